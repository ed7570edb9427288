"""Shared fixtures of the jaxsolve.sparse tests.

Every test runs with x64 off (the users' default), strict dtype promotion and rank promotion
raising, so no code may rely on implicit promotion or broadcasting; tests that need 64-bit
types ask for `x64`.
"""

import jax
import pytest


@pytest.fixture(autouse=True)
def strict_config():
    """x64 off (users' default), strict dtype promotion, rank promotion raises; restored after."""
    settings = {"jax_enable_x64": False, "jax_numpy_dtype_promotion": "strict",
                "jax_numpy_rank_promotion": "raise"}
    previous = {name: getattr(jax.config, name) for name in settings}
    for name, value in settings.items():
        jax.config.update(name, value)
    yield
    for name, value in previous.items():
        jax.config.update(name, value)


@pytest.fixture
def x64(strict_config):
    """Enables ``jax_enable_x64`` for one test (restored by ``strict_config``)."""
    del strict_config
    jax.config.update("jax_enable_x64", True)
