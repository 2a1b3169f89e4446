"""``python -m infill``: the same as the ``infill`` command."""

import sys

from infill.cli import main

if __name__ == "__main__":
    sys.exit(main())
