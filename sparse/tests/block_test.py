"""Tests for block systems: ``solve(A, b, block_dim=k)``, BSR input, nodal coarsening and
block smoothers (jaxsolve.sparse._blocks)."""

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg
from eliminated_boundary import boundary_nodes, eliminated

from jaxsolve import sparse
from jaxsolve.sparse import _blocks, _hierarchy, _relaxation, matrices
from jaxsolve.sparse._csr_arrays import CsrArrays, CsrStructure

SMOOTHED = {"solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_4",
            "jaxsolve_smoothed_aggregation": 1, "smoother": "JACOBI_L1", "min_coarse_rows": 32}
CLASSICAL = {"solver": "AMG", "algorithm": "CLASSICAL", "smoother": "JACOBI_L1",
             "min_coarse_rows": 32}


def scipy_matrix(A) -> scipy.sparse.csr_array:
    csr = sparse.as_csr(A)
    return scipy.sparse.csr_array((np.asarray(csr.values), csr.indices, csr.indptr),
                                  shape=csr.shape)


def status(info) -> str:
    return sparse.Status(int(info.status)).name


def coupled_components(n: int) -> scipy.sparse.bsr_array:
    """A 2D Poisson matrix whose nodes carry two strongly coupled unknowns: ``L ⊗ C``."""
    laplacian = scipy_matrix(matrices.poisson_matrix(n, dtype=np.float64))
    return scipy.sparse.bsr_array(scipy.sparse.kron(laplacian, [[1.0, 0.95], [0.95, 1.0]]),
                                  blocksize=(2, 2))


