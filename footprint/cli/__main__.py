"""`python -m footprint.cli`: the same as the `footprint` console script."""

import sys

from footprint.cli import console

sys.exit(console())
