"""How the parts of a distributed solve talk to each other: the `Collectives` protocol.

A distributed solve splits ``A``, ``b`` and ``x`` by rows into ``P`` parts (devices of one
host, or MPI processes). Each part runs the same algorithms of :mod:`._partitioned` (Krylov
methods, block-Jacobi AMG with a coarse space) on its own rows, and needs only three things
from the others, which a `Collectives` provides:

* `Collectives.halo`: its rows of ``x`` extended with the *halo* entries it needs from the
  other parts for its rows of ``A x`` (only those entries: ``x`` is never gathered);
* `Collectives.sum`: an array summed over all parts, the same on each (inner products,
  the coarse space);
* `Collectives.index`: its number ``0 <= index < nparts``.

Two implementations exist: ``_sharded._AxisCollectives`` inside ``jax.shard_map`` on one
host (``ppermute``, ``psum``, ``axis_index``) and ``_mpi._MpiCollectives`` across processes
(``mpi4jax.sendrecv``, ``mpi4jax.allreduce``, the MPI rank). Every part calls them in the
same order, which is what collective communication needs.
"""

from __future__ import annotations

from typing import Protocol

import jax


class Collectives(Protocol):
    """The communication of one part of a row-partitioned solve (see the module).

    Attributes:
      nparts: ``P``, the number of parts.
    """

    nparts: int

    def index(self) -> jax.Array | int:
        """This part's number, ``0 <= index < nparts`` (traced under ``shard_map``)."""
        ...

    def halo(self, x: jax.Array) -> jax.Array:
        """``[x | halo | 0]``: this part's ``(m, ...)`` rows of ``x`` followed by the halo
        entries it receives and one zero, ``(m + H + 1, ...)``, the columns of its block of
        ``A`` in local numbering. Linear in ``x`` and transposable by JAX."""
        ...

    def sum(self, array: jax.Array) -> jax.Array:
        """``array`` summed over all parts (identical on each part)."""
        ...
