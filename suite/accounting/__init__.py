"""Layer 1, accounting: what a GRPO step costs. Model specs (`modelspec`, with the config
catalog in `catalog/`), the work -> FLOPs pricing and engine profiles (`flops`), and the
measured reference it is tested against (`reference`, torch's FlopCounterMode).

`suite.accounting` itself offers the names of `suite.accounting.flops` (the documented import
path: `from suite.accounting import phase_flops`)."""

from .flops import *  # noqa: F401,F403
from .flops import __all__  # noqa: F401
