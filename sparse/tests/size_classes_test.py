"""Size classes: a kept hierarchy is padded so that a new pattern of similar size reuses the
compiled solve, and the padding changes no iteration (see ``_size_classes.py``)."""

import collections
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
from jaxsolve_testing import counted_compilations
from similar_patterns import poisson3d, similar_matrices, with_extra_couplings

from jaxsolve import sparse
from jaxsolve.sparse import (_cycle, _hierarchy, _padded_setup, _setup, _size_classes, _solve,
                             _structure_key, matrices)
from jaxsolve.sparse._csr_arrays import CsrStructure
from jaxsolve.sparse._default_method import method_for


def test_size_classes_round_up_by_less_than_a_quarter():
    sizes = np.arange(1, 5000)
    classes = np.array([_size_classes.size_class(int(n)) for n in sizes])
    assert np.all(classes >= sizes) and np.all(np.diff(classes) >= 0)
    assert np.all(classes[sizes > 4] < 1.25 * sizes[sizes > 4])
    for c in set(classes.tolist()):  # q · 2ᵉ, q in 4…7: four classes an octave
        shift = c.bit_length() - 3
        assert c >> shift in (4, 5, 6, 7) and c == (c >> shift) << shift, c
    assert all(_size_classes.size_class(n, 3) % 3 == 0 and _size_classes.size_class(n, 3) >= n
               for n in range(3, 300, 3))


def fake_levels(rows, nonzeros, p_nonzeros):
    """Level structures of these sizes (what `class_shape` reads of them), the coarsest's
    pattern last."""
    def pattern(n, nnz):
        return types.SimpleNamespace(n_rows=n, nnz=nnz)

    levels = [types.SimpleNamespace(a=pattern(rows[i], nonzeros[i]),
                                    p=pattern(rows[i], p_nonzeros[i]),
                                    r=pattern(rows[i + 1], p_nonzeros[i]), block_dim=1,
                                    columns=1)
              for i in range(len(rows) - 1)]
    return levels, pattern(rows[-1], nonzeros[-1])


