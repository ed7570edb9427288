"""Tests of the one-host sharded solve: `solve` on a `jaxsolve.sharding.ShardedCsrMatrix`.

Runs on 8 virtual CPU devices: the flag must be in ``XLA_FLAGS`` before JAX starts its
backend, so this file sets it at import (Bazel runs each test file in its own process). Run
in one process after other files have started JAX with one device, the tests skip.
"""

import re

from jaxsolve_testing import use_cpu_devices

use_cpu_devices(8)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.sparse  # noqa: E402
import scipy.sparse.linalg  # noqa: E402
from eliminated_boundary import boundary_nodes, eliminated  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

from jaxsolve import sharding, sparse  # noqa: E402
from jaxsolve.sparse import _partitioned, _sharded, matrices  # noqa: E402

pytestmark = pytest.mark.skipif(
    len(jax.devices("cpu")) < 8,
    reason="needs 8 CPU devices: run this file in its own process (XLA_FLAGS set too late)")

# float32: a tolerance near its attainable accuracy (eps·κ), not below it.
PCG = {"solver": "PCG", "tolerance": 2e-6, "max_iters": 200, "preconditioner": {"solver": "AMG"}}
BICGSTAB = {"solver": "PBICGSTAB", "tolerance": 2e-6, "max_iters": 200,
            "preconditioner": {"solver": "AMG"}}
# PMIS, with which these bounds were measured: the default HMIS gives a single-device
# solve fewer iterations than a sharded one's block-Jacobi AMG gains (30², 8 devices: 6
# against 11), so the sharded-to-single ratios the tests bound are PMIS's.
PCG, BICGSTAB = ({**config, "preconditioner": {"solver": "AMG", "selector": "PMIS"}}
                 for config in (PCG, BICGSTAB))
PROBLEMS = {
    "poisson2d": (lambda: matrices.poisson_matrix(16), PCG),
    "poisson3d": (lambda: matrices.poisson3d_matrix(8), PCG),
    "convection_diffusion": (lambda: matrices.convection_diffusion_matrix_2d(16, peclet=2.0), BICGSTAB),
}
UNEVEN = {  # row counts that 4 and 8 devices do not divide
    "poisson2d_900": (lambda: matrices.poisson_matrix(30), PCG),
    "poisson3d_729": (lambda: matrices.poisson3d_matrix(9), PCG),
    "convection_diffusion_441": (lambda: matrices.convection_diffusion_matrix_2d(21, peclet=2.0),
                                 BICGSTAB),
}


def _mesh(parts):
    return sharding.row_mesh(devices=jax.devices("cpu")[:parts])


@pytest.fixture(scope="module")
def systems():
    """Per problem: the matrix, a right-hand side, and the single-device solution."""
    cache = {}

    def get(name):
        if name not in cache:
            make, config = {**PROBLEMS, **UNEVEN}[name]
            A = make()
            b = matrices.rhs_random(A.shape[0], seed=1)
            with jax.numpy_dtype_promotion("standard"):
                x, info = sparse.solve(A, b, config=config)
            cache[name] = A, b, config, x, int(info.iterations)
        return cache[name]

    return get


