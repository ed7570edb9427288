"""Tests for the row partitions of `jaxsolve.sharding`: `partition_rows`, `partition_csr_matrix`,
`partition_vector` and `gather_vector` (without MPI; mpi_test.py runs them under ``mpiexec``)."""

import collections
import re

import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse as jsparse

import jaxsolve.sharding as js
from helpers import random_matrix

RANKS = [1, 2, 3, 4, 5, 8]


def assert_partition(ranges, n, nranks):
    assert len(ranges) == nranks
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(ranges[:-1], ranges[1:]))
    assert all(isinstance(bound, int) for pair in ranges for bound in pair)


class TestPartitionRows:
    @pytest.mark.parametrize("n", [0, 1, 7, 10, 100])
    @pytest.mark.parametrize("nranks", RANKS)
    def test_partition_rows_by_rows(self, n, nranks):
        ranges = js.partition_rows(n, nranks)
        assert_partition(ranges, n, nranks)
        sizes = [end - start for start, end in ranges]
        assert sizes == [len(part) for part in np.array_split(np.arange(n), nranks)]
        # A row pointer balanced by rows gives the same.
        assert js.partition_rows(np.arange(n + 1) * 3, nranks, balance="rows") == ranges

    @pytest.mark.parametrize("nranks", RANKS)
    @pytest.mark.parametrize("seed", [0, 1])
    def test_partition_rows_by_nnz_nearest_boundaries(self, nranks, seed):
        indptr = random_matrix(200, seed=seed).indptr
        ranges = js.partition_rows(indptr, nranks, balance="nnz")
        assert_partition(ranges, 200, nranks)
        for r, (start, _) in enumerate(ranges[1:], start=1):
            target = r * indptr[-1] / nranks
            assert abs(indptr[start] - target) == np.min(np.abs(indptr - target))

    def test_partition_rows_by_nnz_beats_rows(self):
        indptr = random_matrix(200).indptr  # the first 40 rows are much longer

        def largest_block(ranges):
            return max(indptr[end] - indptr[start] for start, end in ranges)

        for nranks in (2, 4, 8):
            by_nnz = js.partition_rows(indptr, nranks, balance="nnz")
            by_rows = js.partition_rows(indptr, nranks)
            assert largest_block(by_nnz) < 0.8 * largest_block(by_rows)
            assert largest_block(by_nnz) <= indptr[-1] / nranks + np.diff(indptr).max()

    @pytest.mark.parametrize("nranks", [1, 2, 3, 4, 6, 12])
    def test_partition_rows_by_nnz_uniform_rows(self, nranks):
        uniform = np.arange(13) * 5
        assert js.partition_rows(uniform, nranks, balance="nnz") == js.partition_rows(12, nranks)

    def test_partition_rows_by_nnz_keeps_a_row_per_rank(self):
        indptr = np.array([0, 100, 101, 102, 103, 104])
        assert js.partition_rows(indptr, 4, balance="nnz") == ((0, 1), (1, 2), (2, 3), (3, 5))
        assert js.partition_rows(indptr, 5, balance="nnz") == (
            (0, 1), (1, 2), (2, 3), (3, 4), (4, 5))

    @pytest.mark.parametrize("balance", ["rows", "nnz"])
    def test_partition_rows_more_ranks_than_rows(self, balance):
        ranges = js.partition_rows(np.array([0, 2, 4, 6]), 5, balance=balance)
        assert_partition(ranges, 3, 5)
        assert sorted(end - start for start, end in ranges) == [0, 0, 1, 1, 1]

    def test_partition_rows_is_hashable(self):
        assert hash(js.partition_rows(10, 3)) == hash(((0, 4), (4, 7), (7, 10)))

    @pytest.mark.parametrize(
        "args, kwargs, error, message",
        [
            ((10, 0), {}, ValueError,
             "partition_rows: nranks=0 must be at least 1, the number of ranks."),
            ((10, 2.0), {}, TypeError,
             "partition_rows: nranks=2.0 must be an int, the number of ranks; got a float."),
            ((10, 2), dict(balance="cols"), ValueError,
             "partition_rows: balance='cols' is not a balance; pass 'rows' (equal row counts) "
             "or 'nnz' (equal counts of stored entries, from a row pointer)."),
            ((10, 2), dict(balance="nnz"), ValueError,
             "partition_rows: balance='nnz' needs the row pointer of the matrix, not its row "
             "count 10; pass n_or_indptr=A.indptr."),
            ((-1, 2), {}, ValueError, "partition_rows: n_or_indptr=-1 rows cannot be negative."),
            ((np.array([0.0, 1.0]), 2), {}, TypeError,
             "partition_rows: n_or_indptr must be a row count (int) or a CSR row pointer (a 1D "
             "integer array of n + 1 entries); got ndarray of shape (2,) and dtype float64."),
            ((np.array([0, 3, 2]), 2), {}, ValueError,
             "partition_rows: n_or_indptr is not a CSR row pointer: it must start at 0 and "
             "never decrease."),
        ],
    )
    def test_partition_rows_errors(self, args, kwargs, error, message):
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            js.partition_rows(*args, **kwargs)


