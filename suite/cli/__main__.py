"""`python -m suite.cli ...` is `race ...`."""

import sys

from .main import main

sys.exit(main())
