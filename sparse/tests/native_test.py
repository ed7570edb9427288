"""Tests of jaxsolve.sparse's native kernels on the CPU: the CSR product and the setup kernels.

The product's checks are shared with native_gpu_test.py (native_cases.py); the setup kernels
run on the host only and are checked here against references written from their definitions.
"""

import concurrent.futures
import os
import pathlib
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.csgraph
from native_cases import (
    DTYPE_IDS,
    DTYPES,
    check_against_scipy,
    check_csr_product,
    check_csr_product_vmap,
    check_derivatives,
    check_interpolation_weights,
    check_jit,
    check_nested_vmap,
    check_update,
    check_vmap_over_values,
    check_vmap_over_x,
    interpolation_level,
    interpolation_matrix,
    interpolation_operands,
    long_row_matrix,
    plan_sending_outside_a_row,
    poisson,
    product_missing_a_column,
    product_operands,
    random_array,
    random_csr,
    use_dtype,
)

from jaxsolve.sparse import _classical, _classical_kernels, _ffi_primitives, _native_library
from jaxsolve.sparse._ffi_primitives import csr_matvec, csr_product_values, interpolation_weights
from jaxsolve.sparse._graph_kernels import (
    WeightedGraph,
    aggregate_pairs,
    contract_graph,
    coupling_graph,
)
from jaxsolve.sparse._pattern_kernels import (
    csr_transpose,
    find_in_rows,
    spgemm_host,
    spgemm_symbolic,
)

CPU = jax.devices("cpu")[0]

# (shape, density, empty rows): rectangular both ways, empty rows at the ends and inside,
# no entries at all, 1 x 1, and rows longer than the 8 products one GPU lane sums.
MATRICES = [
    ((40, 30), 0.2, (0, 7, 8, 39)),
    ((25, 60), 0.1, ()),
    ((6, 5), 0.0, ()),
    ((1, 1), 1.0, ()),
    ((20, 400), 0.5, (3,)),
]
MATRIX_IDS = ["40x30", "25x60", "no-entries", "1x1", "long-rows"]


AMGX_EXPORTS = {"JaxsolveSparseAmgxSolve", "JaxsolveSparseAmgxLoad", "JaxsolveSparseAmgxVersions",
                "JaxsolveSparseAmgxRelease", "JaxsolveSparseAmgxReleaseAll",
                "JaxsolveSparseAmgxSolvers"}


@pytest.mark.parametrize(("name", "exports"), [
    ("libjaxsolve_sparse.so", {"JaxsolveSparseCsrMatvec", "JaxsolveSparseCsrProduct",
                               "JaxsolveSparseInterpolationWeights",
                               "JaxsolveSparseAggregatePairs", "JaxsolveSparseColorDsatur",
                               "JaxsolveSparseCouplingGraph", "JaxsolveSparseContractGraph",
                               "JaxsolveSparseSpgemm", "JaxsolveSparseSpgemmProducts",
                               "JaxsolveSparseFindInRows", "JaxsolveSparseHostThreads",
                               "JaxsolveSparseCsrTranspose",
                               "JaxsolveSparseClassicalStrength",
                               "JaxsolveSparseClassicalSplitting",
                               "JaxsolveSparseInterpolationPlan",
                               "JaxsolveSparseInterpolationSizes",
                               "JaxsolveSparseInterpolationCopy",
                               "JaxsolveSparseInterpolationValues",
                               "JaxsolveSparseTruncation", "JaxsolveSparseTruncatedValues",
                               "JaxsolveSparseKeptPattern",
                               "JaxsolveSparseMultipassPlan",
                               "JaxsolveSparseMultipassSizes", "JaxsolveSparseMultipassCopy",
                               "JaxsolveSparseMultipassValues",
                               "JaxsolveSparseSpgemmValues"}),
    ("libjaxsolve_sparse_cuda12.so", {"JaxsolveSparseCsrMatvec", "JaxsolveSparseCsrProduct",
                                      "JaxsolveSparseInterpolationWeights"}),
    ("libjaxsolve_sparse_cuda13.so", {"JaxsolveSparseCsrMatvec", "JaxsolveSparseCsrProduct",
                                      "JaxsolveSparseInterpolationWeights"}),
    # The AmgX backend's handlers link no AmgX: they dlopen libamgxsh.so (_amgx.py).
    *((f"libjaxsolve_sparse_amgx_cuda{major}.so", AMGX_EXPORTS) for major in (12, 13)),
])
def test_libraries_export_our_functions_and_need_only_the_c_runtime(name, exports):
    """The CUDA runtime is linked statically and kept private, like every other symbol."""
    library = pathlib.Path(_native_library.__file__).absolute().parent / name

    def tool(*command):
        return subprocess.run([*command, str(library)], check=True, capture_output=True,
                              text=True).stdout

    defined = [line.split() for line in tool("nm", "-D", "--defined-only").splitlines()]
    assert {fields[-1] for fields in defined if fields[-2] == "T"} == exports
    needed = set(re.findall(r"\(NEEDED\).*\[(.+)\]", tool("readelf", "-d")))
    assert needed <= {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1",
                      "ld-linux-x86-64.so.2", "libdl.so.2", "libpthread.so.0", "librt.so.1"}


