"""A re-setup on a cached pattern, of values on a GPU, waits for the device once: for the
solve's status.

Which structure concrete values take follows their key (:mod:`jaxsolve.sparse._structure_key`),
a digest computed where the values are. Read back before the numeric setup, it cost a wait
for the device in every ``solve(A.with_values(values), b)``; now the pattern's latest
structure is taken at once, the solve's program compares the digests and iterates only if
they are equal, and the outcome comes back with the status (``System.setup``). Values of
another key run the solve again, on their own structure.

On the CPU, values are in host memory and keyed there, with no wait to save. The tests
that follow the GPU's path run it on the CPU with values taken as a GPU's would be
(``as_on_a_gpu``: the digest on the device, read back only when asked); those marked
``gpu`` run it on a GPU (skipped elsewhere).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxsolve_testing import counted_compilations

from jaxsolve import sparse
from jaxsolve.sparse import _device_setup, _hierarchy, _setup, _structure_key, matrices

N = 24
PCG = {"solver": "PCG", "tolerance": 1e-8}
LEAN = {**PCG, "preconditioner": {"solver": "AMG", "selector": "PMISC", "aggressive_levels": 1}}
SA = {**PCG, "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_8",
                                "jaxsolve_smoothed_aggregation": 1}}
DEVICE = {**PCG, "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION",
                                    "selector": "SIZE_8", "jaxsolve_setup_location": "DEVICE"}}
CONFIGS = [PCG, LEAN, SA, DEVICE]
IDS = ["default", "lean", "smoothed", "device"]
GPU = next((d for d in jax.devices() if d.platform == "gpu"), None)


@pytest.fixture
def as_on_a_gpu(monkeypatch):
    """Values of JAX arrays are taken as outside host memory, as a GPU's are."""
    def outside(values):
        return not isinstance(values, jax.Array)

    for module in (_setup, _structure_key, _hierarchy):
        monkeypatch.setattr(module, "in_host_memory", outside, raising=False)


@pytest.fixture
def key_reads(monkeypatch):
    """Counts the values' keys read back from the device before a setup (the wait saved)
    and after a solve that found its structure another key's (`System.confirm` said no:
    it reads the values' digest back once)."""
    reads = {"before": 0, "after": 0}

    def counted(values_key):
        def counted_values_key(structure, values):
            reads["before"] += 1
            return values_key(structure, values)
        return counted_values_key

    confirm = _setup.System.confirm

    def counted_confirm(system, matched):
        confirmed = confirm(system, matched)
        reads["after"] += not confirmed
        return confirmed

    for module in (_setup, _device_setup):  # the host setup's key, the device setup's
        monkeypatch.setattr(module, "values_key", counted(module.values_key))
    monkeypatch.setattr(_setup.System, "confirm", counted_confirm)
    return reads


def poisson():
    return sparse.as_csr(matrices.poisson3d_matrix(8, dtype=np.float64))


def solved(A, config):
    x, info = sparse.solve(A, jnp.ones(A.shape[0]), config=config)
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    return np.asarray(x), int(info.iterations)


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_the_same_values_again_read_no_key(x64, as_on_a_gpu, key_reads, config):
    A = poisson()
    sparse.clear_cache()
    x, iterations = solved(A, config)  # the first setup: the key is read
    assert key_reads == {"before": 1, "after": 0}
    hits = sparse.cache_info().hits
    # the same values, then values of the same key: classical AMG's, the same strong
    # couplings, the device setup's, the same order of couplings (the host's aggregation
    # keys the values' bits)
    scale = 1 if config is SA else 2
    for values in (A.values + 0, scale * A.values):
        again, its = solved(A.with_values(values), config)
        assert its == iterations
    np.testing.assert_allclose(again, x / scale, rtol=1e-6)
    # Before: the digest read back before every re-setup ({"before": 3}).
    assert key_reads == {"before": 1, "after": 0}
    assert sparse.cache_info().hits == hits + 2 and sparse.cache_info().currsize == 1
    # reuse_setup takes the latest numbers, the last re-setup's
    x_reused, info = sparse.solve(A.with_values(scale * A.values), jnp.ones(A.shape[0]),
                                  config=config, reuse_setup=True)
    assert int(info.iterations) == iterations
    np.testing.assert_allclose(np.asarray(x_reused), x / scale, rtol=1e-6)


