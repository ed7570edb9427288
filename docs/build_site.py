"""Builds jaxsolve's documentation site with warnings as errors: ``tools/dev docs``.

    python docs/build_site.py [SITE_DIR]      # default: site/ beside this file's folder

MkDocs (with mkdocstrings' Python handler and the Material theme, pinned in tools/lock/)
renders ``docs/pages`` and the API reference from the packages' docstrings; ``--strict``
turns every warning (a broken link, a docstring Griffe cannot parse, an out-of-date AmgX
configuration reference, see ``mkdocs_hooks.py``) into a failed build.  The packages must
be importable (``mkdocs_hooks.py`` reads the configuration parser's tables): Bazel's
``//docs:build`` and ``//docs:docs_test`` depend on them.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

DOCS = pathlib.Path(__file__).resolve().parent


class BuildError(Exception):
    """MkDocs failed or warned; the message holds its output."""


def build(site_dir: str | os.PathLike) -> list[pathlib.Path]:
    """Builds the site into ``site_dir``; returns its pages (one ``index.html`` each).

    Raises:
      BuildError: if MkDocs exits with an error or prints a warning.
    """
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",  # Material's banner about its future
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean",
         "--config-file", str(DOCS / "mkdocs.yml"), "--site-dir", str(site_dir)],
        capture_output=True, text=True, env=env, cwd=DOCS)
    output = result.stdout + result.stderr
    if result.returncode != 0 or "WARNING" in output:
        raise BuildError(f"mkdocs build failed (exit status {result.returncode}):\n{output}")
    return sorted(pathlib.Path(site_dir).rglob("index.html"))


def main(argv: list[str]) -> int:
    site_dir = pathlib.Path(argv[0] if argv else DOCS.parent / "site").resolve()
    try:
        pages = build(site_dir)
    except BuildError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"{len(pages)} pages, 0 warnings: {site_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
