"""What each part of a row-partitioned solve runs: the algorithms both distributed paths share.

A distributed solve splits ``A``, ``b`` and ``x`` by rows into ``P`` parts: the devices of one
host under ``jax.shard_map`` (:mod:`._sharded`) or MPI processes (:mod:`._mpi`). Each part
runs the functions below on its own rows; they reach the other parts only through a
:class:`._collectives.Collectives` (how a vector's halo arrives, how an array is summed),
which is all the two paths implement differently:

* :func:`local_matvec`, :func:`inner_product` and :func:`vector_norm`: this part's rows of
  ``A x``, and the inner products and the convergence test's norm of the Krylov methods
  (:func:`krylov_columns`), reduced over the parts;
* the preconditioner, block-Jacobi AMG with a coarse space (below): each block's
  aggregates for the coarse space (:func:`coarse_aggregates`, host), the part's rows of the
  coarse inverse (:func:`coarse_inverse_rows`) and the application (:func:`precondition`)
  of a :class:`BlockPreconditioner`;
* :func:`kept_numbers`: when concrete values are set up again and when their numbers are
  reused;
* :func:`check_solver` and :func:`amg_of`: the solver and the AMG configuration of a
  distributed solve, checked. A Krylov solver runs with the preconditioner; ``AMG`` or a
  relaxation as the solver runs the stationary iteration ``x ← x + M⁻¹ (b − A x)``, ``M⁻¹``
  one application of the distributed AMG preconditioner or one block relaxation sweep.

**A relaxation preconditioner** (``BLOCK_JACOBI``, ``JACOBI_L1``, ``CHEBYSHEV_POLY``,
``MULTICOLOR_GS``, ``MULTICOLOR_DILU``, ``max_iters`` sweeps) is block-Jacobi relaxation:
each part runs the single-device relaxation on its diagonal block ``A_rr`` alone (as a
hierarchy of one level, smoothed, :func:`amg_of`), with no coarse space and no sweep on all
of ``A``. AmgX relaxes across the ranks, exchanging halos between the colors; here the
parts' cuts are not relaxed across, so a solve takes a few more iterations than on one
device, the more parts the more (the ℓ1 sums of ``JACOBI_L1`` are the block's rows').

**The products** ``A x``: a part receives the entries of ``x`` its rows reach (its halo)
from their owners, then multiplies its block with the native CSR kernel. **The inner
products** are local ``vdot`` s summed over the parts, given to the unchanged Krylov
methods of :mod:`._krylov` as their ``inner_product``, so that every part takes the same
steps.

**The preconditioner** is block-Jacobi AMG with a coarse space, inside damped Jacobi on all
of ``A``. Each part runs one AMG cycle on its *diagonal block* ``A_rr`` (the hierarchy code
of the single-device solve, set up per block): ``B``. A coarse space couples the blocks:
``Z`` is piecewise constant on large aggregates of each block (at most `COARSE_PER_PART`
per part), ``A_c = Zᵀ A Z`` is assembled from every part's rows (one sum at setup) and
inverted redundantly, each part keeping its rows of ``A_c⁻¹``: ``Q = Z A_c⁻¹ Zᵀ``. The
two-level method is ``T = Q + (I − QA) B (I − AQ)`` (coarse correction, block cycles on the
new residual, coarse correction again), and one application of the preconditioner
``M⁻¹ = S + (I − SA) T (I − AS)`` wraps it in a damped-Jacobi sweep ``S`` on the whole
``A`` before and after, which smooths the errors that the blocks' cuts leave. All of it is
symmetric for a symmetric ``A`` (PCG). Per application: four products (halo exchanges),
two sums of ``P × C`` coarse values. Measured on 3D Poisson 24³ over 8 devices it takes 15
PCG iterations where the single-device AMG takes 12 (``tools/bench/sparse_sharded.py``);
block-Jacobi AMG alone, on 16³, 28 against 12.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jax import lax

from . import _aggregation
from ._collectives import Collectives
from ._config import AMGConfig, RelaxationConfig, SolverConfig, krylov_options
from ._csr_arrays import CsrStructure
from ._cycle import cycle
from ._ffi_primitives import csr_matvec
from ._hierarchy import Hierarchy, HierarchyStructure
from ._krylov import KRYLOV_METHODS, stationary
from ._multicolor import safe_inverse
from ._relaxation import finest_diagonal
from ._setup import is_concrete
from ._status import SolveInfo

COARSE_PER_PART = 32
"""The most coarse unknowns per device in the coarse space that couples the blocks."""


def local_matvec(collectives: Collectives, values: jax.Array, indices: jax.Array,
                 indptr: jax.Array, x: jax.Array, *, native: bool = True) -> jax.Array:
    """This part's rows of ``A x`` from its rows ``x`` of shape ``(m,)`` or ``(m, k)``.

    ``indices`` are the block's columns in the ``[owned | halo | 0]`` numbering of
    `Collectives.halo`. ``native``: by the native CSR kernel (the solves); else by a gather
    and a segment sum, which JAX can transpose (the ``matvec`` that derivatives are formed
    from).
    """
    n_rows = indptr.shape[0] - 1
    extended = collectives.halo(x).astype(values.dtype)
    if native:
        return csr_matvec(values, indices, indptr, extended, n_rows=n_rows)
    rows = jnp.searchsorted(indptr[1:], jnp.arange(values.shape[0], dtype=jnp.int32),
                            side="right")
    terms = values.reshape(values.shape + (1,) * (x.ndim - 1)) * extended[indices]
    return jax.ops.segment_sum(terms, rows, num_segments=n_rows, indices_are_sorted=True)


def inner_product(collectives: Collectives):
    """``(u, v) ↦ Σ_parts vdot(u_part, v_part)``, the Krylov methods' inner product."""
    def inner(u: jax.Array, v: jax.Array) -> jax.Array:
        return collectives.sum(jnp.vdot(u, v))
    return inner


