"""The symmetric tridiagonal eigenproblem with eigenvectors: `eigh_tridiagonal`.

JAX's ``jax.scipy.linalg.eigh_tridiagonal`` computes eigenvalues only. This one also computes
eigenvectors, with O(n) workspace besides them, on the CPU and on CUDA GPUs, from one native
core (``csrc/tridiagonal_eigh.h``): bisection for the eigenvalues, then, per eigenvalue,
Rayleigh quotient iteration on twisted factorizations in double-double arithmetic (MRRR's vector
kernel), and inverse iteration with Gram-Schmidt for clusters of nearly equal eigenvalues. Its
GPU driver is shared, so that `syevd` on one GPU can use it with one matrix of workspace.
"""

from __future__ import annotations

import functools
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve import autodiff
from jaxsolve.runtime import NativeLibrary

from ._arguments import check_flag
from ._status import fill_failed, with_status

TARGET = "jaxsolve_dense_tridiagonal_eigh"


@functools.cache
def _library() -> NativeLibrary:
    """Loads libjaxsolve_dense.so (and registers its handler) on first use."""
    return NativeLibrary("jaxsolve.dense", pathlib.Path(__file__).absolute().parent,
                         "jaxsolve_dense", {TARGET: "JaxsolveDenseTridiagonalEigh"})


def _vector(caller: str, name: str, x: Any) -> jax.Array:
    x = x if isinstance(x, jax.Array) else jnp.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"{caller}: {name} must be a vector, got shape {x.shape}.")
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(
            f"{caller}: {name} has dtype {x.dtype}; supported dtypes are float32 and float64 "
            "(a Hermitian tridiagonal matrix can be made real by a diagonal unitary scaling)."
        )
    return x


def _solve(d: jax.Array, e: jax.Array, vectors: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The handler: ``(w, Zᵀ, info)``, or ``(w, (0, 0) array, info)`` without vectors."""
    n = d.shape[0]
    z_shape = (n, n) if vectors else (0, 0)
    return jax.ffi.ffi_call(
        TARGET,
        (jax.ShapeDtypeStruct((n,), d.dtype), jax.ShapeDtypeStruct(z_shape, d.dtype),
         jax.ShapeDtypeStruct((), jnp.int32)),
        vmap_method="sequential",
    )(d, e)


def _dense(d: jax.Array, e: jax.Array) -> jax.Array:
    return jnp.diag(d) + jnp.diag(e, 1) + jnp.diag(e, -1)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _eigenpairs(d: jax.Array, e: jax.Array,
                vectors: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(w, Z, info)``: the handler's results, differentiated as ``eigh`` of the dense ``T``."""
    w, zt, info = _solve(d, e, vectors)
    return w, zt.T, info


def _decompose_dense(t: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(w, Z)`` of a dense tridiagonal ``T`` by the handler: `autodiff.eigh`'s service."""
    w, z, _ = _eigenpairs(jnp.diagonal(t), jnp.diagonal(t, 1), True)
    return w, z


@_eigenpairs.defjvp
def _eigenpairs_jvp(vectors, primals, tangents):
    # JAX's eigh rule (jaxsolve.autodiff.eigh) on the dense T: its tangents need Z even when
    # only w is returned, and cost O(n³) like any eigenvector JVP. The rule decomposes T again
    # (the same values: the handler is deterministic), so that it stays differentiable.
    d, e = primals
    w, z, info = _eigenpairs(d, e, vectors)
    _, (w_dot, z_dot) = jax.jvp(lambda t: autodiff.eigh(t, decompose=_decompose_dense),
                                (_dense(d, e),), (_dense(*tangents),))
    if not vectors:
        z_dot = jnp.zeros((0, 0), d.dtype)
    return (w, z, info), (w_dot, z_dot, np.zeros((), jax.dtypes.float0))


def eigh_tridiagonal(
    d: Any,
    e: Any,
    *,
    eigvals_only: bool = False,
    return_status: bool = False,
) -> Any:
    r"""Eigenvalues and eigenvectors of a real symmetric tridiagonal matrix.

    ``T = Z diag(w) Zᵀ`` for ``T`` with diagonal ``d`` and off-diagonal ``e``; eigenvalues
    ascending, eigenvectors the columns of ``Z`` (orthonormal). This is
    ``scipy.linalg.eigh_tridiagonal(d, e)``, which ``jax.scipy.linalg.eigh_tridiagonal``
    computes only with ``eigvals_only=True``.

    The method needs O(n) memory besides ``Z``, and each eigenpair is computed independently
    (a GPU thread each):

    * ``T`` splits where an off-diagonal entry is negligible; each eigenvalue comes from
      bisection on Sturm counts in its block, to full double accuracy;
    * an eigenvalue separated from its neighbours gets its vector from Rayleigh quotient
      iteration on twisted factorizations ``T − σ = N_r Δ_r N_rᵀ`` (the vector kernel of MRRR)
      in double-double arithmetic: accurate to about ``1e-32 ‖T‖ / gap``;
    * eigenvalues within ``1e-10 ‖T‖`` (``1e-5 ‖T‖`` in float32) of each other form a cluster,
      whose vectors come from inverse iteration in double-double with modified Gram-Schmidt
      (LAPACK's ``stein`` remedy), one cluster after another per GPU thread block.

    Eigenvalues of a float32 ``T`` are computed in float64 and rounded. Derivatives (forward and
    reverse) are JAX's ``eigh`` rule on the dense ``T`` (`jaxsolve.autodiff.eigh`), which needs
    ``Z`` and O(n²) memory even for ``w`` alone; as there, eigenvector derivatives of repeated
    eigenvalues are not finite. ``jax.vmap`` loops over a stack.

    Args:
      d: ``(n,)`` diagonal, float32 or float64.
      e: ``(n - 1,)`` off-diagonal, ``d``'s dtype.
      eigvals_only: return ``w`` alone (no vectors are computed).
      return_status: also return the `Status`: ``info = k > 0`` when ``k`` eigenvectors did
        not converge (outputs NaN); ``Status.NOT_FINITE`` when ``d`` or ``e`` held NaN or Inf.

    Returns:
      ``(w, Z)``, or ``w``; then ``status`` last with `return_status`.

    Raises:
      ValueError: ``d`` or ``e`` is not a vector, or ``e`` is not ``n - 1`` long.
      TypeError: a dtype other than float32 or float64, or ``d`` and ``e`` differ.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> w, z = dense.eigh_tridiagonal(jnp.array([2., 2.]), jnp.array([1.]))
      >>> w
      Array([1., 3.], dtype=float32)
      >>> bool(jnp.allclose(jnp.abs(z), 0.5 ** 0.5))
      True
    """
    caller = "eigh_tridiagonal"
    eigvals_only = check_flag(caller, "eigvals_only", eigvals_only)
    return_status = check_flag(caller, "return_status", return_status)
    d = _vector(caller, "d", d)
    e = _vector(caller, "e", e)
    n = d.shape[0]
    if e.shape[0] != max(n - 1, 0):
        raise ValueError(f"{caller}: e must have n - 1 = {max(n - 1, 0)} entries for d of "
                         f"{n}, got {e.shape[0]}.")
    if e.dtype != d.dtype:
        raise TypeError(f"{caller}: d and e must have the same dtype, got {d.dtype} and "
                        f"{e.dtype}.")
    _library().require_platform(caller, d)
    w, z, info = _eigenpairs(d, e, not eigvals_only)
    outputs = fill_failed(info, w) if eigvals_only else fill_failed(info, w, z)
    return with_status(caller, list(outputs), info, return_status, n)
