"""Shared setup for the jaxsolve.layout tests.

* 8 virtual CPU devices (the flag must be in ``XLA_FLAGS`` before JAX starts its backend), so that
  grids up to 4 × 2 run on any machine; tests take submeshes of them.
* Every test starts with x64 off, strict dtype promotion and rank promotion errors
  (`strict_config`), as users with those settings would have them.
* A `dtype` fixture over float32, complex64 (x64 off, users' default) and float64, complex128
  (x64 on).
* `block_cyclic_model`: the block-cyclic layout in NumPy, straight from its definition, which the
  package's index maps and conversions are checked against; `submesh` for meshes over a few devices.
"""

from jaxsolve_testing import strict_config, use_cpu_devices, x64  # noqa: F401  (fixtures)

use_cpu_devices(8)

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

DTYPES = [np.dtype(t) for t in (np.float32, np.complex64, np.float64, np.complex128)]


@pytest.fixture(params=DTYPES, ids=[d.name for d in DTYPES])
def dtype(request, strict_config):
    """Each supported dtype, with x64 on exactly for the 64-bit ones (`strict_config` restores
    it)."""
    del strict_config
    dtype = request.param
    jax.config.update("jax_enable_x64", dtype in (np.float64, np.complex128))
    return dtype


@pytest.fixture(scope="session")
def block_cyclic_model():
    """`_block_cyclic_model`, as a fixture (test modules do not import conftest)."""
    return _block_cyclic_model


@pytest.fixture(scope="session")
def submesh():
    """`_submesh`, as a fixture."""
    return _submesh


def _block_cyclic_model(a, tile, grid_rows, grid_cols):
    """The local matrices of the 2D block-cyclic distribution of `a`, by dealing out tiles.

    Pads `a` with zeros to whole rounds of ``tile * grid_rows`` rows and ``tile * grid_cols``
    columns, cuts it into ``tile`` × ``tile`` tiles, and gives process ``(p, q)`` the tiles
    ``(I, J)`` with ``I % grid_rows == p`` and ``J % grid_cols == q`` (source process ``(0, 0)``),
    kept in order.

    Args:
      a: NumPy matrix of shape ``(m, n)``.
      tile: tile side.
      grid_rows, grid_cols: the process grid.

    Returns:
      ``local`` of shape ``(grid_rows, grid_cols, m_loc, n_loc)``: ``local[p, q]`` is the local
      matrix of process ``(p, q)``.
    """
    m, n = a.shape
    row_round, col_round = tile * grid_rows, tile * grid_cols
    padded = np.zeros((-(-m // row_round) * row_round, -(-n // col_round) * col_round), a.dtype)
    padded[:m, :n] = a
    row_tiles, col_tiles = padded.shape[0] // tile, padded.shape[1] // tile

    def tile_at(I, J):
        return padded[I * tile : (I + 1) * tile, J * tile : (J + 1) * tile]

    def tiles_of(p, q):
        return [
            [tile_at(I, J) for J in range(q, col_tiles, grid_cols)]
            for I in range(p, row_tiles, grid_rows)
        ]

    return np.array(
        [[np.block(tiles_of(p, q)) for q in range(grid_cols)] for p in range(grid_rows)]
    )


def _submesh(grid_rows, grid_cols, axis_names=("x", "y"), axis_types=None):
    """A ``(grid_rows, grid_cols)`` mesh over the first ``grid_rows * grid_cols`` devices; with one
    axis name, a 1D mesh of that many devices."""
    count = grid_rows * grid_cols
    shape = (grid_rows, grid_cols) if len(axis_names) == 2 else (count,)
    return jax.make_mesh(shape, axis_names, axis_types=axis_types, devices=jax.devices()[:count])
