"""The ``*_shardmap_ctx`` forms: JAXMg's routines inside a caller's ``jax.jit`` that donates.

Each form, in a ``jax.jit`` that donates its matrix (and right-hand side) on a 2 × 2 mesh of
Explicit axes under ``jax.set_mesh``, as JAXMg's examples do, gives the results of the routine
it wraps, returns the work buffers first (JAXMg's order), and every donated buffer is used:
XLA's "donated buffers were not usable" warning is an error here.
"""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from helpers import hermitian_positive_definite, random_matrix
from jaxsolve import dense

N = 8

# name: (ctx form, its routine, takes b, how many work buffers lead its outputs)
FORMS = {
    "potrs": (dense.potrs_shardmap_ctx, dense.potrs, True, 1),
    "lu_solve": (dense.lu_solve_shardmap_ctx, dense.lu_solve, True, 1),
    "least_squares": (dense.least_squares_shardmap_ctx, dense.least_squares, True, 2),
    "syevd": (dense.syevd_shardmap_ctx, dense.syevd, False, 1),
    "gesvd": (dense.gesvd_shardmap_ctx, dense.gesvd, False, 1),
    "qr": (dense.qr_shardmap_ctx, dense.qr, False, 0),
    "polar": (dense.polar_shardmap_ctx, dense.polar, False, 0),
}


@pytest.fixture
def mesh(x64):
    return jax.make_mesh((2, 2), ("pr", "pc"), devices=jax.devices("cpu")[:4])


def operands(mesh, with_b):
    rng = np.random.default_rng(3)
    a = jax.device_put(hermitian_positive_definite(rng, N, np.float64),
                       NamedSharding(mesh, P("pr", "pc")))
    b = jax.device_put(random_matrix(rng, (N, 2), np.float64), NamedSharding(mesh, P("pr")))
    return (a, b) if with_b else (a,)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_context_form_in_a_donating_jit(mesh, name):
    form, routine, with_b, work_count = FORMS[name]
    inputs = operands(mesh, with_b)
    with jax.set_mesh(mesh):
        expected = routine(*operands(mesh, with_b), T_A=4, return_status=True)
        compiled = jax.jit(functools.partial(form, T_A=4),
                           donate_argnums=tuple(range(len(inputs))))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # every donated buffer must find its output
            got = compiled(*inputs)
    assert all(x.is_deleted() for x in inputs)
    work, results = got[:work_count], got[work_count:]
    for buffer, x in zip(work, inputs):
        assert buffer.shape == x.shape and buffer.dtype == x.dtype
    assert isinstance(results[-1], dense.Status) and int(results[-1]) == 0
    for x, y in zip(jax.tree.leaves(results), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-10, atol=1e-12)


def test_potrs_context_form_with_logdet_outside_jit(mesh):
    a, b = operands(mesh, True)
    a_work, x, logdet, status = dense.potrs_shardmap_ctx(a, b, 4, return_logdet=True)
    expected_x, expected_logdet = dense.potrs(a, b, 4, return_logdet=True)
    assert not a.is_deleted() and a_work.shape == a.shape and int(status) == 0
    np.testing.assert_allclose(np.asarray(x), np.asarray(expected_x), rtol=1e-12)
    np.testing.assert_allclose(float(logdet), float(expected_logdet), rtol=1e-14)
    assert jnp.ndim(logdet) == 0
