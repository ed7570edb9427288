"""The import rules of jaxsolve's packages, which every build checks.

Each ``.py`` file a Bazel target of the tree holds (a package's sources, its tests, the
benchmarks) is parsed, and each name it takes from ``jaxsolve`` or ``jax`` — by ``import``,
``from ... import``, or an attribute of an imported module (``monkeypatch.setattr(
jl._native_library, ...)``) — must obey three rules:

* a package imports only the siblings its row of the README's arrow table names (so
  ``sparse ↛ dense``, ``dense ↛ sparse``, and the leaves import no solver package);
* no file imports another package's ``_private`` module or name (a package's own tests may:
  they test its insides); ``tools/`` and the root ``tests/`` use public names only;
* nobody imports ``jax._src``, JAX's internals.

A package's Bazel dependencies on its siblings obey the same table.

``tools/defs.bzl``'s ``import_check`` runs this file as a validation action over each
package's files: a violation fails ``bazel build`` (and so ``tools/dev test``) with the list
of offending names. ``tests/imports_test.py`` applies the same functions to every file of
the tree, including those no target holds.

Usage: import_arrows.py --readme README.md --stamp OUT [--package P --build-dep Q ...] FILE...
(files named by their paths below the repository root, as Bazel passes source files).
"""

import argparse
import ast
import pathlib
import re
import sys

PACKAGES = ("runtime", "layout", "autodiff", "sharding", "dense", "sparse")


def allowed_imports(readme: str) -> dict[str, set[str]]:
    """The README's arrow table: package -> the siblings it may import."""
    rows = re.search(r"^\| package \| may import \|\n\|[-|]+\|\n((?:\|.*\|\n)+)", readme, re.M)
    if not rows:
        raise ValueError("README.md has no `| package | may import |` table")
    allowed = {}
    for row in rows.group(1).splitlines():
        package, imports = (cell.strip() for cell in row.strip("|").split("|"))
        allowed[package.strip("`")] = set(re.findall(r"`(\w+)`", imports))
    return allowed


def owner(relative: str) -> str | None:
    """The package a file belongs to (its sources and its tests), or None (tools, tests/)."""
    first = relative.split("/")[0]
    return first if first in PACKAGES else None


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


def private_module(name: str) -> str | None:
    """The private module (or name) a dotted ``jaxsolve.<package>...`` name reaches, if any:
    ``jaxsolve.layout._ffi`` for ``jaxsolve.layout._ffi.LIBRARY``."""
    parts = name.split(".")
    private = next((p for p in parts[2:] if p.startswith("_") and not p.startswith("__")), None)
    return None if private is None else ".".join(parts[:parts.index(private) + 1])


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
        module = private_module(name)
        if module is not None:
            found.append((relative, module, f"is private to jaxsolve.{parts[1]}"))
    return list(dict.fromkeys(found))  # a module reached by several names once


def dependency_violations(package: str, build_deps: list[str], allowed: dict[str, set[str]]
                          ) -> list[str]:
    """The siblings among a package's Bazel dependencies that its table row does not allow."""
    return [f"//{package}/jaxsolve/{package} depends on //{dep}/jaxsolve/{dep} "
            f"({package} may not import {dep})"
            for dep in build_deps if dep != package and dep not in allowed[package]]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", required=True, type=pathlib.Path)
    parser.add_argument("--stamp", required=True, type=pathlib.Path,
                        help="written (empty) when every file obeys the rules")
    parser.add_argument("--package", help="the package whose library these files are")
    parser.add_argument("--build-dep", action="append", default=[],
                        help="a sibling package the library's Bazel target depends on")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    allowed = allowed_imports(args.readme.read_text())
    problems = [f"{f}: {name} ({why})" for path in args.files
                for f, name, why in violations(path, pathlib.Path(path).read_text(), allowed)]
    if args.package:
        problems += dependency_violations(args.package, args.build_dep, allowed)
    if problems:
        print("jaxsolve's import rules (README.md, 'Packages'; tools/import_arrows.py) are "
              "broken:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    args.stamp.write_text("")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