def vector_norm(collectives: Collectives, norm: str):
    """The convergence test's norm (AmgX's ``"L2"``, ``"L1"`` or ``"LMAX"``) over all the
    parts: ``"L2"`` as the Krylov methods take it from :func:`inner_product`, else ``v ↦
    ‖v‖`` reduced over the parts (LMAX: each part's largest ``|vᵢ|`` summed into its own
    slot of an ``nparts`` vector, so that only ``Collectives.sum`` is needed)."""
    if norm == "L1":
        return lambda v: collectives.sum(jnp.sum(jnp.abs(v)))
    if norm == "LMAX":
        def largest(v: jax.Array) -> jax.Array:
            local = jnp.max(jnp.abs(v), initial=0)
            slots = jnp.zeros(collectives.nparts, local.dtype).at[collectives.index()].set(local)
            return jnp.max(collectives.sum(slots))
        return largest
    return norm


def krylov_columns(config: SolverConfig, collectives: Collectives, matvec, precondition,
                   rhs: jax.Array) -> tuple[jax.Array, SolveInfo]:
    """This part's rows of the configured Krylov solve (or stationary iteration) of every
    column of ``rhs`` ``(m, k)``, with inner products and norms reduced over the parts;
    ``info`` with a leading axis of ``k``."""
    method = KRYLOV_METHODS.get(config.solver, stationary)
    options = {**krylov_options(config), "norm": vector_norm(collectives, config.norm)}

    def one(b):
        return method(matvec, b, precondition=precondition,
                      inner_product=inner_product(collectives), **options)

    return jax.vmap(one, in_axes=1, out_axes=(1, 0))(rhs)


def _structure_of(graph: scipy.sparse.csr_array) -> CsrStructure:
    graph = graph.tocsr()
    graph.sort_indices()
    return CsrStructure(graph.indptr.astype(np.int32), graph.indices.astype(np.int32),
                        graph.shape[1])


