"""`dense.eigh_tridiagonal` on a CUDA GPU.

The GPU driver (a thread per eigenvalue, a bitonic sort, a thread block per cluster) against the
same accuracy bounds as the CPU entry and against the CPU entry's eigenvalues. Every test is
marked ``gpu`` and skipped where JAX has no GPU (run them with ``tools/dev gpu-test``).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tridiagonal_cases import CASES, bounds, case, check_accuracy, errors
from jaxsolve import dense

GPU = next((d for d in jax.devices() if d.platform == "gpu"), None)
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU is None, reason="needs a GPU")]


def gpu(x):
    return jax.device_put(jnp.asarray(x), GPU)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_eigenpairs_meet_lapack_accuracy(name, dtype, x64):
    d, e = case(name, dtype)
    w, z, status = dense.eigh_tridiagonal(gpu(d), gpu(e), return_status=True)
    assert w.devices() == {GPU}
    check_accuracy(d, e, w, z, status)
    cpu = jax.devices("cpu")[0]
    w_cpu = dense.eigh_tridiagonal(jax.device_put(d, cpu), jax.device_put(e, cpu))[0]
    # The same bisection; nvcc may fuse a multiply-add that the host compiler does not.
    scale = float(np.abs(np.asarray(w_cpu, np.float64)).max())
    np.testing.assert_allclose(np.asarray(w), np.asarray(w_cpu), rtol=0,
                               atol=4 * np.finfo(dtype).eps * scale)


def test_large_random_matrix(x64):
    """n = 4096 within the contract the CPU entry meets (`bounds`: LAPACK's O(n ε), 5.7e-13 for
    the eigenvalues here), and the same eigenvalues as the CPU entry's bisection.

    The eigenvalue error is measured against SciPy's ``stemr``, which carries an O(n ε) error of
    its own: it is not a tighter reference than the contract."""
    rng = np.random.default_rng(11)
    n = 4096
    d, e = rng.standard_normal(n), rng.standard_normal(n - 1)
    w, z = dense.eigh_tridiagonal(gpu(d), gpu(e))
    value, residual, orthogonality = errors(d, e, w, z)
    value_bound, residual_bound, orthogonality_bound = bounds(np.float64, n)
    assert value <= value_bound and residual <= residual_bound, (value, residual)
    assert orthogonality <= orthogonality_bound, orthogonality
    cpu = jax.devices("cpu")[0]
    w_cpu = dense.eigh_tridiagonal(jax.device_put(d, cpu), jax.device_put(e, cpu))[0]
    scale = float(np.abs(np.asarray(w_cpu)).max())
    np.testing.assert_allclose(np.asarray(w), np.asarray(w_cpu), rtol=0,
                               atol=4 * np.finfo(np.float64).eps * scale)
