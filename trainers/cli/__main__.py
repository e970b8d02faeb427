"""``python -m trainers.cli``: the ``opu-hal`` command line with the trainers' commands registered."""

import sys

from trainers.cli import main

sys.exit(main())
