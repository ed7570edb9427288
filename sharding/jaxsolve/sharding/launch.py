"""The command line of `jaxsolve.sharding.launch`: ``python -m jaxsolve.sharding.launch``.

Runs a Python script as N processes of one JAX run on this host, one per GPU (or per CPU device
with ``--platform cpu``); ``python -m jaxsolve.sharding.launch --help`` lists the options. The
script calls `jaxsolve.sharding.initialize` (or a bare ``jax.distributed.initialize()``) first::

    python -m jaxsolve.sharding.launch -n 4 --timeout 600 solve.py --size 4096
"""

import sys

from jaxsolve.sharding._launcher import main

if __name__ == "__main__":
    sys.exit(main())
