"""jaxsolve.layout's native libraries, loaded, and the FFI targets they register.

This is the only module of the package that touches ``ctypes``, through
:class:`jaxsolve.runtime.NativeLibrary`: ``libjaxsolve_layout.so`` is loaded at import and
registered for the CPU; ``libjaxsolve_layout_cuda<major>.so`` the first time an op runs on a
CUDA device (:func:`require_platform`). Both export the same handler symbols, one per target.
"""

import ctypes
import pathlib

from jaxsolve.runtime import NativeLibrary

LOCAL_ROW_TO_COLUMN_MAJOR = "jaxsolve_layout_local_row_to_column_major"
LOCAL_COLUMN_TO_ROW_MAJOR = "jaxsolve_layout_local_column_to_row_major"

LIBRARY = NativeLibrary(
    "jaxsolve.layout",
    pathlib.Path(__file__).absolute().parent,
    "jaxsolve_layout",
    {
        LOCAL_ROW_TO_COLUMN_MAJOR: "JaxsolveLayoutLocalRowToColumnMajor",
        LOCAL_COLUMN_TO_ROW_MAJOR: "JaxsolveLayoutLocalColumnToRowMajor",
    },
)
LIBRARY.cpu.JaxsolveLayoutLocalScratchElements.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_int32]
LIBRARY.cpu.JaxsolveLayoutLocalScratchElements.restype = ctypes.c_int64

require_platform = LIBRARY.require_platform


def ships_cuda_library() -> bool:
    """Whether the in-place local transpose has a library for the CUDA major of JAX's CUDA
    plugin (it is built for CUDA 12 and 13), so that a GPU op can use it.

    True also where no plugin tells the major (the first GPU op then says why it cannot
    run); False under a plugin of another major. A caller with another way to move the
    matrix (`to_block_cyclic`, a copy) takes that one when this is False.

    Examples:
      >>> import jaxsolve.layout as jl
      >>> jl.ships_cuda_library()
      True
    """
    return LIBRARY.ships_cuda_library()


def scratch_elements(rows: int, cols: int, tile: int, *, moves_tiles: bool) -> int:
    """Elements of scratch the native local transpose needs, as the C++ core computes it.

    ``moves_tiles``: whether the conversion moves tiles (it does unless the matrix is square
    and the tile permutation the identity).
    """
    n = LIBRARY.cpu.JaxsolveLayoutLocalScratchElements(rows, cols, tile, int(moves_tiles))
    if n < 0:
        raise ValueError(f"invalid local matrix geometry {rows=} {cols=} {tile=}")
    return n
