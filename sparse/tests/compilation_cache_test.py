"""The persistent compilation cache: a second process's first solve compiles nothing.

Each process below solves the same small AMG-PCG problem and prints how many programs XLA
compiled (backend-compile events less persistent-cache hits, from ``jax.monitoring``) and
how many it read from the cache.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from jaxsolve.sparse import _compilation_cache

SOLVE = """
import json, sys
import jax

counts = {"backend": 0, "hits": 0}

def on_duration(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        counts["backend"] += 1

def on_event(event, **kwargs):
    if event == "/jax/compilation_cache/cache_hits":
        counts["hits"] += 1

jax.monitoring.register_event_duration_secs_listener(on_duration)
jax.monitoring.register_event_listener(on_event)

import jax.numpy as jnp
from jaxsolve import sparse

if sys.argv[1] == "call":
    sparse.enable_compilation_cache(sys.argv[2])
A = sparse.matrices.poisson_matrix(12)
x, info = sparse.solve(A, jnp.ones(A.shape[0]), config={
    "solver": "PCG", "tolerance": 1e-4,
    "preconditioner": {"solver": "AMG", "min_coarse_rows": 16}})
assert int(info.status) == 0, info
print(json.dumps({"compiled": counts["backend"] - counts["hits"], "hits": counts["hits"],
                  "cache_dir": jax.config.jax_compilation_cache_dir}))
"""


def _solve_in_new_process(how: str, cache: pathlib.Path | None) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop(_compilation_cache.ENVIRONMENT_VARIABLE, None)
    argv = [sys.executable, "-c", SOLVE, how]
    if how == "environment":
        env[_compilation_cache.ENVIRONMENT_VARIABLE] = str(cache)
    elif how == "call":
        argv.append(str(cache))
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_second_process_compiles_nothing(tmp_path):
    """The first process switches the cache on by the environment, the second by the call."""
    cache = tmp_path / "xla"
    first = _solve_in_new_process("environment", cache)
    assert first["cache_dir"] == str(cache)
    assert first["compiled"] > 0 and first["hits"] == 0
    assert any(cache.iterdir())  # every program was written, however fast it compiled
    second = _solve_in_new_process("call", cache)
    assert second == dict(first, compiled=0, hits=first["compiled"])


def test_off_without_the_switch():
    alone = _solve_in_new_process("off", None)
    assert alone["cache_dir"] is None and alone["hits"] == 0 and alone["compiled"] > 0


def test_default_directory_and_bad_threshold(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _compilation_cache.default_cache_dir() == tmp_path / "jaxsolve" / "compilation"
    with pytest.raises(ValueError, match="min_compile_time_secs"):
        _compilation_cache.enable_compilation_cache(tmp_path, min_compile_time_secs=-1)
    monkeypatch.setenv(_compilation_cache.ENVIRONMENT_VARIABLE, "0")
    assert _compilation_cache.enable_from_environment() is None

