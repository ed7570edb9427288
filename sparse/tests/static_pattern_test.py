"""Tests of with_cache on matrices: BCSR/BCOO arguments of jit, vmap and grad with static
patterns (issue 32), one compilation per pattern."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
from jax.experimental import sparse as jsparse

from jaxsolve import sparse
from jaxsolve_testing import counted_compilations


def poisson(n=8, dtype=jnp.float32):
    return sparse.matrices.poisson_matrix(n, dtype=dtype)


def plain(A):
    """``A`` as a plain BCSR, whose index arrays are pytree leaves (traced under jit)."""
    return jsparse.BCSR((A.data, jnp.asarray(A.indices), jnp.asarray(A.indptr)), shape=A.shape)


def counted_solve():
    """A jitted ``solve(A, b)[0]`` and the list its traces append to."""
    traces = []

    @jax.jit
    def solve(A, b):
        traces.append(None)
        return sparse.solve(A, b, config={"solver": "PCG", "tolerance": 1e-6})[0]

    return solve, traces


def reference(A, b):
    return np.linalg.solve(np.asarray(A.todense(), np.float64), np.asarray(b, np.float64))


def symmetric_gradient(A, b):
    """d(1ᵀ A⁻¹ b)/d a_ij = -λ_i x_j (λ = A⁻ᵀ 1, x = A⁻¹ b), projected onto symmetric
    matrices, on A's stored entries."""
    dense = np.asarray(A.todense(), np.float64)
    x = np.linalg.solve(dense, np.asarray(b, np.float64))
    full = -np.outer(np.linalg.solve(dense.T, np.ones(len(x))), x)
    rows = np.repeat(np.arange(len(x)), np.diff(np.asarray(A.indptr)))
    return ((full + full.T) / 2)[rows, np.asarray(A.indices)]


