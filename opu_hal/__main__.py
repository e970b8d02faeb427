"""``python -m opu_hal``: the ``opu-hal`` command line."""

import sys

from .cli import main

sys.exit(main())