class TestElasticity:
    @pytest.mark.parametrize("solver", ["PCG", "PBICGSTAB"])
    @pytest.mark.parametrize("preconditioner", ["smoothed aggregation", "classical"])
    def test_matches_spsolve(self, x64, solver, preconditioner):
        A, modes = matrices.elasticity_matrix_2d(16, dtype=np.float64)
        b = matrices.rhs_random(A.shape[0], seed=2, dtype=np.float64)
        smoothed = preconditioner == "smoothed aggregation"
        config = {"solver": solver, "tolerance": 1e-10, "max_iters": 200,
                  "preconditioner": SMOOTHED if smoothed else CLASSICAL}
        x, info = sparse.solve(A, b, config=config, block_dim=2,
                               near_nullspace=modes if smoothed else None)
        reference = scipy.sparse.linalg.spsolve(scipy_matrix(A).tocsc(), np.asarray(b))
        assert status(info) == "SUCCESS"
        assert int(info.iterations) <= 40
        np.testing.assert_allclose(x, reference, rtol=1e-6, atol=1e-8 * np.abs(reference).max())

    def test_damped_jacobi_smoothing_is_reported_not_positive_definite(self, x64):
        # ρ(D⁻¹A) ≈ 2.33 on Q1 elasticity (ν = 0.3), so damped Jacobi with AmgX's ω = 0.9,
        # asked for by name, diverges and the AMG cycle is indefinite: CG must say so and
        # point to JACOBI_L1, with which the same solve converges (24² nodes: at 16² the
        # hierarchy is too shallow for the divergent smoothing to show).  The default
        # estimates ω and converges (default_convergence_test.py).
        A, _ = matrices.elasticity_matrix_2d(24, dtype=np.float64)
        b = jnp.ones(A.shape[0])
        config = {"solver": "PCG", "preconditioner": {"solver": "AMG",
                                                      "relaxation_factor": 0.9}}
        _, info = sparse.solve(A, b, config=config, block_dim=2)
        reason = sparse.FailureReason(int(info.failure_reason))
        assert reason is sparse.FailureReason.PRECONDITIONER_NOT_POSITIVE_DEFINITE
        assert "JACOBI_L1" in reason.advice
        with pytest.raises(sparse.SolveError, match="JACOBI_L1"):
            sparse.raise_on_failure(info)
        l1 = {"solver": "PCG", "preconditioner": {"solver": "AMG", "smoother": "JACOBI_L1"}}
        _, info = sparse.solve(A, b, config=l1, block_dim=2)
        assert status(info) == "SUCCESS"

    def test_hierarchy_is_a_block_system_on_every_level(self):
        A, modes = matrices.elasticity_matrix_2d(16)
        smoothed = sparse.describe(A, {"preconditioner": SMOOTHED}, near_nullspace=modes,
                                   block_dim=2)
        # Aggregates of nodes: three rigid-body modes per aggregate below the finest level.
        assert smoothed.block_dims == (2,) + (3,) * (len(smoothed.rows) - 1)
        assert len(smoothed.rows) >= 3
        classical = sparse.describe(A, {"preconditioner": CLASSICAL}, block_dim=2)
        assert set(classical.block_dims) == {2} and len(classical.rows) >= 3
        assert all(rows % 2 == 0 for rows in classical.rows)
        assert "unknowns/node" in str(classical)
        assert "unknowns/node" not in str(sparse.describe(A, {"preconditioner": CLASSICAL}))

    def test_eliminated_boundary_nodes_form_one_aggregate(self, x64):
        # The 18² grid's boundary nodes' rows and columns eliminated (identity) leave the
        # 16² problem and 136 nodes that couple to nothing: one aggregate, of three coarse
        # unknowns (the rigid-body modes) on every level, not 136 aggregates of three each
        # (before: 648, 300, 216, 207 rows and 20 iterations; the 16² problem's 21).
        A, modes = matrices.elasticity_matrix_2d(18, dtype=np.float64)
        A = eliminated(A, boundary_nodes((18, 18)), block_dim=2)
        interior, interior_modes = matrices.elasticity_matrix_2d(16, dtype=np.float64)
        config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 200,
                  "preconditioner": SMOOTHED}
        rows, iterations = {}, {}
        for name, matrix, near_nullspace in (("eliminated", A, modes),
                                             ("interior", interior, interior_modes)):
            rows[name] = sparse.describe(matrix, config, near_nullspace=near_nullspace,
                                         block_dim=2).rows
            b = np.random.default_rng(1).standard_normal(matrix.shape[0])
            x, info = sparse.solve(matrix, b, config=config, near_nullspace=near_nullspace,
                                   block_dim=2)
            assert status(info) == "SUCCESS"
            assert np.linalg.norm(matrix @ np.asarray(x) - b) <= 1e-8 * np.linalg.norm(b)
            iterations[name] = int(info.iterations)
        assert rows["eliminated"][1:] == tuple(n + 3 for n in rows["interior"][1:]), rows
        assert iterations["eliminated"] <= iterations["interior"], iterations

    @pytest.mark.parametrize("selector", ["PMIS", "PMISC", "HMIS"])
    def test_aggressive_levels_coarsen_the_nodes_aggressively(self, x64, selector):
        A, _ = matrices.elasticity_matrix_2d(24, dtype=np.float64)
        b = matrices.rhs_random(A.shape[0], seed=2, dtype=np.float64)
        standard = {**CLASSICAL, "selector": selector}
        aggressive = {**standard, "aggressive_levels": 1}
        rows = {name: sparse.describe(A, {"preconditioner": amg}, block_dim=2).rows
                for name, amg in (("standard", standard), ("aggressive", aggressive))}
        assert rows["aggressive"][1] < 0.5 * rows["standard"][1], rows
        assert all(n % 2 == 0 for n in rows["aggressive"])  # still whole nodes
        x, info = sparse.solve(A, b, block_dim=2, config={
            "solver": "PCG", "tolerance": 1e-8, "max_iters": 200, "preconditioner": aggressive})
        assert status(info) == "SUCCESS"