class TestSolveSharded:

    # Rows that the devices divide; the other device count of each kind of problem runs
    # with uneven rows (TestSolveShardedUneven).
    @pytest.mark.parametrize("name,parts", [("poisson2d", 4), ("poisson3d", 8),
                                            ("convection_diffusion", 4)])
    def test_solve_matches_single_device(self, systems, name, parts):
        A, b, config, x_single, _ = systems(name)
        A_sharded = sharding.shard_rows(A, _mesh(parts))
        b_sharded = jax.device_put(b, A_sharded.sharding)
        x, info = sparse.solve(A_sharded, b_sharded, config=config)
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
        assert x.sharding.is_equivalent_to(A_sharded.sharding, 1)
        np.testing.assert_allclose(x, x_single, rtol=1e-4,
                                   atol=1e-4 * float(jnp.abs(x_single).max()))
        residual = jnp.linalg.norm(A @ x - b) / jnp.linalg.norm(b)
        assert float(residual) < 1e-5

    def test_a_matrix_on_one_device_solves_a_right_hand_side_split_over_the_mesh(
            self, systems):
        # The demo's comparison: b sharded as the sharded matrix's rows, A on one device.
        # The solve runs where A is (its hierarchy is set up there); JAX refused the
        # program's arguments on different devices ("incompatible devices").
        A, b, config, x_single, iterations = systems("poisson3d")
        b_sharded = jax.device_put(b, sharding.shard_rows(A, _mesh(8)).sharding)
        x0 = jax.device_put(jnp.zeros_like(b), jax.devices()[1])
        with jax.numpy_dtype_promotion("standard"):
            x, info = sparse.solve(A, b_sharded, x0, config=config)
        assert x.sharding == b_sharded.sharding and int(info.iterations) == iterations
        np.testing.assert_array_equal(x, x_single)

    @pytest.mark.parametrize("preconditioner", ["MULTICOLOR_DILU", "JACOBI_L1"])
    def test_relaxation_preconditioners_relax_each_block(self, preconditioner):
        """JAX-AMG's MPI demos' preconditioners: block-Jacobi relaxation, each device
        relaxing its diagonal block; the single-device solution."""
        A = matrices.poisson_matrix(16)
        b = matrices.rhs_random(A.shape[0], seed=4)
        config = {"solver": "PBICGSTAB", "tolerance": 1e-6, "max_iters": 300,
                  "preconditioner": preconditioner}
        x_single, _ = sparse.solve(A, b, config=config)
        A_sharded = sharding.shard_rows(A, _mesh(4))
        x, info = sparse.solve(A_sharded, jax.device_put(b, A_sharded.sharding), config=config)
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
        np.testing.assert_allclose(x, x_single, rtol=1e-4,
                                   atol=1e-4 * float(jnp.abs(x_single).max()))

    @pytest.mark.parametrize("solver", ["AMG", "JACOBI_L1"])
    def test_stationary_solvers(self, solver):
        """AMG or a relaxation as the solver: x ← x + M⁻¹ (b − A x), M⁻¹ one application of
        the distributed AMG preconditioner or one block sweep (JAX-AMG's
        make_preconditioner(A_local, comm=...) applies one AMG cycle this way)."""
        A = matrices.poisson_matrix(12)
        b = matrices.rhs_random(A.shape[0], seed=6)
        config = {"solver": solver, "tolerance": 1e-5, "max_iters": 2000}
        A_sharded = sharding.shard_rows(A, _mesh(2))
        x, info = sparse.solve(A_sharded, jax.device_put(b, A_sharded.sharding), config=config)
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
        residual = jnp.linalg.norm(A @ x - b) / jnp.linalg.norm(b)
        assert float(residual) <= 1.1e-5

    def test_solve_iterations_near_single_device(self):
        # Large enough for several AMG levels: the coarse space that couples the blocks keeps
        # the iterations near the single-device AMG's (block-Jacobi AMG alone would not).
        # AmgX's fixed ω = 0.9 on both: the single-device AMG's estimated damping takes it
        # from 10 to 8 iterations, the block-Jacobi AMG's stay at 15 either way.
        A = matrices.poisson3d_matrix(16)
        b = matrices.rhs_random(A.shape[0], seed=2)
        config = {**PCG, "preconditioner": {**PCG["preconditioner"], "relaxation_factor": 0.9}}
        _, single = sparse.solve(A, b, config=config)
        _, sharded = sparse.solve(sharding.shard_rows(A, _mesh(8)), b, config=config)
        assert sparse.Status(int(sharded.status)) == sparse.Status.SUCCESS
        assert int(sharded.iterations) <= 1.5 * int(single.iterations)

    @pytest.mark.parametrize("algorithm", ["CLASSICAL", "AGGREGATION"])
    def test_rows_that_couple_to_nothing_are_one_coarse_unknown(self, algorithm):
        # 3D Poisson 16³ with its 1352 boundary rows and columns the identity's, over two
        # devices: a block's identity rows make one unknown of the coarse space that couples
        # the blocks, which keeps at most COARSE_PER_PART a device (as unknowns of their own
        # they were 677 a device, and the coarse space's dense inverse 1354²).
        A = eliminated(matrices.poisson3d_matrix(16), boundary_nodes((16, 16, 16)))
        b = matrices.rhs_random(A.shape[0], seed=2)
        config = {**PCG, "preconditioner": {"solver": "AMG", "algorithm": algorithm}}
        A_sharded = sharding.shard_rows(A, _mesh(2))
        setup = _sharded._block_setup(A_sharded.layout, np.asarray(A_sharded.values),
                                      sparse.parse_amgx_config(config).preconditioner.amg)
        assert setup.n_coarse <= _partitioned.COARSE_PER_PART
        x, info = sparse.solve(A_sharded, b, config=config)
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
        assert float(jnp.linalg.norm(A @ x - b) / jnp.linalg.norm(b)) < 1e-5

    def test_solve_jit_traced_values_unequal_blocks(self):
        # 34² rows over 4 devices: 8.5 grid rows each, so the diagonal blocks differ (one
        # lax.switch branch per structure); the values are traced, so the structures come
        # from the pattern and the numbers are set up inside the compiled program.
        A = matrices.poisson_matrix(34)
        b = matrices.rhs_random(A.shape[0], seed=3)
        x_single, _ = sparse.solve(A, b, config=PCG)
        A_sharded = sharding.shard_rows(A, _mesh(4))
        solve = jax.jit(lambda values, b: sparse.solve(A_sharded.with_values(values), b,
                                                       config=PCG))
        x, info = solve(A_sharded.values, jax.device_put(b, A_sharded.sharding))
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
        np.testing.assert_allclose(x, x_single, rtol=1e-4,
                                   atol=1e-4 * float(jnp.abs(x_single).max()))

    def test_solve_with_x0(self, systems):
        A, b, config, x_single, _ = systems("poisson2d")
        A_sharded = sharding.shard_rows(A, _mesh(4))
        x0 = x_single + jnp.sin(jnp.arange(A.shape[0], dtype=jnp.float32))
        x, info = sparse.solve(A_sharded, b, x0, config=config)
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
        np.testing.assert_allclose(x, x_single, rtol=1e-4,
                                   atol=1e-4 * float(jnp.abs(x_single).max()))

    def test_solve_compiled_has_no_all_gather(self, systems):
        A, b, config, _, _ = systems("convection_diffusion")
        A_sharded = sharding.shard_rows(A, _mesh(8))
        b_sharded = jax.device_put(b, A_sharded.sharding)
        hlo = jax.jit(lambda b: sparse.solve(A_sharded, b, config=config)[0]).lower(
            b_sharded).compile().as_text()
        assert "collective-permute" in hlo  # the halo exchanges
        assert "all-gather" not in hlo
        assert "all-to-all" not in hlo

    def test_solve_errors(self, systems):
        A, b, config, _, _ = systems("poisson2d")
        A_sharded = sharding.shard_rows(A, _mesh(4))
        other = jax.device_put(b, NamedSharding(_mesh(8), PartitionSpec("rows")))
        with pytest.raises(ValueError, match="b is sharded over another mesh"):
            sparse.solve(A_sharded, other)
        with pytest.raises(ValueError, match=r"b must have shape \(256,\) or \(256, k\)"):
            sparse.solve(A_sharded, b[:128])
        with pytest.raises(ValueError, match="not supported with a sharded A"):
            sparse.solve(A_sharded, b, near_nullspace=jnp.ones(256))
        with pytest.raises(ValueError, match="'NOSOLVER' solves nothing"):
            sparse.solve(A_sharded, b, config={"solver": "NOSOLVER"})

    def test_solve_names_nonfinite_inputs(self, systems):
        A, b, config, _, _ = systems("poisson2d")
        A_sharded = sharding.shard_rows(A, _mesh(2))
        bad_b = b.at[3].set(jnp.nan)
        with pytest.raises(ValueError, match=re.escape("solve: b holds NaN or Inf (1 entries).")):
            sparse.solve(A_sharded, bad_b, config=config)
        bad_A = A_sharded.with_values(A_sharded.values.at[0, 5].set(jnp.inf))
        with pytest.raises(ValueError, match=re.escape("solve: A holds NaN or Inf (1 entries).")):
            sparse.solve(bad_A, b, config=config)
        _, info = sparse.solve(A_sharded, bad_b, config=config, check=False)
        assert int(info.status) != sparse.Status.SUCCESS

    @pytest.mark.parametrize("make,solver,smoother,coarse_solver", [
        (lambda: matrices.poisson_matrix(18), "PCG",
         {"solver": "MULTICOLOR_GS", "symmetric_GS": 1}, "NOSOLVER"),
        (lambda: matrices.convection_diffusion_matrix_2d(15, peclet=2.0), "PBICGSTAB",
         {"solver": "MULTICOLOR_DILU"}, "DENSE_LU_SOLVER"),
    ], ids=["poisson_symmetric_gs", "convection_diffusion_dilu"])
    def test_solve_multicolor_smoother_on_unequal_blocks(self, make, solver, smoother,
                                                          coarse_solver):
        """Blocks of 4.5 or 3.75 grid lines differ, and so do their colorings (color counts
        too, on the coarse levels): each device's multicolor data is padded to one shape."""
        A = make()
        b = matrices.rhs_random(A.shape[0], seed=2)
        # θ = 0.5 and PMIS: the coarse levels whose colorings differ between the blocks (at
        # the default 0.25 the Poisson blocks' color counts happen to agree, with HMIS the
        # convection blocks').
        config = {"solver": solver, "tolerance": 2e-6, "max_iters": 100, "preconditioner": {
            "solver": "AMG", "smoother": smoother, "min_coarse_rows": 16,
            "coarse_solver": coarse_solver, "strength_threshold": 0.5, "selector": "PMIS"}}
        A_sharded = sharding.shard_rows(A, _mesh(4))
        x, info = sparse.solve(A_sharded, b, config=config)
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
        setup = _sharded._block_setup(
            A_sharded.layout, np.asarray(A_sharded.values),
            sparse.parse_amgx_config(config).preconditioner.amg)
        colors = {tuple(level.ordering.n_colors for level in structure.levels)
                  + (structure.coarsest_ordering and structure.coarsest_ordering.n_colors,)
                  for structure in setup.structures}
        assert len(setup.structures) > 1 and len(colors) > 1
        scipy_A = scipy.sparse.csr_array((np.asarray(A.data, np.float64), A.indices, A.indptr),
                                         shape=A.shape)
        reference = scipy.sparse.linalg.spsolve(scipy_A, np.asarray(b, np.float64))
        np.testing.assert_allclose(x, reference, rtol=1e-4,
                                   atol=1e-4 * float(np.abs(reference).max()))
        _, single = sparse.solve(A, b, config=config)
        print(f"{smoother['solver']}: {int(info.iterations)} iterations, single device "
              f"{int(single.iterations)}")
        assert int(info.iterations) <= 2 * int(single.iterations)


