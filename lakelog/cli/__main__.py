"""``python -m lakelog.cli``: the same as the ``lakelog`` console script."""

from lakelog.cli import console_main

console_main()
