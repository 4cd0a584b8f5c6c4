"""Layer 1, accounting: what a GRPO step costs, one idea per module:

- `specs`: the one model door: the `Spec` protocol, the catalog (`catalog/`) and `spec_for`;
- `modelspec`: recipe specs (`ModelSpec`) from a config.json of a family with a recipe;
- `traced`: traced specs (`TracedSpec`) of any other decoder, priced from its own code;
- `adapter`: what is trained (LoRA or full) and what peft adapts for it;
- `settings`: the GRPO settings that move FLOPs;
- `engines`: engine profiles (which passes an engine runs, over which positions);
- `work`: token statistics of steps, built for one profile;
- `costs`: what one model's passes cost per statistic;
- `pricing`: work -> FLOPs per phase, the step-cost bound a budget stops on;
- `compare`: other engines' formulas (verl's estimator, 6*N*T), for comparison;
- `utilization`: achieved FLOP/s and the machine's ceiling;
- `reference`: the measured reference (torch's FlopCounterMode) the formulas are tested against.

`suite.accounting` itself offers the public names of the pricing modules (the documented import
path: `from suite.accounting import phase_flops`)."""

from . import adapter, compare, engines, pricing, settings, work
from .adapter import *  # noqa: F401,F403
from .compare import *  # noqa: F401,F403
from .engines import *  # noqa: F401,F403
from .pricing import *  # noqa: F401,F403
from .settings import *  # noqa: F401,F403
from .work import *  # noqa: F401,F403

__all__ = [*adapter.__all__, *settings.__all__, *engines.__all__, *work.__all__, *pricing.__all__, *compare.__all__]
