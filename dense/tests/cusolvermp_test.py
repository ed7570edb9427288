"""The parts of the cuSOLVERMp backend that run without a GPU.

The handlers themselves run on the GPU host (cusolvermp_gpu_test.py). Here, on virtual CPU
devices: how a mesh becomes a process grid in rank order, the block-cyclic storage of factors
and right-hand sides, the diagonal and the row-swap count read off that storage (against
LAPACK's getrf pivots laid out as ScaLAPACK lays them out), and how the backend is chosen.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from helpers import grid_mesh, put, random_matrix
from jax.sharding import PartitionSpec as P

import jaxsolve.layout as jl
import jaxsolve.sharding as js
from jaxsolve import dense
from jaxsolve.dense import _arguments, _backend, _compile, _cusolvermp
from jaxsolve.runtime import NativeLibrary


def grid(mesh, spec=P("pr", "pc"), tile=4):
    return _cusolvermp.grid_of(_arguments.Layout(mesh=mesh, matrix_spec=spec, tile=tile))


class TestGrid:
    @pytest.mark.parametrize("order", ["row", "column"])
    def test_ranks_are_row_major_over_the_grid(self, order):
        mesh = js.make_grid_mesh(2, 3, order=order, devices=jax.devices("cpu")[:6])
        g = grid(mesh)
        assert g.shape == (2, 3) and g.axes == ("pr", "pc")
        assert [d.id for d in g.devices] == [d.id for d in mesh.devices.flat]

    def test_the_spec_decides_rows_and_columns(self):
        mesh = js.make_grid_mesh(2, 3, devices=jax.devices("cpu")[:6])
        g = grid(mesh, P("pc", "pr"))  # rows split over 'pc' (3), columns over 'pr' (2)
        assert g.shape == (3, 2)
        assert [d.id for d in g.devices] == [d.id for d in mesh.devices.T.flat]

    @pytest.mark.parametrize("spec, shape", [(P("rows", None), (4, 1)),
                                             (P(None, "rows"), (1, 4))])
    def test_one_axis_meshes(self, spec, shape):
        mesh = js.row_mesh(devices=jax.devices("cpu")[:4])
        g = grid(mesh, spec)
        assert g.shape == shape and g.split_axes == ("rows",)
        assert [d.id for d in g.devices] == [d.id for d in mesh.devices.flat]


@pytest.mark.parametrize("rows, cols", [(1, 1), (2, 1), (1, 2), (2, 2)])
class TestStorage:
    def test_round_trip_with_padding(self, rows, cols, x64):
        mesh = grid_mesh(rows, cols)
        g = grid(mesh)
        a = random_matrix(np.random.default_rng(0), (18, 10), np.float64)
        storage = jax.jit(lambda x: _cusolvermp.matrix_storage(g, x)[0])(put(a, mesh,
                                                                             P("pr", "pc")))
        plan = g.plan(18, 10)
        assert plan.padded_shape == (-(-18 // (4 * rows)) * 4 * rows,
                                     -(-10 // (4 * cols)) * 4 * cols)
        assert storage.shape == (rows * plan.local_shape[1], cols * plan.local_shape[0])
        # Device (p, q)'s block is its local matrix, column-major: entry (i, j) of A.
        p, q, li, lj = plan.to_local(13, 7)
        block = storage.addressable_shards[[s.device for s in storage.addressable_shards].index(
            mesh.devices[p, q])].data
        assert block[lj, li] == a[13, 7]
        back = _cusolvermp.matrix_from_storage(g, storage, plan)
        np.testing.assert_array_equal(back, a)

    def test_whole_tiles_on_one_device_take_the_in_place_transpose(self, rows, cols, x64):
        mesh = grid_mesh(rows, cols)
        g = grid(mesh)
        a = put(random_matrix(np.random.default_rng(3), (16, 8), np.float64), mesh,
                P("pr", "pc"))
        plan = g.plan(16, 8)
        assert _cusolvermp._in_place(g, plan) == (rows == cols == 1)
        storage, _ = _cusolvermp.matrix_storage(g, a)
        general = jax.jit(lambda x: jl.to_block_cyclic(x, plan, mesh, ("pr", "pc")))(a)
        np.testing.assert_array_equal(  # the same local matrices either way
            np.asarray(storage), np.asarray(general).transpose(0, 2, 1, 3).reshape(storage.shape))
        np.testing.assert_array_equal(_cusolvermp.matrix_from_storage(g, storage, plan), a)

    @pytest.mark.parametrize("major", [12, 13])
    def test_either_cuda_plugin_takes_the_in_place_transpose(self, rows, cols, major,
                                                             monkeypatch):
        # jaxsolve.layout ships its in-place transpose for CUDA 12 and 13.
        g = grid(grid_mesh(rows, cols))
        monkeypatch.setattr(NativeLibrary, "cuda_major", property(lambda self: major))
        assert _cusolvermp._in_place(g, g.plan(16, 8)) == (rows == cols == 1)

    def test_diagonal(self, rows, cols, x64):
        mesh = grid_mesh(rows, cols)
        g = grid(mesh)
        a = random_matrix(np.random.default_rng(1), (22, 22), np.complex128)
        storage, _ = _cusolvermp.matrix_storage(g, put(a, mesh, P("pr", "pc")))
        np.testing.assert_array_equal(_cusolvermp._diagonal(g, storage, 22), np.diagonal(a))

    def test_scalapack_pivots_gathered(self, rows, cols, x64):
        # getrf's pivots (1-based global rows) laid out as ScaLAPACK lays them out: each
        # device holds the entries of its local rows, the same in every process column.
        n = 22
        mesh = grid_mesh(rows, cols)
        g = grid(mesh)
        a = random_matrix(np.random.default_rng(2), (n, n), np.float64)
        _, ipiv, _ = scipy.linalg.lapack.dgetrf(a)
        ipiv = ipiv + 1
        plan = g.plan(n, n)
        local_rows = plan.local_shape[0]
        pivots = np.zeros((rows * local_rows, cols * 2), np.int32)
        for p in range(rows):
            for q in range(cols):
                for li in range(local_rows):
                    i = plan.to_global(p, q, li, 0)[0]
                    if i < n:
                        pivots[p * local_rows + li, 2 * q] = ipiv[i]
        gathered = _cusolvermp._gathered_pivots(g, put(pivots, mesh, P("pr", "pc")), n)
        np.testing.assert_array_equal(gathered, ipiv - 1)
        assert np.sum(ipiv != np.arange(1, n + 1)) > 0


class TestChoice:
    def test_not_on_cpu_meshes(self):
        layout = _arguments.Layout(mesh=grid_mesh(2, 2), matrix_spec=P("pr", "pc"))
        for family in _backend.FAMILIES:
            assert _backend.backend_name(family, layout, np.float32) == "xla"

    def test_asking_for_it_where_it_cannot_run_says_why(self):
        a = put(jnp.eye(4), grid_mesh(2, 2), P("pr", "pc"))
        with dense.use_backend("cusolvermp"):
            with pytest.raises(ValueError, match="backend 'cusolvermp'.*cannot compute 'cholesky'"):
                dense.potrs(a, jnp.ones(4))
            with pytest.raises(ValueError, match="cannot compute 'gesvd'"):
                dense.gesvd(a)

    def test_the_choice_is_part_of_the_compilation_key(self):
        a = put(2 * jnp.eye(4), grid_mesh(2, 2), P("pr", "pc"))
        dense.clear_cache()
        dense.potrs(a, jnp.ones(4))
        with dense.use_backend("xla"):
            x = dense.potrs(a, jnp.ones(4))
        assert _compile._program.cache_info().currsize == 2
        np.testing.assert_allclose(x, 0.5 * np.ones(4))

    def test_unknown_names_are_refused(self):
        with pytest.raises(ValueError, match="must be a backend name or None"):
            with dense.use_backend(3):
                pass

    def test_without_a_cuda_plugin_the_library_says_so(self):
        if any(d.platform == "gpu" for d in jax.devices()):
            pytest.skip("a CUDA plugin is installed")
        _cusolvermp.library.cache_clear()
        with pytest.raises(RuntimeError, match=r"CUDA version of JAX's CUDA backend could not be "
                           r"determined: no jax-cuda<major>-plugin is installed"):
            _cusolvermp.library()
        assert _cusolvermp.cached_grids() == 0
