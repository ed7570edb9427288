"""Tests for the jaxsolve.autodiff package: its exports and docstring examples."""

import doctest
import importlib

import pytest

from jaxsolve import autodiff

MODULES = [
    "jaxsolve.autodiff",
    "jaxsolve.autodiff._cholesky",
    "jaxsolve.autodiff._decomposition_rule",
    "jaxsolve.autodiff._decompositions",
    "jaxsolve.autodiff._eigh",
    "jaxsolve.autodiff._linear_solve",
    "jaxsolve.autodiff._lstsq",
    "jaxsolve.autodiff._lu",
    "jaxsolve.autodiff._sparse_pattern",
    "jaxsolve.autodiff._testing",
]


class TestPackage:
    def test_package_exports_documented_names(self):
        assert sorted(autodiff.__all__) == autodiff.__all__
        for name in autodiff.__all__:
            exported = getattr(autodiff, name)
            assert exported.__module__.startswith("jaxsolve.autodiff._"), name
            assert exported.__doc__ and len(exported.__doc__.splitlines()) > 3, name

    @pytest.mark.parametrize("module_name", MODULES)
    def test_package_docstring_examples(self, module_name):
        module = importlib.import_module(module_name)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        examples = 0
        for test in doctest.DocTestFinder().find(module):
            runner.run(test)
            examples += len(test.examples)
        assert examples > 0
        assert runner.summarize(verbose=False).failed == 0
