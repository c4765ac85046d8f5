"""``python -m rankwise.cli ARGS``: the ``rankwise`` command."""

import sys

from . import main

sys.exit(main())
