"""Layer 6, analysis: reading many reports at once. Pilot grids declared, expanded and planned
into IsoFLOP bands (`grid`), conditional allocation frontiers (`frontier`) and the RACE
diagnosis (`race`)."""
