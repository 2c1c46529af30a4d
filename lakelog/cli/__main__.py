"""``python -m lakelog.cli``: the same as the ``lakelog`` console script."""

import sys

from lakelog.cli import main

sys.exit(main())
