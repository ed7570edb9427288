"""Tests for jaxsolve.layout.BlockCyclicPlan and jaxsolve.layout.numroc."""

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxsolve.layout import BlockCyclicPlan, numroc

SETTINGS = settings(max_examples=60, deadline=None)


def _raises(error, message):
    """Expects exactly `message`."""
    return pytest.raises(error, match=f"^{re.escape(message)}$")


@st.composite
def plans(draw):
    return BlockCyclicPlan(
        m=draw(st.integers(1, 40)),
        n=draw(st.integers(1, 40)),
        tile=draw(st.integers(1, 6)),
        grid_rows=draw(st.integers(1, 4)),
        grid_cols=draw(st.integers(1, 4)),
        order=draw(st.sampled_from(["row", "column"])),
    )


def _padded_ids(plan):
    """The padded matrix with entry (i, j) = 1 + its row-major position: all distinct, none 0."""
    m_pad, n_pad = plan.padded_shape
    return 1 + np.arange(m_pad * n_pad).reshape(m_pad, n_pad)


class TestNumroc:
    @SETTINGS
    @given(
        n=st.integers(0, 100),
        nb=st.integers(1, 8),
        nprocs=st.integers(1, 6),
        data=st.data(),
    )
    def test_numroc_against_brute_force(self, n, nb, nprocs, data):
        iproc = data.draw(st.integers(0, nprocs - 1))
        isrcproc = data.draw(st.integers(0, nprocs - 1))
        # Block b belongs to process (isrcproc + b) % nprocs.
        expected = sum((isrcproc + i // nb) % nprocs == iproc for i in range(n))
        assert numroc(n, nb, iproc, isrcproc, nprocs) == expected

    @SETTINGS
    @given(plan=plans())
    def test_numroc_against_model(self, plan, block_cyclic_model):
        # A column of ones over the process rows: the local rows holding ones are the real ones.
        rows = block_cyclic_model(np.ones((plan.m, 1)), plan.tile, plan.grid_rows, 1)[:, 0, :, 0]
        cols = block_cyclic_model(np.ones((1, plan.n)), plan.tile, 1, plan.grid_cols)[0, :, 0, :]
        for p in range(plan.grid_rows):
            assert rows[p].sum() == numroc(plan.m, plan.tile, p, 0, plan.grid_rows)
        for q in range(plan.grid_cols):
            assert cols[q].sum() == numroc(plan.n, plan.tile, q, 0, plan.grid_cols)

    def test_numroc_examples(self):
        assert [numroc(10, 3, p, 0, 2) for p in range(2)] == [6, 4]
        assert [numroc(10, 3, p, 1, 2) for p in range(2)] == [4, 6]
        assert [numroc(7, 2, p, 2, 3) for p in range(3)] == [2, 2, 3]
        assert numroc(0, 4, 0, 0, 1) == 0

    @pytest.mark.parametrize(
        "args, error, message",
        [
            ((-1, 2, 0, 0, 1), ValueError, "numroc: n=-1 must be >= 0."),
            ((4, 0, 0, 0, 1), ValueError, "numroc: nb=0 must be >= 1."),
            ((4, 2, 0, 0, 0), ValueError, "numroc: nprocs=0 must be >= 1."),
            ((4, 2, -1, 0, 2), ValueError, "numroc: iproc=-1 must be >= 0."),
            (
                (4, 2, 2, 0, 2),
                ValueError,
                "numroc: iproc=2 is not a process of the nprocs=2 processes; "
                "pass 0 <= iproc < nprocs.",
            ),
            (
                (4, 2, 0, 3, 2),
                ValueError,
                "numroc: isrcproc=3 is not a process of the nprocs=2 processes; "
                "pass 0 <= isrcproc < nprocs.",
            ),
            ((4.0, 2, 0, 0, 1), TypeError, "numroc: n=4.0 must be an int, not float."),
        ],
    )
    def test_numroc_errors(self, args, error, message):
        with _raises(error, message):
            numroc(*args)


class TestBlockCyclicPlan:
    def test_plan_shapes(self):
        plan = BlockCyclicPlan(m=10, n=7, tile=2, grid_rows=2, grid_cols=3)
        assert plan.grid_shape == (2, 3)
        assert plan.num_processes == 6
        assert plan.padded_shape == (12, 12)
        assert plan.local_shape == (6, 4)
        assert plan.lld == 6
        assert plan.local_tiles == (3, 2)
        assert plan.tile_grid == (6, 6)
        assert plan.storage_shape == (2, 3, 4, 6)

    @SETTINGS
    @given(plan=plans())
    def test_plan_padding(self, plan):
        m_pad, n_pad = plan.padded_shape
        row_round, col_round = plan.tile * plan.grid_rows, plan.tile * plan.grid_cols
        # The smallest whole number of rounds of tiles that holds the matrix.
        assert m_pad % row_round == 0 and plan.m <= m_pad < plan.m + row_round
        assert n_pad % col_round == 0 and plan.n <= n_pad < plan.n + col_round
        assert plan.local_shape == (m_pad // plan.grid_rows, n_pad // plan.grid_cols)
        assert plan.lld == plan.local_shape[0]
        assert plan.local_tiles == (m_pad // row_round, n_pad // col_round)
        assert plan.tile_grid == (m_pad // plan.tile, n_pad // plan.tile)
        # Every process holds the same whole-tile local matrix, enough for its share of the matrix.
        for p in range(plan.grid_rows):
            assert numroc(m_pad, plan.tile, p, 0, plan.grid_rows) == plan.local_shape[0]
            assert numroc(plan.m, plan.tile, p, 0, plan.grid_rows) <= plan.lld
        for q in range(plan.grid_cols):
            assert numroc(n_pad, plan.tile, q, 0, plan.grid_cols) == plan.local_shape[1]

    @SETTINGS
    @given(plan=plans())
    def test_plan_to_local_against_model(self, plan, block_cyclic_model):
        ids = _padded_ids(plan)
        local = block_cyclic_model(ids, plan.tile, *plan.grid_shape)
        i, j = np.meshgrid(*map(np.arange, plan.padded_shape), indexing="ij")
        p, q, li, lj = plan.to_local(i, j)
        np.testing.assert_array_equal(local[p, q, li, lj], ids)
        np.testing.assert_array_equal(plan.owner(i, j), (p, q))
        np.testing.assert_array_equal(plan.tile_owner(i // plan.tile, j // plan.tile), (p, q))

    @SETTINGS
    @given(plan=plans())
    def test_plan_to_global_against_model(self, plan, block_cyclic_model):
        ids = _padded_ids(plan)
        local = block_cyclic_model(ids, plan.tile, *plan.grid_shape)
        p, q, li, lj = np.meshgrid(*map(np.arange, local.shape), indexing="ij")
        i, j = plan.to_global(p, q, li, lj)
        np.testing.assert_array_equal(ids[i, j], local)

    def test_plan_scalar_indices_give_ints(self):
        plan = BlockCyclicPlan(m=10, n=7, tile=2, grid_rows=2, grid_cols=2)
        for result in (plan.to_local(5, 3), plan.to_global(0, 1, 3, 1), plan.coords(3)):
            assert all(type(x) is int for x in result)
        assert all(type(x) is int for x in plan.owner(5, 3))
        assert type(plan.rank(1, 1)) is int
        assert plan.to_local(np.int32(5), 3) == (0, 1, 3, 1)

    @pytest.mark.parametrize(
        "order, ranks, coords",
        [
            ("row", [[0, 1, 2], [3, 4, 5]], [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]),
            ("column", [[0, 2, 4], [1, 3, 5]], [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]),
        ],
    )
    def test_plan_rank_and_coords(self, order, ranks, coords):
        plan = BlockCyclicPlan(m=8, n=8, tile=2, grid_rows=2, grid_cols=3, order=order)
        p, q = np.meshgrid(np.arange(2), np.arange(3), indexing="ij")
        np.testing.assert_array_equal(plan.rank(p, q), ranks)
        assert [plan.coords(rank) for rank in range(6)] == coords
        np.testing.assert_array_equal(plan.coords(np.arange(6)), np.transpose(coords))

    def test_plan_is_frozen_and_hashable(self):
        plan = BlockCyclicPlan(8, 8, 2, 2, 2)
        assert plan == BlockCyclicPlan(m=8, n=8, tile=2, grid_rows=2, grid_cols=2, order="row")
        assert hash(plan) == hash(BlockCyclicPlan(np.int64(8), 8, 2, 2, 2))
        with pytest.raises(dataclasses.FrozenInstanceError):
            plan.tile = 4

    @pytest.mark.parametrize(
        "kwargs, error, message",
        [
            (
                {"m": 0},
                ValueError,
                "m=0 must be >= 1 (m is the number of rows of the global matrix).",
            ),
            (
                {"n": -3},
                ValueError,
                "n=-3 must be >= 1 (n is the number of columns of the global matrix).",
            ),
            (
                {"tile": 0},
                ValueError,
                "tile=0 must be >= 1 (tile is the side T of the square tiles, MB = NB = T).",
            ),
            (
                {"grid_rows": 0},
                ValueError,
                "grid_rows=0 must be >= 1 (grid_rows is the number of process rows P_r).",
            ),
            (
                {"grid_cols": -1},
                ValueError,
                "grid_cols=-1 must be >= 1 (grid_cols is the number of process columns P_c).",
            ),
            (
                {"order": "col"},
                ValueError,
                "order='col' is not a grid order; pass 'row' (rank = p * grid_cols + q) or "
                "'column' (rank = q * grid_rows + p).",
            ),
            (
                {"tile": 2.0},
                TypeError,
                "tile=2.0 must be an int, not float (tile is the side T of the square tiles, "
                "MB = NB = T).",
            ),
            (
                {"m": True},
                TypeError,
                "m=True must be an int, not bool (m is the number of rows of the global matrix).",
            ),
        ],
    )
    def test_plan_errors(self, kwargs, error, message):
        args = {"m": 8, "n": 8, "tile": 2, "grid_rows": 2, "grid_cols": 2} | kwargs
        with _raises(error, f"BlockCyclicPlan: {message}"):
            BlockCyclicPlan(**args)

    @pytest.mark.parametrize(
        "method, args, message",
        [
            ("rank", (2, 0), "rank: p=2 is out of range; pass 0 <= p < 2."),
            ("coords", (9,), "coords: rank=9 is out of range; pass 0 <= rank < 6."),
            ("tile_owner", (0, [1, 6]), "tile_owner: tj=6 is out of range; pass 0 <= tj < 6."),
            ("owner", (-1, 0), "owner: i=-1 is out of range; pass 0 <= i < 12."),
            ("to_local", (0, 12), "to_local: j=12 is out of range; pass 0 <= j < 12."),
            ("to_global", (0, 0, 6, 0), "to_global: li=6 is out of range; pass 0 <= li < 6."),
            ("owner", (1.5, 0), "owner: i must be integers, got dtype float64."),
        ],
    )
    def test_plan_index_errors(self, method, args, message):
        plan = BlockCyclicPlan(m=10, n=7, tile=2, grid_rows=2, grid_cols=3)
        error = TypeError if "dtype" in message else ValueError
        with _raises(error, f"BlockCyclicPlan.{message}"):
            getattr(plan, method)(*args)
