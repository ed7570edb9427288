"""The Krylov method :func:`solve` runs when the configuration leaves it to jaxsolve.

A configuration that names no outer ``solver`` (:attr:`SolverConfig.default_solver`) reads as
PBICGSTAB, which solves any nonsingular system.  On a Hermitian positive definite one,
preconditioned CG applies one AMG cycle and one product with ``A`` an iteration where
BiCGSTAB applies two of each, and its cycle may be V(1, 1) where BiCGSTAB's is V(1, 2)
(:func:`for_dtype`).  On the eleven Hermitian problems of ``tools/bench/sparse_suite.py
--size medium`` PCG took as many cycles or fewer (28 → 20 on 3D elasticity, 10 → 10 on 3D
Poisson), an iteration moved 57 MB where BiCGSTAB's moved 141 (2D Poisson, 256²), and the
compiled solve took 6–50 % less time on ten of them.  PyAMG's ``solve`` picks CG for
symmetric matrices in the same way.

**The rule** (:func:`method_for`): the default solver becomes PCG, with the symmetric V(1, 1)
cycle PCG needs, where

* ``A`` is Hermitian: every stored ``a_ij`` has a stored ``a_ji`` with
  ``|a_ij − conj(a_ji)| <= 16 ε max|a|`` (:data:`HERMITIAN_TOLERANCE`; ``ε`` the dtype's).
  An assembly that computes ``a_ij`` and ``a_ji`` along different floating-point paths
  differs by a few units in the last place of its largest terms; a difference that small
  changes no iteration of a solve to 1e-6 (or 1e-12), and the reverse-mode solve with
  ``A`` for ``Aᴴ`` (which PCG's derivative rule does) errs by as little;
* its diagonal is stored in every row, real and positive (a Hermitian matrix with a
  nonpositive diagonal entry is not positive definite);
* the AMG preconditioner is symmetric: its cycle left to jaxsolve
  (:attr:`AMGConfig.default_cycle`), a Jacobi, L1-Jacobi or Chebyshev smoother, a dense or
  no coarse solver.

Every other matrix keeps PBICGSTAB.  The test is one pass over the values on their device,
made once per values array (by NumPy where they are in host memory: no program compiled
for a new pattern; the latest array on each pattern is remembered, without keeping
the pattern alive), on the pattern's transpose permutation and diagonal positions (cached
on the CSR pattern).

**Traced values** (under ``jit`` or ``grad``) cannot be read on the host.  They take the
method chosen for the latest concrete values on their pattern, as they take that setup's
AMG structure; where there were none, PCG if the pattern stores ``a_ji`` beside every
``a_ij`` and every diagonal entry, else PBICGSTAB.  A PCG so chosen tests the values in
its program (:func:`hermitian_with_positive_diagonal`, on the permutation sent once per
pattern): values that fail are solved by BiCGSTAB from the start, with the cycle the
default's PBICGSTAB applies (:func:`pcg_or_bicgstab`).  So a caller who never solves with
concrete values gets PCG on a Hermitian matrix too, and its cheaper iterations.  On two CPU
cores under ``jit`` the numeric setup in the program weighs as much as the solve, and the
call takes about PBICGSTAB's time (Q1 plane elasticity at 100 k rows, float64, 1e-8: 295 ms,
PCG 268, PBICGSTAB 301; ``tools/bench/sparse_first_call.py --traced``).  The price is
compiling both methods (0.5–1.7 s more XLA CPU time on the first call), and on a
nonsymmetric matrix of a symmetric pattern no gain for it.  The derivative of a traced
solve by the default is not symmetrized, as a named PCG's is: reverse mode solves with
``Aᵀ``.

**The fallback** (:func:`pcg_or_bicgstab`): a Hermitian matrix with a positive diagonal can
still be indefinite (a shifted Laplacian), and then CG meets ``pᴴAp <= 0`` or ``rᴴM⁻¹r <= 0``
and stops with ``NOT_POSITIVE_DEFINITE`` or ``PRECONDITIONER_NOT_POSITIVE_DEFINITE``.  The
default PCG then continues by PBICGSTAB from its best iterate, with PBICGSTAB's cycle
(:func:`continuation_cycle`: V(1, 2) on a real matrix), to the same residual norm the
configuration asked of PCG in the iterations PCG left of ``max_iters``, so that the default
never does worse than PBICGSTAB alone.  A PCG the user names stops at its breakdown, as
AmgX's does.

**Where the continuation is compiled.**  Breakdowns are rare, but a continuation in the
solve's program is compiled on every first call: its BiCGSTAB loop, with the AMG cycles in
it, took 0.36 s of the 1.26 s a fresh process spent compiling its first solve of 3D Poisson
(40³, float64, two CPU cores; the call: 1.98 s).  So where the solve reads its failure
reasons on the host anyway (``solve``'s checked path, on concrete inputs) it runs PCG
alone, and compiles and runs a second program only where a column broke down: it continues
those columns by :func:`continued_by_bicgstab` and keeps PCG's result for the others
(``_solve.py``'s ``_continued``).  That first call now takes 1.52 s (0.90 s compiling);
an indefinite 3D Poisson (shifted by 0.1, 160 iterations) compiles the two programs in
the time the one took (a first call of 4.3 s against 4.6, within the noise).  A solve
whose reasons stay in its program (under ``jit``, ``grad`` or ``vmap``, unchecked, with a
null space) holds PCG and the continuation in one program (:func:`pcg_or_bicgstab`: a
``lax.cond``).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._blocks import block_config
from ._config import SolverConfig, for_dtype
from ._hierarchy import in_host_memory
from ._krylov import bicgstab, cg
from ._size_classes import PADDING_DIAGONAL
from ._status import FailureReason, SolveInfo

HERMITIAN_TOLERANCE = 16
"""``c`` of the Hermitian test: ``|a_ij − conj(a_ji)| <= c ε max|a|`` (see the module)."""

_SYMMETRIC_SMOOTHERS = ("BLOCK_JACOBI", "JACOBI_L1", "CHEBYSHEV_POLY")
_SYMMETRIC_COARSE_SOLVERS = ("DENSE_LU_SOLVER", "NOSOLVER")
_BREAKDOWNS = (FailureReason.NOT_POSITIVE_DEFINITE,
               FailureReason.PRECONDITIONER_NOT_POSITIVE_DEFINITE)

# Per CSR pattern, the latest concrete values tested on it and the answer: a solve repeated on
# one matrix tests it once, and traced values on the pattern take the answer.  Weak keys: a
# pattern nobody holds any more (after clear_cache) is not kept alive here.
_latest_on_pattern: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def as_solved(caller: str, config: SolverConfig, matrix: Any, block_dim: int) -> SolverConfig:
    """``config`` as :func:`solve` runs it on ``matrix`` (a :class:`CsrMatrix`) of
    ``block_dim`` unknowns to a node: its method (:func:`method_for`), its cycle
    (:func:`for_dtype`), ``block_dim`` on its AMG and relaxations
    (:func:`._blocks.block_config`, whose error names ``caller``).  What reports on a solve
    (``describe``, ``memory_traffic_per_iteration``) reads the configuration this way too,
    and so finds the solve's hierarchy in the setup cache."""
    config = for_dtype(method_for(config, matrix), matrix.values.dtype)
    return block_config(caller, config, matrix.shape[0], block_dim)


