"""``python -m rankwise ARGS``: the ``rankwise`` command."""

import sys

from .cli import main

sys.exit(main())
