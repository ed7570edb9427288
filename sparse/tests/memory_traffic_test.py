"""Tests for jaxsolve.sparse.memory_traffic_per_iteration: counts checked by hand.

Every expectation is written out from the model in ``_memory_traffic.py``: a CSR matrix of
``n`` rows, ``m`` columns and ``nnz`` entries read once is ``nnz (s + 4) + 4 (n + 1)``
bytes, a vector of ``n`` numbers ``s n``.
"""

import numpy as np
import pytest
import scipy.sparse

from jaxsolve import sparse


def laplacian_1d(n, dtype=np.float32):
    """The 1D Laplacian ``tridiag(-1, 2, -1)``: ``3 n - 2`` entries."""
    return scipy.sparse.diags([-1, 2, -1], [-1, 0, 1], shape=(n, n), format="csr", dtype=dtype)


def matrix_bytes(rows, nnz, s):
    return nnz * (s + 4) + 4 * (rows + 1)


def jacobi_pcg(sweeps, **relaxation):
    return {"solver": "PCG", "preconditioner": {
        "solver": "BLOCK_JACOBI", "relaxation_factor": 1.0, "max_iters": sweeps, **relaxation}}


def amg_pcg(**amg):
    return {"solver": "PCG", "preconditioner": {
        "solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_2",
        "smoother": "BLOCK_JACOBI", "relaxation_factor": 1.0, "presweeps": 1,
        "postsweeps": 1, "min_coarse_rows": 8, **amg}}


@pytest.mark.parametrize("s", [4, 8])
def test_jacobi_pcg_on_a_1d_laplacian_by_hand(s, request):
    if s == 8:
        request.getfixturevalue("x64")
    n, nnz = 10, 28
    traffic = sparse.memory_traffic_per_iteration(
        laplacian_1d(n, np.float32 if s == 4 else np.float64), jacobi_pcg(1))
    # q = A p: the matrix, p read, q written. ⟨r, z⟩ 2, p = z + β p 3, ⟨p, q⟩ 2, x += α p 3,
    # r −= α q 3, ‖r‖ 1: 14 passes of n numbers. z = D⁻¹ r from zero: r, D⁻¹ read, z written.
    assert traffic.method == {"products": matrix_bytes(n, nnz, s) + 2 * n * s,
                              "vector operations": 14 * n * s}
    assert traffic.levels == ({"smoothing": 3 * n * s},)
    assert traffic.total == matrix_bytes(n, nnz, s) + 2 * n * s + 14 * n * s + 3 * n * s


@pytest.mark.parametrize("sweeps", [2, 3, 4, 6])
def test_each_sweep_after_the_first_reads_the_matrix_and_four_vectors(sweeps):
    n = 20
    A = laplacian_1d(n)
    one = sparse.memory_traffic_per_iteration(A, jacobi_pcg(1))
    more = sparse.memory_traffic_per_iteration(A, jacobi_pcg(sweeps))
    sweep = matrix_bytes(n, 3 * n - 2, 4) + 4 * n * 4  # x (gathered and updated), b, D⁻¹; x out
    assert more.total - one.total == (sweeps - 1) * sweep
    assert more.method == one.method


def test_unpreconditioned_cg_reads_r_once_for_its_norm_squared():
    n = 12
    traffic = sparse.memory_traffic_per_iteration(laplacian_1d(n), {"solver": "CG"})
    assert traffic.levels == ()
    assert traffic.method == {"products": matrix_bytes(n, 3 * n - 2, 4) + 2 * n * 4,
                              "vector operations": 13 * n * 4}


def test_block_jacobi_reads_its_blocks():
    n, k = 12, 2
    traffic = sparse.memory_traffic_per_iteration(laplacian_1d(n), jacobi_pcg(1), block_dim=k)
    assert traffic.levels == ({"smoothing": (n * k + 2 * n) * 4},)  # k × k blocks per node


def two_level_sizes(A, config):
    stats = sparse.describe(A, config)
    assert len(stats.rows) == 2
    return stats.rows


def two_level_traffic(n, coarse, s):
    """The bytes of a two-level V-cycle's steps and of PCG's product on a 1D Laplacian of
    ``n`` rows (the vectors' length) and ``3 · 64 − 2`` entries (64 true rows),
    aggregated to ``coarse`` rows."""
    fine = matrix_bytes(n, 3 * 64 - 2, s)
    # Unsmoothed aggregation: P (n × coarse) and R (coarse × n) hold one entry per fine row.
    p, r = matrix_bytes(n, 64, s), matrix_bytes(coarse, 64, s)
    levels = ({
        "pre-smoothing": 3 * n * s,                        # from zero: b, D⁻¹ read, x written
        "residual": fine + 3 * n * s,                       # x, b read, r written
        "restriction": r + (n + coarse) * s,                # r read, R r written
        "prolongation": p + (coarse + 2 * n) * s,           # e, x read, x + P e written
        "post-smoothing": fine + 4 * n * s,                 # one fused Jacobi sweep
    }, {"coarse solve": (coarse * coarse + 2 * coarse) * s})
    return levels, {"products": fine + 2 * n * s, "vector operations": 14 * n * s}