@pytest.mark.parametrize("config, committed", [*((config, False) for config in CONFIGS),
                                               (PCG, True)],
                         ids=[*IDS, "default-committed"])
def test_the_next_solve_on_a_pattern_runs_the_first_ones_program(x64, as_on_a_gpu, config,
                                                                 committed):
    """The solve that sets a pattern up and the next one on it, whose structure is taken
    before its values' key is known, run one compiled solve.  Before, the first passed no
    key check and its values, padded on the host, committed to the device: the next, with
    a check and values padded on the device, compiled the whole solve again (the first
    call's compilations at 128³ took 3–5 s on the H200 on 6 Dec)."""
    assert solve_programs_of_the_next_solve(config, committed) == 0


@pytest.mark.gpu
@pytest.mark.skipif(GPU is None, reason="needs a GPU")
@pytest.mark.parametrize("committed", [False, True], ids=["uncommitted", "committed"])
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_on_a_gpu_the_next_solve_on_a_pattern_runs_the_first_ones_program(x64, config,
                                                                        committed):
    with jax.default_device(GPU):
        assert solve_programs_of_the_next_solve(config, committed) == 0


def solve_programs_of_the_next_solve(config, committed):
    """The solve programs compiled for the second solve on a pattern, on values as the
    first's (placed on the default device, committed to it or not), from fresh caches."""
    A = poisson()
    values = np.asarray(A.values)
    A = A.with_values(jax.device_put(values, jax.devices()[0]) if committed
                      else jnp.asarray(values))
    again = A.with_values(A.values + 0)
    sparse.clear_cache()
    jax.clear_caches()  # no program of another test's
    first = solved(A, config)
    with counted_compilations("_solve_columns_reporting") as count:
        assert solved(again, config)[1] == first[1]
    return count[0]


@pytest.mark.parametrize("config", [PCG, DEVICE], ids=["default", "device"])
def test_a_solve_from_an_initial_guess_runs_the_same_program(x64, as_on_a_gpu, config):
    """The right-hand side ``b − A x0`` of a solve from ``x0`` is placed as ``b`` is: a
    device setup's index arrays, committed to the device where the user's values were not,
    made it committed, and the solve's program compiled again for it."""
    A = poisson()
    A = A.with_values(jnp.asarray(np.asarray(A.values)))
    b = jnp.ones(A.shape[0])
    x0 = 0.5 * b
    again = A.with_values(A.values + 0)
    sparse.clear_cache()
    jax.clear_caches()  # no program of another test's
    first = solved(A, config)
    with counted_compilations("_solve_columns_reporting") as count:
        x, info = sparse.solve(again, b, x0, config=config)
    assert count[0] == 0 and sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    np.testing.assert_allclose(np.asarray(x), first[0], rtol=1e-6)


@pytest.mark.parametrize("config", [PCG, DEVICE], ids=["default", "device"])
def test_values_of_another_key_are_solved_again_on_their_structure(x64, as_on_a_gpu,
                                                                   key_reads, config):
    A = poisson()
    along_x = np.abs(np.asarray(A.indices) - np.asarray(A.row_ids)) == 1
    B = A.with_values(jnp.where(along_x, 0.01 * A.values, A.values))  # anisotropic: x weak
    sparse.clear_cache()
    fresh_b = solved(B, config)
    sparse.clear_cache()
    fresh_a = solved(A, config)
    assert solved(B, config)[1] == fresh_b[1]  # after A's structure: B's own, built now
    np.testing.assert_allclose(solved(B, config)[0], fresh_b[0], rtol=1e-10)
    # the first solve of B found A's structure not its own; the second read its key first
    # and found its structure the latest: the third takes it at once
    assert key_reads == {"before": 3, "after": 1}
    solved(B, config)
    assert key_reads == {"before": 3, "after": 1}
    misses = sparse.cache_info().misses
    for _ in range(2):  # alternating: each finds its own, after the other's
        assert solved(A, config)[1] == fresh_a[1]
        assert solved(B, config)[1] == fresh_b[1]
    # A took B's structure in vain once; then each read its key first
    assert key_reads == {"before": 6, "after": 2}
    assert sparse.cache_info().misses == misses and sparse.cache_info().currsize == 2