def method_for(config: SolverConfig, matrix: Any) -> SolverConfig:
    """``config`` with its outer solver chosen for ``matrix`` (a :class:`CsrMatrix`): PCG
    where the configuration leaves the solver to jaxsolve and the module's rule holds, else
    ``config`` itself."""
    if not config.default_solver or not _symmetric_preconditioner(config.preconditioner):
        return config
    values, pattern = matrix.values, matrix._pattern
    tested, hermitian = _latest_on_pattern.get(pattern, (None, None))
    if not isinstance(values, jax.core.Tracer):
        if tested is None or tested() is not values:
            hermitian = _concrete_test(pattern, values)
            _latest_on_pattern[pattern] = (weakref.ref(values), hermitian)
    elif hermitian is None:  # no concrete values tested on the pattern: the program tests
        hermitian = pattern.symmetric_with_diagonal
    return dataclasses.replace(config, solver="PCG") if hermitian else config


def _symmetric_preconditioner(preconditioner: SolverConfig | None) -> bool:
    """Whether ``preconditioner`` is an AMG cycle that is a symmetric operator under PCG."""
    amg = None if preconditioner is None else preconditioner.amg
    return (amg is not None and amg.default_cycle
            and amg.smoother.solver in _SYMMETRIC_SMOOTHERS
            and amg.coarse_solver in _SYMMETRIC_COARSE_SOLVERS)