def test_a_hierarchy_takes_a_shape_in_use_that_fits_it():
    rows, nonzeros, p_nonzeros = [100003, 20011, 3001, 97], [700001, 300007, 60013, 4001], [
        150001, 30011, 4513]
    shape = _size_classes.class_shape(*fake_levels(rows, nonzeros, p_nonzeros), 1)
    assert shape.levels[0].rows == rows[0] and shape.levels[0].a_nnz == nonzeros[0]
    padded = [level.rows for level in shape.levels] + [shape.coarsest[0]]
    assert all(n < k < 1.5 * n + 4 for n, k in zip(rows[1:], padded[1:]))
    # coarse levels 5 % smaller or 4 % larger: the same shape, though the smaller one's
    # own classes (of a finest size seen first, nonzeros + 1) are smaller
    for factor in (0.95, 1.04):
        coarse = ([int(n * factor) for n in rows[1:]], [int(n * factor) for n in nonzeros[1:]],
                  [int(n * factor) for n in p_nonzeros])
        similar = fake_levels(rows[:1] + coarse[0], nonzeros[:1] + coarse[1], coarse[2])
        assert _size_classes.class_shape(*similar, 1) == shape
        if factor < 1:
            own = fake_levels(rows[:1] + coarse[0], [nonzeros[0] + 1] + coarse[1], coarse[2])
            assert sum(_size_classes._sizes(_size_classes.class_shape(*own, 1))) < sum(
                _size_classes._sizes(shape))
    # a third of the size: a shape of its own, not three times larger than it
    smaller = fake_levels(rows[:1] + [n // 3 for n in rows[1:]],
                          nonzeros[:1] + [n // 3 for n in nonzeros[1:]],
                          [n // 3 for n in p_nonzeros])
    assert _size_classes.class_shape(*smaller, 1) != shape


@pytest.fixture
def fresh_shapes(monkeypatch):
    """No shape handed out yet (none of an earlier test's to take), nor color shape."""
    monkeypatch.setattr(_size_classes, "_SHAPES", collections.OrderedDict())
    monkeypatch.setattr(_size_classes, "_COLORS", collections.OrderedDict())


def test_small_sizes_have_room_for_a_similar_pattern_either_way(fresh_shapes):
    # 24³ default AMG's sizes for a pattern of eight extra couplings (seed 1 of the bench)
    rows, nonzeros, p_nonzeros = ([13824, 6912, 1084, 148], [93328, 121134, 46286, 6952],
                                  [34556, 24396, 3890])
    shape = _size_classes.class_shape(*fake_levels(rows, nonzeros, p_nonzeros), 1)
    assert all(n <= k < 1.5 * n + 4 for n, k in zip(
        _size_classes._sizes(_size_classes.true_shape(*fake_levels(rows, nonzeros,
                                                                   p_nonzeros))),
        _size_classes._sizes(shape)))
    # Another's coarsest level (seed 2): 29 % more rows, 37 % more nonzeros. The small
    # sizes' room (6 / 5, and up to 2 × for a smaller pattern) holds it, and one 20 %
    # smaller; the first coarse level, not small, takes no pattern 30 % smaller.
    for coarsest in [(191, 9547), (118, 5562)]:
        other = fake_levels(rows[:3] + [coarsest[0]], nonzeros[:3] + [coarsest[1]], p_nonzeros)
        assert _size_classes.class_shape(*other, 1) == shape
    smaller = fake_levels([13824, 4838] + rows[2:], [93328, 84794] + nonzeros[2:], p_nonzeros)
    assert _size_classes.class_shape(*smaller, 1) != shape
    assert len(_size_classes._SHAPES[((13824, 93328), (1,) * 4, None)]) == 2


def test_the_coarsest_rows_get_a_sixteenth_more_at_least_48(fresh_shapes):
    # Its dense inverse costs rows² memory and rows³ LU work in every numeric setup: 24³
    # smoothed aggregation with min_coarse_rows 2000 has a coarsest level of 1724 rows
    # (small: a size class of 6 / 5 of it would be 2560 rows, 3.3 × the LU work).
    shape = _size_classes.class_shape(*fake_levels([13824, 1724], [93328, 51014], [52479]), 1)
    assert shape.coarsest[0] == 1840  # 1724 + 107, to a multiple of 16
    # The default's 148 rows: room for the 191 of a similar pattern
    levels = fake_levels([13824, 6912, 1084, 148], [93328, 121134, 46286, 6952],
                         [34556, 24396, 3890])
    assert _size_classes.class_shape(*levels, 1).coarsest[0] == 208


def structure_of(n, couplings, seed, amg):
    a = with_extra_couplings(poisson3d(n), n, couplings, seed)
    config = _setup.amg_config(sparse.parse_amgx_config({"preconditioner": amg}))
    return _hierarchy.build_structure(CsrStructure(a.indptr.astype(np.int32),
                                                   a.indices.astype(np.int32), n**3),
                                      a.data, 1, config)


@pytest.mark.parametrize(("n", "couplings", "seeds", "amg"), [
    (24, 8, (1, 2), {}),  # the bench's default: a coarsest level 29 % larger (rows)
    (13, 6, (5, 4), {"selector": "PMISC", "aggressive_levels": 1}),  # 19 % fewer dropped
], ids=["default 24", "PMISC + aggressive 13"])
def test_similar_patterns_take_one_shape(x64, fresh_shapes, n, couplings, seeds, amg):
    # Hierarchies of two patterns of one size, whose small sizes differ by a fifth or more:
    # one shape, so one compiled solve and one compiled numeric setup serve both.
    first, second = (structure_of(n, couplings, seed, amg) for seed in seeds)
    assert (_size_classes.true_shape(first.levels, first.coarsest)
            != _size_classes.true_shape(second.levels, second.coarsest))
    assert second.shape == first.shape and second.padded_setup == first.padded_setup
    assert sum(len(shapes) for shapes in _size_classes._SHAPES.values()) == 1


NEW_PATTERN_CONFIGS = {
    "default": {},
    "PMISC + 1 aggressive": {"preconditioner": {"solver": "AMG", "algorithm": "CLASSICAL",
                                                "selector": "PMISC", "aggressive_levels": 1}},
    "PMISC + 1 aggressive, two D2 stages": {"preconditioner": {
        "solver": "AMG", "algorithm": "CLASSICAL", "selector": "PMISC", "aggressive_levels": 1,
        "aggressive_interpolator": "D2"}},
    "smoothed aggregation": {"preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION",
                                                "jaxsolve_smoothed_aggregation": 1,
                                                "min_coarse_rows": 8}},
}


@pytest.mark.parametrize("amg", list(NEW_PATTERN_CONFIGS.values()), ids=list(NEW_PATTERN_CONFIGS))
def test_a_new_pattern_of_similar_size_reuses_the_compiled_solve(x64, amg):
    n = 12
    first, second = (with_extra_couplings(poisson3d(n), n, 8, seed) for seed in (1, 2))
    assert first.nnz == second.nnz and (first != second).nnz > 0
    b = jnp.asarray(np.random.default_rng(0).standard_normal(n**3))
    config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 100, **amg}
    sparse.clear_cache()
    x, info = sparse.solve(first, b, config=config)
    assert info.status == sparse.Status.SUCCESS
    programs = _solve._solve_columns_reporting._cache_size()
    with counted_compilations() as count:
        y, info = sparse.solve(second, b, config=config)
        jax.block_until_ready(y)
    assert info.status == sparse.Status.SUCCESS
    # Neither the numeric setup nor the solve compiles for the new pattern.
    assert _solve._solve_columns_reporting._cache_size() == programs
    assert count[0] == 0
    # ... although the two hierarchies differ in size
    sizes = [sparse.describe(a, config) for a in (first, second)]
    assert (sizes[0].rows, sizes[0].nonzeros) != (sizes[1].rows, sizes[1].nonzeros)
    assert float(jnp.linalg.norm(second @ np.asarray(y) - b)) <= 1e-8 * float(
        jnp.linalg.norm(b))


@pytest.mark.parametrize("amg", list(NEW_PATTERN_CONFIGS.values()), ids=list(NEW_PATTERN_CONFIGS))
def test_a_pattern_with_other_finest_nonzeros_reuses_the_compiled_solve(x64, amg):
    # The finest level is padded too: a pattern of the same rows and a few more nonzeros
    # (a refined coupling, a grown Jacobian) runs the numeric setup and the solve compiled
    # for the first, and compiles nothing else either (its values are checked and padded
    # on the host, where the setup copies them, and keyed by a digest of the class); it
    # iterates as its own unpadded hierarchy does (set up and solved inside a caller's
    # jit, at its true sizes).
    n = 12
    first, second = (with_extra_couplings(poisson3d(n), n, k, seed)
                     for k, seed in ((8, 1), (12, 2)))
    assert first.nnz < second.nnz
    first, second = sparse.as_csr(first), sparse.as_csr(second)
    b = jnp.asarray(np.random.default_rng(0).standard_normal(n**3))
    config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 100, **amg}
    sparse.clear_cache()
    jax.block_until_ready(sparse.solve(first, b, config=config))
    solves = _solve._solve_columns_reporting._cache_size()
    setups = len(_padded_setup.PROGRAMS)
    with counted_compilations() as count:  # nor the checks, the key, the padding
        x, info = sparse.solve(second, b, config=config)
        jax.block_until_ready(x)
    assert count[0] == 0
    assert info.status == sparse.Status.SUCCESS and x.shape == b.shape
    assert _solve._solve_columns_reporting._cache_size() == solves
    assert len(_padded_setup.PROGRAMS) == setups
    y, traced = jax.jit(lambda values: sparse.solve(second.with_values(values), b,
                                                    config=config))(second.values)
    assert int(info.iterations) == int(traced.iterations) > 3
    np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)


