"""Tests for the jaxsolve.sparse package: its exports and the examples in its docstrings."""

import doctest
import importlib

import pytest

import jaxsolve.sparse


def test_package_exports_only_documented_public_names():
    assert sorted(jaxsolve.sparse.__all__) == jaxsolve.sparse.__all__
    for name in jaxsolve.sparse.__all__:
        exported = getattr(jaxsolve.sparse, name)
        assert exported.__doc__ and exported.__doc__.count("\n") > 2, name


@pytest.mark.parametrize("module", [
    "jaxsolve.sparse._aggregation", "jaxsolve.sparse._cache", "jaxsolve.sparse._classical", "jaxsolve.sparse._config", "jaxsolve.sparse._csr",
    "jaxsolve.sparse._hierarchy", "jaxsolve.sparse._krylov", "jaxsolve.sparse._preconditioner",
    "jaxsolve.sparse._solve",
    "jaxsolve.sparse._statistics", "jaxsolve.sparse._status", "jaxsolve.sparse.matrices",
    "jaxsolve.sparse._coloring", "jaxsolve.sparse._matrix_free",
    "jaxsolve.sparse._sparsity_tracing", "jaxsolve.sparse._distributed", "jaxsolve.sparse._blocks",
])
def test_docstring_examples_run(module):
    failed, attempted = doctest.testmod(importlib.import_module(module),
                                        optionflags=doctest.NORMALIZE_WHITESPACE)
    assert attempted > 0 and failed == 0
