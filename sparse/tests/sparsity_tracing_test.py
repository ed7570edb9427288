"""Tests of trace_sparsity: the pattern of x ↦ A x from its jaxpr, primitive by primitive."""

import re
import warnings

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
from jax import lax
from jax.experimental import sparse as jsparse

from jaxsolve import sparse
from jaxsolve.sparse import _sparsity_tracing

N = 12
_MATRIX = np.asarray(scipy.sparse.random(N, N, density=0.2, random_state=1).toarray()
                     + np.eye(N), np.float32)


_BCSR = jsparse.BCSR.fromdense(_MATRIX)
_BCOO = jsparse.BCOO.fromdense(_MATRIX)
_ONE_DEVICE = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("i",))


def _custom_jvp_roll(x):
    @jax.custom_jvp
    def f(y):
        return jnp.roll(y, 3)

    f.defjvp(lambda primals, tangents: (f(*primals), f(*tangents)))
    return f(x)


def _custom_vjp_scale(x):
    @jax.custom_vjp
    def f(y):
        return 2 * jnp.flip(y)

    f.defvjp(lambda y: (f(y), None), lambda _, g: (2 * jnp.flip(g),))
    return f(x)


# Each operator's traced pattern must equal its Jacobian's (no structural zero hides).
OPERATORS = {
    "roll": lambda x: 2 * x - jnp.roll(x, 1) - jnp.roll(x, -1),
    "at_add": lambda x: (4.0 * x).at[1:].add(-x[:-1]).at[:-1].add(-x[1:]),
    "at_set": lambda x: x.at[0].set(0.0) + jnp.roll(x, 2).at[-1].set(1.0),
    "pad_slices": lambda x: (lambda p: 2 * p[1:-1] - p[:-2] - p[2:])(jnp.pad(x, 1)),
    "strided_slice_concatenate": lambda x: jnp.concatenate([x[::2], x[1::2]]) * 3,
    "gather": lambda x: x[np.array([0, 2, 1, 3, 3, 4, 5, 6, 7, 8, 9, 11])] * 2,
    "scatter_add": lambda x: jnp.zeros(N, x.dtype).at[
        np.array([0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])].add(x),
    "dense_matvec": lambda x: jnp.asarray(_MATRIX) @ x,
    "vecmat": lambda x: x @ jnp.asarray(_MATRIX),
    "convolution": lambda x: jnp.convolve(x, jnp.array([-1.0, 2.0, -1.0]), mode="same"),
    "conv_general_dilated": lambda x: lax.conv_general_dilated(
        x.reshape(1, 1, 3, 4), jnp.array([[[[0.0, 1.0, 0.0], [1.0, -4.0, 1.0],
                                             [0.0, 1.0, 0.0]]]]), (1, 1), "SAME").ravel(),
    "reshape_transpose_rev": lambda x: jnp.flip(x.reshape(3, 4).T, 0).ravel(),
    "broadcast_reduce": lambda x: jnp.sum(x.reshape(3, 4), axis=1, keepdims=True).repeat(
        4, 1).ravel(),
    "cumsum": lambda x: jnp.cumsum(x),
    "dynamic_slices": lambda x: lax.dynamic_update_slice(x, x[:3] * 2, (5,))
    + lax.dynamic_slice(jnp.concatenate([x, x]), (3,), (N,)),
    "select_constant_predicate": lambda x: jnp.where(jnp.arange(N) % 2 == 0, x, jnp.roll(x, 1)),
    "product_with_zeros": lambda x: x * (jnp.arange(N) % 3 != 0).astype(x.dtype) + jnp.flip(x),
    "fori_loop_scan": lambda x: lax.fori_loop(0, 2, lambda i, v: v + jnp.roll(v, 1), x),
    "fori_loop_traced_shift": lambda x: lax.fori_loop(0, 3, lambda i, v: v + jnp.roll(v, i), x),
    "scan_over_slices": lambda x: lax.scan(lambda c, r: (c + r, c * r[0]), jnp.zeros(4),
                                           x.reshape(3, 4))[1].ravel(),
    "while_static_trip": lambda x: lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + jnp.roll(c[1], 1)), (0, x))[1],
    "nested_jit": lambda x: jax.jit(lambda y: jnp.roll(y, 5) * 2)(x) + x,
    "remat": lambda x: jax.checkpoint(lambda y: jnp.sin(y) * jnp.roll(y, 1))(x),
    "custom_jvp": _custom_jvp_roll,
    "custom_vjp": _custom_vjp_scale,
    "grid_2d": lambda x: (lambda u: 4 * u - jnp.roll(u, 1, 0) - jnp.roll(u, 1, 1))(
        x.reshape(3, 4)).T.ravel(),
    "shard_map_one_device": lambda x: jax.shard_map(
        lambda y: 2 * jnp.flip(y), mesh=_ONE_DEVICE, in_specs=jax.P(),  # a pvary inside
        out_specs=jax.P("i"))(x) + jnp.roll(x, 1),
    # jax.experimental.sparse: constant indices, the dense operand or the data from x.
    "bcsr_matvec_plus_square": lambda x: _BCSR @ x + x ** 2,
    "bcsr_matmat": lambda x: (_BCSR @ jnp.stack([x, jnp.flip(x)], 1)) @ jnp.array([1.0, 2.0]),
    "bcoo_matvec": lambda x: _BCOO @ x,
    "bcoo_vecmat": lambda x: x @ _BCOO,
    "bcoo_transpose_matvec": lambda x: _BCOO.T @ x,
    "bcoo_data_from_x": lambda x: jsparse.BCOO(
        (jnp.roll(x, 3)[np.arange(_BCOO.nse) % N], _BCOO.indices), shape=(N, N))
    @ jnp.linspace(1.0, 2.0, N),
    "bcsr_todense_data_from_x": lambda x: jnp.sum(jsparse.BCSR(
        (x[np.arange(_BCSR.nse) % N], _BCSR.indices, _BCSR.indptr), shape=(N, N)).todense(),
        axis=1),
}


