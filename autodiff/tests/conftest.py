"""Fixtures for the jaxsolve.autodiff tests.

Every test starts with the users' defaults for x64 (off) and with strict
dtype and rank promotion (as Lineax's tests do), so that the rules never rely
on implicit promotion.  Tests that need 64-bit arrays request ``x64``.
"""

import jax
import pytest


def _set_config(name, value):
    previous = getattr(jax.config, name)
    jax.config.update(name, value)
    return previous


@pytest.fixture(autouse=True)
def strict_config():
    """x64 off, strict dtype promotion, rank promotion raises; then restores."""
    settings = {
        "jax_enable_x64": False,
        "jax_numpy_dtype_promotion": "strict",
        "jax_numpy_rank_promotion": "raise",
    }
    previous = {name: _set_config(name, value) for name, value in settings.items()}
    yield
    for name, value in previous.items():
        jax.config.update(name, value)


@pytest.fixture
def x64(strict_config):
    """Enables ``jax_enable_x64`` for one test."""
    del strict_config
    previous = _set_config("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)