class TestCsrMatvec:
    @pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
    @pytest.mark.parametrize("columns", [(), (1,), (3,)], ids=["vector", "k=1", "k=3"])
    @pytest.mark.parametrize(("shape", "density", "empty_rows"), MATRICES, ids=MATRIX_IDS)
    def test_csr_matvec_against_scipy(self, dtype, columns, shape, density, empty_rows):
        use_dtype(dtype)
        matrix = random_csr(shape, dtype, density, empty_rows=empty_rows)
        x = random_array((shape[1], *columns), dtype)
        check_against_scipy(csr_matvec, CPU, matrix, x)

    def test_csr_matvec_empty_rows_are_zero(self):
        matrix = random_csr((10, 10), np.float32, 0.5, empty_rows=(0, 4, 9))
        y = csr_matvec(matrix.data, matrix.indices, matrix.indptr, np.ones(10, np.float32),
                       n_rows=10)
        np.testing.assert_array_equal(np.asarray(y)[[0, 4, 9]], 0.0)

    def test_csr_matvec_without_rows_or_columns(self):
        no_rows = csr_matvec(np.zeros(0, np.float32), np.zeros(0, np.int32),
                             np.zeros(1, np.int32), np.ones((4, 2), np.float32), n_rows=0)
        assert no_rows.shape == (0, 2)
        no_columns = csr_matvec(np.zeros(0, np.float32), np.zeros(0, np.int32),
                                np.zeros(4, np.int32), np.ones((0, 2), np.float32), n_rows=3)
        np.testing.assert_array_equal(no_columns, np.zeros((3, 2)))

    def test_csr_matvec_accepts_any_integer_numpy_pattern(self):
        matrix = random_csr((9, 7), np.float32)
        x = random_array(7, np.float32)
        y = csr_matvec(matrix.data, matrix.indices.astype(np.int64),
                       matrix.indptr.astype(np.uint16), x, n_rows=9)
        np.testing.assert_allclose(y, matrix @ x, rtol=1e-5, atol=1e-6)

    @pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
    def test_csr_matvec_jit(self, dtype):
        use_dtype(dtype)
        check_jit(csr_matvec, CPU, random_csr((30, 20), dtype), random_array((20, 2), dtype))

    @pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
    @pytest.mark.parametrize("columns", [(), (3,)], ids=["vector", "k=3"])
    def test_csr_matvec_vmap_over_x(self, dtype, columns):
        use_dtype(dtype)
        matrix = random_csr((30, 20), dtype, empty_rows=(2,))
        check_vmap_over_x(csr_matvec, CPU, matrix, random_array((5, 20, *columns), dtype))

    @pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
    def test_csr_matvec_vmap_over_values(self, dtype):
        use_dtype(dtype)
        matrix = random_csr((30, 20), dtype)
        check_vmap_over_values(csr_matvec, CPU, matrix, [1.0, -2.0, 0.5],
                               random_array((20, 2), dtype))

    def test_csr_matvec_nested_vmap(self, x64):
        matrix = random_csr((30, 20), np.float64)
        check_nested_vmap(csr_matvec, CPU, matrix, [1.0, 3.0, -1.0],
                          random_array((4, 20, 2), np.float64))

    def test_csr_matvec_vmap_over_patterns(self, x64):
        """A batch of patterns (same sizes) is a loop of products, one per pattern."""
        matrices = [random_csr((12, 10), np.float64, 0.3, seed=s) for s in range(3)]
        nnz = min(m.nnz for m in matrices)
        for m in matrices:  # the same number of entries: drop the last rows' extra ones
            m.indptr = np.minimum(m.indptr, nnz).astype(np.int32)
            m.data, m.indices = m.data[:nnz], m.indices[:nnz]
        x = random_array(10, np.float64)
        stacked = [jnp.asarray(np.stack([getattr(m, a) for m in matrices]))
                   for a in ("data", "indices", "indptr")]
        ys = jax.vmap(lambda v, i, p: csr_matvec(v, i, p, x, n_rows=12))(*stacked)
        np.testing.assert_allclose(ys, np.stack([m @ x for m in matrices]), rtol=1e-12)

    @pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
    @pytest.mark.parametrize("columns", [(), (2,)], ids=["vector", "k=2"])
    def test_csr_matvec_grad(self, dtype, columns):
        use_dtype(dtype)
        matrix = random_csr((12, 9), dtype, 0.4, empty_rows=(5,))
        check_derivatives(csr_matvec, CPU, matrix, random_array((9, *columns), dtype))

    def test_csr_matvec_grad_under_vmap_and_jit(self, x64):
        """Gradients in values for a batch of x, with the pattern traced (jit arguments)."""
        matrix = random_csr((12, 9), np.float64, 0.4, empty_rows=(0, 6))
        xs = random_array((3, 9), np.float64)

        def loss(values, x, indices, indptr):
            return jnp.sum(csr_matvec(values, indices, indptr, x, n_rows=12) ** 2)

        grads = jax.jit(jax.vmap(jax.grad(loss), (None, 0, None, None)))(
            matrix.data, xs, jnp.asarray(matrix.indices), jnp.asarray(matrix.indptr))
        rows = np.repeat(np.arange(12), np.diff(matrix.indptr))
        expected = [2 * (matrix @ x)[rows] * x[matrix.indices] for x in xs]
        np.testing.assert_allclose(grads, np.stack(expected), rtol=1e-12)

    def test_csr_matvec_errors(self):
        matrix = scipy.sparse.csr_matrix(np.array(
            [[1, 0, 2], [0, 3, 0], [4, 0, 5], [0, 0, 6]], np.float32))
        v, i, p = matrix.data, matrix.indices.astype(np.int32), matrix.indptr.astype(np.int32)
        x = np.ones(3, np.float32)

        def raises(error, message, *args, n_rows=4):
            with pytest.raises(error, match=re.escape(f"csr_matvec: {message}")):
                csr_matvec(*args, n_rows=n_rows)

        raises(TypeError, "x must have the dtype of values, got x.dtype=complex64 and "
               "values.dtype=float32", v, i, p, x.astype(np.complex64))
        raises(TypeError, "values must be float32, float64, complex64 or complex128, got "
               "values.dtype=int32", v.astype(np.int32), i, p, x.astype(np.int32))
        raises(ValueError, "values must be (nnz,) and x (n_cols,) or (n_cols, k), got "
               "values.shape=(6,) and x.shape=(3, 1, 1)", v, i, p, x.reshape(3, 1, 1))
        raises(ValueError, "indices must have shape (values.shape[0],) = (5,), got "
               "indices.shape=(6,)", v[:-1], jnp.asarray(i), jnp.asarray(p), x)
        raises(ValueError, "indptr must have shape (n_rows + 1,) = (4,), got indptr.shape=(5,)",
               v, i, p, x, n_rows=3)
        raises(ValueError, "indptr must run from 0 to len(indices) = 5", v[:-1], i[:-1], p, x)
        raises(ValueError, "indices must be columns in [0, 2), got values from 0 to 2",
               v, i, p, x[:2])
        raises(ValueError, "indptr must not decrease, but indptr[2] < indptr[1]",
               v, i, np.array([0, 3, 2, 5, 6]), x)
        raises(ValueError, "n_rows must be an integer in [0, 2**31), got n_rows=-1", v, i, p, x,
               n_rows=-1)
        raises(TypeError, "indices must be int32, got indices.dtype=uint32",
               v, jnp.asarray(i, jnp.uint32), jnp.asarray(p), x)
        raises(TypeError, "indptr must be a 1-D integer array, got indptr.shape=(5,) and "
               "indptr.dtype=float64", v, i, p.astype(np.float64), x)

    def test_csr_matvec_native_checks_its_operands(self):
        """The C++ entry refuses operands whose shapes do not fit, whatever Python passed."""
        matrix = random_csr((4, 3), np.float32, 0.5)
        values = np.stack([matrix.data, matrix.data])  # two systems of values ...
        x = np.ones((3, 3, 1), np.float32)  # ... and three of x
        with pytest.raises(jax.errors.JaxRuntimeError, match=re.escape(
                "jaxsolve_sparse_csr_matvec: values (B or 1, nnz) and x (B or 1, n_cols, k) "
                "must make y (B, n_rows, k)")):
            _ffi_primitives._native_update(False)(values, matrix.indices, matrix.indptr, x, *[
                np.zeros(0, np.float32)] * 3).block_until_ready()
        rhs = np.ones((1, 4, 2), np.float32)  # an update's operand of another shape than y's
        with pytest.raises(jax.errors.JaxRuntimeError, match=re.escape(
                "jaxsolve_sparse_csr_matvec: rhs and base must be empty or (B, n_rows, k)")):
            _ffi_primitives._native_update(True)(matrix.data[None], matrix.indices, matrix.indptr,
                                         np.ones((1, 3, 1), np.float32), rhs,
                                         *[np.zeros(0, np.float32)] * 2).block_until_ready()

    @pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
    @pytest.mark.parametrize("columns", [(), (2,)], ids=["vector", "k=2"])
    def test_csr_update_against_scipy_and_its_unfused_form(self, dtype, columns):
        use_dtype(dtype)
        matrix = random_csr((14, 11), dtype, 0.4, empty_rows=(3,))
        check_update(CPU, matrix, random_array((11, *columns), dtype))


