"""JAX-AMG's Caching Guide (docs/caching.md) run with only the imports changed.

Its code block (``clear_solver_cache``, ``finalize``) and what its text documents:
``with_cache(A, coloring=cache_coloring(...))`` reuses an operator's structure across
solves under ``jax.jit`` while the values change; ``is_symmetric=True``; ``reuse_setup``;
a new sparsity pattern is a cache miss with no explicit clear; the cache counters; and
"Cache inspection": ``get_solver_cache_info()``'s ``single_gpu``/``mpi`` size, capacity and
per-entry summaries and ``isolated_mode``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse as jsparse

import jaxsolve.sparse as jaxamg
from jaxsolve.sparse.matrices import (constant_nullspace, periodic_poisson_matrix,
                                     poisson_matrix, rhs_ones, tridiagonal_operator)


def test_clearing_caches_and_cleanup():
    A, b = poisson_matrix(8), rhs_ones(64)
    jaxamg.solve(A, b)
    assert jaxamg.get_solver_cache_info()["single_gpu"]["size"] >= 1
    operator = tridiagonal_operator(3.0)
    jaxamg.cache_coloring(operator, 16)
    # --- docs/caching.md, "Clearing caches and cleanup" ---
    jaxamg.clear_solver_cache()  # Clears C++ AmgX handle cache
    jaxamg.finalize()            # Clears caches/resources and tears down native state
    # --- end of the page's block ---
    assert jaxamg.get_solver_cache_info()["single_gpu"]["size"] == 0
    x, info = jaxamg.solve(A, b)  # solves may follow: they set up anew
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS


def test_with_cache_coloring_in_an_optimization_loop():
    """The operator's structure computed once, then values changing under jax.jit."""
    n = 32
    b = rhs_ones(n)
    coloring = jaxamg.cache_coloring(tridiagonal_operator(3.0), n)  # once, outside jit
    rows, cols, colors, n_colors, shape = coloring  # JAX-AMG's 5-tuple
    assert shape == (n, n) and rows.size == 3 * n - 2 and n_colors == 3

    @jax.jit
    def loss(diagonal):
        A = jaxamg.with_cache(tridiagonal_operator(diagonal), coloring=coloring,
                              is_symmetric=True)
        x, _ = jaxamg.solve(A, b, config={"solver": "PCG", "tolerance": 1e-10})
        return jnp.sum(x)

    for diagonal in (3.0, 4.0):
        dense = np.diag(np.full(n, diagonal)) - np.eye(n, k=1) - np.eye(n, k=-1)
        np.testing.assert_allclose(loss(diagonal), np.linalg.solve(dense, np.ones(n)).sum(),
                                   rtol=1e-4)
    grad = jax.grad(loss)(3.0)
    step = 1e-2
    np.testing.assert_allclose(grad, (loss(3.0 + step) - loss(3.0 - step)) / (2 * step),
                               rtol=1e-2)


def test_metadata_remains_on_the_objects():
    """"Metadata attached via with_cache(...) remains on Python objects": the result may be
    ignored, as JAX-AMG's attaches in place (the MPI case: jaxamg_mpi_page.py, in_place)."""
    gallery = poisson_matrix(4)
    assert jaxamg.with_cache(gallery, is_symmetric=True) is gallery and gallery.is_symmetric
    plain = jsparse.BCSR((gallery.data, np.asarray(gallery.indices),
                          np.asarray(gallery.indptr)), shape=gallery.shape)
    static = jaxamg.with_cache(plain, is_symmetric=True)
    assert plain.attachments.is_symmetric and static.is_symmetric and static is not plain
    x, info = jaxamg.solve(plain, rhs_ones(16))  # solve reads the plain matrix's attribute
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS
    coloring = jaxamg.cache_coloring(tridiagonal_operator(3.0), 16)
    operator = jaxamg.with_cache(tridiagonal_operator(3.0))
    assert jaxamg.with_cache(operator, coloring=coloring, is_symmetric=True) is operator
    assert operator.coloring is coloring and operator.is_symmetric
    jaxamg.with_cache(operator, is_symmetric=False)  # given attachments replace, others stay
    assert operator.coloring is coloring and operator.is_symmetric