def test_columns_and_an_initial_guess_take_the_latest_structure_alike(x64, as_on_a_gpu):
    A = poisson()
    along_x = np.abs(np.asarray(A.indices) - np.asarray(A.row_ids)) == 1
    B = A.with_values(jnp.where(along_x, 0.01 * A.values, A.values))
    b = jnp.stack([jnp.ones(A.shape[0]), jnp.arange(A.shape[0], dtype=jnp.float64)], axis=1)
    x0 = 0.1 * b
    fresh = {}
    for name, M in (("B", B), ("A", A)):  # A's structure the latest
        sparse.clear_cache()
        fresh[name] = sparse.solve(M, b, x0, config=PCG)
    # A's values find the latest structure theirs; B's find it A's and solve again on theirs
    for name, M in (("A", A.with_values(A.values + 0)), ("B", B)):
        x, info = sparse.solve(M, b, x0, config=PCG)
        np.testing.assert_array_equal(np.asarray(info.iterations),
                                      np.asarray(fresh[name][1].iterations))
        np.testing.assert_allclose(np.asarray(x), np.asarray(fresh[name][0]), rtol=1e-12)
    assert sparse.cache_info().currsize == 2


def test_nonfinite_values_on_a_cached_pattern_are_still_refused(x64, as_on_a_gpu):
    A = poisson()
    sparse.clear_cache()
    solved(A, PCG)
    with pytest.raises(ValueError, match="NaN or Inf"):
        sparse.solve(A.with_values(A.values.at[3].set(jnp.nan)), jnp.ones(A.shape[0]),
                     config=PCG)
    zero = A.with_values(jnp.where(A.row_ids != A.indices, A.values, 0.0))
    with pytest.raises(ValueError, match="zero"):
        sparse.solve(zero, jnp.ones(A.shape[0]), config=PCG)
    assert solved(A, PCG)[1] > 0  # the pattern's structure still serves


@pytest.mark.gpu
@pytest.mark.skipif(GPU is None, reason="needs a GPU")
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_resetup_on_a_gpu_reads_back_no_digest(x64, capfd, config):
    """On a GPU, a re-setup + solve and a solve alone copy nothing from the device but the
    status that the solve's program put in host memory: no digest (``uint32[2]``) and
    nothing the size of the values."""
    A = sparse.as_csr(matrices.poisson3d_matrix(16, dtype=np.float64))
    A = A.with_values(jax.device_put(A.values, GPU))
    b = jax.device_put(jnp.ones(A.shape[0]), GPU)
    sparse.clear_cache()
    x, info = sparse.solve(A, b, config=config)
    for _ in range(2):  # compiled
        sparse.solve(A.with_values(A.values + 0), b, config=config)
        sparse.solve(A, b, config=config, reuse_setup=True)
    capfd.readouterr()
    with jax.transfer_guard_device_to_host("log"):
        again, info_again = sparse.solve(A.with_values(A.values + 0), b, config=config)
        alone, _ = sparse.solve(A, b, config=config, reuse_setup=True)
        jax.block_until_ready((again, alone))
    logged = [line for line in capfd.readouterr().err.splitlines()
              if "device-to-host transfer" in line]
    assert not [line for line in logged if "uint32[2]" in line or f"[{A.values.shape[0]}]" in line], logged
    assert int(info_again.iterations) == int(info.iterations)
    np.testing.assert_allclose(np.asarray(again), np.asarray(x), rtol=1e-10)
