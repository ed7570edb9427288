"""Shared setup for the jaxsolve.runtime tests: every test starts from the users' defaults
(x64 off) and strict promotion (`strict_config`)."""

from jaxsolve_testing import strict_config  # noqa: F401  (fixture)
