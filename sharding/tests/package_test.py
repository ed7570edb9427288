"""Tests for the jaxsolve.sharding package: its exports and the examples in its docstrings."""

import pytest
from jaxsolve_testing import PackageChecks

import jaxsolve.sharding


@pytest.mark.usefixtures("single_process_environment")  # initialize() in the examples: one process
class TestPackage(PackageChecks):
    package = jaxsolve.sharding
    require_examples = True
