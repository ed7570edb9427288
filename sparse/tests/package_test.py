"""Tests for the jaxsolve.sparse package: its exports and the examples in its docstrings."""

from jaxsolve_testing import PackageChecks

import jaxsolve.sparse


class TestPackage(PackageChecks):
    package = jaxsolve.sparse