def programs_of_the_second_solve(first, second, b, config, x0=None):
    """The programs XLA compiles for ``second``'s solve after ``first``'s (from ``x0``),
    from an empty setup cache, and the second solve's info."""
    sparse.clear_cache()
    jax.block_until_ready(sparse.solve(first, b, x0, config=config))
    with counted_compilations() as count:
        x, info = sparse.solve(second, b, x0, config=config)
        jax.block_until_ready(x)
    return count[0], info


@pytest.mark.parametrize("preconditioner", [
    {"solver": "AMG"}, {"solver": "BLOCK_JACOBI"},
], ids=["amg", "jacobi"])
def test_a_new_patterns_solve_from_an_initial_guess_compiles_nothing(x64, preconditioner):
    # The initial residual b − A x0 is formed by the matrix padded to its size classes, as
    # the solve takes it: cut to the pattern's own nonzeros, it compiled five small programs
    # for each new pattern's.
    n = 10
    first, second = similar_matrices(n, (6, 1), (8, 2))
    assert first.nnz < second.nnz
    b = jnp.ones(n**3, jnp.float64)
    x0 = jnp.linspace(0.0, 1.0, n**3)
    config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 200,
              "preconditioner": preconditioner}
    compiled, info = programs_of_the_second_solve(first, second, b, config, x0)
    assert compiled == 0 and info.status == sparse.Status.SUCCESS
    x = sparse.solve(second, b, x0, config=config)[0]
    residual = b - scipy.sparse.csr_array((np.asarray(second.values), second.indices,
                                           second.indptr), shape=second.shape) @ np.asarray(x)
    assert np.linalg.norm(residual) <= 1e-7 * np.linalg.norm(b)


def test_a_small_patterns_setup_arrays_are_padded_to_few_setup_entries(x64):
    # At 8³ the numeric setup's index arrays of two patterns with eight couplings more
    # differ by up to 1.25 × (367 and 458 entries), past the 17 / 16 room a new size
    # class gives; padded to FEW_SETUP_ENTRIES, the second compiles no numeric setup.
    n = 8
    first, second = similar_matrices(n, (8, 1), (8, 2))
    b = jnp.ones(n**3, jnp.float64)
    config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 100,
              **NEW_PATTERN_CONFIGS["PMISC + 1 aggressive"]}
    compiled, info = programs_of_the_second_solve(first, second, b, config)
    assert compiled == 0 and info.status == sparse.Status.SUCCESS


@pytest.mark.parametrize("amg", list(NEW_PATTERN_CONFIGS.values())[:2],
                         ids=list(NEW_PATTERN_CONFIGS)[:2])
def test_a_one_level_hierarchys_nonzeros_are_padded(x64, amg):
    # 6³ = 216 rows, no more than the default's min_coarse_rows (256): the hierarchy is
    # the finest level alone, solved by the coarsest solver. Its nonzeros are padded as a
    # finest level's, so a pattern with more of them compiles nothing.
    n = 6
    first, second = similar_matrices(n, (4, 1), (8, 2))
    assert first.nnz < second.nnz
    b = jnp.ones(n**3, jnp.float64)
    config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 100, **amg}
    assert len(sparse.describe(first, config).rows) == 1
    compiled, info = programs_of_the_second_solve(first, second, b, config)
    assert compiled == 0 and info.status == sparse.Status.SUCCESS


def test_the_default_method_chooses_for_a_new_pattern_without_compiling(x64):
    # The configuration leaves the Krylov method to jaxsolve, which tests the values for
    # symmetry (PCG or PBICGSTAB): by NumPy where they are in host memory, so that a
    # pattern with other nonzeros compiles nothing for the test either.
    n = 12
    first, second = similar_matrices(n, (8, 1), (12, 2))
    b = jnp.ones(n**3, jnp.float64)
    config = {"tolerance": 1e-8, "max_iters": 100}
    compiled, info = programs_of_the_second_solve(first, second, b, config)
    assert compiled == 0 and info.status == sparse.Status.SUCCESS
    assert method_for(sparse.parse_amgx_config(config), second).solver == "PCG"