def _concrete_test(pattern: Any, values: jax.Array) -> bool:
    """Whether ``A`` (``pattern``, ``values``) passes the module's Hermitian test and has a
    real positive diagonal stored in every row.

    Values in host memory (NumPy's, or a JAX array on the CPU, which NumPy reads where it
    is) are tested by NumPy: a program compiled for the pattern's size would cost more
    than the test (0.15 s for 3 k values on two CPU cores), on every new pattern."""
    if not pattern.symmetric_with_diagonal:
        return False
    if in_host_memory(values):
        return bool(hermitian_with_positive_diagonal(
            np.asarray(values), pattern.transposed[1], pattern.diagonal_positions, xp=np))
    # Concrete values closed over by a caller's jit are tested now, not staged; the
    # pattern's arrays were sent to the device once.
    with jax.ensure_compile_time_eval():
        return bool(_jitted_test(values, pattern.transpose_permutation_on_device,
                                 pattern.diagonal_positions_on_device))


def hermitian_with_positive_diagonal(values: jax.Array, transpose_permutation: jax.Array,
                                     diagonal: jax.Array, *, xp: Any = jnp) -> jax.Array:
    """Whether values on a pattern that stores ``a_ji`` beside every ``a_ij`` and a diagonal
    entry in every row pass the module's Hermitian test and have a real positive diagonal
    (jit-able; a traced solve's program runs it on its values).

    ``transpose_permutation``: the position of each ``a_ji`` among the values;
    ``diagonal``: each row's diagonal position (a padding row's
    :data:`~._size_classes.PADDING_DIAGONAL` is passed over).  ``values`` may be longer,
    padded: the test reads their first ``transpose_permutation.size``.  ``xp``: the array
    module, ``jax.numpy`` or ``numpy`` (on the host)."""
    values = values[:transpose_permutation.shape[0]]
    eps = xp.finfo(values.dtype).eps
    scale = xp.max(xp.abs(values))
    hermitian = xp.all(xp.abs(values - xp.conj(values[transpose_permutation]))
                       <= HERMITIAN_TOLERANCE * eps * scale)
    positive = xp.where(diagonal == PADDING_DIAGONAL, True,
                        (diagonal >= 0) & (values[xp.maximum(diagonal, 0)].real > 0))
    return hermitian & xp.all(positive)


_jitted_test = jax.jit(hermitian_with_positive_diagonal)


def falls_back(config: SolverConfig) -> bool:
    """Whether :func:`solve` runs ``config``'s solver as the default's PCG, continued by
    BiCGSTAB where it breaks down (:func:`pcg_or_bicgstab`), rather than as named."""
    return config.default_solver and config.solver == "PCG"


def broke_down(failure_reason: Any) -> Any:
    """Where ``failure_reason`` (a NumPy or JAX array of :class:`FailureReason` codes) is
    a breakdown of PCG that the default continues by BiCGSTAB."""
    return functools.reduce(operator.or_, [failure_reason == reason for reason in _BREAKDOWNS])