def coarse_aggregates(structure: HierarchyStructure, target: int) -> tuple[np.ndarray, int]:
    """Each row's coarse unknown: the composite aggregates of the block's hierarchy (none for
    classical AMG), merged further by pairwise matching until there are at most ``target``."""
    n = structure.levels[0].a.n_rows if structure.levels else structure.coarsest.n_rows
    of_row, count = np.arange(n), n
    pattern = structure.levels[0].a if structure.levels else structure.coarsest
    for level in structure.levels:
        if count <= target or level.aggregates is None:  # classical levels: no partition
            break
        of_row, count, pattern = level.aggregates[of_row], level.n_aggregates, level.galerkin.c
    graph = scipy.sparse.csr_array((np.ones(pattern.nnz), pattern.indices, pattern.indptr),
                                   shape=(pattern.n_rows, pattern.n_rows))
    while count > target:
        aggregates, merged = _aggregation.aggregate(
            _aggregation.coupling_graph(_structure_of(graph), None), 3)
        if merged == count:
            break
        membership = scipy.sparse.csr_array(
            (np.ones(count), aggregates, np.arange(count + 1)), shape=(count, merged))
        graph = scipy.sparse.csr_array(membership.T @ graph @ membership)
        of_row, count = aggregates[of_row], merged
    return of_row.astype(np.int32), int(count)


class BlockPreconditioner(NamedTuple):
    """One part's preconditioner numbers: its diagonal block's AMG hierarchy and its rows
    of the coarse inverse."""

    hierarchy: Hierarchy
    coarse_inverse_rows: jax.Array  # (C, P C): this device's rows of A_c⁻¹


def kept_bytes(numbers: BlockPreconditioner) -> dict[str, int]:
    """Device bytes of preconditioner numbers, by part (``print_grid_stats``): of the arrays
    given, every part's when they are stacked over the devices, one rank's under MPI."""
    def size(tree):
        return sum(leaf.nbytes for leaf in jax.tree.leaves(tree))
    return {"block hierarchies": size(numbers.hierarchy),
            "coarse inverse": size(numbers.coarse_inverse_rows)}


def coarse_inverse_rows(collectives: Collectives, values: jax.Array, coarse_rows: jax.Array,
                        coarse_cols: jax.Array, n_coarse: int) -> jax.Array:
    """This part's ``(C, P C)`` rows of ``A_c⁻¹``, ``A_c = Zᵀ A Z`` summed from every part's
    stored values at their global coarse ``(row, column)`` (``P C``: dropped)."""
    size = collectives.nparts * n_coarse
    coarse = jnp.zeros((size, size), values.dtype).at[
        coarse_rows, coarse_cols].add(values, mode="drop")
    coarse = collectives.sum(coarse)
    unused = jnp.all(coarse == 0, axis=1)  # the padding of parts with fewer aggregates
    coarse = coarse + jnp.diag(unused.astype(coarse.dtype))
    inverse = jnp.linalg.inv(coarse)
    return lax.dynamic_slice_in_dim(inverse, collectives.index() * n_coarse, n_coarse, axis=0)


def _fine_scale(hierarchy: Hierarchy) -> jax.Array:
    """The Jacobi scaling of the finest level (``diag(A_rr) = diag(A)``): its Jacobi
    smoother's ``ω / diag(A)``, else ``1 / diag(A)`` (the multicolor smoothers' scales are
    in their color order, DILU's not even ``1 / diag(A)``)."""
    if hierarchy.levels and hierarchy.levels[0].smoother.multicolor is None:
        return hierarchy.levels[0].smoother.scale
    return safe_inverse(finest_diagonal(
        hierarchy.levels[0].a if hierarchy.levels else hierarchy.coarsest.a))


def precondition(collectives: Collectives, n_coarse: int, preconditioner: BlockPreconditioner,
                 coarse_of_row: jax.Array, matvec):
    """``r ↦ M⁻¹ r`` on this part's rows: damped Jacobi on all of ``A`` around the
    two-level block method ``T = Q + (I − QA) B (I − AQ)`` (symmetric for a symmetric ``A``:
    ``M⁻¹ = S + (I − SA) T (I − AS)``)."""
    size = collectives.nparts * n_coarse

    def coarse(r):
        local = jax.ops.segment_sum(r, coarse_of_row, num_segments=n_coarse)
        start = collectives.index() * n_coarse
        residual = collectives.sum(
            lax.dynamic_update_slice(jnp.zeros(size, r.dtype), local, (start,)))
        # Padding rows have the coarse unknown C: none, so they stay zero.
        return (preconditioner.coarse_inverse_rows @ residual).at[coarse_of_row].get(
            mode="fill", fill_value=0)

    if is_block_relaxation(preconditioner.hierarchy.config):
        return lambda r: cycle(preconditioner.hierarchy, r)

    def two_level(r):
        x = coarse(r)
        x = x + cycle(preconditioner.hierarchy, r - matvec(x))
        return x + coarse(r - matvec(x))

    scale = _fine_scale(preconditioner.hierarchy)

    def apply(r):
        x = scale * r
        x = x + two_level(r - matvec(x))
        return x + scale * (r - matvec(x))

    return apply


