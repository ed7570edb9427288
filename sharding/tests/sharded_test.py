"""Tests of `shard_rows` and `ShardedCsrMatrix` (8 virtual CPU devices, from conftest.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse as jsparse
from jax.sharding import PartitionSpec

import jaxsolve.sharding as js


def _mesh(parts, axis_name="rows"):
    return js.row_mesh(axis_name, devices=jax.devices("cpu")[:parts])


def _poisson3d(n):
    T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(n, n))
    return sp.kronsum(sp.kronsum(T, T), T, format="csr").astype(np.float32)


def _nonsymmetric(n, seed=0):
    A = _poisson3d(4)[:n, :n] if n <= 64 else None
    rng = np.random.default_rng(seed)
    extra = sp.random_array((n, n), density=0.05, format="csr", rng=rng).astype(np.float32)
    return (A + extra).tocsr() if A is not None else extra


def _matvec(A_sharded, x):
    """``A x`` by the sharded layout: halo exchange by ppermute, then the local blocks."""
    layout = A_sharded.layout
    spec = PartitionSpec(layout.axis_name)

    def body(values, indices, indptr, send, recv, x):
        values, indices, indptr, send, recv = (a[0] for a in (values, indices, indptr, send,
                                                               recv))
        extended = jnp.concatenate([x, jnp.zeros(layout.n_halo + 1, x.dtype)])
        extended = layout.halo.apply(layout.axis_name, x, send, recv, extended)
        rows = jnp.searchsorted(indptr[1:], jnp.arange(values.shape[0]), side="right")
        return jax.ops.segment_sum(values * extended[indices], rows,
                                   num_segments=layout.n_owned)

    arrays = A_sharded.arrays
    return jax.jit(js.shard_map(body, layout.mesh, (spec,) * 6, spec))(
        A_sharded.values, arrays.indices, arrays.indptr, arrays.send, arrays.recv,
        jax.device_put(x, A_sharded.sharding))  # x in the padded layout


class TestShardRows:

    @pytest.mark.parametrize("parts", [1, 2, 4, 8])
    def test_shard_rows_matvec(self, parts):
        A = _nonsymmetric(64)
        A_sharded = js.shard_rows(A, _mesh(parts))
        x = np.cos(np.arange(64, dtype=np.float32))
        np.testing.assert_allclose(_matvec(A_sharded, x), A @ x, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(A_sharded.todense(), A.toarray())
        assert A_sharded.values.shape == (parts, max(A_sharded.layout.nnz))
        assert A_sharded.values.sharding.is_equivalent_to(A_sharded.sharding, 2)

    def test_shard_rows_matvec_exchanges_no_all_gather(self):
        A_sharded = js.shard_rows(_poisson3d(8), _mesh(8))  # one z-plane per device
        layout = A_sharded.layout
        # A slab partition exchanges with the two neighbouring slabs only: two shifts.
        assert sorted(move.shift for move in layout.halo.moves) == [1, 7]
        spec = PartitionSpec("rows")
        arrays = A_sharded.arrays

        def body(send, recv, x):
            return layout.halo.apply("rows", x, send[0], recv[0],
                                     jnp.zeros(layout.n_local_columns, x.dtype))[None]

        hlo = jax.jit(js.shard_map(body, layout.mesh, (spec,) * 3, spec)).lower(
            arrays.send, arrays.recv, jnp.zeros(512)).compile().as_text()
        assert "collective-permute" in hlo
        assert "all-gather" not in hlo

    @pytest.mark.parametrize("form", ["scipy", "bcsr", "bcoo"])
    def test_shard_rows_formats(self, form):
        A = _nonsymmetric(32, seed=1)
        given = {"scipy": A, "bcsr": jsparse.BCSR.from_scipy_sparse(A),
                 "bcoo": jsparse.BCOO.from_scipy_sparse(A)}[form]
        A_sharded = js.shard_rows(given, _mesh(4))
        np.testing.assert_array_equal(A_sharded.todense(), A.toarray())

    def test_shard_rows_values_round_trip(self):
        A = _nonsymmetric(64, seed=2)
        # Columns unsorted within rows: the sharded entries follow another order.
        rng = np.random.default_rng(0)
        indices = A.indices.copy()
        for start, end in zip(A.indptr[:-1], A.indptr[1:]):
            rng.shuffle(indices[start:end])
        data = np.asarray(A[np.repeat(np.arange(64), np.diff(A.indptr)), indices])
        bcsr = jsparse.BCSR((jnp.asarray(data), jnp.asarray(indices), jnp.asarray(A.indptr)),
                            shape=A.shape)
        A_sharded = js.shard_rows(bcsr, _mesh(4))
        np.testing.assert_array_equal(A_sharded.todense(), A.toarray())
        np.testing.assert_array_equal(A_sharded.global_values(), data)
        doubled = A_sharded.shard_values(2 * data)
        np.testing.assert_array_equal(A_sharded.with_values(doubled).todense(), 2 * A.toarray())

    @pytest.mark.parametrize("parts", [2])  # 8 parts, padded: test_shard_rows_uneven
    def test_shard_rows_transpose(self, parts):
        A = _nonsymmetric(64, seed=3)
        A_sharded = js.shard_rows(A, _mesh(parts))
        At = A_sharded.transpose()
        np.testing.assert_array_equal(At.todense(), A.toarray().T)
        x = np.sin(np.arange(64, dtype=np.float32))
        np.testing.assert_allclose(_matvec(At, x), A.T @ x, rtol=1e-5, atol=1e-5)

    # Blocks of 7, 7, 7, 6 rows; of 8 × 4 and 7 × 4; of 2 and 7 × 1 (padded to 2).
    @pytest.mark.parametrize("n,parts", [(27, 4), (60, 8), (9, 8)])
    def test_shard_rows_uneven(self, n, parts):
        # Blocks of ⌈n / P⌉ rows, the last ones with an empty padding row: products, the
        # transpose and vectors in the padded layout round-trip to the n × n system.
        A = _nonsymmetric(n, seed=4)
        A_sharded = js.shard_rows(A, _mesh(parts))
        layout = A_sharded.layout
        m = -(-n // parts)
        assert layout.n_owned == m and layout.padded_size == parts * m
        assert layout.row_ranges == js.partition_rows(n, parts)
        assert layout.real_rows.sum() == n
        x = np.cos(np.arange(n, dtype=np.float32))
        x_padded = A_sharded.shard_vector(x)
        assert x_padded.shape == (parts * m,)
        assert x_padded.sharding.is_equivalent_to(A_sharded.sharding, 1)
        assert not np.any(np.asarray(x_padded)[~layout.real_rows])
        np.testing.assert_array_equal(A_sharded.global_vector(x_padded), x)
        y = _matvec(A_sharded, x_padded)
        assert not np.any(np.asarray(y)[~layout.real_rows])
        np.testing.assert_allclose(A_sharded.global_vector(y), A @ x, rtol=1e-5, atol=1e-5)
        At = A_sharded.T
        np.testing.assert_array_equal(At.todense(), A.toarray().T)
        np.testing.assert_allclose(A_sharded.global_vector(_matvec(At, x_padded)), A.T @ x,
                                   rtol=1e-5, atol=1e-5)
        columns = np.stack([x, 2 * x], axis=1)  # (n, k) too
        np.testing.assert_array_equal(
            A_sharded.global_vector(A_sharded.shard_vector(columns)), columns)
        with pytest.raises(ValueError, match=rf"v must have shape \({n},\) or \({n}, k\)"):
            A_sharded.shard_vector(x[:-1])

    def test_shard_rows_bytes_per_matvec(self):
        # 8³ Poisson in 4 slabs of 2 planes: the inner slabs send a plane (64 values) each way.
        A_sharded = js.shard_rows(_poisson3d(8), _mesh(4))
        assert A_sharded.bytes_per_matvec() == {"sent": 512, "received": 512, "padded": 512}
        assert js.shard_rows(_poisson3d(8), _mesh(1)).bytes_per_matvec()["padded"] == 0

    def test_shard_rows_errors(self):
        with pytest.raises(ValueError, match="has 6 rows, fewer than the 8 devices"):
            js.shard_rows(sp.eye_array(6, format="csr"), _mesh(8))
        with pytest.raises(ValueError, match="must be square"):
            js.shard_rows(sp.random_array((8, 4), density=0.5, format="csr"), _mesh(2))
        with pytest.raises(ValueError, match="not an axis of the mesh"):
            js.shard_rows(_poisson3d(2), _mesh(2), axis_name="columns")
        with pytest.raises(TypeError, match="must be a jax.sharding.Mesh"):
            js.shard_rows(_poisson3d(2), jax.devices("cpu")[:2])
        duplicated = jsparse.BCSR((jnp.ones(2), jnp.array([0, 0]), jnp.array([0, 2, 2])),
                                  shape=(2, 2))  # scipy matrices sum duplicates first
        with pytest.raises(ValueError, match="stores some entry twice"):
            js.shard_rows(duplicated, _mesh(2))
        with pytest.raises(ValueError, match="values must have shape"):
            js.shard_rows(_poisson3d(2), _mesh(2)).with_values(np.zeros(3))
