"""Tests for the jaxsolve.dense package: its exports and docstring examples."""

import doctest
import importlib
import inspect

import pytest

from jaxsolve import dense

MODULES = [
    "jaxsolve.dense",
    "jaxsolve.dense._backend",
    "jaxsolve.dense._cholesky",
    "jaxsolve.dense._compile",
    "jaxsolve.dense._decompositions",
    "jaxsolve.dense._eigen",
    "jaxsolve.dense._factor",
    "jaxsolve.dense._lu",
    "jaxsolve.dense._status",
]


class TestPackage:
    def test_package_exports_documented_names(self):
        assert sorted(dense.__all__) == dense.__all__
        for name in dense.__all__:
            exported = getattr(dense, name)
            assert exported.__module__.startswith("jaxsolve.dense._"), name
            assert exported.__doc__ and len(exported.__doc__.splitlines()) > 3, name

    @pytest.mark.parametrize("name, positional, keyword", [
        ("potrs", "a b T_A=256 mesh=None matrix_specs=None",
         "in_specs=None return_logdet=False return_status=False pad=True donate=False"),
        ("lu_solve", "a b T_A=256 mesh=None matrix_specs=None",
         "in_specs=None return_status=False pad=True donate=False"),
        ("syevd", "a T_A=256 mesh=None matrix_specs=None",
         "return_eigenvectors=True return_status=False pad=True donate=False"),
        ("sygvd", "a b T_A=256 mesh=None matrix_specs=None",
         "return_eigenvectors=True return_status=False pad=True donate=False"),
        ("least_squares", "a b T_A=256 mesh=None matrix_specs=None",
         "in_specs=None return_status=False pad=True donate=False"),
        ("qr", "a T_A=256 mesh=None matrix_specs=None",
         "return_status=False pad=True donate=False"),
    ])
    def test_jaxmg_signatures(self, name, positional, keyword):
        parameters = inspect.signature(getattr(dense, name)).parameters.values()

        def shown(kinds):
            return " ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}"
                            for p in parameters if p.kind in kinds)

        assert shown((inspect.Parameter.POSITIONAL_OR_KEYWORD,)) == positional
        assert shown((inspect.Parameter.KEYWORD_ONLY,)) == keyword

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
