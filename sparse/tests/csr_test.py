"""Tests for jaxsolve.sparse._csr: CsrMatrix and as_csr."""

import gc
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
from jax.experimental import sparse as jsparse

from jaxsolve.sparse import _csr
from jaxsolve.sparse._csr import CsrMatrix, as_csr
from jaxsolve.sparse._csr_arrays import CsrStructure
from jaxsolve_testing import counted_compilations


def random_scipy(shape, dtype=np.float32, density=0.3, seed=0):
    """A random canonical scipy CSR matrix (possibly complex) with empty rows."""
    rng = np.random.default_rng(seed)
    matrix = scipy.sparse.random(*shape, density=density, format="csr", rng=rng, dtype=np.float64)
    if np.issubdtype(dtype, np.complexfloating):
        matrix = matrix + 1j * matrix.multiply(rng.standard_normal(shape))
    return matrix.astype(dtype)


def random_vector(shape, dtype, seed=1):
    rng = np.random.default_rng(seed)
    sample = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        sample = sample + 1j * rng.standard_normal(shape)
    return jnp.asarray(sample.astype(dtype))


def from_scipy(matrix):
    return CsrMatrix(matrix.data, matrix.indices, matrix.indptr, matrix.shape)


class TestCsrMatrix:
    @pytest.mark.parametrize("dtype", [np.float32, np.complex64])
    @pytest.mark.parametrize("columns", [(), (3,)], ids=["vector", "matrix"])
    def test_csr_matvec_against_scipy(self, dtype, columns):
        reference = random_scipy((5, 7), dtype)
        A = from_scipy(reference)
        x = random_vector((7, *columns), dtype)
        y = random_vector((5, *columns), dtype)
        np.testing.assert_allclose(A @ x, reference @ np.asarray(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            A.rmatvec(y), reference.T @ np.asarray(y), rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(A.to_bcsr() @ x, A @ x, rtol=1e-5, atol=1e-6)

    def test_csr_matvec_promotes_explicitly(self):
        A = from_scipy(random_scipy((4, 4)))
        y = A @ random_vector((4,), np.complex64)
        assert y.dtype == jnp.complex64

    def test_csr_transpose(self):
        reference = random_scipy((5, 7), np.complex64)
        A = from_scipy(reference)
        transposed = A.T
        assert transposed.shape == (7, 5)
        np.testing.assert_array_equal(transposed.todense(), reference.T.toarray())
        expected = reference.T.tocsr()
        expected.sort_indices()
        np.testing.assert_array_equal(transposed.indices, expected.indices)
        np.testing.assert_array_equal(transposed.indptr, expected.indptr)
        np.testing.assert_array_equal(transposed.T.values, A.values)

    def test_csr_diagonal(self):
        dense = np.array([[1.0, 2.0, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0], [4.0, 0.0, 5.0, 6.0]])
        A = as_csr(dense)
        np.testing.assert_array_equal(A.diagonal(), [1.0, 0.0, 5.0])
        np.testing.assert_array_equal(A.T.diagonal(), [1.0, 0.0, 5.0])

    def test_csr_todense_properties(self):
        reference = random_scipy((6, 3))
        A = from_scipy(reference)
        np.testing.assert_array_equal(A.todense(), reference.toarray())
        assert (A.shape, A.nnz, A.dtype) == ((6, 3), reference.nnz, np.float32)
        np.testing.assert_array_equal(A.row_ids, reference.tocoo().row)
        assert repr(A) == f"CsrMatrix(shape=(6, 3), nnz={reference.nnz}, dtype=float32)"
        with pytest.raises(ValueError, match="read-only"):
            A.indices[0] = 1

    def test_csr_integer_values_become_float(self):
        A = CsrMatrix(np.array([1, 2]), np.array([0, 1]), np.array([0, 1, 2]), (2, 2))
        assert A.dtype == jnp.float32

    def test_csr_with_values(self):
        A = from_scipy(random_scipy((5, 5)))
        B = A.with_values(2 * A.values)
        assert B.pattern_key == A.pattern_key
        np.testing.assert_allclose(B.todense(), 2 * A.todense())
        with pytest.raises(
            ValueError,
            match=re.escape(
                "CsrMatrix.with_values: values must have shape (nnz,) ="
                f" ({A.nnz},), got (3,)."
            ),
        ):
            A.with_values(jnp.ones(3))

    def test_csr_pattern_key(self):
        reference = random_scipy((5, 5))
        A, B = from_scipy(reference), from_scipy(reference)
        assert A.pattern_key == B.pattern_key and isinstance(A.pattern_key, str)
        assert jax.tree.structure(A) == jax.tree.structure(B)
        other = from_scipy(random_scipy((5, 5), seed=3))
        assert other.pattern_key != A.pattern_key
        assert jax.tree.structure(other) != jax.tree.structure(A)
        assert A.T.pattern_key != A.pattern_key

    def test_csr_grad(self):
        """The gradient with respect to the values is the outer product on the pattern."""
        A = from_scipy(random_scipy((5, 7)))
        x = random_vector((7,), np.float32)
        w = random_vector((5,), np.float32, seed=2)
        u = random_vector((7,), np.float32, seed=3)
        grad = jax.grad(lambda v: jnp.vdot(w, A.with_values(v) @ x))(A.values)
        np.testing.assert_allclose(grad, w[A.row_ids] * x[A.indices], rtol=1e-6)
        grad_transposed = jax.grad(lambda v: jnp.vdot(u, A.with_values(v).T @ w))(A.values)
        np.testing.assert_allclose(grad_transposed, w[A.row_ids] * u[A.indices], rtol=1e-6)
        grad_matrix = jax.grad(lambda M: jnp.sum(M @ x))(A)
        assert isinstance(grad_matrix, CsrMatrix) and grad_matrix.pattern_key == A.pattern_key
        np.testing.assert_allclose(grad_matrix.values, x[A.indices], rtol=1e-6)
        grad_x = jax.grad(lambda x: jnp.vdot(w, A @ x))(x)
        np.testing.assert_allclose(grad_x, A.rmatvec(w), rtol=1e-5)

    def test_csr_grad_dense_and_diagonal(self):
        A = as_csr(np.array([[2.0, 1.0], [0.0, 3.0]]))
        grad = jax.grad(lambda v: jnp.sum(A.with_values(v).diagonal() * jnp.array([5.0, 7.0])))
        np.testing.assert_array_equal(grad(A.values), [5.0, 0.0, 7.0])
        grad = jax.grad(lambda v: A.with_values(v).todense()[0, 1])
        np.testing.assert_array_equal(grad(A.values), [0.0, 1.0, 0.0])

    def test_csr_jit(self):
        reference = random_scipy((6, 6))
        traces = []

        @jax.jit
        def apply(A, x):
            traces.append(None)
            assert isinstance(A.indices, np.ndarray) and isinstance(A.indptr, np.ndarray)
            return A @ x, A.diagonal(), A.T @ x

        x = random_vector((6,), np.float32)
        y, diagonal, y_transposed = apply(from_scipy(reference), x)
        apply(from_scipy(reference).with_values(reference.data + 1), x)
        assert len(traces) == 1  # equal patterns share one compilation
        np.testing.assert_allclose(y, reference @ np.asarray(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(diagonal, reference.diagonal())
        np.testing.assert_allclose(y_transposed, reference.T @ np.asarray(x), rtol=1e-5, atol=1e-6)
        apply(from_scipy(random_scipy((6, 6), seed=5)), x)
        assert len(traces) == 2

    def test_csr_vmap_over_values(self):
        A = from_scipy(random_scipy((5, 5)))
        stacked = jnp.stack([A.values, 2 * A.values, -A.values])
        x = random_vector((5,), np.float32)
        expected = jnp.stack([A @ x, 2 * (A @ x), -(A @ x)])
        np.testing.assert_allclose(
            jax.vmap(lambda v: A.with_values(v) @ x)(stacked), expected, rtol=1e-6
        )
        batch = jax.vmap(A.with_values)(stacked)
        assert isinstance(batch, CsrMatrix) and batch.values.shape == (3, A.nnz)
        np.testing.assert_allclose(jax.vmap(lambda M: M @ x)(batch), expected, rtol=1e-6)
        dense = A.todense()
        np.testing.assert_allclose(
            jax.vmap(CsrMatrix.todense)(batch), jnp.stack([dense, 2 * dense, -dense])
        )

    @pytest.mark.parametrize(
        "values, indices, indptr, shape, message",
        [
            ([1.0], [0], [0, 1], (2, 2),
             "CsrMatrix: indptr must have n_rows + 1 = 3 entries for shape (2, 2), got 2."),
            ([1.0], [0], [0, 1, 2], (2, 2),
             "CsrMatrix: indptr[-1] = 2 must equal the number of column indices, 1"),
            ([1.0, 2.0], [0, 1], [1, 1, 2], (2, 2), "CsrMatrix: indptr[0] must be 0, got 1."),
            ([1.0, 2.0], [0, 1], [0, 2, 1, 2], (3, 2),
             "CsrMatrix: indptr must be non-decreasing, but indptr[2] = 1 < indptr[1] = 2."),
            ([1.0, 2.0], [0, 2], [0, 1, 2], (2, 2),
             "CsrMatrix: column index 2 at position 1 (row 1) is out of range for 2 columns."),
            ([1.0, 2.0], [1, 0], [0, 2, 2], (2, 2),
             "CsrMatrix: row 0 has column indices [1, 0], which are unsorted or duplicated"),
            ([1.0, 2.0], [1, 1], [0, 0, 2], (2, 2),
             "CsrMatrix: row 1 has column indices [1, 1], which are unsorted or duplicated"),
            ([1.0, np.nan], [0, 1], [0, 1, 2], (2, 2),
             "CsrMatrix: values hold 1 NaN or Inf entries, the first at position 1"
             " (row 1, column 1)."),
            ([1.0], [0, 1], [0, 1, 2], (2, 2),
             "CsrMatrix: values must have shape (nnz,) = (2,), got (1,)."),
            ([1.0], [0.0], [0, 1], (1, 1),
             "CsrMatrix: indices must be a 1-D integer array of nnz entries, got"
             " shape (1,) and dtype float64."),
            ([1.0], [0], [0, 1], (1,),
             "CsrMatrix: shape must be a pair (n_rows, n_cols), got (1,)."),
        ],
        ids=["indptr-length", "indptr-end", "indptr-start", "indptr-monotone", "index-range",
             "unsorted", "duplicate", "nan", "values-shape", "indices-dtype", "shape"],
    )
    def test_csr_errors(self, values, indices, indptr, shape, message):
        with pytest.raises(ValueError, match=re.escape(message)):
            CsrMatrix(np.array(values), np.array(indices), np.array(indptr), shape)

    def test_csr_check_false_skips_content_checks(self):
        A = CsrMatrix(
            np.array([1.0, np.nan]), np.array([1, 0]), np.array([0, 2, 2]), (2, 2), check=False
        )
        assert A.nnz == 2

    def test_csr_traced_pattern_error(self):
        message = "CsrMatrix: indices is traced, but the sparsity pattern must be concrete"

        @jax.jit
        def build(indices):
            return CsrMatrix(jnp.ones(2), indices, np.array([0, 1, 2]), (2, 2)).todense()

        with pytest.raises(TypeError, match=re.escape(message)) as raised:
            build(jnp.array([0, 1]))
        assert "static_argnums" in str(raised.value) and "with_cache(A)" in str(raised.value)


class TestAsCsr:
    @pytest.mark.parametrize(
        "kind", ["csr_matrix", "csc_array", "coo_duplicates", "bsr_matrix", "lil_array"]
    )
    def test_as_csr_from_scipy(self, kind):
        reference = random_scipy((6, 6)).astype(np.float32)
        expected = reference.toarray()
        if kind == "coo_duplicates":  # every entry twice, in reverse order
            coo = reference.tocoo()
            source = scipy.sparse.coo_array(
                (np.tile(coo.data, 2)[::-1],
                 (np.tile(coo.row, 2)[::-1], np.tile(coo.col, 2)[::-1])),
                shape=coo.shape,
            )
            expected = 2 * expected
        elif kind == "bsr_matrix":
            source = scipy.sparse.bsr_matrix(expected, blocksize=(2, 2))
        else:
            source = getattr(scipy.sparse, kind)(reference)
        A = as_csr(source)
        np.testing.assert_allclose(A.todense(), expected, rtol=1e-6)
        CsrMatrix(A.values, A.indices, A.indptr, A.shape)  # canonical: passes every check
        if kind == "bsr_matrix":  # explicit zeros inside blocks stay in the pattern
            assert A.nnz == source.nnz > reference.nnz

    @pytest.mark.parametrize(
        "kind", ["csr_matrix", "csr_unsorted", "csc_array", "coo_duplicates", "bsr_matrix",
                 "numpy_dense"])
    def test_as_csr_of_host_matrices_compiles_nothing(self, kind):
        # Issue 33: converting a new pattern compiled a copy of its values (jnp.asarray) and,
        # for a non-canonical input, a gather and a segment sum: programs for every number
        # of nonzeros. Host values now go to the device by jax.device_put.
        for size in (7, 9, 11):  # three patterns, each with its own number of nonzeros
            reference = random_scipy((size, size), dtype=np.float64, seed=size)
            expected = reference.toarray()
            if kind == "coo_duplicates":
                coo = reference.tocoo()
                source = scipy.sparse.coo_array(
                    (np.tile(coo.data, 2)[::-1],
                     (np.tile(coo.row, 2)[::-1], np.tile(coo.col, 2)[::-1])), shape=coo.shape)
                expected = 2 * expected
            elif kind == "csr_unsorted":  # each row's columns reversed
                source = reference.copy()
                for row in range(size):
                    entries = slice(source.indptr[row], source.indptr[row + 1])
                    source.indices[entries] = source.indices[entries][::-1]
                    source.data[entries] = source.data[entries][::-1]
                source.has_sorted_indices = False
            elif kind == "bsr_matrix":
                source = scipy.sparse.bsr_matrix(expected, blocksize=(1, 1))
            elif kind == "numpy_dense":
                source = expected
            else:
                source = getattr(scipy.sparse, kind)(reference)
            with counted_compilations() as compiled:
                A = as_csr(source)
            assert compiled[0] == 0, (kind, size)
            assert A.values.dtype == jnp.float32  # f64 values, canonicalized without x64
            np.testing.assert_allclose(np.asarray(A.values), expected[
                np.repeat(np.arange(size), np.diff(A.indptr)), A.indices], rtol=1e-6)

    def test_as_csr_from_dense(self):
        dense = np.array([[4.0, 0.0, 1.0], [0.0, 0.0, 0.0], [2.0, 3.0, 0.0]], np.float32)
        for source in (dense, jnp.asarray(dense)):
            A = as_csr(source)
            np.testing.assert_array_equal(A.indices, [0, 2, 0, 1])
            np.testing.assert_array_equal(A.indptr, [0, 2, 2, 4])
            np.testing.assert_array_equal(A.values, [4.0, 1.0, 2.0, 3.0])

    def test_as_csr_traced_dense_keeps_every_entry(self):
        dense = jnp.array([[4.0, 0.0], [1.0, 3.0]])
        nnz = jax.jit(lambda d: jnp.asarray(as_csr(d).nnz))(dense)
        assert int(nnz) == 4
        x = jnp.array([1.0, 2.0])
        grad = jax.grad(lambda d: jnp.sum(as_csr(d) @ x))(dense)
        np.testing.assert_array_equal(grad, jnp.ones((2, 1)) * x[None, :])  # the dense gradient

    def test_as_csr_from_bcoo_and_bcsr(self):
        dense = jnp.array([[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]])
        for source in (jsparse.BCOO.fromdense(dense, nse=5), jsparse.BCSR.fromdense(dense, nse=5)):
            A = as_csr(source)  # padding (nse > nnz) is dropped
            assert A.nnz == 3
            np.testing.assert_array_equal(A.todense(), dense)
        unsorted = jsparse.BCOO(
            (jnp.array([3.0, 1.0, 2.0, 4.0]), jnp.array([[1, 2], [1, 0], [0, 1], [1, 2]])),
            shape=(2, 3),
        )
        A = as_csr(unsorted)
        np.testing.assert_array_equal(A.todense(), jnp.array([[0.0, 2.0, 0.0], [1.0, 0.0, 7.0]]))

    @pytest.mark.parametrize("kind", ["BCSR", "csr_array"])
    def test_as_csr_from_csr_arrays(self, kind):
        def source(indptr, indices, data, shape):
            if kind == "BCSR":
                return jsparse.BCSR((jnp.array(data), jnp.array(indices), jnp.array(indptr)),
                                    shape=shape)
            return scipy.sparse.csr_array((data, indices, indptr), shape=shape)

        # Canonical, a row's first column below the last row's last (also past an empty
        # row): taken as it is.
        A = as_csr(source([0, 2, 2, 3, 4], [1, 2, 0, 0], [1.0, 2.0, 3.0, 4.0], (4, 3)))
        np.testing.assert_array_equal(A.indices, [1, 2, 0, 0])
        np.testing.assert_array_equal(A.indptr, [0, 2, 2, 3, 4])
        np.testing.assert_array_equal(A.values, [1.0, 2.0, 3.0, 4.0])
        # A row out of order and a duplicate: sorted and summed.
        A = as_csr(source([0, 3, 5], [2, 0, 2, 1, 1], [1.0, 2.0, 3.0, 4.0, 5.0], (2, 3)))
        np.testing.assert_array_equal(A.indices, [0, 2, 1])
        np.testing.assert_array_equal(A.indptr, [0, 2, 3])
        np.testing.assert_array_equal(A.values, [2.0, 4.0, 9.0])
        CsrMatrix(A.values, A.indices, A.indptr, A.shape)

    def test_as_csr_remembers_a_pattern_while_its_arrays_live(self):
        dense = jnp.array([[2.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 2.0]])
        A = jsparse.BCSR.fromdense(dense)
        key = (id(A.indices), id(A.indptr), A.shape)
        first = as_csr(A)
        # New values on the same index arrays: the pattern is not read again.
        second = as_csr(jsparse.BCSR((2 * A.data, A.indices, A.indptr), shape=A.shape))
        assert second._pattern is first._pattern and key in _csr._PATTERNS
        np.testing.assert_array_equal(second.todense(), 2 * dense)
        # Equal index arrays that are other arrays: read, checked and hashed again.
        third = as_csr(jsparse.BCSR((A.data, jnp.array(A.indices), jnp.array(A.indptr)),
                                    shape=A.shape))
        assert third._pattern is not first._pattern and third._pattern == first._pattern
        del A
        gc.collect()
        assert key not in _csr._PATTERNS  # gone with its arrays
        # A BCOO's canonical pattern too.
        coo = jsparse.BCOO.fromdense(dense)
        first = as_csr(coo)
        second = as_csr(jsparse.BCOO((3 * coo.data, coo.indices), shape=coo.shape))
        assert second._pattern is first._pattern
        assert (id(coo.indices), coo.shape) in _csr._PATTERNS
        np.testing.assert_array_equal(second.todense(), 3 * dense)
        # NumPy index arrays: remembered when read-only (as sparse.matrices makes them).
        indices, indptr = np.array([0, 0, 1]), np.array([0, 1, 3])
        for writeable in (True, False):
            indices.flags.writeable = indptr.flags.writeable = writeable
            matrix = jsparse.BCSR.tree_unflatten(
                {"shape": (2, 2), "indices_sorted": True, "unique_indices": True},
                (jnp.ones(3), indices, indptr))
            as_csr(matrix)
            assert ((id(indices), id(indptr), (2, 2)) in _csr._PATTERNS) != writeable

    def test_as_csr_from_csr_arrays_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "as_csr: indptr must be 3 nondecreasing offsets from 0 for 2 rows, got"
                " indptr[1] = 2 > indptr[2] = 1.")):
            as_csr(scipy.sparse.csr_array(
                (np.ones(2), np.array([0, 1]), np.array([0, 2, 1])), shape=(2, 2)))

    @pytest.mark.parametrize("make", [
        lambda data, cols, indptr: scipy.sparse.csr_array((data, cols, indptr), shape=(2, 2)),
        lambda data, cols, indptr: jsparse.BCSR((jnp.asarray(data), jnp.asarray(cols),
                                                 jnp.asarray(indptr)), shape=(2, 2)),
        lambda data, cols, indptr: jsparse.BCOO(
            (jnp.asarray(data), jnp.array([[0, cols[0]], [1, cols[1]], [1, cols[2]]])),
            shape=(2, 2)),
    ], ids=["scipy", "BCSR", "BCOO"])
    def test_as_csr_refuses_negative_columns(self, make):
        # Row 1's column -1 must not land in row 0 (row * n + col arithmetic).
        with pytest.raises(ValueError, match=r"as_csr: .* has 1 entries whose column index"
                           r" (is negative|lies outside 0 \.\. 1) \(the first: entry 1,"
                           r" column -1\)\."):
            as_csr(make(np.array([4., 1., 4.]), np.array([0, -1, 1]), np.array([0, 1, 3])))

    def test_as_csr_refuses_scipy_columns_outside_the_shape(self):
        # scipy has no padding convention (BCOO/BCSR's out-of-range entries are padding).
        message = ("as_csr: a scipy.sparse matrix has 1 entries whose column index lies outside"
                   " 0 .. 1 (the first: entry 1, column 5).")
        csr = scipy.sparse.csr_array((np.array([4., 1., 4.]), np.array([0, 5, 1]),
                                      np.array([0, 1, 3])), shape=(2, 2))
        with pytest.raises(ValueError, match=re.escape(message)):
            as_csr(csr)
        with pytest.raises(ValueError, match=re.escape(
                "as_csr: indptr stores 3 entries, but there are 2 column indices and 2 values.")):
            as_csr(jsparse.BCSR((jnp.ones(2), jnp.array([0, 1]), jnp.array([0, 1, 3])),
                                shape=(2, 2)))

    def test_as_csr_refuses_values_that_are_not_numbers(self):
        for A in (np.array([[1.0, None], [None, 2.0]], dtype=object),
                  np.array([["1", "0"], ["0", "2"]])):
            with pytest.raises(TypeError, match=re.escape(
                    f"as_csr: the matrix's values must be numbers (float or complex; integers"
                    f" are cast to float), got dtype {A.dtype}; convert them first, e.g."
                    " A.astype(np.float64).")):
                as_csr(A)
        with pytest.raises(TypeError, match=re.escape(
                "CsrMatrix: the matrix's values must be numbers")):
            CsrMatrix(np.array([1.0, 2.0], dtype=object), np.array([0, 1]), np.array([0, 1, 2]),
                      (2, 2))
        assert as_csr(np.eye(2, dtype=np.int64)).values.dtype == jnp.float32

    def test_as_csr_grad_through_canonicalization(self):
        indices = jnp.array([[1, 2], [1, 0], [0, 1], [1, 2]])
        weights = jnp.array([[0.0, 5.0, 0.0], [6.0, 0.0, 7.0]])

        def loss(data):
            A = as_csr(jsparse.BCOO((data, indices), shape=(2, 3)))
            return jnp.sum(A.todense() * weights)

        np.testing.assert_array_equal(jax.grad(loss)(jnp.ones(4)), [7.0, 6.0, 5.0, 7.0])

    def test_as_csr_passes_csr_through(self):
        A = as_csr(np.eye(3, dtype=np.float32))
        assert as_csr(A) is A

    def test_as_csr_errors(self):
        message = "as_csr: a dense matrix must be 2-D, got shape (3,)."
        with pytest.raises(ValueError, match=re.escape(message)):
            as_csr(np.ones(3))
        with pytest.raises(TypeError, match="as_csr: A must be a CsrMatrix, a scipy.sparse matrix"):
            as_csr([[1.0]])
        batched = jsparse.BCOO.fromdense(jnp.ones((2, 3, 3)), n_batch=1)
        message = "as_csr: BCOO matrices with batch or dense dimensions are not supported"
        with pytest.raises(ValueError, match=re.escape(message)):
            as_csr(batched)
        with pytest.raises(ValueError, match=re.escape("as_csr: values hold 1 NaN or Inf entries")):
            as_csr(np.array([[1.0, np.inf], [0.0, 1.0]]))
        with pytest.raises(TypeError, match=re.escape("the indices of a BCOO is traced")):
            jax.jit(lambda M: as_csr(M).todense())(jsparse.BCOO.fromdense(jnp.eye(2)))


def test_transposed_pattern_keeps_rows_ascending_within_each_column():
    """Unsorted rows, duplicates, empty rows and columns: the transpose is the stable sort."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        n_rows, n_cols = (int(k) for k in rng.integers(1, 40, 2))
        indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 6, n_rows))]).astype(np.int32)
        indices = rng.integers(0, n_cols, indptr[-1]).astype(np.int32)
        pattern = CsrStructure(indptr, indices, n_cols)
        transposed, permutation = pattern.transposed()
        stable = np.argsort(indices, kind="stable")
        np.testing.assert_array_equal(permutation, stable)
        np.testing.assert_array_equal(transposed.indices, pattern.row_ids[stable])
        counts = np.bincount(indices, minlength=n_cols)
        np.testing.assert_array_equal(transposed.indptr, np.concatenate([[0], np.cumsum(counts)]))
        assert transposed.n_cols == n_rows



class TestCsrArraysRowIds:
    def test_rows_of_a_concrete_pattern_are_not_folded_into_the_program(self):
        # A pattern closed over by jit is constant; folded, the rows' cumulative sum becomes
        # an nnz-long int32 constant (and costs seconds of compile time at 65k rows).
        pattern = from_scipy(random_scipy((40, 30)))
        arrays = CsrStructure(np.asarray(pattern.indptr), np.asarray(pattern.indices),
                              30).on_device(pattern.values)

        def row_sums(values):
            rows = arrays._replace(values=values).row_ids
            return jax.ops.segment_sum(values, rows, num_segments=arrays.n_rows,
                                       indices_are_sorted=True)

        program = jax.jit(row_sums).lower(arrays.values).compile().as_text()
        constants = re.findall(r"= s32\[([\d,]+)\]\S* constant\(", program)
        assert str(pattern.nnz) not in {shape.split(",")[0] for shape in constants}
        np.testing.assert_allclose(jax.jit(row_sums)(arrays.values),
                                   np.asarray(pattern.todense()).sum(axis=1), rtol=1e-6)

    def test_rows_are_the_host_patterns_for_concrete_and_traced_index_arrays(self):
        pattern = from_scipy(random_scipy((40, 30)))
        structure = CsrStructure(np.asarray(pattern.indptr), np.asarray(pattern.indices), 30)
        arrays = structure.on_device(pattern.values)
        np.testing.assert_array_equal(arrays.row_ids, structure.row_ids)
        np.testing.assert_array_equal(jax.jit(lambda a: a.row_ids)(arrays), structure.row_ids)