@pytest.mark.parametrize("config", [SMOOTHED, CLASSICAL])
def test_a_nodes_unknowns_share_aggregate_or_splitting(config):
    A = sparse.as_csr(matrices.elasticity_matrix_2d(12)[0])
    amg = sparse.parse_amgx_config({"preconditioner": config}).preconditioner.amg
    pattern = CsrStructure(A.indptr, A.indices, A.shape[1])
    values = np.asarray(A.values, np.float64)
    block = _hierarchy.build_structure(pattern, values, 2,
                                       dataclasses.replace(amg, block_dim=2)).levels[0]
    scalar = _hierarchy.build_structure(pattern, values, 2, amg).levels[0]
    if config is SMOOTHED:
        labels, scalar_labels = block.aggregates, scalar.aggregates
    else:
        labels, scalar_labels = block.interpolation.coarse, scalar.interpolation.coarse
    np.testing.assert_array_equal(labels[0::2], labels[1::2])
    # The scalar setup does split some nodes (so the test above can fail).
    assert np.any(scalar_labels[0::2] != scalar_labels[1::2])


class TestInput:
    def test_bsr_block_size_is_taken_and_agrees(self, x64):
        A, modes = matrices.elasticity_matrix_2d(8, dtype=np.float64)
        csr = scipy_matrix(A)
        b = np.random.default_rng(0).standard_normal(A.shape[0])
        config = {"solver": "PCG", "tolerance": 1e-10, "preconditioner": SMOOTHED}
        x, info = sparse.solve(A, b, config=config, block_dim=2, near_nullspace=modes)
        for bsr in (scipy.sparse.bsr_array(csr, blocksize=(2, 2)),
                    scipy.sparse.bsr_matrix(csr, blocksize=(2, 2))):
            bsr_x, bsr_info = sparse.solve(bsr, b, config=config, near_nullspace=modes)
            assert int(bsr_info.iterations) == int(info.iterations)
            np.testing.assert_allclose(bsr_x, x, rtol=1e-12)
            stats = sparse.describe(bsr, {"preconditioner": SMOOTHED}, near_nullspace=modes)
            assert stats.block_dims[0] == 2
        # Dense and BCOO input with block_dim: the same hierarchy and iterates.
        for other in (jnp.asarray(csr.toarray()), sparse.as_csr(A).to_bcsr().to_bcoo()):
            other_x, _ = sparse.solve(other, b, config=config, block_dim=2,
                                      near_nullspace=modes)
            np.testing.assert_allclose(other_x, x, rtol=1e-12)

    def test_bad_input(self):
        A = matrices.elasticity_matrix_2d(4)[0]  # 32 unknowns
        b = jnp.ones(32)
        bsr = scipy.sparse.bsr_array(scipy_matrix(A), blocksize=(2, 2))
        with pytest.raises(ValueError, match="32 rows, not a multiple of block_dim=3"):
            sparse.solve(A, b, block_dim=3)
        with pytest.raises(ValueError, match=re.escape(
                "block_dim=4 disagrees with the BSR matrix's blocksize (2, 2)")):
            sparse.solve(bsr, b, block_dim=4)
        with pytest.raises(ValueError, match=re.escape("blocks must be square for block_dim,"
                                                       " got blocksize (2, 1)")):
            sparse.solve(scipy.sparse.bsr_array(scipy_matrix(A), blocksize=(2, 1)), b)
        with pytest.raises(ValueError, match="block_dim must be >= 1, got 0"):
            sparse.solve(A, b, block_dim=0)
        with pytest.raises(TypeError, match="block_dim must be an int, got 2.0"):
            sparse.solve(A, b, block_dim=2.0)
        with pytest.raises(ValueError, match=re.escape("near_nullspace must have shape (32, k)")):
            sparse.solve(A, b, block_dim=2, near_nullspace=jnp.ones((16, 3)))
        with pytest.raises(ValueError, match="not a multiple of block_dim=3"):
            sparse.make_preconditioner(A, block_dim=3)
        with pytest.raises(ValueError, match="not a multiple of block_dim=3"):
            sparse.describe(A, block_dim=3)