@pytest.mark.parametrize("preconditioner", [
    "NOSOLVER", {"solver": "BLOCK_JACOBI"}, {"solver": "BLOCK_JACOBI", "relaxation_factor": 0.8},
    {"solver": "JACOBI_L1"}, {"solver": "CHEBYSHEV_POLY", "max_iters": 1},
    {"solver": "MULTICOLOR_GS", "max_iters": 1}, {"solver": "MULTICOLOR_DILU", "max_iters": 1},
], ids=["cg", "jacobi-estimated", "jacobi-given", "l1-jacobi", "chebyshev", "multicolor-gs",
        "multicolor-dilu"])
def test_a_solve_without_amg_reuses_its_program_for_a_pattern_of_the_same_rows(
        x64, preconditioner):
    # Without AMG the matrix's nonzeros are padded to a size class (its rows are not): a
    # pattern of the same rows and a few more nonzeros runs the programs compiled for the
    # first (before: the relaxation's setup and the solve, compiled again; 0.55 s on two
    # CPU cores at 16³), and iterates as the unpadded matrix does (traced, at its sizes).
    n = 12
    first, second = similar_matrices(n, (8, 1), (12, 2))
    assert first.nnz < second.nnz
    b = jnp.asarray(np.random.default_rng(0).standard_normal(n**3))
    config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 300,
              "preconditioner": preconditioner}
    compiled, info = programs_of_the_second_solve(first, second, b, config)
    # (a GPU pads the values by a program compiled once per size)
    assert compiled == 0 if jax.default_backend() == "cpu" else compiled <= 1
    assert info.status == sparse.Status.SUCCESS
    x, _ = sparse.solve(second, b, config=config)
    y, traced = jax.jit(lambda values: sparse.solve(second.with_values(values), b,
                                                    config=config))(second.values)
    assert int(info.iterations) == int(traced.iterations) > 3
    np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)
    # the preconditioner made for export holds A's own matrix
    exported = sparse.make_preconditioner(second, preconditioner if isinstance(
        preconditioner, dict) else {"solver": preconditioner})
    assert exported.matrix.indices.shape == second.indices.shape


def poisson2d(nx: int, ny: int) -> scipy.sparse.csr_array:
    """The 5-point Poisson matrix on an ``nx × ny`` grid."""
    def line(n):
        return scipy.sparse.diags_array([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)],
                                        offsets=[-1, 0, 1])
    a = scipy.sparse.csr_array(scipy.sparse.kron(line(nx), scipy.sparse.eye_array(ny))
                               + scipy.sparse.kron(scipy.sparse.eye_array(nx), line(ny)))
    a.sort_indices()
    return a


def test_a_grid_with_a_few_more_rows_reuses_the_compiled_solve(x64):
    # A remeshed domain of 2.5 % more rows: b is padded and x cut back to their own rows
    # (on the host, on a CPU), the programs of the first grid's class serve, and the
    # iterations and x are those of the grid's own unpadded hierarchy.
    first, second = sparse.as_csr(poisson2d(40, 40)), sparse.as_csr(poisson2d(40, 41))
    config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 100}
    sparse.clear_cache()
    jax.block_until_ready(sparse.solve(first, jnp.ones(1600), config=config))
    b = jnp.asarray(np.random.default_rng(3).standard_normal(1640))
    with counted_compilations() as count:
        x, info = sparse.solve(second, b, config=config)
        jax.block_until_ready(x)
    # (a GPU pads b and cuts x by a program compiled once per size)
    assert count[0] == 0 if jax.default_backend() == "cpu" else count[0] <= 2
    assert info.status == sparse.Status.SUCCESS and x.shape == (1640,)
    y, traced = jax.jit(lambda values: sparse.solve(second.with_values(values), b,
                                                    config=config))(second.values)
    assert int(info.iterations) == int(traced.iterations) > 3
    np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)


def test_a_reuse_setup_solve_pads_a_values_once_for_the_matrix_and_the_kept_hierarchy(x64):
    # The kept hierarchy's finest pattern is padded to the class, but it keeps A's own
    # values, unpadded: no second copy of them. A reuse_setup solve with the same A pads
    # them once, for the matrix and the hierarchy's finest operator both, runs the program
    # compiled for the class and computes what the solve that set up computed, bit for bit.
    a = sparse.as_csr(poisson2d(30, 30))
    config = sparse.parse_amgx_config({"solver": "PCG"})
    b = jnp.asarray(np.random.default_rng(5).standard_normal(900))
    sparse.clear_cache()
    x, info = sparse.solve(a, b, config=config)
    system = _setup.System.for_matrix(a, config, None, reuse_setup=True, check=True)
    _, numbers = system.setup
    assert numbers.finest.values is a.values
    matrix, padded = system.operators(a.values, system.state())
    assert matrix.values.shape[0] == numbers.finest.indices.shape[0] > a.nnz
    assert padded.finest.values is matrix.values
    assert padded.levels[1] is numbers.levels[1] and padded.coarsest is numbers.coarsest
    # other values on the pattern are padded anew; the hierarchy's stay A's
    other, kept = system.operators(2 * a.values, system.state())
    np.testing.assert_array_equal(other.values[:a.nnz], 2 * a.values)
    np.testing.assert_array_equal(kept.finest.values, matrix.values)
    with counted_compilations() as count:
        y, again = sparse.solve(a, b, config=config, reuse_setup=True)
        jax.block_until_ready(y)
    assert count[0] == 0 if jax.default_backend() == "cpu" else count[0] <= 1
    assert int(again.iterations) == int(info.iterations) > 3
    np.testing.assert_array_equal(y, x)


