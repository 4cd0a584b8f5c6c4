"""Layer 9, pipeline: the only layer that drives training, evaluation and the site together.
Executors (`executors`: local processes or Ray), grids and studies run (`gridrun`, `studyrun`)
and the main job (`quickstart`)."""