class TestBlockSmoothers:
    @pytest.mark.parametrize("relaxation", ["BLOCK_JACOBI", "JACOBI_L1"])
    def test_one_sweep_inverts_the_diagonal_blocks(self, x64, relaxation):
        rng = np.random.default_rng(1)
        A = coupled_components(3).toarray() + np.diag(rng.uniform(0.0, 1.0, 18))
        r = rng.standard_normal(18)
        M = sparse.make_preconditioner(jnp.asarray(A), {"solver": relaxation,
                                                         "relaxation_factor": 0.7}, block_dim=2)
        inside = np.kron(np.eye(9), np.ones((2, 2))) > 0
        D = np.where(inside, A, 0)
        if relaxation == "JACOBI_L1":
            D += np.diag(np.abs(np.where(inside, 0, A)).sum(axis=1))
        np.testing.assert_allclose(M(jnp.asarray(r)), 0.7 * np.linalg.solve(D, r), rtol=1e-12)

    def test_strongly_coupled_components_need_block_smoothing(self, x64):
        # Point Jacobi with ω = 0.9 diverges on L ⊗ C (ρ(D⁻¹A) ≈ 3.9), the 2 × 2 blocks do
        # not; point Jacobi damped from its estimated ρ converges, but far more slowly.
        A = coupled_components(16)
        b = np.random.default_rng(0).standard_normal(A.shape[0])
        config = {"solver": "PCG", "tolerance": 1e-8,
                  "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION"}}
        x, info = sparse.solve(A, b, config=config)
        assert status(info) == "SUCCESS" and int(info.iterations) <= 20
        np.testing.assert_allclose(A @ np.asarray(x), b, atol=1e-6 * np.linalg.norm(b))
        _, point = sparse.solve(A.tocsr(), b, config=config)
        assert status(point) == "SUCCESS" and int(point.iterations) > 5 * int(info.iterations)
        fixed = {**config, "preconditioner": {**config["preconditioner"],
                                              "relaxation_factor": 0.9}}
        _, point = sparse.solve(A.tocsr(), b, config=fixed)
        assert status(point) != "SUCCESS"


    def test_decoupled_unknowns_get_zero_rows(self, x64):
        # A row of zeros in a diagonal block (a coarse unknown whose basis function
        # vanished) leaves that unknown unchanged: its row of D⁻¹ is zero, the others are
        # those of the block with a one on the zero row's diagonal; an all-zero block gives 0.
        D = np.zeros((6, 6))
        D[:2, :2] = [[4.0, 1.0], [1.0, 3.0]]
        D[2, 2:4] = [3.0, 2.0]  # node 1: its second row is zero
        A = D.copy()
        A[1, 2] = A[4, 0] = -1.0  # couplings outside the blocks; node 2's block is zero
        csr = scipy.sparse.csr_array(A)
        a = CsrArrays(jnp.asarray(csr.data), jnp.asarray(csr.indices, jnp.int32),
                      jnp.asarray(csr.indptr, jnp.int32))
        config = sparse.RelaxationConfig(solver="BLOCK_JACOBI", relaxation_factor=1.0,
                                         chebyshev_polynomial_order=None)
        data = _relaxation.relaxation_data(a, jnp.asarray(np.diag(A)), config, block_dim=2)
        expected = np.zeros((3, 2, 2))
        expected[0] = np.linalg.inv(D[:2, :2])
        expected[1, 0] = [1 / 3, -2 / 3]  # row 0 of [[3, 2], [0, 1]]⁻¹
        np.testing.assert_allclose(data.scale, expected, rtol=1e-15)

    @pytest.mark.parametrize("smoother", ["BLOCK_JACOBI", "JACOBI_L1"])
    def test_numeric_setup_runs_no_batched_lapack(self, x64, smoother):
        # XLA CPU's batched LAPACK FFI hung the setup of a 3D elasticity system (a worker
        # in the batched LU of the 3 × 3 diagonal blocks, every other thread idle): the
        # block inverses are elementwise work; only the coarsest matrix is factored.
        laplacian = scipy_matrix(matrices.poisson_matrix(6, dtype=np.float64))
        coupling = [[2.0, 0.5, 0.2], [0.5, 2.0, 0.5], [0.2, 0.5, 2.0]]
        A = sparse.as_csr(scipy.sparse.csr_array(scipy.sparse.kron(laplacian, coupling)))
        b = jnp.ones(A.shape[0])
        config = {"solver": "PCG", "preconditioner": {"solver": "AMG", "smoother": smoother,
                                                      "min_coarse_rows": 16}}
        jaxpr = jax.make_jaxpr(lambda values: sparse.solve(
            A.with_values(values), b, config=config, block_dim=3))(A.values)
        factored = {(eqn.primitive.name, tuple(v.aval.shape for v in eqn.invars))
                    for eqn in equations(jaxpr.jaxpr)
                    if eqn.primitive.name in ("lu", "triangular_solve", "qr", "eigh", "svd",
                                              "cholesky")}
        coarsest = [shapes for name, shapes in factored if name == "lu"]
        assert coarsest and all(len(shapes[0]) == 2 for shapes in coarsest), factored
        assert all(len(shape) == 2 for _, shapes in factored for shape in shapes), factored


