"""Tests for `jaxsolve.sharding.halo_plans` and `HaloPlan` (one host; mpi_test.py runs
`halo_plan` under ``mpiexec``).

The exchange the plans describe is carried out here between the ranks' pieces in one process:
each rank's halo is filled from what the others' plans say they send it, and its rows of
``A x`` computed from its localized block must then be those of the global product.
"""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve.sharding as js
from helpers import poisson, random_matrix


def distributed_product(A, x, plans):
    """Every rank's rows of ``A x`` from its block, its own entries of x and the halo that the
    other ranks' plans send it, concatenated in rank order."""
    row_ranges = plans[0].row_ranges
    owned = [x[start:end] for start, end in row_ranges]
    pieces = []
    for rank, plan in enumerate(plans):
        halo = np.full(plan.n_halo, np.nan)
        for source, part in plan.receives():
            halo[part] = owned[source][dict(plans[source].sends())[rank]]
        start, end = row_ranges[rank]
        pieces.append(plan.localize(A[start:end]) @ np.concatenate([owned[rank], halo]))
    return js.gather_vector(pieces)


class TestHaloPlans:
    @pytest.mark.parametrize("nranks", [1, 2, 3, 5, 8])
    @pytest.mark.parametrize("balance", ["rows", "nnz"])
    @pytest.mark.parametrize("density", [0.02, 0.2])
    def test_halo_plans_product_against_scipy(self, nranks, balance, density):
        A = random_matrix(64, density=density, seed=nranks)  # not symmetric
        x = np.random.default_rng(nranks).standard_normal(64)
        plans = js.halo_plans(A, js.partition_rows(A.indptr, nranks, balance=balance))
        np.testing.assert_allclose(distributed_product(A, x, plans), A @ x, rtol=1e-12)

    @pytest.mark.parametrize("nranks", [2, 3, 5])
    def test_halo_plans_send_lists_are_receive_lists(self, nranks):
        A = random_matrix(50, density=0.05)
        plans = js.halo_plans(A, js.partition_rows(50, nranks))
        for plan in plans:
            assert plan.halo_columns.tolist() == sorted(set(plan.halo_columns.tolist()))
            for source, part in plan.receives():
                sent = dict(plans[source].sends())[plan.rank] + plans[source].row_start
                assert sent.tolist() == plan.halo_columns[part].tolist()
                assert all(plans[source].row_start <= j < plans[source].row_end for j in sent)
            assert sorted(plan.send_ranks) == [q for q in range(nranks)
                                               if plan.rank in plans[q].recv_ranks]

    def test_halo_plans_from_blocks(self):
        A = random_matrix(40, density=0.1)
        row_ranges = js.partition_rows(A.indptr, 3, balance="nnz")
        blocks = [js.partition_csr_matrix(A, rank, 3, balance="nnz")[0] for rank in range(3)]
        assert js.halo_plans(blocks, row_ranges) == js.halo_plans(A, row_ranges)

    def test_halo_plans_empty_ranks(self):
        A = poisson(3, 1)
        plans = js.halo_plans(A, js.partition_rows(3, 5))
        assert [plan.n_owned for plan in plans] == [1, 1, 1, 0, 0]
        assert [plan.halo_columns.tolist() for plan in plans] == [[1], [0, 2], [1], [], []]
        x = np.arange(3.0)
        np.testing.assert_array_equal(distributed_product(A, x, plans), A @ x)

    @pytest.mark.parametrize("parts", [1, 2, 4, 8])
    def test_halo_plans_poisson_3d_bytes(self, parts):
        """Slabs of whole z-planes of a 16³ grid: one plane of 16² values per neighbour."""
        n = 16
        plans = js.halo_plans(poisson(n, 3), js.partition_rows(n**3, parts))
        for plan in plans:
            neighbours = [q for q in (plan.rank - 1, plan.rank + 1) if 0 <= q < parts]
            assert plan.recv_ranks == plan.send_ranks == tuple(neighbours)
            assert plan.recv_counts == plan.send_counts == (n * n,) * len(neighbours)
            assert plan.bytes_per_exchange(np.float64) == (8 * n * n * len(neighbours),) * 2
            assert plan.bytes_per_exchange(jnp.float32) == (4 * n * n * len(neighbours),) * 2
        total = sum(plan.bytes_per_exchange("float64")[1] for plan in plans)
        assert total == 2 * (parts - 1) * n * n * 8

    def test_halo_plans_poisson_2d_halo_is_the_next_grid_rows(self):
        n = 32
        plans = js.halo_plans(poisson(n, 2), js.partition_rows(n * n, 4))
        assert plans[1].halo_columns.tolist() == [*range(7 * n, 8 * n), *range(16 * n, 17 * n)]
        np.testing.assert_array_equal(plans[1].sends()[0][1], np.arange(n))

    @pytest.mark.parametrize(
        "A, row_ranges, message",
        [
            (random_matrix(6, 5), ((0, 6),),
             "halo_plans: A has shape (6, 5); halo plans are for square matrices, whose "
             "columns are partitioned like their rows."),
            (poisson(6, 1), ((0, 3), (3, 5)),
             "halo_plans: row_ranges covers 5 rows, but there are 6; pass the partition of "
             "these 6 rows."),
            ([poisson(6, 1)[:3], poisson(6, 1)[3:]], ((0, 2), (2, 6)),
             "halo_plans: A[0] has shape (3, 6), but rank 0's block is (2, 6): rows 0:2 of "
             "the 6 x 6 matrix, with global column indices."),
            ([poisson(6, 1)[:3]], ((0, 3), (3, 6)),
             "halo_plans: row_ranges has 2 ranges but nranks=1; pass one range per rank."),
        ],
        ids=["rectangular", "short_ranges", "block_shape", "block_count"],
    )
    def test_halo_plans_errors(self, A, row_ranges, message):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            js.halo_plans(A, row_ranges)