CONFIGS = {
    "classical": {},
    "aggregation, W, Chebyshev": {"algorithm": "AGGREGATION", "jaxsolve_smoothed_aggregation": 1,
                                  "cycle": "W", "smoother": "CHEBYSHEV_POLY",
                                  "min_coarse_rows": 8},
    "F, l1-Jacobi, smoothed coarsest": {"cycle": "F", "smoother": "JACOBI_L1",
                                        "coarse_solver": "NOSOLVER", "min_coarse_rows": 8},
    "CG on the coarsest": {"coarse_solver": {"solver": "CG", "max_iters": 5},
                           "min_coarse_rows": 30},
}


@pytest.mark.parametrize("amg", list(CONFIGS.values()), ids=list(CONFIGS))
def test_the_padded_hierarchy_cycles_as_the_unpadded_one(x64, fresh_shapes, amg):
    a = sparse.as_csr(with_extra_couplings(poisson3d(10), 10, 6, 3))
    config = sparse.parse_amgx_config({"preconditioner": amg})
    system = _setup.System.for_matrix(a, config, None, reuse_setup=False, check=True)
    structure, _ = system.setup
    padded = system.operators(a.values, system.state())[1]  # as the solve takes it
    unpadded = jax.jit(_hierarchy.numeric_setup, static_argnums=0)(
        _setup._without_arrays(structure), structure.arrays, a.values, None)
    true_rows = [level.a.n_rows for level in structure.levels] + [structure.coarsest.n_rows]
    assert [level.a.n_rows for level in unpadded.levels] + [unpadded.coarsest.a.n_rows] == (
        true_rows)
    padded_rows = [level.a.n_rows for level in padded.levels] + [padded.coarsest.a.n_rows]
    assert all(n < k for n, k in zip(true_rows, padded_rows))  # the finest level's too
    # the memory bound of a new shape: every padded array under 1.5 × its true size + 4
    for true, kept in zip(jax.tree.leaves(unpadded), jax.tree.leaves(padded), strict=True):
        assert all(t <= k < 1.5 * t + 4 for t, k in zip(true.shape, kept.shape)), (
            true.shape, kept.shape)
    r = jnp.asarray(np.random.default_rng(1).standard_normal(a.shape[0]))
    z = _cycle.cycle(padded, _size_classes.pad_rows(r, padded_rows[0]))
    np.testing.assert_array_equal(z[true_rows[0]:], 0)  # the padding rows stay zero
    np.testing.assert_allclose(z[:true_rows[0]], _cycle.cycle(unpadded, r),
                               rtol=1e-13, atol=1e-13 * float(jnp.max(jnp.abs(r))))


def test_a_padded_solve_iterates_as_the_unpadded_one(x64):
    # Outside jit the solve's hierarchy is padded; with values traced by a caller's jit it is
    # set up inside that program, unpadded. The iterations are the same.
    a = sparse.as_csr(with_extra_couplings(poisson3d(10), 10, 6, 4))
    b = jnp.asarray(np.random.default_rng(2).standard_normal(a.shape[0]))
    config = {"solver": "PCG", "tolerance": 1e-10, "max_iters": 100}
    sparse.clear_cache()
    x, info = sparse.solve(a, b, config=config)
    y, traced = jax.jit(lambda values: sparse.solve(a.with_values(values), b, config=config))(
        a.values)
    assert int(info.iterations) == int(traced.iterations) > 3
    np.testing.assert_allclose(x, y, rtol=1e-10)


AGGREGATION = {
    "smoothed aggregation": {"algorithm": "AGGREGATION", "jaxsolve_smoothed_aggregation": 1,
                             "min_coarse_rows": 8},
    "unsmoothed aggregation": {"algorithm": "AGGREGATION", "min_coarse_rows": 8},
}


@pytest.mark.parametrize("amg", [{}, {"selector": "PMISC", "aggressive_levels": 1},
                                 {"interpolator": "D1", "interp_max_elements": -1,
                                  "interp_truncation_factor": 0},
                                 {"selector": "PMISC", "aggressive_levels": 1,
                                  "aggressive_interpolator": "D2"},
                                 {"aggressive_levels": 1, "aggressive_interpolator": "D1",
                                  "interp_max_elements": -1, "interp_truncation_factor": 0},
                                 *AGGREGATION.values(), {"smoother": "MULTICOLOR_DILU"},
                                 {**AGGREGATION["smoothed aggregation"],
                                  "smoother": "MULTICOLOR_GS"}],
                         ids=["HMIS D2", "PMISC + aggressive", "D1 untruncated",
                              "PMISC + two D2 stages", "two D1 stages untruncated",
                              *AGGREGATION, "DILU", "smoothed aggregation, multicolor GS"])