def equations(jaxpr):
    """Every equation of ``jaxpr`` and of the jaxprs in its equations' parameters."""
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    yield from equations(inner)


class TestUnderTransformations:
    def test_gradient_matches_dense(self, x64):
        A, modes = matrices.elasticity_matrix_2d(5, dtype=np.float64)
        A = sparse.as_csr(A)
        n = A.shape[0]
        b = matrices.rhs_random(n, seed=3, dtype=np.float64)
        weights = jnp.linspace(-1.0, 1.0, n)
        config = {"solver": "PCG", "tolerance": 1e-12,
                  "preconditioner": {**SMOOTHED, "min_coarse_rows": 8}}

        def loss(values):
            x, _ = sparse.solve(A.with_values(values), b, config=config, block_dim=2,
                                near_nullspace=modes)
            return jnp.sum(weights * x ** 3)

        def dense_loss(values):
            matrix = jnp.zeros((n, n)).at[A.row_ids, A.indices].add(values)
            matrix = (matrix + matrix.T) / 2  # PCG differentiates on symmetric matrices
            return jnp.sum(weights * jnp.linalg.solve(matrix, b) ** 3)

        got = jax.jit(jax.grad(loss))(A.values)
        np.testing.assert_allclose(got, jax.grad(dense_loss)(A.values), rtol=1e-7, atol=1e-9)

    def test_a_structure_from_the_pattern_alone_takes_each_component_by_itself(self, x64):
        # Under jit alone, classical AMG's structure is built from the pattern. Couplings
        # between the displacement components, counted as strong as the others, mixed
        # them: 20 iterations here, 27 at 32², 77 at 96², against 14 from the concrete
        # values. Coupling each component with its own iterates as the values' structure.
        A = sparse.as_csr(matrices.elasticity_matrix_2d(24, dtype=np.float64)[0])
        b = matrices.rhs_random(A.shape[0], seed=5, dtype=np.float64)
        config = {"tolerance": 1e-8, "max_iters": 100}
        sparse.clear_cache()
        x, traced = jax.jit(lambda values: sparse.solve(A.with_values(values), b, config=config,
                                                        block_dim=2))(A.values)
        sparse.clear_cache()
        _, concrete = sparse.solve(A, b, config=config, block_dim=2)
        assert status(traced) == status(concrete) == "SUCCESS"
        assert int(traced.iterations) == int(concrete.iterations)

    def test_numeric_resetup_inside_jit(self, x64):
        # New values on the fixed pattern: the block inverses and coarse operators are
        # recomputed inside the compiled program.
        A = sparse.as_csr(coupled_components(8))
        b = matrices.rhs_random(A.shape[0], seed=4, dtype=np.float64)
        config = {"solver": "PCG", "tolerance": 1e-10,
                  "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION",
                                     "min_coarse_rows": 16}}
        x, _ = sparse.solve(A, b, config=config, block_dim=2)
        scaled = jax.jit(lambda values: sparse.solve(A.with_values(values), b, config=config,
                                                     block_dim=2))
        for scale in (2.0, 5.0):
            y, info = scaled(scale * A.values)
            assert status(info) == "SUCCESS"
            np.testing.assert_allclose(y, x / scale, rtol=1e-7)
