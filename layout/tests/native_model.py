"""The NumPy model of the native local layout conversion, and its test inputs.

Shared by native_test.py (CPU) and native_gpu_test.py (GPU).
"""

import numpy as np

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]

# (shape (R, C), tile): square ones take the in-place transpose (100 x 100 and 33 x 33 end
# in partial 32 x 32 blocks), the others the tile decomposition.
CASES = [
    ((64, 64), 16),
    ((100, 100), 10),
    ((33, 33), 1),
    ((96, 96), 96),
    ((48, 80), 16),
    ((8, 200), 8),
    ((200, 8), 4),
    ((12, 18), 3),
    ((7, 5), 1),
]
CASE_IDS = [f"{r}x{c}/T{t}" for (r, c), t in CASES]


def random_matrix(rng: np.random.Generator, shape: tuple[int, int], dtype) -> np.ndarray:
    """A matrix of distinct values (so that any misplaced element shows)."""
    x = rng.permutation(shape[0] * shape[1]).reshape(shape).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        x = (x - 1j * rng.permutation(x.size).reshape(shape)).astype(dtype)
    return x


def random_tile_permutation(rng: np.random.Generator, grid: tuple[int, int]) -> np.ndarray:
    """A random bijection of the tile grid, as an (nR, nC, 2) array of tile positions."""
    return np.stack(np.unravel_index(rng.permutation(grid[0] * grid[1]), grid), -1).reshape(
        *grid, 2
    )


def numpy_row_to_column_major(x: np.ndarray, tile: int, permutation=None) -> np.ndarray:
    """The model: ``Z.T``, ``Z`` being ``x`` with tile ``(i, j)`` moved to ``permutation[i, j]``."""
    z = np.empty_like(x)
    for i in range(x.shape[0] // tile):
        for j in range(x.shape[1] // tile):
            pi, pj = (i, j) if permutation is None else permutation[i, j]
            z[pi * tile : (pi + 1) * tile, pj * tile : (pj + 1) * tile] = x[
                i * tile : (i + 1) * tile, j * tile : (j + 1) * tile
            ]
    return z.T


def permutations_for(shape: tuple[int, int], tile: int, seed: int) -> list:
    """The identity (None) and a random tile permutation for a case."""
    grid = (shape[0] // tile, shape[1] // tile)
    return [None, random_tile_permutation(np.random.default_rng(seed), grid)]
