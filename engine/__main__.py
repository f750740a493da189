"""`python -m engine simulate FILE|- [--pretty|--summary] [-o OUT]` (see `engine.cli`)."""

import sys

from .cli import main

sys.exit(main())