# ----------------------------------------------------------------------------------------
# aggregate_pairs


def reference_aggregate_pairs(indptr, indices, weights):
    """The pairwise aggregation, straight from its definition."""
    n = len(indptr) - 1
    aggregate = [-1] * n
    count = 0

    def strongest(i, eligible):
        best, best_weight = -1, 0.0
        for e in range(indptr[i], indptr[i + 1]):
            j, w = int(indices[e]), float(weights[e])
            if j != i and w > 0 and eligible(j) and (
                    best < 0 or w > best_weight or (w == best_weight and j < best)):
                best, best_weight = j, w
        return best

    for i in range(n):
        if aggregate[i] < 0:
            j = strongest(i, lambda j: aggregate[j] < 0)
            if j >= 0:
                aggregate[i] = aggregate[j] = count
                count += 1
    phase_one = list(aggregate)
    isolated = []
    for i in range(n):
        if aggregate[i] < 0:
            j = strongest(i, lambda j: True)
            if j >= 0:
                aggregate[i] = aggregate[j]
            else:
                isolated.append(i)
    for i in isolated:  # the nodes without a neighbour: one aggregate, the last
        aggregate[i] = count
    return np.array(aggregate, np.int32), count + bool(isolated), np.array(phase_one)


def random_graph(n, density, seed, symmetric=False, diagonal=True):
    """Unsymmetric weights of mixed sign, with ties, and rows in shuffled storage order."""
    rng = np.random.default_rng(seed)
    graph = scipy.sparse.random(n, n, density=density, format="csr", rng=rng)
    graph.data = rng.integers(-2, 5, graph.nnz).astype(np.float64)  # ties, zeros, negatives
    if symmetric:
        graph = (graph + graph.T).tocsr()
    if diagonal:
        graph = (graph + scipy.sparse.diags(rng.random(n) + 10)).tocsr()
    for i in range(n):  # storage order must not matter
        order = slice(graph.indptr[i], graph.indptr[i + 1])
        permutation = rng.permutation(graph.indptr[i + 1] - graph.indptr[i])
        graph.indices[order], graph.data[order] = (graph.indices[order][permutation],
                                                   graph.data[order][permutation])
    return graph


def aggregate_sizes(aggregate, count):
    return np.bincount(aggregate, minlength=count)


