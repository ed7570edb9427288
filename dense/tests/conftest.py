"""Shared setup for the jaxsolve.dense tests.

* 8 virtual CPU devices (``XLA_FLAGS`` must hold the flag before JAX starts its backend), so
  that 1 × 1, 2 × 1, 1 × 2 and 2 × 2 grids build on any machine.
* Every test starts with the users' defaults for x64 (off) and strict dtype and rank promotion,
  so that the routines never rely on implicit promotion; the `dtype` fixture turns x64 on for
  float64 and complex128 only.
"""

from jaxsolve_testing import strict_config, use_cpu_devices, x64  # noqa: F401  (fixtures)

use_cpu_devices(8)

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers import COVERING, DTYPES, GRIDS, grid_mesh, is_wide  # noqa: E402


@pytest.fixture(params=DTYPES, ids=[np.dtype(d).name for d in DTYPES])
def dtype(request, strict_config):
    """Each supported dtype, with x64 on only for the 64-bit ones."""
    del strict_config
    dtype = np.dtype(request.param)
    if is_wide(dtype):
        jax.config.update("jax_enable_x64", True)
    return dtype


@pytest.fixture(params=list(GRIDS), ids=list(GRIDS))
def mesh(request):
    """A row-major grid mesh of the shape named by the parameter, axes ('pr', 'pc')."""
    return grid_mesh(*GRIDS[request.param])


@pytest.fixture(params=COVERING, ids=[f"{np.dtype(d).name}-{g}" for d, g in COVERING])
def dtype_and_mesh(request, strict_config):
    """Every dtype on the 2 × 2 grid, and float64 on the other grids (x64 as `dtype` sets it).

    The full dtype × grid product runs for `potrs` and `lu_solve` (`dtype` and `mesh`); the
    other routines take this covering, which keeps the suite's compile time in bounds.
    """
    del strict_config
    dtype, grid = request.param
    dtype = np.dtype(dtype)
    if is_wide(dtype):
        jax.config.update("jax_enable_x64", True)
    return dtype, grid_mesh(*GRIDS[grid])