def test_a_two_level_v_cycle_by_hand_on_the_padded_rows():
    s = 4
    A = laplacian_1d(64)
    config = amg_pcg(max_levels=2)
    assert two_level_sizes(A, config) == (64, 32)
    traffic = sparse.memory_traffic_per_iteration(A, config)
    # The solve runs on size classes (_size_classes.py): the finest level's 64 rows and
    # 64 / 32 more to a step of 16 (80), the coarsest's 32 plus 48 to a multiple of 16
    # (80) holds 1.5 × 32 + 4 or more, so the size class of 6 / 5 · 32 (40). The kernels
    # read the padding rows' pointers and vector entries, not the padding entries.
    levels, method = two_level_traffic(80, 40, s)
    assert traffic.levels == levels
    assert traffic.method == method
    unpadded_levels, unpadded_method = two_level_traffic(64, 32, s)
    assert traffic.padding == traffic.total - sum(
        sum(part.values()) for part in (*unpadded_levels, unpadded_method))
    assert f"size-class padding {traffic.padding / 1e6:.3f} MB" in str(traffic)


# The padded rows of the 3-level hierarchy of a 1D Laplacian of 256 rows (256, 128 and 64
# rows: _size_classes.py): 256 + 256 / 32 to a step of 16; the size class of 17 / 16 · 128;
# 64 + 48 to a multiple of 16 is 1.5 × 64 + 4 or more, so the size class of 6 / 5 · 64.
PADDED_ROWS_256 = (272, 160, 80)


def test_more_sweeps_grow_the_smoothing_of_every_level_only():
    n, s = 256, 4
    A = laplacian_1d(n)
    v11 = sparse.memory_traffic_per_iteration(A, amg_pcg(max_levels=3))
    v22 = sparse.memory_traffic_per_iteration(A, amg_pcg(max_levels=3, presweeps=2,
                                                         postsweeps=2))
    nonzeros = sparse.describe(A, amg_pcg(max_levels=3)).nonzeros
    rows = PADDED_ROWS_256
    for level in range(2):
        sweep = matrix_bytes(rows[level], nonzeros[level], s) + 4 * rows[level] * s
        for step in ("pre-smoothing", "post-smoothing"):
            assert v22.levels[level][step] - v11.levels[level][step] == sweep
        for step in ("residual", "restriction", "prolongation"):
            assert v22.levels[level][step] == v11.levels[level][step]
    assert v22.levels[2] == v11.levels[2]
    assert v22.method == v11.method


def test_a_w_cycle_visits_the_second_level_twice_and_the_coarsest_four_times():
    n, s = 256, 4
    A = laplacian_1d(n)
    v = sparse.memory_traffic_per_iteration(A, amg_pcg(max_levels=3))
    w = sparse.memory_traffic_per_iteration(A, amg_pcg(max_levels=3, cycle="W"))
    assert w.levels[0] == v.levels[0]
    for step in ("residual", "restriction", "prolongation", "post-smoothing"):
        assert w.levels[1][step] == 2 * v.levels[1][step]
    # the second visit starts from the first's correction: a full sweep, not one from zero
    rows, nonzeros = PADDED_ROWS_256, sparse.describe(A, amg_pcg(max_levels=3)).nonzeros
    assert w.levels[1]["pre-smoothing"] == (
        v.levels[1]["pre-smoothing"] + matrix_bytes(rows[1], nonzeros[1], s) + 4 * rows[1] * s)
    coarse = rows[2]
    from_zero = (coarse * coarse + 2 * coarse) * s
    from_x = matrix_bytes(coarse, nonzeros[2], s) + 3 * coarse * s + (coarse * coarse
                                                                      + 3 * coarse) * s
    assert v.levels[2]["coarse solve"] == from_zero
    assert w.levels[2]["coarse solve"] == 2 * from_zero + 2 * from_x


def test_a_single_precision_hierarchy_reads_four_byte_values(x64):
    n = 64
    A = laplacian_1d(n, np.float64)
    double = sparse.memory_traffic_per_iteration(A, amg_pcg(max_levels=2))
    single = sparse.memory_traffic_per_iteration(A, amg_pcg(
        max_levels=2, jaxsolve_hierarchy_precision="SINGLE"))
    rows = 80  # padded (test_a_two_level_v_cycle_by_hand_on_the_padded_rows)
    assert single.levels[0]["residual"] == matrix_bytes(rows, 3 * n - 2, 4) + 3 * rows * 4
    assert double.levels[0]["residual"] == matrix_bytes(rows, 3 * n - 2, 8) + 3 * rows * 8
    # r in, the correction out
    assert single.levels[0]["precision casts"] == 2 * rows * (8 + 4)
    assert single.method == double.method  # the Krylov loop stays in f64


