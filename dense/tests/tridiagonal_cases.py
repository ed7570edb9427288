"""Symmetric tridiagonal matrices that stress an eigensolver, and the checks of its results.

Shared by ``tridiagonal_test.py`` (CPU) and ``tridiagonal_gpu_test.py``: random matrices,
the 1-2-1 Laplacian (eigenvalues close at both ends), Wilkinson's W⁺ (pairs equal to many
digits), glued Wilkinson matrices (clusters of 20 eigenvalues within 1e-11 or 1e-15 of each
other), matrices that split (zero off-diagonals, a repeated block), reductions of matrices with
repeated or tightly clustered eigenvalues, a graded matrix, and extreme scales.
"""

import numpy as np
import scipy.linalg


def _reduced(rng, eigenvalues):
    """The tridiagonal of a Householder reduction of Q diag(eigenvalues) Qᵀ."""
    n = len(eigenvalues)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    a = (q * eigenvalues) @ q.T
    t = scipy.linalg.hessenberg((a + a.T) / 2)
    return np.diag(t).copy(), np.diag(t, 1).copy()


def _glued(glue):
    m, copies = 10, 20
    wilkinson = np.abs(np.arange(-m, m + 1)).astype(float)
    d = np.tile(wilkinson, copies)
    e = np.tile(np.r_[np.ones(2 * m), glue], copies)[:-1]
    return d, e


def cases():
    """Name -> (d, e), float64."""
    rng = np.random.default_rng(7)
    out = {
        "one": (np.array([3.0]), np.zeros(0)),
        "two": (np.array([1.0, 2.0]), np.array([0.5])),
        "random": (rng.standard_normal(300), rng.standard_normal(299)),
        "laplacian": (2 * np.ones(400), -np.ones(399)),
        "wilkinson": (np.abs(np.arange(-50, 51)).astype(float), np.ones(100)),
        "glued_1e-10": _glued(1e-10),
        "glued_1e-14": _glued(1e-14),
        "zero": (np.zeros(30), np.zeros(29)),
        "split": (np.ones(10), np.r_[0.5 * np.ones(4), 0.0, 0.5 * np.ones(4)]),
        "repeated": _reduced(rng, np.r_[np.ones(60), 2 * np.ones(60), np.linspace(3, 4, 60)]),
        "cluster_1e-12": _reduced(rng, np.r_[1 + 1e-12 * rng.standard_normal(80),
                                             np.linspace(3, 4, 80)]),
        "graded": (10.0 ** -np.arange(40), 10.0 ** -(np.arange(39) + 0.5)),
        "huge": (1e200 * rng.standard_normal(60), 1e200 * rng.standard_normal(59)),
        "tiny": (1e-200 * rng.standard_normal(60), 1e-200 * rng.standard_normal(59)),
    }
    return out


CASES = cases()


def errors(d, e, w, z):
    """(eigenvalue error, residual, orthogonality), relative to ‖T‖, in float64."""
    d = np.asarray(d, np.float64)
    e = np.asarray(e, np.float64)
    w = np.asarray(w, np.float64)
    z = np.asarray(z, np.float64)
    reference = scipy.linalg.eigh_tridiagonal(d, e, eigvals_only=True) if len(d) > 1 else d
    norm = max(float(np.abs(reference).max()), np.finfo(np.float64).tiny)
    scale = 1 / norm  # residuals of scaled T: no overflow for "huge"
    t_z = d[:, None] * z * scale
    t_z[:-1] += e[:, None] * z[1:] * scale
    t_z[1:] += e[:, None] * z[:-1] * scale
    residual = float(np.abs(t_z - z * (w * scale)).max())
    orthogonality = float(np.abs(z.T @ z - np.eye(len(d))).max())
    return float(np.abs(w - reference).max()) / norm, residual, orthogonality


def bounds(dtype, n):
    """What the solver must meet: LAPACK's O(n ε) (eigenvalues, residual, orthogonality)."""
    eps = np.finfo(dtype).eps
    return 4 * eps * max(n, 10) ** 0.5 * 10, 10 * eps * n ** 0.5, 2 * eps * n


def case(name, dtype):
    """`CASES[name]` in `dtype`; float32 takes the extreme scales as far as its range goes."""
    d, e = CASES[name]
    if dtype == np.float32 and name in ("huge", "tiny"):
        factor = 1e-170 if name == "huge" else 1e170
        d, e = d * factor, e * factor
    return d.astype(dtype), e.astype(dtype)


def check_accuracy(d, e, w, z, status):
    """Asserts success, ascending eigenvalues and LAPACK's accuracy (`bounds`)."""
    dtype = np.dtype(d.dtype)
    assert w.dtype == dtype and z.dtype == dtype and int(status.info) == 0
    value, residual, orthogonality = errors(d, e, w, z)
    value_bound, residual_bound, orthogonality_bound = bounds(dtype, len(d))
    assert value <= value_bound and residual <= residual_bound, (value, residual)
    assert orthogonality <= orthogonality_bound, orthogonality
    assert np.all(np.diff(np.asarray(w)) >= 0)