def test_the_padded_numeric_setup_computes_the_unpadded_numbers(x64, amg):
    # A classical or aggregation hierarchy's numbers come from the program of its size
    # class, on padded arrays: the weights (T, P) and coarse operators are the per-pattern
    # setup's bit for bit, and so are the multicolor smoothers' data (padded to their
    # level's color shape: chunks, entries and windows); the damping and the coarsest
    # inverse, whose sums also run over the padding's zeros, to rounding. A second
    # pattern of the class sets up without compiling.
    first, second = (sparse.as_csr(with_extra_couplings(poisson3d(10), 10, 6, seed))
                     for seed in (3, 5))
    config = sparse.parse_amgx_config({"preconditioner": amg})
    sparse.clear_cache()
    system = _setup.System.for_matrix(first, config, None, reuse_setup=False, check=True)
    structure, _ = system.setup
    padded = system.operators(first.values, system.state())[1]  # as the solve takes it
    assert structure.padded_setup is not None
    unpadded = jax.jit(_hierarchy.numeric_setup, static_argnums=0)(
        _setup._without_arrays(structure), structure.arrays, first.values, None)
    expected = _hierarchy.padded_hierarchy(unpadded, structure.shape,
                                           _setup.multicolor_paddings(structure))
    for numbers, reference in zip(padded.levels, expected.levels, strict=True):
        for got, want in [(numbers.a, reference.a), (numbers.p, reference.p),
                          (numbers.r, reference.r)]:
            np.testing.assert_array_equal(got.values, want.values)
            np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_allclose(numbers.smoother.scale, reference.smoother.scale,
                                   rtol=1e-14)
        if "smoother" in amg:  # the same shapes and numbers, padding included
            for got, want in zip(jax.tree.leaves(numbers.smoother.multicolor),
                                 jax.tree.leaves(reference.smoother.multicolor), strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_array_equal(padded.coarsest.a.values, expected.coarsest.a.values)
    np.testing.assert_allclose(padded.coarsest.inverse, expected.coarsest.inverse, rtol=0,
                               atol=1e-14 * float(jnp.max(jnp.abs(expected.coarsest.inverse))))
    with counted_compilations() as count:
        other, numbers = _setup.System.for_matrix(second, config, None, reuse_setup=False,
                                                  check=True).setup
        jax.block_until_ready(numbers)
    assert other.padded_setup == structure.padded_setup
    assert other.fingerprint != structure.fingerprint
    assert count[0] == 0


def test_clear_cache_keeps_the_compiled_setups_and_finalize_drops_them(x64, monkeypatch):
    # The size classes' compiled numeric setups hold no arrays: clear_cache() leaves them
    # (a pattern set up again traces, lowers and compiles nothing), finalize() drops them.
    _padded_setup.PROGRAMS.clear()
    lowered = []
    padded_numeric_setup = _setup._padded_numeric_setup

    class CountingLowering:
        def lower(self, *args):
            lowered.append(args)
            return padded_numeric_setup.lower(*args)

    monkeypatch.setattr(_setup, "_padded_numeric_setup", CountingLowering())
    a = sparse.as_csr(with_extra_couplings(poisson3d(8), 8, 4, 1))
    config = sparse.parse_amgx_config({})

    def setup():
        jax.block_until_ready(_setup.System.for_matrix(a, config, None, reuse_setup=False,
                                                       check=True).setup[1])
        return len(lowered)

    sparse.clear_cache()
    assert setup() == 1 and len(_padded_setup.PROGRAMS) == 1
    sparse.clear_cache()
    with counted_compilations() as count:
        assert setup() == 1 and len(_padded_setup.PROGRAMS) == 1
    assert count[0] == 0
    sparse.finalize()
    assert not _padded_setup.PROGRAMS and not _structure_key.DIGESTS
    assert setup() == 2 and len(_padded_setup.PROGRAMS) == 1


@pytest.mark.gpu
@pytest.mark.skipif(not any(d.platform == "gpu" for d in jax.devices()), reason="needs a GPU")
@pytest.mark.parametrize("amg", [{}, {"selector": "PMISC", "aggressive_levels": 1},
                                 {"selector": "PMISC", "aggressive_levels": 1,
                                  "aggressive_interpolator": "D2"},
                                 AGGREGATION["smoothed aggregation"],
                                 {"smoother": "MULTICOLOR_GS"}, {"smoother": "MULTICOLOR_DILU"}],
                         ids=["HMIS D2", "PMISC + aggressive", "PMISC + two D2 stages",
                              "smoothed aggregation", "multicolor GS", "DILU"])
def test_the_padded_numeric_setup_on_a_gpu(x64, amg):
    # The CUDA kernels on padded arrays (row pointers that end before their arrays, plan
    # pairs at A's end): the per-pattern setup's numbers (to rounding: XLA's segment sums
    # on a GPU add in no fixed order), zeros past every last row, and a second pattern of
    # the class sets up without compiling.
    gpu = next(d for d in jax.devices() if d.platform == "gpu")
    first, second = (sparse.as_csr(with_extra_couplings(poisson3d(10), 10, 6, seed))
                     for seed in (3, 5))
    first, second = (a.with_values(jax.device_put(a.values, gpu)) for a in (first, second))
    config = sparse.parse_amgx_config({"preconditioner": amg})
    sparse.clear_cache()
    structure, padded = _setup.System.for_matrix(first, config, None, reuse_setup=False,
                                                 check=True).setup
    arrays = jax.device_put(structure.arrays, gpu)
    expected = _hierarchy.padded_hierarchy(jax.jit(_hierarchy.numeric_setup, static_argnums=0)(
        _setup._without_arrays(structure), arrays, first.values, None), structure.shape,
        _setup.multicolor_paddings(structure))
    for got, want in zip(jax.tree.leaves(padded), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12,
                                   atol=1e-14 * float(np.max(np.abs(np.asarray(want)),
                                                             initial=1)))
    for level in padded.levels:
        for operator in (level.a, level.p, level.r):
            end = int(operator.indptr[-1])
            assert not np.any(np.asarray(operator.values)[end:])
    with counted_compilations() as count:
        _, numbers = _setup.System.for_matrix(second, config, None, reuse_setup=False,
                                              check=True).setup
        jax.block_until_ready(numbers)
    assert count[0] == 0


def elasticity_with_extra_couplings(n: int, k: int, seed: int):
    """2D elasticity on ``n²`` nodes (two unknowns each) plus ``k`` couplings between nodes
    one step apart along ``(1, 1)``, each component's a graph-Laplacian term (whole 2 × 2
    blocks; the matrix stays symmetric positive definite); and the rigid-body modes."""
    a, modes = matrices.elasticity_matrix_2d(n, dtype=jnp.float64)
    a = sparse.as_csr(a)
    a = scipy.sparse.csr_array((np.asarray(a.values), a.indices, a.indptr), shape=a.shape)
    cells = np.random.default_rng(seed).choice((n - 1) ** 2, size=k, replace=False)
    x, y = np.unravel_index(cells, (n - 1,) * 2)
    i = 2 * np.ravel_multi_index((x, y), (n, n))
    j = 2 * np.ravel_multi_index((x + 1, y + 1), (n, n))
    i, j = np.concatenate([i, i + 1]), np.concatenate([j, j + 1])
    weight = 0.5 * float(np.mean(a.diagonal()))
    extra = scipy.sparse.csr_array(
        (np.concatenate([np.full(4 * k, weight), np.full(4 * k, -weight)]),
         (np.concatenate([i, j, i, j]), np.concatenate([i, j, j, i]))), shape=a.shape)
    out = scipy.sparse.csr_array(a + extra)
    out.sort_indices()
    return sparse.as_csr(out), jnp.asarray(modes)


@pytest.mark.parametrize("block_dim", [2, 1], ids=["block system", "scalar system"])
def test_a_new_pattern_with_rigid_body_modes_compiles_nothing(x64, block_dim):
    # Smoothed aggregation with three near-null-space vectors: the numeric setup runs on
    # padded arrays too (coarse rows in whole aggregates of 3 unknowns), so a second
    # pattern of the size runs the programs of the first; it iterates as its own unpadded
    # hierarchy does (set up inside a caller's jit).
    (first, modes), (second, _) = (elasticity_with_extra_couplings(40, 6, seed)
                                   for seed in (1, 2))
    assert first.nnz == second.nnz
    config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 100,
              "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION",
                                 "selector": "SIZE_4", "jaxsolve_smoothed_aggregation": 1,
                                 "smoother": "JACOBI_L1", "min_coarse_rows": 64}}
    b = jnp.asarray(np.random.default_rng(0).standard_normal(first.shape[0]))
    sparse.clear_cache()
    jax.block_until_ready(sparse.solve(first, b, config=config, block_dim=block_dim,
                                       near_nullspace=modes))
    with counted_compilations() as count:
        x, info = sparse.solve(second, b, config=config, block_dim=block_dim,
                               near_nullspace=modes)
        jax.block_until_ready(x)
    assert count[0] == 0
    assert info.status == sparse.Status.SUCCESS
    y, traced = jax.jit(lambda values: sparse.solve(
        second.with_values(values), b, config=config, block_dim=block_dim,
        near_nullspace=modes))(second.values)
    assert int(info.iterations) == int(traced.iterations) > 3
    np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12 * float(jnp.max(jnp.abs(y))))


