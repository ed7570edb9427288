"""Tests for the jaxsolve.sharding package: its exports and the examples in its docstrings."""

import doctest
import importlib

import pytest

import jaxsolve.sharding as js

MODULES = [
    "jaxsolve.sharding",
    "jaxsolve.sharding._halo",
    "jaxsolve.sharding._initialize",
    "jaxsolve.sharding._launcher",
    "jaxsolve.sharding._mesh",
    "jaxsolve.sharding._nccl",
    "jaxsolve.sharding._partition",
    "jaxsolve.sharding._sharded",
]


class TestPackage:
    def test_package_exports_documented_names(self):
        assert sorted(js.__all__) == js.__all__
        for name in js.__all__:
            exported = getattr(js, name)
            assert exported.__module__.startswith("jaxsolve.sharding._"), name
            assert exported.__doc__ and "Examples:" in exported.__doc__, name

    @pytest.mark.parametrize("module_name", MODULES)
    def test_package_docstring_examples(self, module_name, single_process_environment):
        module = importlib.import_module(module_name)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        examples = 0
        for test in doctest.DocTestFinder().find(module):
            runner.run(test)
            examples += len(test.examples)
        assert examples > 0
        assert runner.summarize(verbose=False).failed == 0
