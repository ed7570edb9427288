"""Tests for the jaxsolve.runtime package: its exports and the examples in its docstrings."""

from jaxsolve_testing import PackageChecks

import jaxsolve.runtime


class TestPackage(PackageChecks):
    package = jaxsolve.runtime
    require_examples = True