def kept_numbers(kept: dict, values: jax.Array, reuse_setup: bool,
                 setup: Callable[[jax.Array], Any],
                 agree: Callable[[bool], bool] = bool) -> Any | None:
    """The preconditioner numbers a solve with ``values`` uses, or None to set up inside
    the solve; shared by the one-host sharded and the MPI solves.

    As for the single-device solve: concrete values are set up once (``setup(values)``) and
    the numbers kept with them in ``kept`` (``{dtype: (values, numbers)}``, one per
    orientation), so a solve with the same values (equal, checked on the device) reuses them
    and other values set up anew; traced values are set up inside the compiled solve.
    ``reuse_setup`` takes the latest numbers whatever the values. ``agree`` turns this
    process's choice to reuse into every process's (an MPI ``allreduce``): a new setup
    exchanges messages, so all must take it or none.
    """
    latest = kept.get(values.dtype)
    concrete = is_concrete(values)
    reuse = False
    if latest is not None and (reuse_setup or concrete):
        with jax.ensure_compile_time_eval():  # concrete, also while a caller's jit traces
            reuse = reuse_setup or latest[0] is values or bool(_equal(latest[0], values))
    if agree(reuse):
        return latest[1]
    if not concrete:
        return None
    numbers = setup(values)
    kept[values.dtype] = (values, numbers)
    return numbers


@jax.jit
def _equal(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.array_equal(a, b)


def check_solver(config: SolverConfig, where: str) -> None:
    """Refuses ``NOSOLVER`` as the solver, which solves nothing. ``where`` names the path in
    the error (``"with comm="``)."""
    if config.solver == "NOSOLVER":
        raise ValueError(f"solve: {where}, solver 'NOSOLVER' solves nothing; it is a "
                         "preconditioner choice.")


def amg_of(config: SolverConfig) -> AMGConfig | None:
    """The AMG configuration of a distributed solve's preconditioner (None: ``NOSOLVER`` or
    none); a relaxation's is a hierarchy of one level that the relaxation smooths
    ``max_iters`` times (:func:`is_block_relaxation`). For ``AMG`` or a relaxation as the
    solver, that of one cycle or one sweep of the stationary iteration."""
    if config.solver == "AMG":
        return config.amg
    if config.relaxation is not None:
        return _relaxation_amg(config.relaxation, 1)
    preconditioner = config.preconditioner
    if preconditioner is None or preconditioner.solver == "NOSOLVER":
        return None
    if preconditioner.relaxation is not None:
        return _relaxation_amg(preconditioner.relaxation, preconditioner.max_iters)
    return preconditioner.amg


def _relaxation_amg(relaxation: RelaxationConfig, sweeps: int) -> AMGConfig:
    """``sweeps`` of ``relaxation`` as an AMG configuration: one level, smoothed only."""
    return AMGConfig(algorithm="AGGREGATION", selector="SIZE_2", smoothed_aggregation=False,
                     smoother=relaxation, presweeps=0, postsweeps=0, cycle="V", max_levels=1,
                     min_coarse_rows=1, coarse_solver="NOSOLVER", coarsest_sweeps=sweeps)


def is_block_relaxation(amg: AMGConfig) -> bool:
    """Whether ``amg`` is a relaxation preconditioner's (:func:`amg_of`), or an AMG of one
    level without a coarse solver, which is one: its cycle is the relaxation alone, applied
    without the coarse space."""
    return amg.max_levels == 1 and amg.coarse_solver == "NOSOLVER"
