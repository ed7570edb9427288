"""Fixtures of the jaxsolve.sparse tests.

Every test runs with x64 off (the users' default), strict dtype promotion and rank promotion
raising (`strict_config`), so no code may rely on implicit promotion or broadcasting; tests
that need 64-bit types ask for `x64`.
"""

from jaxsolve_testing import strict_config, x64  # noqa: F401  (fixtures)