# jaxsolve.sparse.CsrMatrix's shape: CSR arrays under the name `values`.
CsrWithValues = collections.namedtuple("CsrWithValues", "indptr indices values shape")


class TestPartitionCsrMatrix:
    @pytest.mark.parametrize("nranks", RANKS)
    @pytest.mark.parametrize("balance", ["rows", "nnz"])
    def test_partition_csr_matrix_against_scipy(self, nranks, balance):
        A = random_matrix(60, seed=nranks)
        blocks = []
        for rank in range(nranks):
            block, (start, end) = js.partition_csr_matrix(A, rank, nranks, balance=balance)
            assert (start, end) == js.partition_rows(A.indptr, nranks, balance=balance)[rank]
            assert isinstance(block, sp.csr_array)
            assert block.shape == (end - start, 60)
            np.testing.assert_array_equal(block.toarray(), A[start:end].toarray())
            blocks.append(block)
        np.testing.assert_array_equal(sp.vstack(blocks).toarray(), A.toarray())

    def test_partition_csr_matrix_rectangular(self):
        A = random_matrix(20, 7)
        block, (start, end) = js.partition_csr_matrix(A, 2, 3)
        assert (start, end) == (14, 20)
        np.testing.assert_array_equal(block.toarray(), A[14:20].toarray())

    @pytest.mark.parametrize(
        "convert",
        [sp.coo_array, sp.csr_matrix, sp.csc_matrix, jsparse.BCSR.from_scipy_sparse,
         lambda A: CsrWithValues(A.indptr, A.indices, A.data, A.shape)],
        ids=["coo_array", "csr_matrix", "csc_matrix", "jax_bcsr", "values"],
    )
    def test_partition_csr_matrix_input_forms(self, convert):
        A = random_matrix(30).astype(np.float32)
        expected, rows = js.partition_csr_matrix(A, 1, 3, balance="nnz")
        block, same_rows = js.partition_csr_matrix(convert(A), 1, 3, balance="nnz")
        assert same_rows == rows
        assert block.dtype == np.float32
        np.testing.assert_array_equal(block.toarray(), expected.toarray())

    @pytest.mark.parametrize(
        "args, error, message",
        [
            ((sp.eye_array(4), 2, 2), ValueError,
             "partition_csr_matrix: rank=2 is not one of the 2 ranks 0 to 1."),
            ((sp.eye_array(4), True, 2), TypeError,
             "partition_csr_matrix: rank=True must be an int, this rank's number; got a bool."),
            ((np.eye(4), 0, 2), TypeError,
             "partition_csr_matrix: A must be a scipy.sparse matrix or have CSR arrays indptr, "
             "indices and data (or values) and a shape; got ndarray."),
            ((CsrWithValues([0, 1, 2], [0, 1], [1.0, 2.0], (3, 3)), 0, 2), ValueError,
             "partition_csr_matrix: A is not a CSR matrix with one value per column index: "
             "shape (3, 3), indptr of 3 entries ending at 2, indices of shape (2,), data of "
             "shape (2,). Batched or blocked matrices are not supported; pass an (n, m) matrix "
             "with scalar entries."),
            ((CsrWithValues([0, 1, 2], [0, 5], [1.0, 2.0], (2, 3)), 0, 2), ValueError,
             "partition_csr_matrix: A has column indices outside [0, 3), the columns of its "
             "shape."),
        ],
    )
    def test_partition_csr_matrix_errors(self, args, error, message):
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            js.partition_csr_matrix(*args)