class TestSolveShardedUneven:

    @pytest.mark.parametrize("name,parts", [("poisson2d_900", 8), ("poisson3d_729", 4),
                                            ("convection_diffusion_441", 8)])
    def test_solve_uneven_rows_matches_single_device(self, systems, name, parts):
        # Blocks of ⌈n / P⌉ rows, some with an empty padding row: b and x keep their n rows.
        A, b, config, x_single, iterations = systems(name)
        A_sharded = sharding.shard_rows(A, _mesh(parts))
        assert A.shape[0] % parts and A_sharded.layout.padded_size > A.shape[0]
        x, info = sparse.solve(A_sharded, b, config=config)
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
        assert x.shape == b.shape
        np.testing.assert_allclose(x, x_single, rtol=1e-4,
                                   atol=1e-4 * float(jnp.abs(x_single).max()))
        print(f"{name} on {parts} devices: iterations {int(info.iterations)}, single device "
              f"{iterations}")
        assert int(info.iterations) <= 1.5 * iterations + 1

    def test_solve_uneven_rows_padded_layout(self, systems):
        # b in the padded layout, sharded like the rows: x comes back in it, padding zero;
        # other lengths are refused with the layouts that fit.
        A, b, config, x_single, _ = systems("convection_diffusion_441")
        A_sharded = sharding.shard_rows(A, _mesh(4))  # 111, 110, 110, 110 rows
        assert A_sharded.layout.n_owned == 111
        b_padded = A_sharded.shard_vector(b)
        assert b_padded.shape == (444,)
        assert b_padded.sharding.is_equivalent_to(A_sharded.sharding, 1)
        x_padded, info = jax.jit(lambda b: sparse.solve(A_sharded, b, config=config))(
            b_padded)
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
        assert x_padded.shape == (444,)
        assert not np.any(np.asarray(x_padded)[~A_sharded.layout.real_rows])
        np.testing.assert_allclose(A_sharded.global_vector(x_padded), x_single, rtol=1e-4,
                                   atol=1e-4 * float(jnp.abs(x_single).max()))
        with pytest.raises(ValueError, match=r"\(441,\) or \(441, k\).*or \(444,\) or "
                                             r"\(444, k\) in the padded layout"):
            sparse.solve(A_sharded, b[:440], config=config)