def test_symmetric_gauss_seidel_adds_one_full_pass():
    n, s = 16, 4
    A = laplacian_1d(n)

    def smoothing(symmetric):
        config = {"solver": "PCG", "preconditioner": {
            "solver": "MULTICOLOR_GS", "max_iters": 1, "symmetric_GS": symmetric}}
        return sparse.memory_traffic_per_iteration(A, config).levels[0]["smoothing"]

    off_diagonal = 2 * (n - 1)
    half = off_diagonal // 2 * (s + 4) + 4 * (n + 1)  # L (or U): entries and row pointers
    # L and U, the diagonal, D⁻¹, b and x read, x written
    assert smoothing(1) - smoothing(0) == 2 * half + 5 * n * s


def test_bandwidth_is_bytes_times_iterations_over_seconds():
    traffic = sparse.memory_traffic_per_iteration(laplacian_1d(10), jacobi_pcg(1))
    assert traffic.bandwidth(iterations=5, seconds=1e-3) == pytest.approx(
        traffic.total * 5 / 1e-3)
    assert str(traffic).startswith(f"memory traffic per iteration: {traffic.total / 1e6:.3f} MB")


def test_bad_input_is_refused_as_solve_refuses_it():
    with pytest.raises(ValueError, match="memory_traffic_per_iteration: A must be square"):
        sparse.memory_traffic_per_iteration(scipy.sparse.eye(3, 4, format="csr"))


def test_the_stationary_iteration_forms_its_residual_in_the_product():
    n, s = 10, 4
    config = {"solver": "BLOCK_JACOBI", "relaxation_factor": 1.0}
    traffic = sparse.memory_traffic_per_iteration(laplacian_1d(n), config)
    # x += M⁻¹ r (3 passes), r = b − A x (one kernel: x and b read, r written), ‖r‖ (1)
    assert traffic.method == {"products": matrix_bytes(n, 3 * n - 2, s) + 3 * n * s,
                              "vector operations": 4 * n * s}
    assert traffic.levels == ({"smoothing": 3 * n * s},)


def test_bicgstab_applies_the_preconditioner_twice():
    n, s = 10, 4
    config = {**jacobi_pcg(1), "solver": "PBICGSTAB"}
    traffic = sparse.memory_traffic_per_iteration(laplacian_1d(n), config)
    assert traffic.method == {"products": 2 * (matrix_bytes(n, 3 * n - 2, s) + 2 * n * s),
                              "vector operations": 25 * n * s}
    assert traffic.levels == ({"smoothing": 2 * 3 * n * s},)


@pytest.mark.parametrize("solver", ["GMRES", "FGMRES"])
def test_gmres_spreads_its_restart_over_the_cycle(solver):
    n, s = 10, 4
    config = {**jacobi_pcg(1), "solver": solver, "gmres_n_restart": 1}
    traffic = sparse.memory_traffic_per_iteration(laplacian_1d(n), config)
    product = matrix_bytes(n, 3 * n - 2, s) + 2 * n * s
    # m = 1: the step's Gram-Schmidt against v_0 (5 passes), ‖w‖ and v_1 = w / ‖w‖ (3);
    # the cycle's v_0 = r / β (2), the update of x (FGMRES: x + Z y, 3; GMRES: V y, 2,
    # then x + M⁻¹(V y), 3, and one more application), the restart's residual and ‖r‖.
    update = 3 if solver == "FGMRES" else 5
    assert traffic.method == {"products": product + product + n * s,
                              "vector operations": (8 + 2 + update + 1) * n * s}
    applications = 1 if solver == "FGMRES" else 2
    assert traffic.levels == ({"smoothing": applications * 3 * n * s},)


def test_a_chebyshev_sweep_of_degree_two():
    n, s = 10, 4
    config = {"solver": "PCG", "preconditioner": {
        "solver": "CHEBYSHEV_POLY", "chebyshev_polynomial_order": 2, "max_iters": 1}}
    traffic = sparse.memory_traffic_per_iteration(laplacian_1d(n), config)
    # from zero: r = D⁻¹ b (3), d = r / θ (2), x = d (free); r −= D⁻¹ A d in one kernel
    # (the matrix, d, D⁻¹ and r read, r written), d = c₁ d + c₂ r (3), x += d (3).
    assert traffic.levels == ({"smoothing": matrix_bytes(n, 3 * n - 2, s)
                               + (3 + 2 + 4 + 3 + 3) * n * s},)


def test_a_hierarchy_set_up_on_the_device_counts_as_the_hosts():
    # On a grid numbered line by line the device's matching finds the host's aggregates
    # (device_setup_test.py), so the two hierarchies move the same bytes but for their
    # size classes' padding (the device setup's are its own).
    A = sparse.matrices.poisson_matrix(24)

    def traffic(location):
        return sparse.memory_traffic_per_iteration(A, amg_pcg(
            selector="SIZE_4", min_coarse_rows=16, jaxsolve_setup_location=location))

    host, device = traffic("HOST"), traffic("DEVICE")
    assert len(device.levels) >= 3
    assert [len(level) for level in device.levels] == [len(level) for level in host.levels]
    assert device.padding > 0 and host.padding > 0
    assert device.total - device.padding == host.total - host.padding
