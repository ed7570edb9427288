"""``python -m jaxsolve.sparse``: the command line of :mod:`jaxsolve.sparse._cli`."""

import sys

from jaxsolve.sparse._cli import main

if __name__ == "__main__":
    sys.exit(main())