class TestSolveShardedSetup:

    def test_solve_reuses_numeric_setup(self, systems, monkeypatch):
        # The per-device hierarchies and the coarse inverse are set up once for concrete
        # values: a second right-hand side reuses them, new values set up anew, and
        # reuse_setup=True keeps the latest numbers whatever the values.
        A, b, config, x_single, _ = systems("convection_diffusion")
        A_sharded = sharding.shard_rows(A, _mesh(4))
        setups = []
        real = sparse._sharded._setup_numbers
        monkeypatch.setattr(sparse._sharded, "_setup_numbers",
                            lambda *args: setups.append(args) or real(*args))

        x, _ = sparse.solve(A_sharded, b, config=config)
        assert len(setups) == 1
        x2, info = sparse.solve(A_sharded, 2 * b, config=config)
        assert len(setups) == 1  # same values: the numbers are reused
        np.testing.assert_allclose(x2, 2 * x, rtol=1e-4, atol=1e-4 * float(jnp.abs(x).max()))
        same = A_sharded.with_values(A_sharded.values + 0)  # equal values, another array
        sparse.solve(same, b, config=config)
        assert len(setups) == 1

        doubled = A_sharded.with_values(2 * A_sharded.values)
        x_half, info = sparse.solve(doubled, b, config=config)
        assert len(setups) == 2  # new values: set up anew
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
        np.testing.assert_allclose(x_half, x_single / 2, rtol=1e-4,
                                   atol=1e-4 * float(jnp.abs(x_single).max()))
        # Reused numbers of 2A precondition A's solve: still converged, no new setup.
        x_reused, info = sparse.solve(A_sharded, b, config=config, reuse_setup=True)
        assert len(setups) == 2
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
        np.testing.assert_allclose(x_reused, x_single, rtol=1e-4,
                                   atol=1e-4 * float(jnp.abs(x_single).max()))


