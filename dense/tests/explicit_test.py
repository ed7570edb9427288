"""The dense routines on meshes of Explicit axes (``jax.make_mesh``'s default).

Every routine on arrays typed on an Explicit 2 × 2 mesh gives what it gives on the same mesh
with Auto axes, and its outputs come back typed on the caller's mesh (solutions split like
``b``, matrices like ``a``, eigenvalues and log-determinants replicated): outside ``jax.jit``,
inside it, under ``jax.grad`` and ``jax.vmap``, donated in place.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from helpers import hermitian_positive_definite, random_matrix
from jaxsolve import dense
from jaxsolve.dense import _explicit

N = 8


def make_mesh(kind, devices=None):
    devices = jax.devices("cpu")[:4] if devices is None else devices
    return jax.make_mesh((2, 2), ("pr", "pc"), axis_types=(kind,) * 2, devices=devices)


@pytest.fixture
def meshes(x64):
    """(Explicit mesh, Auto mesh) over the same four devices."""
    return make_mesh(AxisType.Explicit), make_mesh(AxisType.Auto)


def spec_of(x):
    """The spec in `x`'s type, without trailing Nones (``P(None)`` is ``P()``)."""
    entries = list(jax.typeof(x).sharding.spec)
    while entries and entries[-1] is None:
        entries.pop()
    return P(*entries)


def on(mesh, x, spec):
    return jax.device_put(jnp.asarray(x), NamedSharding(mesh, spec))


def operands(mesh):
    rng = np.random.default_rng(0)
    a = hermitian_positive_definite(rng, N, np.float64)
    tall = random_matrix(rng, (N, N // 2), np.float64)
    return dict(a=on(mesh, a, P("pr", "pc")), b=on(mesh, np.ones(N), P("pr")),
                bb=on(mesh, a + N * np.eye(N), P("pr", "pc")),
                tall=on(mesh, tall, P("pr", "pc")))


ROUTINES = {
    "potrs": lambda o: dense.potrs(o["a"], o["b"], return_logdet=True),
    "potrs_split": lambda o: dense.potrs(o["a"], o["b"], return_logdet=True, replicate_x=False),
    "lu_solve": lambda o: dense.lu_solve(o["a"], o["b"]),
    "syevd": lambda o: dense.syevd(o["a"]),
    "sygvd": lambda o: dense.sygvd(o["a"], o["bb"]),
    "qr": lambda o: dense.qr(o["tall"]),
    "gesvd": lambda o: dense.gesvd(o["tall"]),
    "polar": lambda o: dense.polar(o["a"]),
    "least_squares": lambda o: dense.least_squares(o["tall"], o["b"]),
    "cho_solve": lambda o: dense.cho_solve(dense.cho_factor(o["a"]), o["b"]),
    "slogdet": lambda o: dense.slogdet(o["a"]),
}

# The specs the outputs come back with: like b, like a, or replicated (JAXMg's solvers' x,
# unless replicate_x=False).
EXPECTED_SPECS = {
    "potrs": (P(), P()),
    "potrs_split": (P("pr"), P()),
    "lu_solve": (P(),),
    "syevd": (P(), P("pr", "pc")),
    "sygvd": (P(), P("pr", "pc")),
    "qr": (P("pr", "pc"), P("pr", "pc")),
    "gesvd": (P("pr", "pc"), P(), P("pr", "pc")),
    "polar": (P("pr", "pc"), P("pr", "pc")),
    "least_squares": (P(),),
    "cho_solve": (P("pr"),),
    "slogdet": (P(), P()),
}


def leaves(x):
    return jax.tree.leaves(x)


@pytest.mark.parametrize("routine", sorted(ROUTINES))
def test_every_routine_matches_the_auto_mesh_and_keeps_the_callers_types(meshes, routine):
    explicit, auto = meshes
    got = leaves(ROUTINES[routine](operands(explicit)))
    expected = leaves(ROUTINES[routine](operands(auto)))
    assert [tuple(spec_of(x)) for x in got] == [tuple(s) for s in EXPECTED_SPECS[routine]]
    for x in got:
        assert x.sharding.mesh == explicit
    for x, y in zip(got, expected):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("routine", ["potrs", "potrs_split", "syevd", "qr", "cho_solve"])
def test_under_jit(meshes, routine):
    explicit, auto = meshes
    got = leaves(jax.jit(ROUTINES[routine])(operands(explicit)))
    expected = leaves(ROUTINES[routine](operands(auto)))
    assert [tuple(spec_of(x)) for x in got] == [tuple(s) for s in EXPECTED_SPECS[routine]]
    for x, y in zip(got, expected):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-12, atol=1e-12)


def test_mesh_given_inside_jit(meshes):
    explicit, _ = meshes
    o = operands(explicit)
    x = jax.jit(lambda a, b: dense.potrs(a, b, mesh=explicit, matrix_specs=P("pr", "pc"),
                                         replicate_x=False))(o["a"], o["b"])
    assert spec_of(x) == P("pr")
    np.testing.assert_allclose(np.asarray(o["a"]) @ np.asarray(x), np.ones(N), atol=1e-12)


def test_derivatives_match_the_auto_mesh(meshes):
    explicit, auto = meshes

    def loss(a, b):
        x, logdet = dense.potrs(a, b, return_logdet=True)
        return jnp.sum(x) + logdet + jnp.sum(dense.syevd(a)[0] ** 2)

    with jax.set_mesh(explicit):  # what JAX asks for grad of Explicit-typed arrays
        o = operands(explicit)
        ga, gb = jax.jit(jax.grad(loss, argnums=(0, 1)))(o["a"], o["b"])
    o = operands(auto)
    ea, eb = jax.grad(loss, argnums=(0, 1))(o["a"], o["b"])
    assert spec_of(ga) == P("pr", "pc") and spec_of(gb) == P("pr")
    np.testing.assert_allclose(np.asarray(ga), np.asarray(ea), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gb), np.asarray(eb), rtol=1e-10, atol=1e-12)