@pytest.mark.parametrize("smoother", ["MULTICOLOR_GS", "MULTICOLOR_DILU"])
def test_a_new_pattern_with_a_multicolor_smoother_compiles_nothing(x64, fresh_shapes, smoother):
    # The multicolor smoothers' data follow each pattern's coloring: their chunks, L and U
    # and the chunks' windows are padded to a color shape of the level's (empty chunks,
    # zero entries), so a second pattern whose coloring differs (its first coarse level's
    # L has other nonzeros) runs the first's programs; it iterates as its own unpadded
    # hierarchy does (set up inside a caller's jit).
    n = 12
    first, second = similar_matrices(n, (8, 1), (8, 3))
    config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 100,
              "preconditioner": {"solver": "AMG", "smoother": smoother}}
    b = jnp.asarray(np.random.default_rng(0).standard_normal(n**3))
    sparse.clear_cache()
    jax.block_until_ready(sparse.solve(first, b, config=config))
    with counted_compilations() as count:
        x, info = sparse.solve(second, b, config=config)
        jax.block_until_ready(x)
    assert count[0] == 0
    assert info.status == sparse.Status.SUCCESS
    structures = [_setup.System.for_matrix(a, sparse.parse_amgx_config(config), None,
                                           reuse_setup=False, check=True).setup[0]
                  for a in (first, second)]
    assert structures[0].shape == structures[1].shape
    orderings = [structure.levels[1].ordering for structure in structures]
    assert orderings[0].lower.nnz != orderings[1].lower.nnz
    y, traced = jax.jit(lambda values: sparse.solve(second.with_values(values), b,
                                                    config=config))(second.values)
    assert int(info.iterations) == int(traced.iterations) > 3
    np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12 * float(jnp.max(jnp.abs(y))))


