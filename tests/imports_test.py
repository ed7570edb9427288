"""jaxsolve's import rules (tools/import_arrows.py) on the whole source tree and on examples.

Every package's build checks its own files with the same functions (``import_check`` in
tools/defs.bzl); this test adds what no single target sees: every ``.py`` file of the tree,
those no target holds included, the README's table itself, and that the scan sees each way of
reaching in. The tree is read where this file really lies (under Bazel, the runfiles link
back to the source tree), so the target is tagged ``external``: it runs every time.
"""

import ast
import pathlib

import pytest

import import_arrows
from import_arrows import PACKAGES, allowed_imports, names_used, violations

ROOT = pathlib.Path(__file__).resolve().parents[1]
ALLOWED = allowed_imports((ROOT / "README.md").read_text())


def python_files() -> list[pathlib.Path]:
    return sorted(p for top in (*PACKAGES, "tools", "tests") for p in (ROOT / top).rglob("*.py"))


def test_the_readme_table_names_every_package_and_only_siblings():
    assert sorted(ALLOWED) == sorted(PACKAGES)
    for package, imports in ALLOWED.items():
        assert imports <= set(PACKAGES) - {package}, package


@pytest.mark.parametrize("package", ["runtime", "layout", "autodiff", "sharding"])
def test_the_leaves_import_no_solver_package(package):
    assert not ALLOWED[package] & {"dense", "sparse"}


def test_the_solver_packages_import_not_each_other():
    assert "dense" not in ALLOWED["sparse"] and "sparse" not in ALLOWED["dense"]


def test_every_file_obeys_the_arrows_and_uses_only_public_names():
    files = python_files()
    assert len(files) > 100  # the whole tree was found, not an empty folder
    found = sorted({v for path in files
                    for v in violations(path.relative_to(ROOT).as_posix(), path.read_text(),
                                        ALLOWED)})
    assert not found, "\n".join(f"{f}: {name} ({why})" for f, name, why in found)


@pytest.mark.parametrize("source, name", [
    ("from jaxsolve.layout import _ffi as ffi\nffi.LIBRARY", "jaxsolve.layout._ffi.LIBRARY"),
    ("import jaxsolve.layout as jl\njl._native_library", "jaxsolve.layout._native_library"),
    ("import jaxsolve.layout\njaxsolve.layout._ffi.LIBRARY", "jaxsolve.layout._ffi.LIBRARY"),
    ("from jax._src import core", "jax._src.core"),
    ("from jax import _src", "jax._src"),
])
def test_the_scan_sees_each_way_of_reaching_in(source, name):
    assert name in names_used(ast.parse(source))


def test_a_private_reach_in_and_a_forbidden_arrow_are_reported():
    # A sparse module that takes layout's private loader and a dense name.
    source = "from jaxsolve.layout import _ffi\nimport jaxsolve.dense\nimport jaxsolve.sparse._csr"
    assert violations("sparse/jaxsolve/sparse/_example.py", source, ALLOWED) == [
        ("sparse/jaxsolve/sparse/_example.py", "jaxsolve.dense", "sparse may not import dense"),
        ("sparse/jaxsolve/sparse/_example.py", "jaxsolve.layout._ffi",
         "sparse may not import layout"),
        ("sparse/jaxsolve/sparse/_example.py", "jaxsolve.layout._ffi",
         "is private to jaxsolve.layout"),
    ]
    # The same reach-in from a benchmark is private only; sparse's own module is fine there.
    assert violations("tools/bench/example.py", source, ALLOWED) == [
        ("tools/bench/example.py", "jaxsolve.layout._ffi", "is private to jaxsolve.layout"),
        ("tools/bench/example.py", "jaxsolve.sparse._csr", "is private to jaxsolve.sparse"),
    ]


def test_a_module_reached_by_several_names_is_reported_once():
    source = "from jaxsolve.dense import _arguments\n_arguments.check(1)\n_arguments.mesh"
    assert violations("tools/bench/example.py", source, ALLOWED) == [
        ("tools/bench/example.py", "jaxsolve.dense._arguments", "is private to jaxsolve.dense")]


def check(tmp_path, files: dict[str, str], *options: str) -> tuple[int, bool]:
    """Runs the build's checker on `files` (path below the root -> text), as Bazel does from
    the root; returns its exit status and whether it wrote its stamp."""
    for relative, text in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    (tmp_path / "README.md").write_text((ROOT / "README.md").read_text())
    stamp = tmp_path / "imports.ok"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        status = import_arrows.main(["--readme", "README.md", "--stamp", str(stamp),
                                     *options, *files])
    return status, stamp.exists()


def test_the_build_check_passes_public_imports_and_writes_its_stamp(tmp_path):
    files = {"dense/jaxsolve/dense/_example.py": "import jaxsolve.layout\nimport jax.numpy\n"}
    assert check(tmp_path, files, "--package", "dense", "--build-dep", "layout") == (0, True)


def test_the_build_check_fails_on_a_private_reach_in(tmp_path, capsys):
    files = {"dense/jaxsolve/dense/_example.py": "from jaxsolve.sharding import _nccl\n",
             "dense/jaxsolve/dense/public.py": "import jaxsolve.dense\n"}
    assert check(tmp_path, files) == (1, False)
    assert capsys.readouterr().err.splitlines()[1:] == [
        "  dense/jaxsolve/dense/_example.py: jaxsolve.sharding._nccl "
        "(is private to jaxsolve.sharding)"]


def test_the_build_check_fails_on_a_bazel_dependency_the_table_forbids(tmp_path, capsys):
    files = {"sparse/jaxsolve/sparse/_example.py": "import jaxsolve.sharding\n"}
    assert check(tmp_path, files, "--package", "sparse", "--build-dep", "sharding",
                 "--build-dep", "dense") == (1, False)
    assert "//sparse/jaxsolve/sparse depends on //dense/jaxsolve/dense (sparse may not " \
           "import dense)" in capsys.readouterr().err