def test_vmap_over_right_hand_sides_and_stacks(meshes):
    explicit, _ = meshes
    o = operands(explicit)
    a = np.asarray(o["a"])
    with jax.set_mesh(explicit):
        rhs = on(explicit, np.arange(3.0 * N).reshape(N, 3), P("pr", None))
        x = jax.vmap(lambda b: dense.potrs(o["a"], b), in_axes=1, out_axes=1)(rhs)
        stack = on(explicit, np.stack([a, 2 * a]), P(None, "pr", "pc"))
        w = jax.vmap(lambda m: dense.syevd(m)[0])(stack)
    np.testing.assert_allclose(a @ np.asarray(x), np.asarray(rhs), atol=1e-10)
    expected = np.linalg.eigvalsh(a)
    np.testing.assert_allclose(np.asarray(w), np.stack([expected, 2 * expected]), atol=1e-10)


def test_donation_stays_in_place(meshes):
    explicit, _ = meshes
    o = operands(explicit)
    a = o["a"]
    view = _explicit._on_auto_view(a)  # what the program gets: a's buffers, not a copy
    assert [s.data.unsafe_buffer_pointer() for s in view.addressable_shards] == [
        s.data.unsafe_buffer_pointer() for s in a.addressable_shards]
    assert view.sharding.mesh.axis_types == (AxisType.Auto,) * 2
    expected = np.linalg.solve(np.asarray(a), np.ones(N))
    x = dense.potrs(a, o["b"], donate=True)
    assert a.is_deleted() and o["b"].is_deleted()
    np.testing.assert_allclose(np.asarray(x), expected, atol=1e-12)


def test_inputs_on_two_explicit_meshes_are_refused(meshes):
    explicit, _ = meshes
    renamed = jax.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Explicit,) * 2,
                            devices=jax.devices("cpu")[:4])
    a = operands(explicit)["a"]
    b = on(renamed, np.ones(N), P("x"))
    with pytest.raises(ValueError, match="typed on different Explicit meshes"):
        dense.potrs(a, b)


# ------------------------------------------------------------------ jax.set_mesh


@pytest.mark.parametrize("kind", [AxisType.Explicit, AxisType.Auto], ids=["explicit", "auto"])
@pytest.mark.parametrize("routine", sorted(ROUTINES))
def test_every_routine_under_set_mesh(x64, kind, routine):
    """JAXMg's examples call ``jax.set_mesh(mesh)`` first; every routine runs under it."""
    mesh = make_mesh(kind)
    expected = leaves(ROUTINES[routine](operands(make_mesh(AxisType.Auto))))
    with jax.set_mesh(mesh):
        got = leaves(ROUTINES[routine](operands(mesh)))
    for x, y in zip(got, expected, strict=True):
        assert x.sharding.mesh.axis_types == mesh.axis_types
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", [AxisType.Explicit, AxisType.Auto], ids=["explicit", "auto"])
def test_the_issues_reproducer_in_and_out_of_jit_under_grad_and_vmap(x64, kind):
    """A 4 × 1 grid of ``jax.make_mesh``, ``A = diag(1..12)``, ``b = 1``, ``T_A = 3``."""
    mesh = jax.make_mesh((4, 1), ("pr", "pc"), axis_types=(kind,) * 2,
                         devices=jax.devices("cpu")[:4])
    d = np.arange(1.0, 13.0)
    a = on(mesh, np.diag(d), P("pr", "pc"))
    b = on(mesh, np.ones((12, 1)), P("pr", None))
    with jax.set_mesh(mesh):
        x = dense.potrs(a, b, T_A=3)
        x_jit = jax.jit(lambda a, b: dense.potrs(a, b, T_A=3))(a, b)
        grad = jax.grad(lambda a: jnp.sum(dense.potrs(a, b, T_A=3)))(a)
        columns = jax.vmap(lambda c: dense.potrs(a, c, T_A=3), in_axes=1, out_axes=1)(
            on(mesh, np.ones((12, 2)), P("pr", None)))
    np.testing.assert_allclose(np.asarray(x)[:, 0], 1 / d, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(x_jit)[:, 0], 1 / d, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(grad), -np.outer(1 / d, 1 / d), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(columns), np.stack([1 / d, 1 / d], 1), rtol=1e-14)