def pcg_or_bicgstab(matvec, b, *, precondition, continuation, hermitian=None, max_iters,
                    **options) -> tuple[jax.Array, SolveInfo]:
    """PCG (:func:`cg`), continued by BiCGSTAB (:func:`continued_by_bicgstab`, preconditioned
    by ``continuation``: :func:`continuation_cycle`'s) from its iterate where it breaks down
    on an indefinite matrix or preconditioner (see the module), in one program: the
    continuation is compiled with PCG, and runs only after a breakdown (``lax.cond``).  The
    program of a solve whose failure reasons stay in it; a checked solve of concrete inputs
    runs PCG alone and continues its breakdowns in a second program.

    ``hermitian``: for values the host could not test (traced), the outcome of
    :func:`hermitian_with_positive_diagonal` in the program; where it is False, PCG
    takes no iteration and BiCGSTAB solves from the start."""
    limit = None if hermitian is None else jnp.where(hermitian, max_iters, 0)
    x, info = cg(matvec, b, precondition=precondition, max_iters=max_iters,
                 iteration_limit=limit, **options)
    continued = broke_down(info.failure_reason)
    if hermitian is not None:
        continued = continued | ~hermitian
    return lax.cond(continued,
                    lambda x: continued_by_bicgstab(matvec, b, x, info, precondition=continuation,
                                                    max_iters=max_iters, **options),
                    lambda x: (x, info), x)


def continuation_cycle(config: SolverConfig, hierarchy: Any, dtype: Any) -> Any:
    """``hierarchy`` (the numbers of the default's PCG, ``config``, for a matrix of
    ``dtype``) cycling as the default's PBICGSTAB would (:func:`for_dtype`: V(1, 2) on a
    real matrix): BiCGSTAB, which continues PCG or replaces it, needs no symmetric cycle,
    and takes fewer iterations with the second sweep (upwind convection 12 → 8)."""
    amg = for_dtype(dataclasses.replace(config, solver="PBICGSTAB"), dtype).preconditioner.amg
    return dataclasses.replace(
        hierarchy, config=dataclasses.replace(hierarchy.config, postsweeps=amg.postsweeps))


def continued_by_bicgstab(matvec, b, x, info, *, precondition, tolerance, max_iters,
                          convergence, norm, store_history, alt_rel_tolerance=None,
                          **options) -> tuple[jax.Array, SolveInfo]:
    """BiCGSTAB (:func:`bicgstab`) from ``x``, the iterate at which PCG broke down
    (``info`` its), for ``A x = b`` and the configured stopping test (``options`` are
    :func:`~._config.krylov_options`).

    It stops at the residual norm the configured test asked of PCG, as an absolute
    tolerance: ``tolerance ‖r_0‖`` (``RELATIVE_INI``, and ``RELATIVE_MAX`` from its first
    residual), ``tolerance`` (``ABSOLUTE``), the larger of ``tolerance`` and
    ``alt_rel_tolerance ‖r_0‖`` (``COMBINED_REL_INI_ABS``), in the ``max_iters``
    iterations PCG left.  ``info`` counts both methods' iterations, its residuals relative
    to PCG's ``‖r_0‖``, its status BiCGSTAB's."""
    initial = info.initial_residual
    threshold = {"ABSOLUTE": tolerance,
                 "COMBINED_REL_INI_ABS": jnp.fmax(tolerance, (alt_rel_tolerance or 0) * initial)
                 }.get(convergence, tolerance * initial)
    y, more = bicgstab(matvec, b, x, precondition=precondition, tolerance=threshold,
                       max_iters=max_iters, convergence="ABSOLUTE", norm=norm,
                       store_history=store_history,
                       iteration_limit=max_iters - info.iterations, **options)
    return y, _joined(info, more)


def _joined(first: SolveInfo, second: SolveInfo) -> SolveInfo:
    """The info of ``second``'s solve continuing ``first``'s: iterations summed, residuals
    relative to ``first``'s initial residual, the histories one after the other."""
    rescale = second.initial_residual / jnp.where(first.initial_residual > 0,
                                                  first.initial_residual, 1)
    history = first.residual_history
    if history.size:
        k = first.iterations
        index = jnp.arange(history.shape[-1], dtype=k.dtype)
        later = (second.residual_history * rescale)[jnp.maximum(index - k, 0)]
        history = jnp.where(index <= k, history, later)
    return dataclasses.replace(
        second, iterations=first.iterations + second.iterations,
        residual=(second.residual * rescale).astype(second.residual.dtype),
        residual_history=history.astype(first.residual_history.dtype),
        initial_residual=first.initial_residual)
