"""Tests of color_columns: valid distance-1/-2 colorings, and few colors on stencils."""

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest
import scipy.sparse

from jaxsolve import sparse
from jaxsolve.sparse import _coloring


def stencil_pattern(shape, offsets):
    """The pattern of a stencil with the given offsets on a grid (zero boundary)."""
    n = int(np.prod(shape))
    index = np.arange(n).reshape(shape)
    rows, cols = [], []
    for offset in offsets:
        target, source = [], []
        for length, o in zip(shape, offset, strict=True):
            target.append(slice(max(0, -o), length - max(0, o)))
            source.append(slice(max(0, o), length - max(0, -o)))
        rows.append(index[tuple(target)].ravel())
        cols.append(index[tuple(source)].ravel())
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    return scipy.sparse.csr_array((np.ones(rows.size, bool), (rows, cols)), shape=(n, n))


_AXES_2D = [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)]
_BOX_2D = [(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)]
_AXES_3D = [(0, 0, 0)] + [tuple(s * (d == k) for d in range(3)) for k in range(3) for s in (1, -1)]
_BOX_3D = [(a, b, c) for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)]
# The targets (≤) for the distance-2 colors, on grids of at least 24² / 12³.
STENCILS = {
    "5-point": ((24, 24), _AXES_2D, 6),
    "9-point": ((24, 24), _BOX_2D, 10),
    "7-point": ((12, 12, 12), _AXES_3D, 12),
    "27-point": ((12, 12, 12), _BOX_3D, 30),
}


class TestColorColumns:
    @pytest.mark.parametrize("name", sorted(STENCILS))
    def test_color_columns_stencil_targets(self, name):
        shape, offsets, target = STENCILS[name]
        pattern = stencil_pattern(shape, offsets)
        colors = sparse.color_columns(pattern)
        assert _coloring.is_valid_coloring(pattern, colors, 2)
        assert colors.max() + 1 <= target
        # distance 1: the optimum, 2 for the axis stencils (red-black), 4 / 8 for the boxes
        colors_1 = sparse.color_columns(pattern, distance=1)
        assert _coloring.is_valid_coloring(pattern, colors_1, 1)
        assert colors_1.max() + 1 == {"5-point": 2, "7-point": 2, "9-point": 4,
                                      "27-point": 8}[name]

    def test_color_columns_optimal_on_5_point(self):
        colors = sparse.color_columns(stencil_pattern((32, 32), _AXES_2D))
        assert colors.max() + 1 == 5  # JAX-AMG's Jones–Plassmann: 17

    def test_color_columns_accepts_dense_and_any_scipy_format(self):
        dense = np.eye(5) + np.eye(5, k=1)
        for pattern in (dense, scipy.sparse.coo_matrix(dense), scipy.sparse.csc_array(dense)):
            colors = sparse.color_columns(pattern)
            assert colors.dtype == np.int32 and _coloring.is_valid_coloring(dense, colors, 2)

    def test_color_columns_edge_cases(self):
        assert sparse.color_columns(np.zeros((3, 0))).shape == (0,)
        np.testing.assert_array_equal(sparse.color_columns(np.zeros((2, 3))), [0, 0, 0])
        assert sparse.color_columns(np.ones((4, 4))).max() == 3

    def test_color_columns_errors(self):
        with pytest.raises(ValueError, match="distance must be 1 or 2, got 3"):
            sparse.color_columns(np.eye(3), distance=3)
        with pytest.raises(ValueError, match="square pattern"):
            sparse.color_columns(np.ones((2, 3)), distance=1)
        with pytest.raises(ValueError, match="must be 2-D"):
            sparse.color_columns(np.ones(3))


@st.composite
def patterns(draw):
    m, n = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    density = draw(st.floats(0.0, 0.4))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    return scipy.sparse.csr_array(rng.random((m, n)) < density)


@hypothesis.settings(max_examples=30, deadline=None)
@hypothesis.given(patterns())
def test_color_columns_is_valid(pattern):
    """No two columns sharing a row share a color (distance 2); no edge joins one color."""
    colors = sparse.color_columns(pattern)
    square = pattern[:min(pattern.shape), :min(pattern.shape)]
    colors_1 = sparse.color_columns(square, distance=1)
    assert colors.shape == (pattern.shape[1],)
    assert _coloring.is_valid_coloring(pattern, colors, 2)
    assert _coloring.is_valid_coloring(square, colors_1, 1)
    # First fit never needs more colors than the largest degree plus one.
    gram = (pattern.T.astype(np.int32) @ pattern.astype(np.int32)).toarray() != 0
    assert colors.max() + 1 <= gram.sum(axis=1).max(initial=0) + 1
