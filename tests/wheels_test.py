"""Checks the seven built wheels as a user's pip would see them.

The wheels are this test's Bazel data, so these checks run on exactly what `tools/dev wheels`
ships: sibling version ranges hold for the versions in the tree, platform tags tell the
truth about the glibc the native libraries need, the `jaxsolve` namespace stays a PEP 420
namespace, each wheel ships its CUDA libraries for both CUDA majors, and each wheel installs
and imports with no other wheel than the siblings it requires.
"""

import email.parser
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

# Debian 12, where our native libraries are built: the newest glibc symbol version they may use.
_BUILD_GLIBC = (2, 36)
_DISTRIBUTIONS = {
    "jaxsolve": None,
    "jaxsolve-runtime": "runtime",
    "jaxsolve-layout": "layout",
    "jaxsolve-autodiff": "autodiff",
    "jaxsolve-sharding": "sharding",
    "jaxsolve-dense": "dense",
    "jaxsolve-sparse": "sparse",
}


def _wheels() -> dict[str, pathlib.Path]:
    found = {}
    for path in pathlib.Path.cwd().rglob("*.whl"):
        name = canonicalize_name(path.name.split("-")[0])
        assert name not in found, f"two wheels of {name}: {found[name]} and {path}"
        found[name] = path
    return found


WHEELS = _wheels()


def _metadata(wheel: pathlib.Path):
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def test_all_seven_distributions_are_built():
    assert sorted(WHEELS) == sorted(_DISTRIBUTIONS)


def test_sibling_requirements_hold_for_the_versions_in_the_tree():
    versions = {name: Version(_metadata(w)["Version"]) for name, w in WHEELS.items()}
    checked = 0
    for name, wheel in WHEELS.items():
        for line in _metadata(wheel).get_all("Requires-Dist") or []:
            requirement = Requirement(line)
            sibling = canonicalize_name(requirement.name)
            if sibling in versions:
                assert requirement.specifier.contains(versions[sibling]), (
                    f"{name} requires {requirement}, but the tree has {sibling} {versions[sibling]}")
                checked += 1
    # the meta-package's six parts, dense's four, sparse's three, layout's and sharding's one
    assert checked >= 6 + 4 + 3 + 1 + 1


def test_meta_package_offers_cuda_extras():
    extras = _metadata(WHEELS["jaxsolve"]).get_all("Provides-Extra")
    assert sorted(extras) == ["cuda12", "cuda13"]


@pytest.mark.parametrize("name", sorted(_DISTRIBUTIONS))
def test_platform_tag_matches_native_content(name):
    wheel = WHEELS[name]
    with zipfile.ZipFile(wheel) as archive:
        libraries = [n for n in archive.namelist() if n.endswith(".so")]
    platform = wheel.name[:-len(".whl")].split("-")[-1]
    if libraries:
        assert platform == "manylinux_%d_%d_x86_64" % _BUILD_GLIBC
    else:
        assert platform == "any"


def test_wheels_ship_cuda_libraries_for_both_majors():
    stems = {12: set(), 13: set()}
    for wheel in WHEELS.values():
        with zipfile.ZipFile(wheel) as archive:
            for n in archive.namelist():
                if match := re.fullmatch(r"(.+)_cuda(\d+)\.so", n):
                    stems[int(match.group(2))].add(match.group(1))
    assert {"jaxsolve/layout/libjaxsolve_layout", "jaxsolve/sparse/libjaxsolve_sparse",
            "jaxsolve/dense/libjaxsolve_dense_cusolvermp",
            "jaxsolve/dense/libjaxsolve_dense_cusolver",
            "jaxsolve/sharding/libjaxsolve_nccl"} <= stems[12]
    assert stems[12] == stems[13]


@pytest.mark.parametrize("name", [n for n, pkg in _DISTRIBUTIONS.items() if pkg])
def test_wheel_contributes_one_namespace_subpackage(name):
    with zipfile.ZipFile(WHEELS[name]) as archive:
        top = {n.split("/")[0] for n in archive.namelist() if not n.split("/")[0].endswith(".dist-info")}
        packages = {"/".join(n.split("/")[:2]) for n in archive.namelist() if n.startswith("jaxsolve/")}
        assert "jaxsolve/__init__.py" not in archive.namelist()
    assert top == {"jaxsolve"}
    assert packages == {f"jaxsolve/{_DISTRIBUTIONS[name]}"}


def _glibc_versions_needed(library: pathlib.Path) -> set[tuple[int, int]]:
    dump = subprocess.run(["objdump", "-T", str(library)], check=True, capture_output=True, text=True)
    return {tuple(map(int, m)) for m in re.findall(r"GLIBC_(\d+)\.(\d+)", dump.stdout)}