class TestSolveShardedGrad:

    # Symmetric on rows the devices divide; nonsymmetric (a reverse solve with Aᵀ, whose
    # rows are routed between the devices) on 441 rows, which 4 devices do not divide
    # (padded blocks).
    @pytest.mark.parametrize("name,parts", [("poisson2d", 8), ("convection_diffusion_441", 4)])
    def test_solve_grad_matches_single_device(self, systems, name, parts):
        A, b, config, _, _ = systems(name)
        A_csr = sparse.as_csr(A)
        A_sharded = sharding.shard_rows(A, _mesh(parts))
        weights = jnp.cos(jnp.arange(A.shape[0], dtype=jnp.float32))

        def single(values, b):
            return jnp.sum(weights * sparse.solve(A_csr.with_values(values), b, config=config)[0])

        def sharded(values, b):
            return jnp.sum(weights * sparse.solve(A_sharded.with_values(values), b,
                                                  config=config)[0])

        values_bar, b_bar = jax.grad(single, argnums=(0, 1))(A_csr.values, b)
        stacked_bar, sharded_b_bar = jax.grad(sharded, argnums=(0, 1))(A_sharded.values, b)
        scale = float(jnp.abs(values_bar).max())
        np.testing.assert_allclose(sharded_b_bar, b_bar, rtol=1e-3,
                                   atol=1e-4 * float(jnp.abs(b_bar).max()))
        np.testing.assert_allclose(A_sharded.global_values(stacked_bar), values_bar, rtol=1e-3,
                                   atol=1e-4 * scale)
        # The padding of the blocks gets no gradient.
        for rank, count in enumerate(A_sharded.layout.nnz):
            assert not np.any(np.asarray(stacked_bar)[rank, count:])