class TestAggregatePairs:
    @pytest.mark.parametrize("symmetric", [False, True], ids=["unsymmetric", "symmetric"])
    @pytest.mark.parametrize(("n", "density"), [(50, 0.05), (200, 0.02), (30, 0.3), (100, 0.0)])
    def test_aggregate_pairs_against_reference(self, n, density, symmetric):
        for seed in range(3):
            graph = random_graph(n, density, seed, symmetric)
            aggregate, count = aggregate_pairs(graph.indptr, graph.indices, graph.data)
            expected, expected_count, _ = reference_aggregate_pairs(
                graph.indptr, graph.indices, graph.data)
            assert aggregate.dtype == np.int32 and count == expected_count
            np.testing.assert_array_equal(aggregate, expected)
            assert set(np.unique(aggregate)) == set(range(count))

    def test_aggregate_pairs_ties_go_to_the_smallest_neighbour(self):
        # A complete graph with equal weights: 0-1, 2-3, 4 joins 0's aggregate.
        graph = scipy.sparse.csr_matrix(np.ones((5, 5)))
        aggregate, count = aggregate_pairs(graph.indptr, graph.indices, graph.data)
        np.testing.assert_array_equal(aggregate, [0, 0, 1, 1, 0])
        assert count == 2

    def test_aggregate_pairs_singletons(self):
        # 1 x 1; isolated nodes and a diagonal-only graph; non-positive weights only.
        one = scipy.sparse.csr_matrix(np.ones((1, 1)))
        assert aggregate_pairs(one.indptr, one.indices, one.data)[1] == 1
        isolated = scipy.sparse.csr_matrix((3, 3))
        np.testing.assert_array_equal(
            aggregate_pairs(isolated.indptr, isolated.indices, isolated.data)[0], [0, 0, 0])
        negative = scipy.sparse.csr_matrix(-np.ones((3, 3)))
        assert aggregate_pairs(negative.indptr, negative.indices, negative.data)[1] == 1

    def test_aggregate_pairs_gathers_the_nodes_without_a_neighbour(self):
        # 0 and 3 couple to nothing (eliminated Dirichlet rows; 3's zero weight ignored):
        # one aggregate, numbered after the pair 1-2, not one each, which would stay
        # apart on every coarser level.
        rows, cols, weights = [1, 2, 3, 2], [2, 1, 2, 3], [1.0, 1.0, 0.0, 0.0]
        graph = scipy.sparse.csr_matrix((weights, (rows, cols)), shape=(4, 4))
        aggregate, count = aggregate_pairs(graph.indptr, graph.indices, graph.data)
        np.testing.assert_array_equal(aggregate, [1, 0, 0, 1])
        assert count == 2

    def test_aggregate_pairs_unsymmetric_late_pairing(self):
        """A node left over by phase one can still be taken by a later node's row."""
        # 0 and 1 see each other and pair. 2 sees nobody and waits; 3 sees 2 and pairs with it.
        rows, cols = [0, 1, 3], [1, 0, 2]
        graph = scipy.sparse.csr_matrix((np.ones(3), (rows, cols)), shape=(4, 4))
        aggregate, count = aggregate_pairs(graph.indptr, graph.indices, graph.data)
        np.testing.assert_array_equal(aggregate, [0, 0, 1, 1])
        assert count == 2

    def test_aggregate_pairs_poisson_2d(self):
        """A 2D Poisson graph: pairs after phase one, at most three nodes after phase two."""
        matrix = poisson(17, 2)
        graph = -matrix  # positive off-diagonal weights, the diagonal ignored
        aggregate, count = aggregate_pairs(graph.indptr, graph.indices, graph.data)
        expected, expected_count, phase_one = reference_aggregate_pairs(
            graph.indptr, graph.indices, graph.data)
        np.testing.assert_array_equal(aggregate, expected)
        assert count == expected_count
        assert aggregate_sizes(phase_one[phase_one >= 0], count).max() == 2
        assert set(aggregate_sizes(aggregate, count)) <= {2, 3}
        # every aggregate is connected through the graph's edges
        for members in np.split(np.argsort(aggregate, kind="stable"),
                                np.cumsum(aggregate_sizes(aggregate, count))[:-1]):
            assert scipy.sparse.csgraph.connected_components(
                matrix[members][:, members])[0] == 1

    def test_aggregate_pairs_poisson_3d_64(self):
        """2^18 nodes, 1.8 million edges: a correctness case of the size AMG setups meet."""
        graph = -poisson(64, 3)
        aggregate, count = aggregate_pairs(graph.indptr, graph.indices, graph.data)
        expected, expected_count, _ = reference_aggregate_pairs(
            graph.indptr.tolist(), graph.indices.tolist(), graph.data.tolist())
        assert count == expected_count
        np.testing.assert_array_equal(aggregate, expected)

    def test_aggregate_pairs_errors(self):
        graph = random_graph(6, 0.5, 0)
        p, i, w = graph.indptr, graph.indices, graph.data

        def raises(error, message, *args):
            with pytest.raises(error, match=re.escape(f"aggregate_pairs: {message}")):
                aggregate_pairs(*args)

        raises(TypeError, f"weights must be real, one per entry, shape {i.shape}", p, i, w[1:])
        raises(TypeError, "weights must be real", p, i, w * 1j)
        raises(ValueError, "indices must be columns in [0, 6)", p, i + 6, w)
        raises(ValueError, "indptr must run from 0 to len(indices)", p + 1, i, w)
        raises(TypeError, "indices must be a 1-D integer array", p, i.astype(np.float32), w)


