"""Tests for the jaxsolve.layout package: its exports and the examples in its docstrings."""

from jaxsolve_testing import PackageChecks

import jaxsolve.layout


class TestPackage(PackageChecks):
    package = jaxsolve.layout
    require_examples = True