def _jacobian_pattern(operator):
    x = jnp.linspace(0.5, 1.5, N, dtype=jnp.float32)
    try:  # reverse mode for custom_vjp, forward mode for while loops
        return np.asarray(jax.jacrev(operator)(x)) != 0
    except ValueError:
        return np.asarray(jax.jacfwd(operator)(x)) != 0


class TestTraceSparsity:
    @pytest.mark.parametrize("name", sorted(OPERATORS))
    def test_trace_sparsity_equals_jacobian_pattern(self, name):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # neither a fallback nor a failed check
            pattern = sparse.trace_sparsity(OPERATORS[name], N)
        assert isinstance(pattern, scipy.sparse.csr_array) and pattern.dtype == bool
        np.testing.assert_array_equal(pattern.toarray(), _jacobian_pattern(OPERATORS[name]))

    def test_trace_sparsity_cond_is_union_of_branches_and_the_predicates_inputs(self):
        def operator(x):  # the branch taken depends on x[4]: JAX-AMG adds that column
            return lax.cond(x[4] > 0, lambda: jnp.roll(x, 1), lambda: jnp.roll(x, 2))

        pattern = sparse.trace_sparsity(operator, N).toarray()
        expected = np.roll(np.eye(N, dtype=bool), 1, 0) | np.roll(np.eye(N, dtype=bool), 2, 0)
        expected[:, 4] = True
        np.testing.assert_array_equal(pattern, expected)
        # A constant predicate takes its branch alone.
        constant = sparse.trace_sparsity(
            lambda x: lax.cond(True, lambda: jnp.roll(x, 1), lambda: jnp.roll(x, 2)), N)
        np.testing.assert_array_equal(constant.toarray(), np.roll(np.eye(N, dtype=bool), 1, 0))

    def test_trace_sparsity_while_test_from_x_adds_its_inputs(self):
        def operator(x):  # halves x while x[1] is large: the trip count depends on x[1]
            return lax.while_loop(lambda v: v[1] > 1e-3, lambda v: 0.5 * v, x)

        expected = np.eye(N, dtype=bool)
        expected[:, 1] = True
        np.testing.assert_array_equal(sparse.trace_sparsity(operator, N).toarray(), expected)

    def test_trace_sparsity_while_without_static_trip_count_is_a_fixed_point(self):
        def operator(x):  # the trip count depends on x: the union over all of them
            def body(c):
                return c[0] + 1, jnp.roll(c[1], 1) + c[1], c[2] * 0.5

            return lax.while_loop(lambda c: c[2] > 1e-3, body, (0, x, jnp.sum(x ** 2)))[1]

        pattern = sparse.trace_sparsity(operator, N).toarray()
        assert pattern.all()  # every shift reachable; nothing missed

    def test_trace_sparsity_rectangular(self):
        pattern = sparse.trace_sparsity(lambda x: x[1:] - x[:-1], (N - 1, N))
        assert pattern.shape == (N - 1, N) and pattern.nnz == 2 * (N - 1)

    def test_trace_sparsity_falls_back_to_probing_with_a_warning(self):
        def operator(x):
            return jax.pure_callback(lambda y: 2 * y, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

        with pytest.warns(RuntimeWarning, match="primitive 'pure_callback' cannot be traced"):
            pattern = sparse.trace_sparsity(operator, N)
        np.testing.assert_array_equal(pattern.toarray(), np.eye(N, dtype=bool))

    def test_trace_sparsity_without_probing_returns_none(self):
        # JAX-AMG's trace_sparsity_pattern answer where tracing cannot decide: None.
        def operator(x):
            return jax.pure_callback(lambda y: 2 * y, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert sparse.trace_sparsity(operator, N, probe=False) is None
            assert sparse.trace_sparsity(OPERATORS["roll"], N, probe=False).nnz == 3 * N

    def test_trace_sparsity_of_an_operator_on_a_bcsr_probes_nothing(self, monkeypatch):
        """Issue 32's acceptance: x ↦ A x + x², A a BCSR (JAX-AMG's preconditioned_solver
        demo builds its operator so), 4096 unknowns: exact, without a single probe."""
        A = sparse.matrices.poisson_matrix(64)

        def no_probing(*args):
            raise AssertionError("trace_sparsity probed the operator")

        monkeypatch.setattr(_sparsity_tracing, "probe_pattern", no_probing)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            pattern = sparse.trace_sparsity(lambda x: A @ x + x ** 2, 64 * 64)
            # Its linear part, colored and materialized for a solve: no probe either.
            info = sparse.cache_coloring(lambda x: A @ x + 2.0 * x, 64 * 64)
        expected = scipy.sparse.csr_array(np.asarray(A.todense()) != 0)  # has the diagonal
        assert (pattern != expected.astype(bool)).nnz == 0 and pattern.nnz == 20224
        assert info.method == "traced" and info.n_colors == 5

    def test_trace_sparsity_data_dependent_index_falls_back(self):
        def operator(x):
            shift = jnp.argmax(x)  # a data-dependent offset
            return lax.dynamic_slice(jnp.concatenate([x, x]), (shift,), (N,))

        with pytest.warns(RuntimeWarning, match="dynamic_slice.*data-dependent"):
            sparse.trace_sparsity(operator, N)

    def test_trace_sparsity_dead_callback_does_not_force_probing(self):
        def operator(x):
            jax.pure_callback(lambda y: y, jax.ShapeDtypeStruct(x.shape, x.dtype), x)  # unused
            return 3 * x

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            pattern = sparse.trace_sparsity(operator, N)
        assert pattern.nnz == N

    def test_trace_sparsity_verification_rejects_a_misread_pattern(self, monkeypatch):
        # A tracer bug that drops entries must be caught by the random probes.
        original = _sparsity_tracing._Interpreter.elementwise

        def lossy(self, name, args, shape):
            result = original(self, name, args, shape)
            if name == "sub":
                return _sparsity_tracing._Deps(shape, result.rows.multiply(
                    scipy.sparse.identity(N, dtype=bool, format="csr")).tocsr())
            return result

        monkeypatch.setattr(_sparsity_tracing._Interpreter, "elementwise", lossy)
        with pytest.warns(RuntimeWarning, match="failed its check"):
            pattern = sparse.trace_sparsity(OPERATORS["roll"], N)
        np.testing.assert_array_equal(pattern.toarray(), _jacobian_pattern(OPERATORS["roll"]))

    def test_trace_sparsity_errors(self):
        with pytest.raises(ValueError, match=r"must map \(12,\) to \(12,\)"):
            sparse.trace_sparsity(lambda x: x[:3], N)
        with pytest.raises(ValueError, match="shape must be n or"):
            sparse.trace_sparsity(lambda x: x, (2, 2, 2))
        for shape in (0, -3, (4, 0)):
            with pytest.raises(ValueError, match=re.escape(
                    f"cache_coloring: shape must be n or (n_rows, n_cols), sizes >= 1, got"
                    f" {shape!r}.")):
                sparse.cache_coloring(lambda x: x, shape)
        for shape in (2.5, (4, 2.5), "4", True, None):
            with pytest.raises(TypeError, match=re.escape(
                    "trace_sparsity: shape must be an int n or a pair (n_rows, n_cols) of ints,"
                    f" got {shape!r}.")):
                sparse.trace_sparsity(lambda x: x, shape)
        # Integers of every kind are sizes.
        assert sparse.trace_sparsity(lambda x: x, (np.int64(3), jnp.int32(3))).shape == (3, 3)

    def test_primitive_vocabulary_matches_installed_jax(self):
        """The version test: the primitive names and parameters this module reads exist."""
        seen, scans = set(), []

        def collect(jaxpr):
            for eqn in jaxpr.eqns:
                seen.add(eqn.primitive.name)
                if eqn.primitive.name == "scan":
                    scans.append(eqn)
                for value in eqn.params.values():
                    for sub in value if isinstance(value, tuple) else (value,):
                        inner = getattr(sub, "jaxpr", sub)
                        if hasattr(inner, "eqns"):
                            collect(inner)

        for operator in OPERATORS.values():
            collect(jax.make_jaxpr(operator)(jnp.ones(N)).jaxpr)
        known = (_sparsity_tracing._ELEMENTWISE | set(_sparsity_tracing._MOVEMENT)
                 | _sparsity_tracing._REDUCTIONS | _sparsity_tracing._CUMULATIVE
                 | _sparsity_tracing._SCATTER_COMBINE
                 | _sparsity_tracing._SPARSE_PRODUCTS | _sparsity_tracing._SPARSE_TODENSE
                 | _sparsity_tracing._IDENTITIES
                 | {"dot_general", "conv_general_dilated", "scan", "while", "cond", "iota",
                    "bcoo_transpose"})
        calls = seen - known
        # What is left must be call primitives, found by their jaxpr parameter.
        assert calls <= {"jit", "pjit", "closed_call", "remat", "remat2", "checkpoint",
                         "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
                         "shard_map"}, calls
        for name in ("scatter-add", "gather", "dynamic_slice", "conv_general_dilated", "scan",
                     "while", "dot_general", "pad", "concatenate", "bcoo_dot_general",
                     "bcsr_dot_general", "bcsr_todense", "bcoo_transpose", "shard_map"):
            assert name in seen, name
        for eqn in scans:  # the carry read from the parameters is the one the body returns
            consts, carry = _sparsity_tracing.scan_operand_counts(eqn.params)
            body = getattr(eqn.params["jaxpr"], "jaxpr", eqn.params["jaxpr"])
            assert [v.aval for v in eqn.invars[consts:consts + carry]] == [
                v.aval for v in body.outvars[:carry]]
            assert len(body.invars) == len(eqn.invars)


# -----------------------------------------------------------------------------
# Property tests: random sparse matrices, as a product and as index-based stencil code


@st.composite
def sparse_matrices(draw):
    m = draw(st.sampled_from([1, 6, 20]))  # few shapes: compilations are shared
    n = draw(st.sampled_from([1, 9, 20]))
    density = draw(st.floats(0.0, 0.5))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    mask = rng.random((m, n)) < density
    values = np.where(mask, rng.uniform(0.5, 2.0, (m, n)) * rng.choice([-1, 1], (m, n)), 0)
    return values.astype(np.float32)


def _as_stencil_code(matrix):
    """x ↦ A x written with gathers of x: y[i] = Σ_k w[k, i] x[idx[k, i]] (padded slots 0)."""
    m, n = matrix.shape
    nnz_per_row = np.count_nonzero(matrix, axis=1)
    width = max(1, int(nnz_per_row.max(initial=0)))
    index = np.zeros((width, m), np.int32)
    weight = np.zeros((width, m), np.float32)
    for i in range(m):
        columns = np.flatnonzero(matrix[i])
        index[:len(columns), i] = columns
        weight[:len(columns), i] = matrix[i, columns]

    def operator(x):
        return jnp.sum(jnp.asarray(weight) * x[jnp.asarray(index)], axis=0)

    return operator


_PROPERTY = hypothesis.settings(max_examples=8, deadline=None,
                                suppress_health_check=[hypothesis.HealthCheck.too_slow])


@_PROPERTY
@hypothesis.given(sparse_matrices())
def test_trace_sparsity_of_matvec_is_exact(matrix):
    pattern = sparse.trace_sparsity(lambda x: jnp.asarray(matrix) @ x, matrix.shape)
    np.testing.assert_array_equal(pattern.toarray(), matrix != 0)


@_PROPERTY
@hypothesis.given(sparse_matrices())
def test_trace_sparsity_of_stencil_code_contains_pattern(matrix):
    pattern = sparse.trace_sparsity(_as_stencil_code(matrix), matrix.shape).toarray()
    assert not np.any((matrix != 0) & ~pattern)  # never misses a nonzero
    np.testing.assert_array_equal(pattern, matrix != 0)  # and padding slots weigh 0
