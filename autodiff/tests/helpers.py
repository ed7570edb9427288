"""Reference services built from jnp, problem generators and call counters.

The reference services are what a solver package would supply, written with
``jnp``/``jax.scipy``; the tests compare each rule against JAX's own
derivatives of the corresponding ``jnp`` function.  :class:`HostServices`
runs the solves on the host with ``jax.pure_callback``: they cannot be
differentiated at all, and they count their calls and right-hand-side
columns, so tests can see how many solves a derivative really made.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg


def random_array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Standard normal entries (real and imaginary parts) of ``dtype``."""
    sample = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        sample = sample + 1j * rng.standard_normal(shape)
    return sample.astype(dtype)


def well_conditioned(rng: np.random.Generator, n: int, dtype) -> np.ndarray:
    """A nonsymmetric ``(n, n)`` matrix with a condition number of order 10."""
    return (random_array(rng, (n, n), dtype) / np.sqrt(n) + 2 * np.eye(n)).astype(dtype)


def hermitian(m: jax.Array) -> jax.Array:
    """``(m + mᴴ) / 2``."""
    return (m + jnp.conj(m).T) / 2


def positive_definite(m: jax.Array) -> jax.Array:
    """``m mᴴ / n + I``: Hermitian positive definite, well conditioned."""
    n = m.shape[0]
    return m @ jnp.conj(m).T / n + jnp.eye(n, dtype=m.dtype)


def dense_solve(a, rhs):
    return jnp.linalg.solve(a, rhs)


def dense_transpose_solve(a, rhs):
    return jnp.linalg.solve(a.T, rhs)


def cholesky_decompose(a):
    return jnp.linalg.cholesky(a)


def cholesky_solve_with_factor(factor, rhs):
    return jax.scipy.linalg.cho_solve((factor, True), rhs)


def lu_decompose(a):
    return jax.scipy.linalg.lu_factor(a)


def lu_solve_with_factor(factor, rhs, transpose):
    return jax.scipy.linalg.lu_solve(factor, rhs, trans=1 if transpose else 0)


def eigh_decompose(a):
    w, v = jnp.linalg.eigh(a)
    return w, v


def sygvd(a, b):
    """``A V = B V diag(w)``, ``Vᴴ B V = I``, by reduction with ``B = L Lᴴ``."""
    lower = jnp.linalg.cholesky(b)
    c = jax.scipy.linalg.solve_triangular(lower, a, lower=True)
    c = jax.scipy.linalg.solve_triangular(lower, jnp.conj(c).T, lower=True)
    w, y = jnp.linalg.eigh(c)
    v = jax.scipy.linalg.solve_triangular(jnp.conj(lower).T, y, lower=False)
    return w, v


def qr_decompose(a):
    q, r = jnp.linalg.qr(a)
    return q, r


def svd_decompose(a):
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    return u, s, vh


def polar_decompose(a):
    return jax.scipy.linalg.polar(a, method="svd")


def gels(a, rhs):
    return jnp.linalg.lstsq(a, rhs)[0]


@dataclasses.dataclass
class HostServices:
    """Dense solves on the host (scipy), counting calls and columns.

    ``calls`` records ``(name, rhs.shape)`` for every call actually executed
    (not traced).  The callbacks use ``vmap_method="sequential"``: if a rule
    let JAX vmap a service call, it would show up here as one call per
    batch element.
    """

    calls: list = dataclasses.field(default_factory=list)

    def _callback(self, name, function, result, *args):
        def run(*host_args):
            self.calls.append((name, host_args[-1].shape))
            outputs = function(*host_args)
            return jax.tree.map(lambda r, o: np.asarray(o, r.dtype), result, outputs)

        return jax.pure_callback(run, result, *args, vmap_method="sequential")

    def solve(self, a, rhs):
        result = jax.ShapeDtypeStruct(rhs.shape, rhs.dtype)
        return self._callback("solve", np.linalg.solve, result, a, rhs)

    def transpose_solve(self, a, rhs):
        result = jax.ShapeDtypeStruct(rhs.shape, rhs.dtype)
        return self._callback(
            "transpose_solve", lambda a, r: np.linalg.solve(a.T, r), result, a, rhs
        )

    def potrf(self, a):
        result = jax.ShapeDtypeStruct(a.shape, a.dtype)
        return self._callback("potrf", np.linalg.cholesky, result, a)

    def potrs(self, factor, rhs):
        result = jax.ShapeDtypeStruct(rhs.shape, rhs.dtype)
        return self._callback(
            "potrs",
            lambda factor, r: scipy.linalg.cho_solve((factor, True), r),
            result,
            factor,
            rhs,
        )

    def getrf(self, a):
        n = a.shape[0]
        result = (
            jax.ShapeDtypeStruct(a.shape, a.dtype),
            jax.ShapeDtypeStruct((n,), jnp.int32),
        )
        return self._callback("getrf", scipy.linalg.lu_factor, result, a)

    def getrs(self, factor, rhs, transpose):
        result = jax.ShapeDtypeStruct(rhs.shape, rhs.dtype)

        def getrs(lu, pivots, r):
            return scipy.linalg.lu_solve((lu, pivots), r, trans=int(transpose))

        name = "getrs_T" if transpose else "getrs_N"
        return self._callback(name, getrs, result, *factor, rhs)

    def gels(self, a, rhs):
        result = jax.ShapeDtypeStruct((a.shape[1],) + rhs.shape[1:], rhs.dtype)
        return self._callback(
            "gels", lambda a, r: np.linalg.lstsq(a, r, rcond=None)[0], result, a, rhs
        )

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]
