"""The documentation site builds with warnings as errors, and the pages' examples run.

Every ```` ```pycon ```` block of ``docs/pages`` is a doctest (ELLIPSIS and
NORMALIZE_WHITESPACE), run page by page, so the pages cannot show code that does not work.
JAX sees four CPU devices, for the pages that shard.
"""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=4").strip()

import doctest  # noqa: E402
import logging  # noqa: E402
import pathlib  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402

import build_site  # noqa: E402
import griffe_docstrings  # noqa: E402
import mkdocs_hooks  # noqa: E402

PAGES = sorted((build_site.DOCS / "pages").rglob("*.md"))
_EXAMPLE_BLOCK = re.compile(r"^```pycon\n(.*?)^```", re.MULTILINE | re.DOTALL)


def page_examples(page: pathlib.Path) -> str:
    """The ``pycon`` blocks of ``page``, one doctest text."""
    return "\n".join(_EXAMPLE_BLOCK.findall(page.read_text()))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site_dir = tmp_path_factory.mktemp("site")
    return site_dir, build_site.build(site_dir)


def test_site_builds_one_page_per_source_page_without_warnings(site):
    site_dir, pages = site
    assert len(pages) == len(PAGES)
    solve_page = (site_dir / "packages" / "sparse-solve" / "index.html").read_text()
    assert 'id="jaxsolve.sparse.solve"' in solve_page  # the API reference, from docstrings
    assert "AMG-preconditioned Krylov method" in solve_page  # the docstring's summary
    sparse_page = (site_dir / "packages" / "sparse" / "index.html").read_text()
    assert 'id="jaxsolve.sparse.describe"' in sparse_page
    assert ":func:" not in sparse_page + solve_page  # Sphinx roles became code


def test_config_reference_lists_every_key_the_parser_reads(site):
    site_dir, _ = site
    reference = (site_dir / "reference" / "amgx-config" / "index.html").read_text()
    config = mkdocs_hooks._config_module()
    for key in (*config._IMPLEMENTED_KEYS, *config._DEFAULT_ONLY_KEYS, *config._IGNORED_KEYS):
        assert f"<code>{key}</code>" in reference, key


def test_config_reference_fails_on_an_undescribed_key(monkeypatch):
    monkeypatch.delitem(mkdocs_hooks.MEANINGS, "cycle")
    with pytest.raises(ValueError, match=r"\['cycle'\] read by the parser but not described"):
        mkdocs_hooks.config_reference()


@pytest.mark.parametrize("page", [p for p in PAGES if page_examples(p)],
                         ids=lambda p: str(p.relative_to(build_site.DOCS / "pages")))
def test_page_examples_run(page, monkeypatch):
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))  # a page may
    monkeypatch.setattr(logging.root, "level", logging.root.level)  # configure logging
    test = doctest.DocTestParser().get_doctest(page_examples(page), {}, page.name, str(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert test.examples and runner.failures == 0, f"{runner.failures} examples failed in {page}"


def test_docstring_conversion_examples():
    failed, attempted = doctest.testmod(griffe_docstrings)
    assert attempted and not failed
