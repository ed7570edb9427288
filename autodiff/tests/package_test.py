"""Tests for the jaxsolve.autodiff package: its exports and the examples in its docstrings."""

from jaxsolve_testing import PackageChecks

import jaxsolve.autodiff


class TestPackage(PackageChecks):
    package = jaxsolve.autodiff