def _with_siblings(name: str) -> list[pathlib.Path]:
    """The wheels of `name` and of the siblings it requires (without extras), transitively."""
    needed, todo = {}, [name]
    while todo:
        current = todo.pop()
        if current not in needed:
            needed[current] = WHEELS[current]
            for line in _metadata(WHEELS[current]).get_all("Requires-Dist") or []:
                requirement = Requirement(line)
                if requirement.marker is None and canonicalize_name(requirement.name) in WHEELS:
                    todo.append(canonicalize_name(requirement.name))
    return list(needed.values())


def test_the_solver_wheels_require_no_unneeded_sibling():
    # The README's arrows (tests/imports_test.py checks the code against them): sparse needs
    # neither layout nor dense, dense not sparse; the leaves need only jaxsolve-runtime.
    siblings = {name: {w.name.split("-")[0] for w in _with_siblings(name)}
                - {name.replace("-", "_")} for name, package in _DISTRIBUTIONS.items() if package}
    assert siblings["jaxsolve-sparse"] == {
        "jaxsolve_runtime", "jaxsolve_autodiff", "jaxsolve_sharding"}
    assert "jaxsolve_sparse" not in siblings["jaxsolve-dense"]
    for leaf in ("jaxsolve-runtime", "jaxsolve-autodiff"):
        assert siblings[leaf] == set(), leaf
    for leaf in ("jaxsolve-layout", "jaxsolve-sharding"):
        assert siblings[leaf] == {"jaxsolve_runtime"}, leaf


@pytest.mark.parametrize("name", [n for n, pkg in _DISTRIBUTIONS.items() if pkg])
def test_wheel_installs_with_its_siblings_and_imports(name, tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--target", str(tmp_path),
                    *map(str, _with_siblings(name))], check=True)
    for library in tmp_path.rglob("*.so"):
        assert max(_glibc_versions_needed(library)) <= _BUILD_GLIBC, library
    module = f"jaxsolve.{_DISTRIBUTIONS[name]}"
    probe = (f"import importlib.metadata, {module} as m; "
             f"assert m.__file__.startswith({str(tmp_path)!r}), m.__file__; "
             f"assert m.__version__ == importlib.metadata.version({name!r}), m.__version__; "
             f"print(m.__version__)")
    result = subprocess.run([sys.executable, "-c", probe], env={"PYTHONPATH": str(tmp_path)},
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == _metadata(WHEELS[name])["Version"]


def test_sparse_wheel_installs_its_command_and_offers_the_plot_extra(tmp_path):
    assert "plot" in _metadata(WHEELS["jaxsolve-sparse"]).get_all("Provides-Extra")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--target", str(tmp_path),
                    *map(str, _with_siblings("jaxsolve-sparse"))], check=True)
    result = subprocess.run([str(tmp_path / "bin" / "jaxsolve-sparse"), "solve", "missing.mtx"],
                            env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert result.stderr == "jaxsolve-sparse: error: missing.mtx: the file does not exist\n"


def test_readme_install_from_the_wheel_folder(tmp_path):
    # The README's install command, offline: `pip install --find-links dist/ ...` takes the
    # jaxsolve wheels from the folder and, with --no-index, every other requirement from what
    # is installed already (JAX, NumPy, SciPy, matplotlib: this test's own environment).
    folder = tmp_path / "dist"
    folder.mkdir()
    for wheel in WHEELS.values():
        (folder / wheel.name).write_bytes(wheel.read_bytes())
    prefix = tmp_path / "prefix"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index",
                    "--disable-pip-version-check", "--find-links", str(folder),
                    "--prefix", str(prefix), "jaxsolve", "jaxsolve-sparse[plot]"], check=True)
    (site,) = prefix.glob("lib/python*/site-packages")
    installed = {canonicalize_name(p.name.split("-")[0]) for p in site.glob("*.dist-info")}
    assert installed == set(_DISTRIBUTIONS)  # all seven, from the folder
    probe = ("import jaxsolve.runtime, jaxsolve.layout, jaxsolve.autodiff, jaxsolve.sharding,"
             " jaxsolve.dense, jaxsolve.sparse as s; print(s.__file__)")
    result = subprocess.run([sys.executable, "-c", probe], env={"PYTHONPATH": str(site)},
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(str(site))
    result = subprocess.run([str(prefix / "bin" / "jaxsolve-sparse"), "--help"],
                            env={"PYTHONPATH": str(site)}, capture_output=True, text=True)
    assert result.returncode == 0 and "solve" in result.stdout, result.stderr