def test_a_matrix_of_its_size_class_shares_its_values_with_the_kept_hierarchy(fresh_shapes):
    # The 32 × 32 grid's shape pads its finest level to 1056 rows and 5376 nonzeros: those
    # of a 32 × 33 grid with 113 pairs of explicit zeros between diagonal neighbours, which
    # takes that shape. Nothing to pad: the hierarchy keeps A's own values, no copy.
    def grid(nx: int, ny: int, zeros: int) -> sparse.CsrMatrix:
        def line(m: int) -> scipy.sparse.dia_array:
            return scipy.sparse.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(m, m))

        a = scipy.sparse.kron(line(ny), scipy.sparse.eye(nx)) + scipy.sparse.kron(
            scipy.sparse.eye(ny), line(nx))
        i = np.arange(zeros) + np.arange(zeros) // (nx - 1)  # not past a grid row's end
        a = scipy.sparse.coo_array(a)
        rows, columns = (np.concatenate([a.row, i, i + nx + 1]),
                         np.concatenate([a.col, i + nx + 1, i]))
        values = np.concatenate([a.data, np.zeros(2 * zeros)])
        return sparse.as_csr(scipy.sparse.csr_array((values, (rows, columns)), shape=a.shape))

    config = sparse.parse_amgx_config(None)

    def kept(A: sparse.CsrMatrix):
        return _setup.System.for_matrix(A, config, None, reuse_setup=True, check=True).setup

    sparse.clear_cache()
    sparse.describe(grid(32, 32, 0))
    finest = kept(grid(32, 32, 0))[0].shape.levels[0]
    assert (finest.rows, finest.a_nnz) == (1056, 5376)
    A = grid(32, 33, 113)
    assert (A.shape[0], A.nnz) == (1056, 5376)
    stats = sparse.describe(A)
    structure, numbers = kept(A)
    assert structure.shape.levels[0] == finest
    values = numbers.levels[0].a.values
    assert values is A.values
    assert values.unsafe_buffer_pointer() == A.values.unsafe_buffer_pointer()
    assert "finest values" not in stats.bytes_kept
    # the solve pads nothing either, and converges
    x, info = sparse.solve(A, jnp.ones(A.shape[0]), config=config, reuse_setup=True)
    assert info.status == sparse.Status.SUCCESS and x.shape == (1056,)
    assert kept(A)[1].levels[0].a.values is A.values


def test_the_solve_checks_the_diagonal_of_the_true_rows_of_a_padded_matrix(x64):
    # The solve's check for a zero diagonal reads the structure's finest diagonal
    # positions as they are, no copy of them kept: a padding row's (PADDING_DIAGONAL) is
    # passed over, a zero on a true row's found.
    a = sparse.as_csr(poisson2d(30, 30))
    config = {"solver": "PCG"}
    b = jnp.ones(900)
    sparse.clear_cache()
    x, info = sparse.solve(a, b, config=config)
    assert info.status == sparse.Status.SUCCESS
    system = _setup.System.for_matrix(a, sparse.parse_amgx_config(config), None,
                                      reuse_setup=True, check=True)
    structure, _ = system.setup
    diagonal = structure.arrays.levels[0].diagonal
    assert system.state().diagonal is diagonal and diagonal.shape[0] > 900
    np.testing.assert_array_equal(diagonal[900:], _size_classes.PADDING_DIAGONAL)
    assert not [value for value in vars(structure).values() if isinstance(value, jax.Array)]
    zero = a.with_values(a.values.at[int(a._pattern.diagonal_positions[7])].set(0.0))
    x, info = sparse.solve(zero, b, config=config, reuse_setup=True, check=False)
    assert info.status == sparse.Status.FAILED and int(info.iterations) == 0
    assert sparse.FailureReason(int(info.failure_reason)).name == "ZERO_DIAGONAL"


def test_a_tiny_levels_entries_have_room_for_a_pattern_of_half_as_many(fresh_shapes):
    # 32³ default AMG (tools/bench/sparse_new_pattern.py 32): the grid's sizes, then those
    # of eight extra couplings (seed 1), whose coarsest level of 61 rows (81) has 2255
    # nonzeros (3663): the grid's shape gives it 5120, over 2 × them. The entries of a level
    # of at most 1/64 of the finest rows fit up to 4 × them: the grid's shape serves, and
    # its compiled programs (a new shape compiled two).
    grid = fake_levels([32768, 16384, 2734, 437, 81], [223232, 293056, 112224, 25305, 3663],
                       [81916, 57331, 9624, 1504])
    shape = _size_classes.class_shape(*grid, 1, pad_finest=True)
    assert shape.coarsest == (112, 5120)
    other = fake_levels([32768, 16384, 2575, 368, 61], [223248, 293092, 111801, 20996, 2255],
                        [81916, 57805, 9194, 1286])
    assert _size_classes.class_shape(*other, 1, pad_finest=True) == shape
    # Rows keep a small size's room (the coarsest's dense inverse grows with their square):
    # a coarsest level of 54 rows does not fit 112 (≥ 2 × 54 + 4), nor do 1100 nonzeros.
    for coarsest in [(54, 2255), (61, 1100)]:
        fewer = fake_levels([32768, 16384, 2575, 368, coarsest[0]],
                            [223248, 293092, 111801, 20996, coarsest[1]],
                            [81916, 57805, 9194, 1286])
        assert _size_classes.class_shape(*fewer, 1, pad_finest=True) != shape