class TestJitArguments:
    def test_one_compilation_per_pattern(self):
        A = poisson()
        b = jnp.linspace(1.0, 2.0, 64)
        solve, traces = counted_solve()
        compiled = []
        for scale in (1.0, 2.0, 3.0):
            # Each with new index arrays of equal contents: the fingerprint, not identity.
            matrix = sparse.with_cache(jsparse.BCSR(
                (scale * A.data, jnp.array(np.asarray(A.indices)),
                 jnp.array(np.asarray(A.indptr))), shape=A.shape))
            # Counted by XLA's compile events, not by the entries of jit's C++ dispatch
            # cache (`_cache_size`), which the whole process shares: past 8192 live jitted
            # functions (a long single-process run of the sparse tests) JAX keeps no entry
            # for a new one, and `_cache_size()` reads 0.
            with counted_compilations() as count:
                x = solve(matrix, b)
            compiled.append(count[0])
            np.testing.assert_allclose(x, reference(A, b) / scale, rtol=1e-4)
        assert len(traces) == 1 and compiled[1:] == [0, 0]
        other = sparse.with_cache(poisson(9).to_bcoo())  # a new pattern: traced again
        b9 = jnp.ones(81)
        np.testing.assert_allclose(solve(other, b9), reference(other, b9), rtol=1e-4)
        assert len(traces) == 2
        with counted_compilations() as count:  # the same one again
            solve(sparse.with_cache(poisson(9).to_bcoo()), b9)
        assert len(traces) == 2 and count[0] == 0

    def test_csr_matrix_argument_compiles_once_per_pattern(self):
        A = sparse.as_csr(poisson())
        b = jnp.ones(64)
        solve, traces = counted_solve()
        for scale in (1.0, 2.0, 3.0):
            np.testing.assert_allclose(solve(A.with_values(scale * A.values), b),
                                       reference(A, b) / scale, rtol=1e-4)
        assert len(traces) == 1
        assert sparse.with_cache(A) is A  # a CsrMatrix's pattern is static already

    @pytest.mark.parametrize("convert", [
        lambda A: A, lambda A: A.to_bcoo(),
        lambda A: scipy.sparse.csr_array(np.asarray(A.todense())),
        lambda A: scipy.sparse.coo_matrix(np.asarray(A.todense()))])
    def test_each_sparse_type_keeps_its_pattern_static(self, convert):
        A = poisson()
        matrix = sparse.with_cache(convert(A))
        assert isinstance(matrix, (jsparse.BCSR, jsparse.BCOO))
        x = jnp.linspace(-1.0, 1.0, 64)
        # Inside jit the cached matrix is an ordinary BCSR/BCOO with concrete indices.
        np.testing.assert_allclose(jax.jit(lambda M, x: M @ x)(matrix, x), A @ x, rtol=1e-6)
        np.testing.assert_array_equal(jax.jit(lambda M: M.todense())(matrix), A.todense())
        leaves, _ = jax.tree.flatten(matrix)
        assert len(leaves) == 1 and leaves[0] is matrix.data

    def test_unsorted_bcoo_with_duplicates(self):
        # Not canonical: as_csr sorts and sums inside the compiled function, statically.
        rows, cols = np.array([1, 0, 0, 1, 1]), np.array([1, 1, 0, 0, 1])
        values = jnp.array([2.0, 1.0, 4.0, 1.0, 1.0])
        A = sparse.with_cache(jsparse.BCOO((values, jnp.array(np.stack([rows, cols], 1))),
                                           shape=(2, 2)))
        solve, traces = counted_solve()
        b = jnp.array([1.0, 2.0])
        expected = np.linalg.solve([[4.0, 1.0], [1.0, 3.0]], [1.0, 2.0])
        np.testing.assert_allclose(solve(A, b), expected, rtol=1e-5)
        np.testing.assert_allclose(solve(jax.tree.map(lambda d: 2 * d, A), b), expected / 2,
                                   rtol=1e-5)
        assert len(traces) == 1

    def test_a_traced_pattern_gets_an_error_naming_with_cache(self):
        b = jnp.ones(64)
        with pytest.raises(TypeError, match="with_cache"):
            jax.jit(lambda A, b: sparse.solve(A, b)[0])(plain(poisson()), b)
        with pytest.raises(TypeError, match=r"with_cache: the indices of this BCSR are traced"):
            jax.jit(lambda A: sparse.with_cache(A).data)(plain(poisson()))

    def test_new_values_inside_jit_keep_the_static_pattern(self):
        """JAX-AMG's solver_cache_benchmark rebuilds BCSR((data + noise, A.indices, A.indptr))
        inside jit: from a cached matrix (the gallery's are) the indices are concrete, so that
        works as jax.tree.map over the data does; from a plain BCSR argument they are traced,
        and the error names both ways."""
        A, b = poisson(), jnp.ones(64)
        config = {"config_version": 2, "solver": {"solver": "JACOBI_L1", "max_iters": 1,
                                                  "monitor_residual": 0}}

        def rebuilt(A, noise):
            return jsparse.BCSR((A.data + noise, A.indices, A.indptr), shape=A.shape)

        def mapped(A, noise):
            return jax.tree.map(lambda data: data + noise, A)

        def step(A, noise, new_matrix):
            return sparse.solve(new_matrix(A, noise), b, config=config)[0]

        noise = jnp.linspace(-0.01, 0.01, A.data.shape[0], dtype=A.data.dtype)
        with pytest.raises(TypeError, match=r"jax\.tree\.map\(lambda data: new_data, A\)"):
            jax.jit(step, static_argnums=2)(plain(A), noise, rebuilt)
        perturbed = A.todense() + jsparse.BCSR((noise, A.indices, A.indptr),
                                               shape=A.shape).todense()
        # One L1-Jacobi sweep from 0 (ω = 0.9): x = ω b / (a_ii + Σ_j≠i |a_ij|) on the
        # perturbed matrix.
        expected = 0.9 * b / jnp.sum(jnp.abs(perturbed), axis=1)
        from_numpy = jsparse.BCSR.tree_unflatten(  # NumPy index arrays, copied by with_cache
            {"shape": A.shape, "indices_sorted": True, "unique_indices": True}, (A.data, np.asarray(A.indices), np.asarray(A.indptr)))
        for matrix in (A, sparse.with_cache(A), sparse.with_cache(from_numpy)):
            for new_matrix in (rebuilt, mapped):
                x = jax.jit(step, static_argnums=2)(matrix, noise, new_matrix)
                np.testing.assert_allclose(x, expected, rtol=1e-5)

    def test_with_cache_inside_jit_on_a_closed_over_matrix(self):
        # JAX-AMG's demos call with_cache inside the jitted function on a closed-over A.
        A = poisson()
        b = jnp.ones(64)

        @jax.jit
        def loss(theta):
            x, _ = sparse.solve(sparse.with_cache(A, is_symmetric=True), theta * b,
                                config={"solver": "CG", "tolerance": 1e-7})
            return jnp.sum(x)

        expected = reference(A, b).sum()
        np.testing.assert_allclose(jax.grad(loss)(2.0), expected, rtol=1e-4)


