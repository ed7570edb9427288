"""Checks every import of the source tree against the arrows of the README's package table.

Every ``.py`` file of the packages (their sources and tests) and of ``tools/`` is parsed, and
each name it takes from ``jaxsolve`` or ``jax`` — by ``import``, ``from ... import``, or an
attribute of an imported module (``monkeypatch.setattr(jl._native_library, ...)``) — must
obey three rules:

* a package imports only the siblings its row of the README's arrow table names (so
  ``sparse ↛ dense``, ``dense ↛ sparse``, and the leaves import no solver package);
* no file imports another package's ``_private`` module or name (a package's own tests may:
  they test its insides); ``tools/`` and the root ``tests/`` use public names only;
* nobody imports ``jax._src``, JAX's internals.

The tree is read where this file really lies (under Bazel, the runfiles link back to the
source tree), so the target is tagged ``external``: it runs every time, never from cache.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("runtime", "layout", "autodiff", "sharding", "dense", "sparse")

# Reach-ins of the benchmarks into the solver packages' modules, each waiting for a public
# name (issue 31). The list may only shrink: a pair that no longer occurs fails the test.
KNOWN_REACH_INS = {
    ("tools/bench/dense.py", "jaxsolve.dense._backend"),
    ("tools/bench/dense.py", "jaxsolve.dense._cusolver"),
    ("tools/bench/dense.py", "jaxsolve.dense._cusolvermp"),
    ("tools/bench/dense.py", "jaxsolve.dense._layout"),
    ("tools/bench/sparse_loop_launch.py", "jaxsolve.sparse._native"),
    ("tools/bench/sparse_matrix_free.py", "jaxsolve.sparse._matrix_free"),
    ("tools/bench/sparse_matrix_free.py", "jaxsolve.sparse._sparsity_tracing"),
    ("tools/bench/sparse_multicolor.py", "jaxsolve.sparse._setup"),
    ("tools/bench/sparse_poisson3d.py", "jaxsolve.sparse._native"),
    ("tools/bench/sparse_spmv.py", "jaxsolve.sparse._native"),
}


def allowed_imports(readme: str) -> dict[str, set[str]]:
    """The README's arrow table: package -> the siblings it may import."""
    rows = re.search(r"^\| package \| may import \|\n\|[-|]+\|\n((?:\|.*\|\n)+)", readme, re.M)
    assert rows, "README.md has no `| package | may import |` table"
    allowed = {}
    for row in rows.group(1).splitlines():
        package, imports = (cell.strip() for cell in row.strip("|").split("|"))
        allowed[package.strip("`")] = set(re.findall(r"`(\w+)`", imports))
    return allowed


def owner(relative: str) -> str | None:
    """The package a file belongs to (its sources and its tests), or None (tools, tests/)."""
    first = relative.split("/")[0]
    return first if first in PACKAGES else None


def python_files() -> list[pathlib.Path]:
    return sorted(p for top in (*PACKAGES, "tools", "tests") for p in (ROOT / top).rglob("*.py"))


def names_used(tree: ast.AST) -> set[str]:
    """Every dotted name of ``jax``/``jaxsolve`` the module imports or reaches through an
    imported module's attributes (``jl._ffi.LIBRARY`` after ``import jaxsolve.layout as jl``)."""
    bound: dict[str, str] = {}  # local name -> the dotted module name it stands for
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                used.add(alias.name)
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                used.add(name)
                bound[alias.asname or alias.name] = name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts = []
            inner = node
            while isinstance(inner, ast.Attribute):
                parts.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in bound:
                used.add(".".join([bound[inner.id], *reversed(parts)]))
    return {n for n in used if n.split(".")[0] in ("jax", "jaxsolve")}


def violations(relative: str, source: str, allowed: dict[str, set[str]]
               ) -> list[tuple[str, str, str]]:
    """``(file, name, why)`` for each name the file at `relative` (below the root), whose
    text is `source`, may not use."""
    mine = owner(relative)
    found = []
    for name in sorted(names_used(ast.parse(source, relative))):
        parts = name.split(".")
        if parts[:2] == ["jax", "_src"]:
            found.append((relative, name, "imports JAX's internals"))
            continue
        if parts[0] != "jaxsolve" or len(parts) < 2 or parts[1] == mine:
            continue
        if parts[1] not in PACKAGES:
            found.append((relative, name, "is no jaxsolve package"))
            continue
        if mine is not None and parts[1] not in allowed[mine]:
            found.append((relative, name, f"{mine} may not import {parts[1]}"))
        private = next((p for p in parts[2:] if p.startswith("_") and not p.startswith("__")),
                       None)
        if private is not None:
            module = ".".join(parts[:parts.index(private) + 1])
            if (relative, module) not in KNOWN_REACH_INS:
                found.append((relative, module, f"is private to jaxsolve.{parts[1]}"))
    return found


ALLOWED = allowed_imports((ROOT / "README.md").read_text())


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


def test_the_known_reach_ins_still_occur():
    # One the benchmarks no longer make leaves the list, so that it cannot come back.
    used = {(path.relative_to(ROOT).as_posix(), name)
            for path in python_files() for name in names_used(ast.parse(path.read_text()))}
    modules = {(f, ".".join(n.split(".")[:3])) for f, n in used}
    assert KNOWN_REACH_INS <= modules, KNOWN_REACH_INS - modules


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