class TestHaloPlan:
    def test_halo_plan_equal_plans_hash_equal(self):
        A = random_matrix(30, density=0.1)
        first = js.halo_plans(A, js.partition_rows(30, 3))
        again = js.halo_plans(A.tocoo(), js.partition_rows(30, 3))
        assert first == again and first is not again
        assert [hash(p) for p in first] == [hash(p) for p in again]
        assert first[0] != first[1]
        assert js.halo_plans(A, js.partition_rows(A.indptr, 3, balance="nnz")) != first

    def test_halo_plan_static_jit_argument(self):
        A = poisson(8, 2)
        traces = []

        @functools.partial(jax.jit, static_argnames="plan")
        def send_buffers(x_owned, plan):
            traces.append(plan.rank)
            return [x_owned[jnp.asarray(idx)] for _, idx in plan.sends()]

        plan = js.halo_plans(A, js.partition_rows(64, 4))[1]
        x_owned = jnp.arange(16.0)
        first = send_buffers(x_owned, plan=plan)
        again = send_buffers(x_owned, plan=js.halo_plans(A, js.partition_rows(64, 4))[1])
        assert traces == [1]
        assert [b.tolist() for b in first] == [b.tolist() for b in again] == [
            list(map(float, range(8))), list(map(float, range(8, 16)))]

    def test_halo_plan_is_immutable(self):
        plan = js.halo_plans(poisson(4, 1), js.partition_rows(4, 2))[0]
        with pytest.raises(ValueError, match="read-only"):
            plan.halo_columns[0] = 0
        with pytest.raises(AttributeError):
            plan.rank = 1

    def test_halo_plan_local_indices_and_localize(self):
        A = random_matrix(30, density=0.1)
        plan = js.halo_plans(A, js.partition_rows(30, 3))[1]
        block, _ = js.partition_csr_matrix(A, 1, 3)
        local = plan.localize(block)
        assert local.shape == (plan.n_owned, plan.n_owned + plan.n_halo)
        columns = np.concatenate([np.arange(plan.row_start, plan.row_end), plan.halo_columns])
        assert plan.local_indices(columns).tolist() == list(range(len(columns)))
        np.testing.assert_array_equal(local.toarray(), block.toarray()[:, columns])

    def test_halo_plan_errors(self):
        plans = js.halo_plans(poisson(6, 1), js.partition_rows(6, 3))
        with pytest.raises(ValueError, match=re.escape(
                "HaloPlan.local_indices: columns [0, 5] are neither owned by rank 1 (rows 2:4) "
                "nor in its halo; the plan was built for another sparsity pattern.")):
            plans[1].local_indices([5, 2, 0])
        with pytest.raises(ValueError, match=re.escape(
                "HaloPlan.local_indices: columns [3, 4] are neither owned by rank 0 (rows 0:2) "
                "nor in its halo;")):
            plans[0].localize(poisson(6, 1)[2:4])
        with pytest.raises(ValueError, match=re.escape(
                "HaloPlan.localize: local_matrix has shape (3, 6), but rank 1's block is (2, 6): "
                "rows 2:4 of the 6 x 6 matrix, with global column indices.")):
            plans[1].localize(poisson(6, 1)[:3])
