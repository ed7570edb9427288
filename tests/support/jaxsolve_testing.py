"""What the tests of every jaxsolve package share: the JAX settings they run under and the
checks of a package's public surface.

Not part of any distribution. A package's ``conftest.py`` imports the fixtures it wants from
here, which registers them for its tests, and its ``package_test.py`` subclasses
`PackageChecks`::

    from jaxsolve_testing import strict_config, x64  # noqa: F401  (fixtures)

Bazel puts this module on the tests' path (``//tests/support:jaxsolve_testing``, a dependency
of every ``jaxsolve_py_tests`` target); ``tools/dev gpu-test`` puts its folder on
``PYTHONPATH``.
"""

import contextlib
import doctest
import importlib
import importlib.util
import os
import pkgutil
import types

import jax
import pytest

# On the CPU the tests compile far more than they run (small problems, many programs), and
# XLA's backend (LLVM) optimizations cost more than they save: a fifth of the CPU time of
# sparse's solve tests. Off there (not on a GPU host, whose tests run the real kernels), in
# the environment too, for the processes tests start (MPI ranks, launchers, benchmarks).
#
# XLA's CPU compiler then still spends half of a solve's compile in its MLIR fusion emitters
# and in splitting each program's LLVM module for parallel codegen; `CPU_COMPILE_FLAGS` turn
# both off (fusions are emitted by XLA's classic emitters, in one module): a first solve's CPU
# time drops to 0.4 of what it was. Appended to ``XLA_FLAGS`` before JAX starts its CPU
# backend, after whatever flags the environment already holds; the processes tests start get
# them too (`xla_flags_for_processes`). A test file that checks the options jaxsolve itself
# passes XLA runs with XLA's defaults instead: its Bazel target sets
# ``JAXSOLVE_TEST_DEFAULT_XLA_FLAGS=1`` (`jaxsolve_py_tests`' `env_of`).
CPU_COMPILE_FLAGS = ("--xla_cpu_use_fusion_emitters=false",
                     "--xla_cpu_parallel_codegen_split_count=1")

if not any(importlib.util.find_spec(f"jax_cuda{major}_plugin") for major in (12, 13)):
    os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "true")
    jax.config.update("jax_disable_most_optimizations",
                      os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"].lower() in ("1", "true"))
    if os.environ.get("JAXSOLVE_TEST_DEFAULT_XLA_FLAGS") != "1":
        os.environ["XLA_FLAGS"] = " ".join([
            os.environ.get("XLA_FLAGS", ""),
            *(flag for flag in CPU_COMPILE_FLAGS
              if flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""))]).strip()

# The settings every test starts from: the users' default for x64 (off), and dtype and rank
# promotion as strict as a user may set them (as Lineax's tests do), so that no code relies on
# implicit promotion or broadcasting.
STRICT_SETTINGS = {
    "jax_enable_x64": False,
    "jax_numpy_dtype_promotion": "strict",
    "jax_numpy_rank_promotion": "raise",
}


@pytest.fixture(autouse=True)
def strict_config():
    """Applies `STRICT_SETTINGS` for the test and restores the previous settings after it."""
    previous = {name: getattr(jax.config, name) for name in STRICT_SETTINGS}
    for name, value in STRICT_SETTINGS.items():
        jax.config.update(name, value)
    yield
    for name, value in previous.items():
        jax.config.update(name, value)


@pytest.fixture
def x64(strict_config):
    """Enables ``jax_enable_x64`` for one test (`strict_config` restores it)."""
    del strict_config
    jax.config.update("jax_enable_x64", True)


@contextlib.contextmanager
def counted_compilations(named: str | None = None):
    """Counts the programs XLA compiles inside the block (``jax.monitoring``'s backend-compile
    events), or with ``named`` those of the functions of that name only: yields a
    one-element list whose entry grows with each."""
    count = [0]

    def listener(event, duration, **kwargs):
        del duration
        if event == "/jax/core/compile/backend_compile_duration" and (
                named is None or kwargs.get("fun_name") == f"jit({named})"):
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield count
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def use_cpu_devices(count: int) -> None:
    """Asks XLA for `count` virtual CPU devices, so that meshes of up to `count` devices build
    on any machine. Takes effect only if called before JAX starts its CPU backend: call it at
    the top of a ``conftest.py``."""
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [
        os.environ.get("XLA_FLAGS"), f"--xla_force_host_platform_device_count={count}"]))


def xla_flags_for_processes() -> str:
    """This process's ``XLA_FLAGS`` without its virtual CPU device count: for the processes a
    test starts (MPI ranks, launched processes), which get their devices from their launcher
    but compile as the tests do."""
    return " ".join(flag for flag in os.environ.get("XLA_FLAGS", "").split()
                    if not flag.startswith("--xla_force_host_platform_device_count"))


def check_public_names(package: types.ModuleType, *, examples: bool = False) -> None:
    """Checks `package`'s ``__all__``: sorted; each name a public submodule of the package or
    an object defined in one of its private modules; each with a docstring of several lines
    (and, with `examples`, an ``Examples`` section)."""
    assert sorted(package.__all__) == package.__all__
    for name in package.__all__:
        exported = getattr(package, name)
        if isinstance(exported, types.ModuleType):
            assert exported.__name__ == f"{package.__name__}.{name}", name
        else:
            assert exported.__module__.startswith(f"{package.__name__}._"), name
        assert exported.__doc__ and len(exported.__doc__.splitlines()) > 3, name
        assert not examples or "Examples" in exported.__doc__, name


def modules_with_examples(package: types.ModuleType) -> list[str]:
    """The names of `package` and of its Python modules (native libraries aside) whose
    docstrings hold examples."""
    names = [package.__name__] + [
        info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
        if importlib.util.find_spec(info.name).origin.endswith(".py")]
    finder = doctest.DocTestFinder()
    return [name for name in names
            if any(test.examples for test in finder.find(importlib.import_module(name)))]


def check_docstring_examples(module_name: str) -> None:
    """Runs the examples in the docstrings of module `module_name`; all must pass."""
    module = importlib.import_module(module_name)
    failed, attempted = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failed == 0, f"{failed} of {attempted} examples failed in {module_name}"


class PackageChecks:
    """The checks of a package's public surface, for its tests to subclass::

        class TestPackage(PackageChecks):
            package = jaxsolve.sparse

    Its exports must pass `check_public_names` (with an ``Examples`` section in each docstring
    when `require_examples`), and the docstring examples of each of its modules that has some
    must run (a test per module).
    """

    package: types.ModuleType
    require_examples: bool = False

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "module_name" in metafunc.fixturenames:
            metafunc.parametrize("module_name", modules_with_examples(self.package))

    def test_package_exports_documented_names(self):
        check_public_names(self.package, examples=self.require_examples)

    def test_package_docstring_examples(self, module_name):
        check_docstring_examples(module_name)
