"""Tests for the jaxsolve.layout package: its exports and the examples in its docstrings."""

import doctest
import importlib

import pytest

import jaxsolve.layout


def test_package_exports_only_documented_public_names():
    assert sorted(jaxsolve.layout.__all__) == jaxsolve.layout.__all__
    for name in jaxsolve.layout.__all__:
        exported = getattr(jaxsolve.layout, name)
        assert exported.__module__.startswith("jaxsolve.layout._"), name
        assert exported.__doc__ and "Examples" in exported.__doc__ or name == "numroc", name


@pytest.mark.parametrize("module", ["jaxsolve.layout", "jaxsolve.layout._plan",
                                    "jaxsolve.layout._block_cyclic", "jaxsolve.layout._native",
                                    "jaxsolve.layout._native_library"])
def test_docstring_examples_run(module):
    failed, attempted = doctest.testmod(importlib.import_module(module),
                                        optionflags=doctest.NORMALIZE_WHITESPACE)
    assert attempted > 0 and failed == 0