def test_reusing_a_declared_pattern():
    """The newer Caching Guide's "Reusing a declared pattern": a pattern declared once, with
    couplings whose coefficients are zero at first, serves each new operator under jit."""
    n = 16
    i = np.arange(n)
    rows, cols, shape = np.r_[i, i[1:], i[:-1]], np.r_[i, i[:-1], i[1:]], (n, n)
    traces = []

    def apply_operator(coefficients, x):  # tridiagonal; the couplings are coefficients[1]
        traces.append(None)
        y = coefficients[0] * x
        y = y.at[1:].add(-coefficients[1] * x[:-1])
        return y.at[:-1].add(-coefficients[1] * x[1:])

    # --- docs/caching.md, "Reusing a declared pattern" ---
    p = jaxamg.pattern(rows, cols, shape)

    @jax.jit
    def solve_at(coefficients, b):
        op = jaxamg.with_cache(lambda x: apply_operator(coefficients, x), pattern=p)
        return jaxamg.solve(op, b)[0]
    # --- end of the page's block ---
    b = rhs_ones(n)
    counts = []
    for diagonal, coupling in [(2.0, 0.0), (3.0, 1.0), (4.0, 1.5)]:
        x = solve_at(jnp.array([diagonal, coupling]), b)
        dense = diagonal * np.eye(n) - coupling * (np.eye(n, k=1) + np.eye(n, k=-1))
        np.testing.assert_allclose(x, np.linalg.solve(dense, np.ones(n)), rtol=1e-4)
        counts.append(len(traces))
    assert counts[0] > 0 and counts == counts[:1] * 3  # traced by the first call only
    assert (p.method, p.nnz, p.n_colors, p.shape) == ("declared", 3 * n - 2, 3, shape)
    with pytest.raises(TypeError, match="mutually exclusive"):
        jaxamg.with_cache(lambda x: x, pattern=p, coloring=p)
    with pytest.raises(ValueError, match="outside the shape"):
        jaxamg.pattern(rows, cols + 1, shape)
    # A coupling left out of the declaration is caught where the values are concrete.
    with pytest.raises(ValueError, match="does not reproduce"):
        jaxamg.solve(jaxamg.with_cache(lambda x: apply_operator(jnp.array([3.0, 1.0]), x),
                                       pattern=jaxamg.pattern(i, i, shape)), b)


def test_null_spaces_attached_to_a_matrix(x64):
    """The newer Caching Guide: ``nullspace=`` / ``transpose_nullspace=`` of ``with_cache``
    are defaults for ``solve``'s arguments of those names, for matrices too."""
    A = periodic_poisson_matrix(8, dtype=jnp.float64)
    ones = constant_nullspace(64, dtype=jnp.float64)
    b = jnp.sin(jnp.arange(64.0))
    expected, _ = jaxamg.solve(A, b, nullspace=ones, transpose_nullspace=ones)
    jaxamg.with_cache(A, nullspace=ones, transpose_nullspace=ones)  # in place
    x, info = jaxamg.solve(A, b)
    np.testing.assert_allclose(x, expected, rtol=1e-10, atol=1e-12)
    assert abs(float(jnp.sum(x))) < 1e-8 and float(info["rhs_inconsistency"]) > 1e-3
    with pytest.raises(ValueError, match="nullspace= is not supported with comm="):
        jaxamg.solve(A, b, comm=object(), nglobal=64, partition_info=(0, 64))


def test_reuse_setup_and_pattern_changes():
    jaxamg.clear_solver_cache()
    A, b = poisson_matrix(10), rhs_ones(100)
    jaxamg.solve(A, b)
    misses = jaxamg.cache_info().misses
    scaled = jaxamg.as_csr(A).with_values(1.5 * A.data)
    x, info = jaxamg.solve(scaled, b, reuse_setup=True)  # hierarchy kept, values refreshed
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS
    np.testing.assert_allclose(1.5 * (A @ x), b, atol=1e-4)
    jaxamg.solve(poisson_matrix(11), rhs_ones(121))  # a new pattern: a miss, no clear needed
    assert jaxamg.cache_info().misses == misses + 1


def test_cache_inspection():
    """Sizes and capacities of both caches, an entry per setup with its dimensions, config
    and pattern hash (equal for equal patterns), and isolated mode."""
    jaxamg.clear_solver_cache()
    A, b = poisson_matrix(10), rhs_ones(100)
    jaxamg.solve(A, b)
    jaxamg.solve(A, b, config={"solver": "CG"})  # no preconditioner: the pattern only
    info = jaxamg.get_solver_cache_info()
    assert set(info) == {"single_gpu", "mpi", "isolated_mode"}
    assert info["isolated_mode"] is False
    assert info["mpi"]["entries"] == [] and info["mpi"]["size"] == 0
    single = info["single_gpu"]
    assert (single["size"], single["capacity"]) == (2, jaxamg.cache_info().maxsize)
    amg, pattern = single["entries"]
    assert (amg["n_rows"], amg["nnz"]) == (pattern["n_rows"], pattern["nnz"]) == (100, 460)
    assert amg["structure_hash"] == pattern["structure_hash"]
    assert amg["config"]["solver"] == "AMG" and pattern["config"] is None
    jaxamg.set_cache_size(0)
    try:
        assert jaxamg.get_solver_cache_info()["isolated_mode"] is True
    finally:
        jaxamg.set_cache_size(8)
