"""Fixtures for the jaxsolve.autodiff tests.

Every test starts with the users' defaults for x64 (off) and with strict dtype and rank
promotion (`strict_config`), so that the rules never rely on implicit promotion. Tests that
need 64-bit arrays request ``x64``.
"""

from jaxsolve_testing import strict_config, x64  # noqa: F401  (fixtures)
