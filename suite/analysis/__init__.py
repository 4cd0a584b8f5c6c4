"""Layer 6, analysis: reading many reports at once. Pilot grids declared, expanded and planned
into IsoFLOP bands (`grid`), conditional allocation frontiers (`frontier`), the RACE
diagnosis (`race`), and studies (`study`): their runs' per-problem evidence (`evidence`), the
bootstrap (`stats`), RACE on a held-out budget (`holdout`) and the paper's claims (`findings`)."""