class TestPartitionVector:
    @pytest.mark.parametrize("nranks", RANKS)
    def test_partition_vector_matches_matrix_rows(self, nranks):
        A = random_matrix(40)
        x = np.random.default_rng(0).standard_normal((40, 3))
        row_ranges = js.partition_rows(A.indptr, nranks, balance="nnz")
        for rank in range(nranks):
            _, (start, end) = js.partition_csr_matrix(A, rank, nranks, balance="nnz")
            piece = js.partition_vector(x, rank, nranks, row_ranges=row_ranges)
            np.testing.assert_array_equal(piece, x[start:end])
            assert piece.flags.c_contiguous and not np.shares_memory(piece, x)

    def test_partition_vector_default_rows_and_jax_input(self):
        import jax.numpy as jnp

        piece = js.partition_vector(jnp.arange(10), 3, 4)
        assert isinstance(piece, np.ndarray)
        assert piece.tolist() == [8, 9]

    @pytest.mark.parametrize(
        "args, kwargs, message",
        [
            ((np.float64(1.0), 0, 1), {},
             "partition_vector: x is a scalar; pass a vector of shape (n,) or a stack of "
             "vectors of shape (n, k)."),
            ((np.zeros(10), 0, 2), dict(row_ranges=((0, 5), (5, 9))),
             "partition_vector: row_ranges covers 9 rows, but there are 10; pass the partition "
             "of these 10 rows."),
            ((np.zeros(10), 0, 3), dict(row_ranges=((0, 5), (5, 10))),
             "partition_vector: row_ranges has 2 ranges but nranks=3; pass one range per rank."),
            ((np.zeros(10), 0, 2), dict(row_ranges=((0, 5), (6, 10))),
             "partition_vector: row_ranges=((0, 5), (6, 10)) is not a row partition: it must "
             "list (row_start, row_end) for every rank in rank order, the first starting at 0 "
             "and each starting where the one before ends, as partition_rows gives them."),
        ],
    )
    def test_partition_vector_errors(self, args, kwargs, message):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            js.partition_vector(*args, **kwargs)


class TestGatherVector:
    @pytest.mark.parametrize("nranks", [1, 3, 12])
    @pytest.mark.parametrize("shape", [(10,), (10, 2)])
    def test_gather_vector_inverts_partition_vector(self, nranks, shape):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        pieces = [js.partition_vector(x, rank, nranks) for rank in range(nranks)]
        gathered = js.gather_vector(pieces)
        assert gathered.dtype == np.float32
        np.testing.assert_array_equal(gathered, x)

    @pytest.mark.parametrize(
        "pieces, kwargs, message",
        [
            ([], {}, "gather_vector: no pieces; pass one array per rank, in rank order."),
            ([np.zeros(2), np.zeros(2, np.float32)], {},
             "gather_vector: pieces of shapes (2,) (float64) and (2,) (float32) do not stack; "
             "all pieces need the same dtype and trailing shape."),
            ([np.zeros((2, 3)), np.zeros((2, 2))], {},
             "gather_vector: pieces of shapes (2, 3) (float64) and (2, 2) (float64) do not "
             "stack; all pieces need the same dtype and trailing shape."),
            ([np.zeros(2), np.float64(1.0)], {},
             "gather_vector: a piece is a scalar; each piece holds a rank's rows, of shape "
             "(n_r,) or (n_r, k)."),
            ([np.zeros(2)], dict(root=0),
             "gather_vector: root=0 needs comm=, the MPI communicator whose rank `root` "
             "receives the vector."),
        ],
    )
    def test_gather_vector_errors(self, pieces, kwargs, message):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            js.gather_vector(pieces, **kwargs)