def test_host_threads_follow_the_affinity_mask():
    # Started on one CPU, the host kernels use one thread, however many the machine has.
    def cpu_quota() -> float:
        try:
            quota, period = open("/sys/fs/cgroup/cpu.max").read().split()
        except (OSError, ValueError):
            return float("inf")
        return float("inf") if quota == "max" else -(-int(quota) // int(period))

    assert _native_library.host_threads() == min(len(os.sched_getaffinity(0)), cpu_quota())
    one_cpu = subprocess.run(
        [sys.executable, "-c", "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))});"
         " from jaxsolve.sparse import _native_library; print(_native_library.host_threads())"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert one_cpu.stdout.split() == ["1"]


def test_host_threads_serve_concurrent_callers():
    # Python threads (ctypes releases the GIL) share the host threads' pool: every call
    # gets its own blocks back, whoever ran them.
    indptr = np.arange(0, 600001, 2, dtype=np.int32)
    patterns = [np.random.default_rng(seed).integers(0, 50, 600000).astype(np.int32)
                for seed in range(4)]
    expected = [csr_transpose(indptr, indices, 50) for indices in patterns]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for _ in range(5):
            got = list(pool.map(lambda indices: csr_transpose(indptr, indices, 50), patterns))
            for g, e in zip(got, expected):
                for g_array, e_array in zip(g, e):
                    np.testing.assert_array_equal(g_array, e_array)


def test_host_threads_in_a_forked_child():
    # A forked child has none of its parent's pool threads: it starts its own (the forking
    # thread plus host_threads() - 1 of them are all its threads), never waiting on the
    # parent's.
    script = """if True:
        import os, warnings
        import numpy as np
        from jaxsolve.sparse import _native_library, _pattern_kernels
        warnings.simplefilter("ignore")  # JAX's warning that forking a threaded process is risky
        indptr = np.arange(0, 600001, 2, dtype=np.int32)
        indices = np.random.default_rng(8).integers(0, 50, 600000).astype(np.int32)
        expected = _pattern_kernels.csr_transpose(indptr, indices, 50)
        pid = os.fork()
        if pid == 0:
            got = _pattern_kernels.csr_transpose(indptr, indices, 50)
            if not all(np.array_equal(g, e) for g, e in zip(got, expected)):
                os._exit(3)
            threads = len(os.listdir("/proc/self/task"))
            os._exit(0 if threads == _native_library.host_threads() else 4)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["0"]


# ----------------------------------------------------------------------------------------
# csr_transpose


@pytest.mark.parametrize(("shape", "density"), [((40, 30), 0.2), ((30, 40), 0.0), ((1, 1), 1.0),
                                                ((7, 300), 0.05)])
def test_csr_transpose_is_scipys_csc(shape, density):
    matrix = shuffled_rows(random_csr(shape, np.float64, density, seed=6, empty_rows=(0,)), 7)
    check_transpose(matrix.indptr, matrix.indices, shape)


def test_csr_transpose_over_many_threads():
    # 300000 rows of two entries in 50 columns, unsorted, repeated columns: several blocks
    # of rows, each counting its own entries per column.
    indptr = np.arange(0, 600001, 2, dtype=np.int32)
    indices = np.random.default_rng(8).integers(0, 50, 600000).astype(np.int32)
    check_transpose(indptr, indices, (300000, 50))


def check_transpose(indptr, indices, shape):
    """csr_transpose equals SciPy's CSR -> CSC of the entry numbers, entry for entry."""
    expected = scipy.sparse.csr_array(
        (np.arange(indices.size, dtype=np.int32), indices, indptr), shape=shape).tocsc()
    t_indptr, t_indices, source = csr_transpose(indptr, indices, shape[1])
    np.testing.assert_array_equal(t_indptr, expected.indptr)
    np.testing.assert_array_equal(t_indices, expected.indices)
    np.testing.assert_array_equal(source, expected.data)
    assert t_indptr.dtype == t_indices.dtype == source.dtype == np.int32


# ----------------------------------------------------------------------------------------
# find_in_rows


class TestFindInRows:
    @pytest.mark.parametrize(("shape", "density"),
                             [((40, 30), 0.2), ((30, 40), 0.2), ((1, 1), 1.0), ((5, 5), 0.0),
                              ((40000, 40000), 1e-4)])  # rows in several blocks of threads
    def test_find_in_rows_against_numpy(self, shape, density):
        # Unsorted rows, half with a diagonal, one row with its diagonal stored twice (the
        # last one counts, as NumPy's scatter of the positions has it).
        matrix = random_csr(shape, np.float64, density, seed=3)
        m = min(shape)
        matrix = (matrix + scipy.sparse.diags((np.arange(m) % 2 == 0) * 1.0, shape=shape)).tocsr()
        matrix.eliminate_zeros()
        matrix = shuffled_rows(matrix, 4)
        indptr = matrix.indptr.astype(np.int32)
        indices = np.insert(matrix.indices, indptr[1], 0).astype(np.int32)
        indptr[1:] += 1  # row 0 gets a second diagonal entry, last in the row
        rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
        expected = np.full(m, -1, np.int32)
        on_diagonal = np.flatnonzero(rows == indices)
        expected[rows[on_diagonal]] = on_diagonal
        np.testing.assert_array_equal(find_in_rows(indptr, indices, None, m), expected)
        # Any column per row: the last entry of row i in column columns[i].
        columns = np.random.default_rng(5).integers(0, shape[1], shape[0]).astype(np.int32)
        columns[::3] = indices[np.minimum(indptr[:-1], indices.size - 1)][::3]  # often stored
        expected = np.full(shape[0], -1, np.int32)
        hits = np.flatnonzero(indices == columns[rows])
        expected[rows[hits]] = hits
        np.testing.assert_array_equal(find_in_rows(indptr, indices, columns, shape[0]),
                                      expected)


# ----------------------------------------------------------------------------------------
# coupling_graph, contract_graph


def scipy_graph(graph: WeightedGraph) -> scipy.sparse.csr_array:
    n = graph.indptr.shape[0] - 1
    return scipy.sparse.csr_array((graph.weights, graph.indices, graph.indptr), shape=(n, n))


def assert_sorted_distinct_rows(graph: WeightedGraph):
    for i in range(graph.indptr.shape[0] - 1):
        row = graph.indices[graph.indptr[i]:graph.indptr[i + 1]]
        assert (np.diff(row) > 0).all(), i


class TestWeightedGraphs:
    @pytest.mark.parametrize(("seed", "n", "density"),
                             [(0, 40, 0.15), (1, 40, 0.15), (2, 40, 0.15),
                              (3, 200, 0.3)])  # rows of more than 32 entries
    def test_coupling_graph_is_the_scaled_symmetric_part(self, seed, n, density):
        matrix = random_graph(n, density, seed)  # unsymmetric, shuffled rows, with a diagonal
        graph = coupling_graph(matrix.indptr, matrix.indices, matrix.data)
        root = np.sqrt(np.abs(matrix.diagonal()))
        magnitudes = abs(matrix).toarray()
        expected = (magnitudes + magnitudes.T) / (2 * np.outer(root, root))
        np.fill_diagonal(expected, 0)
        np.testing.assert_allclose(scipy_graph(graph).toarray(), expected, rtol=1e-14)
        assert_sorted_distinct_rows(graph)
        # the pattern alone: a pair stored both ways weighs 1, one way 1/2
        pattern = coupling_graph(matrix.indptr, matrix.indices, None)
        stored = (matrix.toarray() != 0) * 0.5
        expected = stored + stored.T
        np.fill_diagonal(expected, 0)
        np.testing.assert_array_equal(scipy_graph(pattern).toarray(), expected)

    @pytest.mark.parametrize("magnitudes", [True, False], ids=["values", "pattern"])
    def test_coupling_graph_of_a_symmetric_sorted_pattern_over_many_threads(self, magnitudes):
        # A symmetric pattern with sorted rows is done row by row over the cores (20000
        # rows: several blocks); its values need not be symmetric. The result is bitwise
        # that of the general path, which shuffled rows take.
        pattern = (scipy.sparse.random(20000, 20000, density=3e-4, format="csr", rng=1) != 0)
        pattern = (pattern + pattern.T + scipy.sparse.eye(20000)).tocsr()
        matrix = scipy.sparse.csr_matrix(
            (np.random.default_rng(2).standard_normal(pattern.nnz), pattern.indices,
             pattern.indptr), pattern.shape)
        matrix.sort_indices()
        values = matrix.data if magnitudes else None
        graph = coupling_graph(matrix.indptr, matrix.indices, values)
        rng = np.random.default_rng(3)
        indices, data = matrix.indices.copy(), matrix.data.copy()
        for i in range(0, 20000, 7):  # unsorted rows: the general path
            row = slice(matrix.indptr[i], matrix.indptr[i + 1])
            order = rng.permutation(row.stop - row.start)
            indices[row], data[row] = indices[row][order], data[row][order]
        general = coupling_graph(matrix.indptr, indices, data if magnitudes else None)
        for ours, theirs in zip(graph, general, strict=True):
            np.testing.assert_array_equal(ours, theirs)
        root = np.sqrt(np.abs(matrix.diagonal()))
        weights = abs(matrix) if magnitudes else (matrix != 0) * 0.5
        expected = (weights + weights.T).tocoo()
        if magnitudes:
            expected.data /= 2 * root[expected.row] * root[expected.col]
        expected.setdiag(0)
        expected = scipy.sparse.csr_matrix(expected)
        expected.eliminate_zeros()
        error = abs(scipy_graph(graph) - expected)
        assert error.max() <= 1e-14 * abs(expected).max()

    def test_coupling_graph_of_a_pattern_symmetric_but_for_one_entry(self):
        # The row-by-row path finds the missing mirror and leaves it to the general one.
        matrix = scipy.sparse.csr_matrix(scipy.sparse.diags(
            [-np.ones(19999), 2 * np.ones(20000), -np.ones(19999)], [-1, 0, 1]))
        matrix = matrix.tolil()
        matrix[19990, 5] = -0.5  # far from its mirror's place, in the last block
        matrix = matrix.tocsr()
        graph = coupling_graph(matrix.indptr, matrix.indices, matrix.data)
        assert graph.indptr[-1] == 2 * 19999 + 2
        row5 = graph.indices[graph.indptr[5]:graph.indptr[6]].tolist()
        assert row5 == [4, 6, 19990]
        assert graph.weights[graph.indptr[5] + 2] == pytest.approx(0.5 / 4)

    def test_coupling_graph_without_a_diagonal_weighs_zero(self):
        graph = coupling_graph([0, 1, 2], [1, 0], np.array([3.0, 3.0]))
        assert graph.indices.tolist() == [1, 0] and graph.weights.tolist() == [0.0, 0.0]

    @pytest.mark.parametrize("keep_diagonal", [False, True])
    @pytest.mark.parametrize(("n", "density", "n_groups"), [(50, 0.2, 12), (400, 0.3, 100)],
                             ids=["short-rows", "long-rows"])  # rows of more than 32 groups
    def test_contract_graph_is_membership_product(self, keep_diagonal, n, density, n_groups):
        matrix = random_graph(n, density, 3)
        groups = np.random.default_rng(3).integers(0, n_groups, n)
        groups[:n_groups] = np.arange(n_groups)  # every group has a member
        graph = contract_graph(WeightedGraph(matrix.indptr, matrix.indices, matrix.data),
                               groups, n_groups, keep_diagonal=keep_diagonal)
        membership = scipy.sparse.csr_array(
            (np.ones(n), (np.arange(n), groups)), shape=(n, n_groups))
        expected = (membership.T @ matrix @ membership).toarray()
        if not keep_diagonal:
            np.fill_diagonal(expected, 0)
        np.testing.assert_allclose(scipy_graph(graph).toarray(), expected, rtol=1e-13)
        assert_sorted_distinct_rows(graph)

    def test_contract_graph_over_many_threads(self):
        # 40000 nodes in 20000 groups: several blocks of groups, packed in order.
        matrix = random_graph(40000, 2e-4, 4, symmetric=True)
        groups = np.random.default_rng(5).integers(0, 20000, 40000)
        groups[:20000] = np.arange(20000)
        graph = contract_graph(WeightedGraph(matrix.indptr, matrix.indices, matrix.data),
                               groups, 20000, keep_diagonal=False)
        membership = scipy.sparse.csr_array(
            (np.ones(40000), (np.arange(40000), groups)), shape=(40000, 20000))
        expected = (membership.T @ matrix @ membership).tolil()
        expected.setdiag(0)
        expected = scipy.sparse.csr_array(expected)
        assert abs(scipy_graph(graph) - expected).max() <= 1e-12
        assert_sorted_distinct_rows(graph)

    def test_weighted_graph_errors(self):
        matrix = random_graph(6, 0.5, 0)
        p, i, w = matrix.indptr, matrix.indices, matrix.data
        with pytest.raises(TypeError, match=re.escape("coupling_graph: magnitudes must be real")):
            coupling_graph(p, i, w[1:])
        with pytest.raises(ValueError, match=re.escape(
                "coupling_graph: indices must be columns in [0, 6)")):
            coupling_graph(p, i + 6, w)
        graph = WeightedGraph(p, i, w)
        with pytest.raises(ValueError, match=re.escape(
                "contract_graph: groups must lie in [0, 2), got values from 0 to 5")):
            contract_graph(graph, np.arange(6), 2, keep_diagonal=True)
        with pytest.raises(TypeError, match=re.escape("contract_graph: groups must be (6,)")):
            contract_graph(graph, np.arange(5), 6, keep_diagonal=True)


# ----------------------------------------------------------------------------------------
# spgemm_symbolic and csr_product_values


def reference_pattern(a, b):
    """C's pattern from the definition: the distinct (row, column) pairs of the products
    ``A[i, j] B[j, l]`` of stored entries, sorted; and the number of products."""
    m, p = a.shape[0], b.shape[1]
    lengths = np.diff(b.indptr)[a.indices]
    t = np.repeat(np.arange(a.nnz), lengths)
    group_starts = np.cumsum(lengths) - lengths
    s = np.repeat(b.indptr[a.indices] - group_starts, lengths) + np.arange(t.size)
    rows = np.repeat(np.arange(m), np.diff(a.indptr))[t]
    entries = np.unique(rows.astype(np.int64) * p + b.indices[s])
    indptr = np.concatenate([[0], np.cumsum(np.bincount(entries // p, minlength=m))])
    return indptr, entries % p, t.size


def check_spgemm(a, b):
    """spgemm_symbolic's pattern is the reference's; the product on it is SciPy's."""
    c = check_csr_product(csr_product_values, spgemm_symbolic, CPU, a, b)
    indptr, indices, n_products = reference_pattern(a, b)
    np.testing.assert_array_equal(c.indptr, indptr)
    np.testing.assert_array_equal(c.indices, indices)
    assert c.n_products == n_products and c.indptr.dtype == np.int32
    return c


def shuffled_rows(matrix, seed):
    """``matrix`` with each row's entries in a random storage order."""
    rng = np.random.default_rng(seed)
    matrix = matrix.copy()
    for i in range(matrix.shape[0]):
        row = slice(matrix.indptr[i], matrix.indptr[i + 1])
        order = rng.permutation(matrix.indptr[i + 1] - matrix.indptr[i])
        matrix.indices[row], matrix.data[row] = matrix.indices[row][order], matrix.data[row][order]
    return matrix


class TestSpgemmSymbolic:
    @pytest.mark.parametrize(("m", "n", "p", "density"),
                             [(20, 30, 25, 0.1), (40, 10, 50, 0.3), (7, 100, 3, 0.05),
                              (30, 30, 30, 0.0),
                              (9000, 50, 40, 0.05)])  # rows in several blocks of threads
    def test_spgemm_symbolic_against_reference(self, m, n, p, density):
        for seed in range(3):
            a = random_csr((m, n), np.float64, density, seed, empty_rows=(0,))
            b = random_csr((n, p), np.float64, density, seed + 10, empty_rows=(n - 1,))
            check_spgemm(a, b)
            check_spgemm(shuffled_rows(a, seed), shuffled_rows(b, seed))

    def test_spgemm_symbolic_one_by_one_and_empty(self):
        one = scipy.sparse.csr_matrix(np.full((1, 1), 2.0))
        c = check_spgemm(one, one)
        assert c.indices.tolist() == [0] and c.n_products == 1
        empty = scipy.sparse.csr_matrix((0, 4))
        c = check_spgemm(empty, random_csr((4, 3), np.float64))
        assert c.indptr.tolist() == [0] and c.n_products == 0

    @pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
    def test_csr_product_values_in_every_dtype_on_many_threads(self, dtype):
        use_dtype(dtype)
        # 3000 rows of ~60 products: several blocks of threads
        a = random_csr((3000, 200), dtype, 0.03, empty_rows=(0, 2999))
        check_csr_product(csr_product_values, spgemm_symbolic, CPU, a,
                          random_csr((200, 300), dtype, 0.01, seed=4, empty_rows=(5,)))

    @pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
    def test_csr_product_values_under_vmap_is_one_call(self, dtype):
        check_csr_product_vmap(csr_product_values, spgemm_symbolic, CPU,
                               random_csr((40, 30), dtype, 0.2, empty_rows=(3,)),
                               random_csr((30, 25), dtype, 0.2, seed=3))

    @pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
    def test_spgemm_host_is_the_pattern_and_the_cpu_products_values(self, dtype):
        use_dtype(dtype)
        for a, b in [  # several blocks of threads; shuffled rows; one long row of C
                (random_csr((9000, 200), dtype, 0.03, empty_rows=(0,)),
                 random_csr((200, 300), dtype, 0.01, seed=4, empty_rows=(5,))),
                (shuffled_rows(random_csr((40, 30), dtype, 0.2), 1),
                 shuffled_rows(random_csr((30, 25), dtype, 0.2, seed=3), 2)),
                (scipy.sparse.csr_matrix(np.ones((1, 2), dtype)),
                 scipy.sparse.csr_matrix((np.arange(5000, dtype=dtype),
                                          (np.arange(5000) % 2, np.arange(5000))),
                                         shape=(2, 5000)))]:
            c, values = spgemm_host(a.data, a.indptr, a.indices, b.data, b.indptr, b.indices,
                                    b.shape[1])
            symbolic = spgemm_symbolic(a.indptr, a.indices, b.indptr, b.indices, b.shape[1])
            for ours, theirs in zip(c, symbolic):
                np.testing.assert_array_equal(ours, theirs)
            assert values.dtype == dtype and values.shape == c.indices.shape
            np.testing.assert_array_equal(values, csr_product_values(
                *product_operands(CPU, a, b, c.indptr, c.indices), n_cols=b.shape[1]))

    def test_spgemm_host_errors(self):
        a = random_csr((4, 3), np.float64, 0.5)
        with pytest.raises(ValueError, match="spgemm_host: A and B must have one dtype, got"
                                             " float64 and float32"):
            spgemm_host(a.data, a.indptr, a.indices, a.data.astype(np.float32), a.indptr,
                        a.indices, 3)
        with pytest.raises(TypeError, match="spgemm_host: a_values must be float32"):
            spgemm_host(a.indices, a.indptr, a.indices, a.data, a.indptr, a.indices, 3)
        with pytest.raises(ValueError, match=re.escape(
                f"spgemm_host: b_values must have shape ({a.nnz},), got (2,)")):
            spgemm_host(a.data, a.indptr, a.indices, a.data[:2], a.indptr, a.indices, 3)

    def test_csr_product_values_one_long_row(self, x64):
        # A = [1, 1] times B with two rows making one row of 70000 columns in C.
        a = scipy.sparse.csr_matrix(np.ones((1, 2)))
        columns = np.arange(70000)
        b = scipy.sparse.csr_matrix((np.arange(70000.0), (columns % 2, columns)),
                                    shape=(2, 70000))
        check_spgemm(a, b)

    def test_csr_product_values_rejects_a_product_outside_the_pattern(self, x64):
        a = random_csr((30, 20), np.float64, 0.2)
        b = random_csr((20, 25), np.float64, 0.2, seed=3)
        indptr, indices, _ = product_missing_a_column(spgemm_symbolic, a, b)
        with pytest.raises(Exception, match="a product's column is not in its row of C"):
            jax.block_until_ready(csr_product_values(
                *product_operands(CPU, a, b, indptr, indices), n_cols=25))
        good = spgemm_symbolic(a.indptr, a.indices, b.indptr, b.indices, 25)
        bad_indptr = good.indptr.copy()
        bad_indptr[3] = bad_indptr[4] + 1  # decreasing
        with pytest.raises(Exception, match="row pointers must run from 0"):
            jax.block_until_ready(csr_product_values(
                *product_operands(CPU, a, b, bad_indptr, good.indices), n_cols=25))

    def test_spgemm_symbolic_galerkin_product_poisson_3d_64(self):
        """A P and Pᵀ (A P) for the pairwise aggregates of a 64³ Poisson matrix."""
        a = poisson(64, 3)
        aggregate, count = aggregate_pairs(a.indptr, a.indices, -a.data)
        p = scipy.sparse.csr_matrix((np.ones(a.shape[0]), (np.arange(a.shape[0]), aggregate)))
        ap = check_spgemm(a, p)
        coarse = check_spgemm(p.T.tocsr(), (a @ p).tocsr())
        assert ap.n_products == a.nnz and coarse.indptr.size == count + 1

    def test_spgemm_symbolic_refuses_more_than_int32_products(self):
        # One row of A with 2^17 entries, all selecting B's row of 2^14 + 1 entries.
        a_indptr = np.array([0, 2**17], np.int32)
        b_indptr = np.array([0, 2**14 + 1], np.int32)
        with pytest.raises(ValueError, match=re.escape(
                f"spgemm_symbolic: A B has {2**17 * (2**14 + 1)} scalar products, more than "
                "2**31 - 1")):
            spgemm_symbolic(a_indptr, np.zeros(2**17, np.int32), b_indptr,
                            np.arange(2**14 + 1, dtype=np.int32), 2**14 + 1)

    def test_spgemm_symbolic_errors(self):
        a, b = random_csr((5, 4), np.float64, 0.5), random_csr((4, 6), np.float64, 0.5)

        def raises(error, message, *args):
            with pytest.raises(error, match=re.escape(f"spgemm_symbolic: {message}")):
                spgemm_symbolic(*args)

        raises(ValueError, "a_indices must be columns in [0, 3)",
               a.indptr, a.indices, b.indptr[:-1], b.indices[:b.indptr[-2]], 6)
        raises(ValueError, "b_indices must be columns in [0, 5)",
               a.indptr, a.indices, b.indptr, b.indices, 5)
        raises(ValueError, "p must be an integer in [0, 2**31), got p=-1",
               a.indptr, a.indices, b.indptr, b.indices, -1)
        raises(ValueError, "b_indptr must run from 0 to len(b_indices)",
               a.indptr, a.indices, b.indptr, b.indices[1:], 6)


class TestInterpolationWeights:
    """Classical AMG's weights kernel on the CPU (the numeric re-setup's)."""

    @pytest.mark.parametrize("truncated", [False, True], ids=["full", "truncated"])
    @pytest.mark.parametrize("interpolator", ["D1", "D2"])
    @pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
    def test_weights_are_the_hosts(self, dtype, interpolator, truncated):
        check_interpolation_weights(interpolation_weights, CPU, dtype, interpolator, truncated)

    @pytest.mark.parametrize("truncated", [False, True], ids=["full", "truncated"])
    def test_a_row_longer_than_a_byte_reaches_takes_offsets_of_two(self, truncated, x64):
        matrix = long_row_matrix()
        pattern, structure = interpolation_level(matrix, "D2", truncated)
        plan = structure.plan
        assert plan.triple_targets.dtype == np.uint16 and not structure.coarse[0]
        assert plan.pair_offsets[plan.pair_indptr[0]:plan.pair_indptr[1]].max() > 255
        operands, sizes = interpolation_operands(CPU, matrix, pattern, structure)
        np.testing.assert_array_equal(np.asarray(interpolation_weights(*operands, **sizes)),
                                      _classical.host_values(structure, pattern, matrix.data))
        numpy = _classical.interpolation_values(
            np, _classical.host_arrays(structure), structure.full.nnz, matrix.data,
            pattern.row_ids, pattern.indices, matrix.data[pattern.diagonal_positions()],
            structure.p.indptr)
        np.testing.assert_array_equal(numpy, structure.values)

    def test_rejects_a_plan_that_sends_a_value_outside_its_row(self, x64):
        matrix = interpolation_matrix(8, np.float64)
        pattern, structure = interpolation_level(matrix, "D2", truncated=False)
        plan, _ = plan_sending_outside_a_row(structure)
        operands, sizes = interpolation_operands(CPU, matrix, pattern, structure, plan)
        with pytest.raises(Exception, match="sends a value outside its row of P"):
            jax.block_until_ready(interpolation_weights(*operands, **sizes))
        arrays = _classical.host_arrays(structure)
        # A triple's entry past the end of its row of A (the plan's offsets are uint8).
        offsets = arrays.triple_offsets.copy()
        offsets[0] = 200
        operands, sizes = interpolation_operands(CPU, matrix, pattern, structure,
                                                 arrays._replace(triple_offsets=offsets))
        with pytest.raises(Exception, match="reads an entry outside its row of A"):
            jax.block_until_ready(interpolation_weights(*operands, **sizes))
        operands, sizes = interpolation_operands(CPU, matrix, pattern, structure)
        decreasing = np.asarray(operands[7]).copy()  # the pairs' row pointers
        decreasing[1] = decreasing[2] + 1
        with pytest.raises(Exception, match="row pointers must run from 0"):
            jax.block_until_ready(interpolation_weights(
                *operands[:7], jnp.asarray(decreasing), *operands[8:], **sizes))

    @pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
    def test_truncated_values_are_the_numpy_formulas(self, dtype):
        from jaxsolve.sparse import _classical

        use_dtype(dtype)
        weights_of = random_csr((20000, 40), dtype, 0.1, empty_rows=(0, 7, 19999))
        indptr, weights = weights_of.indptr.astype(np.int32), weights_of.data
        kept = _classical_kernels.truncation(indptr, weights, 0.5, 3)
        kept_indptr, keep, kept_indices = _classical_kernels.kept_pattern(
            indptr, weights_of.indices.astype(np.int32), kept)
        np.testing.assert_array_equal(keep, np.flatnonzero(kept))
        np.testing.assert_array_equal(kept_indptr, np.searchsorted(keep, indptr))
        np.testing.assert_array_equal(kept_indices, weights_of.indices[keep])
        assert 0 < keep.size < weights.size
        ours = _classical_kernels.truncated_values(indptr, weights, keep, kept_indptr)
        numpy = _classical._truncated(np, weights, indptr, keep)
        if np.iscomplexobj(weights):
            np.testing.assert_allclose(ours, numpy, rtol=4 * np.finfo(dtype).eps)
        else:
            np.testing.assert_array_equal(ours, numpy)
        with pytest.raises(ValueError, match="keep must select weights of each row's own"):
            _classical_kernels.truncated_values(indptr, weights, np.roll(keep, 1), kept_indptr)
