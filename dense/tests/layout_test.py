"""Tests for argument checks and the mesh/spec contract: errors before any work, inference."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from helpers import grid_mesh, put
import jaxsolve.sharding as js
from jaxsolve import dense


def raises(message):
    return pytest.raises(ValueError, match="^" + re.escape(message) + "$")


class TestArgumentErrors:
    @pytest.mark.parametrize("tile", [0, -3, 2.5, True, "256", None])
    def test_tile_errors(self, tile):
        with raises(f"potrs: T_A must be a positive int (the tile size of the 2D block-cyclic "
                    f"layout), got {tile!r}."):
            dense.potrs(jnp.eye(2), jnp.ones(2), T_A=tile)

    def test_flag_errors(self):
        with raises("lu_solve: return_status must be True or False, got 'yes'."):
            dense.lu_solve(jnp.eye(2), jnp.ones(2), return_status="yes")
        with raises("syevd: donate must be True or False, got 1."):
            dense.syevd(jnp.eye(2), donate=1)

    def test_dtype_errors(self):
        with raises("potrs: a has dtype int32; supported dtypes are float32, float64, complex64 "
                    "and complex128."):
            dense.potrs(jnp.eye(2, dtype=jnp.int32), jnp.ones(2))
        with raises("potrs: a has dtype float16; supported dtypes are float32, float64, "
                    "complex64 and complex128."):
            dense.potrs(jnp.eye(2, dtype=jnp.float16), jnp.ones(2))
        with raises("potrs: a and b must have the same dtype, got float32 and complex64."):
            dense.potrs(jnp.eye(2), jnp.ones(2, dtype=jnp.complex64))

    def test_float64_without_x64(self):
        with raises("potrs: a has dtype float64, but 64-bit arrays need "
                    "jax.config.update('jax_enable_x64', True) (jaxsolve never changes it); "
                    "enable it, or pass a as float32."):
            dense.potrs(np.eye(2), np.ones(2, np.float32))
        assert not jax.config.jax_enable_x64

    def test_operands_on_other_devices_are_refused(self):
        first = grid_mesh(2, 2)
        last = js.make_grid_mesh(2, 2, devices=jax.devices("cpu")[4:8])
        a = put(4 * jnp.eye(8), first, P("pr", "pc"))
        b = put(jnp.ones(8), last, P("pr"))
        with raises("potrs: b lies on devices [4, 5, 6, 7], but the mesh is over devices "
                    "[0, 1, 2, 3]; put b on the mesh's devices (jax.device_put with a "
                    "NamedSharding of that mesh)."):
            dense.potrs(a, b)
        with pytest.raises(ValueError, match=re.escape("potrs: a lies on devices [0, 1, 2, 3]")):
            dense.potrs(a, jnp.ones(8), mesh=last)
        with pytest.raises(ValueError, match=re.escape("sygvd: b lies on devices [4, 5, 6, 7]")):
            dense.sygvd(a, put(4 * jnp.eye(8), last, P("pr", "pc")))
        # An uncommitted b (jnp.ones) goes where the mesh is.
        np.testing.assert_allclose(dense.lu_solve(a, jnp.ones(8)), np.full(8, 0.25))

    def test_shape_errors(self):
        with raises("potrs: a must be a non-empty square (n, n) matrix, got shape (2, 3); use "
                    "jax.vmap for stacks of matrices."):
            dense.potrs(jnp.ones((2, 3)), jnp.ones(2))
        for routine in (lambda a: dense.potrs(a, jnp.zeros(0)),
                        lambda a: dense.lu_solve(a, jnp.zeros(0)),
                        dense.cho_factor, dense.slogdet, lambda a: dense.sygvd(a, a)):
            with pytest.raises(ValueError, match=re.escape(
                    ": a must be a non-empty square (n, n) matrix, got shape (0, 0)")):
                routine(jnp.zeros((0, 0)))
        with raises("lu_solve: b must have shape (2,) or (2, k) for a of shape (2, 2), got (3,)."):
            dense.lu_solve(jnp.eye(2), jnp.ones(3))
        with raises("qr: a must be a non-empty (m, n) matrix, got shape (3,); use jax.vmap for "
                    "stacks of matrices."):
            dense.qr(jnp.ones(3))
        with raises("polar: a must have at least as many rows as columns, got shape (2, 4); for "
                    "a wide matrix decompose its conjugate transpose."):
            dense.polar(jnp.ones((2, 4)))
        with raises("sygvd: a and b must have the same shape and dtype, got (2, 2) float32 and "
                    "(3, 3) float32."):
            dense.sygvd(jnp.eye(2), jnp.eye(3))
        with raises("gesvd: full_matrices=True is not supported; the reduced SVD (U of shape "
                    "(m, min(m, n))) is what jaxsolve differentiates."):
            dense.gesvd(jnp.eye(2), full_matrices=True)
        with raises("solve: a must have shape (..., N, N), got (2, 3)."):
            dense.solve(jnp.ones((2, 3)), jnp.ones(2))


class TestMeshErrors:
    def test_mesh_must_be_a_mesh(self):
        with raises("potrs: mesh must be a jax.sharding.Mesh (e.g. from "
                    "jaxsolve.sharding.make_grid_mesh), got str."):
            dense.potrs(jnp.eye(2), jnp.ones(2), mesh="pr")

    def test_spec_errors(self):
        mesh = grid_mesh(2, 2)
        a, b = jnp.eye(4), jnp.ones(4)
        with raises("potrs: matrix_specs=P(('pr', 'pc'), None) must name one mesh "
                    "axis or None per matrix dimension; got ('pr', 'pc') (several axes for one "
                    "dimension are not supported)."):
            dense.potrs(a, b, mesh=mesh, matrix_specs=P(("pr", "pc"), None))
        with raises("potrs: matrix_specs=P('rows', 'pc') names axis 'rows', which "
                    "the mesh (axes ('pr', 'pc')) does not have."):
            dense.potrs(a, b, mesh=mesh, matrix_specs=P("rows", "pc"))
        with raises("potrs: matrix_specs=P('pr', 'pr') splits rows and columns over "
                    "the same axis 'pr'; use two mesh axes, e.g. P('pr', 'pc')."):
            dense.potrs(a, b, mesh=mesh, matrix_specs=P("pr", "pr"))
        with raises("potrs: matrix_specs=P(None, None) splits neither dimension; "
                    "split the rows or the columns over a mesh axis, e.g. P('pr', 'pc') or "
                    "P('x', None)."):
            dense.potrs(a, b, mesh=mesh, matrix_specs=P(None, None))
        with raises("potrs: mesh axis 'pc' (2 devices) is not used by "
                    "matrix_specs=P('pr'), so the matrix would be replicated over "
                    "it; use a mesh of only the grid's axes."):
            dense.potrs(a, b, mesh=mesh, matrix_specs=P("pr"))
        with raises("potrs: matrix_specs=P('pr', 'pc', None) must be a "
                    "PartitionSpec of one or two entries, e.g. P('pr', 'pc'), P('x', None) or "
                    "P('x')."):
            dense.potrs(a, b, mesh=mesh, matrix_specs=P("pr", "pc", None))

    def test_divisibility_error(self):
        mesh = grid_mesh(2, 2)
        with raises("lu_solve: a has 5 rows, which the 2 devices of mesh axis 'pr' cannot split "
                    "evenly; pad the matrix or use another mesh."):
            dense.lu_solve(jnp.eye(5), jnp.ones(5), mesh=mesh)
        with raises("qr: a has 3 columns, which the 2 devices of mesh axis 'pc' cannot split "
                    "evenly; pad the matrix or use another mesh."):
            dense.qr(jnp.ones((4, 3)), mesh=mesh)

    def test_in_specs_errors(self):
        mesh = grid_mesh(2, 2)
        with raises("potrs: in_specs must be the matrix's PartitionSpec, a sequence of one, or "
                    "the pair (matrix spec, rhs spec); got ('pr', 'pc')."):
            dense.potrs(jnp.eye(4), jnp.ones(4), mesh=mesh, in_specs=("pr", "pc"))
        with raises("potrs: matrix_specs=P('pr', 'pc') and the matrix spec of in_specs, "
                    "P('pc', 'pr'), differ; pass one of them."):
            dense.potrs(jnp.eye(4), jnp.ones(4), mesh=mesh, matrix_specs=P("pr", "pc"),
                        in_specs=(P("pc", "pr"), P()))
        with raises("potrs: b's spec P('pr', 'pc') must split b's rows like a's "
                    "rows (over 'pr') or not at all, and must not split its columns."):
            dense.potrs(jnp.eye(4), jnp.ones((4, 2)), mesh=mesh,
                        in_specs=(P("pr", "pc"), P("pr", "pc")))
        with raises("potrs: b's spec P('pc') must split b's rows like a's rows "
                    "(over 'pr') or not at all, and must not split its columns."):
            dense.potrs(put(jnp.eye(4), mesh, P("pr", "pc")), put(jnp.ones(4), mesh, P("pc")))

    def test_specs_without_mesh(self):
        with raises("potrs: matrix_specs=P('pr', 'pc') was given without a mesh, "
                    "and a is not sharded over one; pass mesh= as well."):
            dense.potrs(jnp.eye(2), jnp.ones(2), matrix_specs=P("pr", "pc"))


class TestInference:
    def test_mesh_and_specs_read_off_the_arrays(self):
        mesh = grid_mesh(2, 2)
        a = put(4 * jnp.eye(4), mesh, P("pc", "pr"))
        b = put(jnp.ones((4, 2)), mesh, P("pc", None))
        x = dense.potrs(a, b, replicate_x=False)
        assert x.sharding.is_equivalent_to(b.sharding, 2)
        np.testing.assert_allclose(x, np.full((4, 2), 0.25))
        assert dense.potrs(a, b).sharding.is_fully_replicated  # JAXMg's placement
        inverse = dense.cho_inverse(a)
        assert inverse.sharding.spec == P("pc", "pr")

    def test_jaxmg_in_specs_alias_and_replicated_solutions(self):
        mesh = grid_mesh(2, 2)
        a = 4 * jnp.eye(4)
        _, v = dense.syevd(a, mesh=mesh, in_specs=P("pc", "pr"))
        assert v.sharding.spec == P("pc", "pr")
        inverse = dense.cho_inverse(a, mesh=mesh, in_specs=(P("pc", "pr"),))
        assert inverse.sharding.spec == P("pc", "pr")
        a, b = put(a, mesh, P("pr", "pc")), put(jnp.ones(4), mesh, P("pr"))
        for solver in (dense.lu_solve, dense.least_squares):
            assert solver(a, b).sharding.is_fully_replicated
            split = solver(a, b, replicate_x=False)
            assert split.sharding.spec == P("pr")
            np.testing.assert_allclose(split, np.full(4, 0.25))

    def test_mesh_given_places_unsharded_inputs(self):
        mesh = grid_mesh(2, 2)
        x = dense.lu_solve(np.eye(4, dtype=np.float32), np.ones(4, np.float32), mesh=mesh)
        assert x.sharding.mesh == mesh and x.sharding.is_fully_replicated
        w, v = dense.syevd(np.eye(4, dtype=np.float32), mesh=mesh)
        assert v.sharding.spec == P("pr", "pc") and w.sharding.is_fully_replicated

    def test_single_axis_spec_is_padded(self):
        mesh = Mesh(np.array(jax.devices("cpu")[:2]), ("x",))
        q, r = dense.qr(put(jnp.eye(4), mesh, P("x")))
        assert q.sharding.is_equivalent_to(NamedSharding(mesh, P("x", None)), 2)
        np.testing.assert_allclose(np.abs(np.asarray(q @ r)), np.eye(4), atol=1e-6)

    def test_unsharded_arrays_stay_where_they_are(self):
        x = dense.potrs(2 * jnp.eye(2), jnp.ones(2))
        assert x.sharding.device_set == {jax.devices()[0]}

    def test_python_lists_take_jax_default_dtypes(self):
        x = dense.lu_solve([[2.0, 0.0], [0.0, 4.0]], [2.0, 4.0])
        assert x.dtype == np.float32
        np.testing.assert_allclose(x, [1.0, 1.0])