class TestGradAndVmap:
    def test_grad_with_respect_to_values_through_the_jitted_solve(self):
        A = sparse.with_cache(poisson())
        b = jnp.linspace(1.0, 2.0, 64)
        solve, _ = counted_solve()
        grad = jax.grad(lambda M: jnp.sum(solve(M, b)))(A)
        assert type(grad) is type(A) and grad.pattern_key == A.pattern_key
        # PCG takes A as symmetric, so its derivative is the symmetric part's.
        np.testing.assert_allclose(grad.data, symmetric_gradient(A, b), rtol=1e-3, atol=1e-5)

    def test_is_symmetric_spares_the_transposed_solve(self):
        # JAX-AMG's meaning of is_symmetric: reverse mode of a BiCGSTAB solve needs no Aᵀ.
        A, b = poisson(), jnp.linspace(1.0, 2.0, 64)
        config = {"solver": "PBICGSTAB", "tolerance": 1e-7}

        def gradient(matrix):
            before = sparse.cache_info().misses
            grad = jax.grad(lambda M: jnp.sum(sparse.solve(M, b, config=config)[0]))(matrix)
            return grad.data, sparse.cache_info().misses - before

        sparse.clear_cache()
        declared, declared_setups = gradient(sparse.with_cache(poisson(), is_symmetric=True))
        sparse.clear_cache()
        plain, plain_setups = gradient(A)
        # One host setup either way: Aᵀ, of A's pattern, takes A's structure.  The plain
        # gradient still solves with Aᵀ (unprojected, below); the declared one does not.
        assert (declared_setups, plain_setups) == (1, 1)
        expected = symmetric_gradient(A, b)
        np.testing.assert_allclose(declared, expected, rtol=1e-3, atol=1e-5)
        # The plain gradient is unprojected; its symmetric part is the declared one.
        assert not np.allclose(plain, expected, rtol=1e-3, atol=1e-5)

    def test_vmap_over_b_and_over_values(self):
        A = sparse.with_cache(poisson())
        solve, traces = counted_solve()
        bs = jnp.stack([jnp.ones(64), jnp.linspace(0.0, 1.0, 64)])
        xs = jax.vmap(solve, in_axes=(None, 0))(A, bs)
        for x, b in zip(xs, bs):
            np.testing.assert_allclose(x, reference(A, b), rtol=1e-4, atol=1e-6)
        scaled = [jax.tree.map(lambda d, s=s: s * d, A) for s in (1.0, 2.0)]
        stacked = jax.tree.map(lambda *d: jnp.stack(d), *scaled)
        xs = jax.vmap(solve)(stacked, bs)
        for x, M, b in zip(xs, scaled, bs):
            np.testing.assert_allclose(x, reference(M, b), rtol=1e-4, atol=1e-6)


class TestAttachments:
    def test_attachments_are_recorded_and_kept(self):
        A = sparse.with_cache(poisson(), is_symmetric=True)
        assert A.is_symmetric
        before = jax.tree.structure(A)
        metadata = {"nglobal": 64}
        B = sparse.with_cache(A, mpi=metadata)  # in place, as JAX-AMG attaches
        assert B is A and B.is_symmetric and B.attachments.mpi is metadata
        # Attachments are part of the static half: a new one compiles anew.
        assert jax.tree.structure(B) != before
        assert jax.tree.structure(sparse.with_cache(poisson())) != jax.tree.structure(A)

    def test_matrices_without_a_pattern_to_attach(self):
        dense = jnp.eye(3)
        assert sparse.with_cache(dense) is dense
        with pytest.raises(TypeError, match="carries no attachments"):
            sparse.with_cache(sparse.as_csr(dense), is_symmetric=True)
        with pytest.raises(TypeError, match="carries no attachments"):
            sparse.with_cache(sparse.as_csr(dense), nullspace=jnp.ones(3))
        with pytest.raises(TypeError, match="A must be a BCSR"):
            sparse.with_cache("A")
