"""``python -m rmqcore.cli``: the ``rmqcore`` command."""
import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
