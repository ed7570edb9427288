"""Tests for the jaxsolve.dense package: its exports and the examples in its docstrings."""

import inspect

import pytest
from jaxsolve_testing import PackageChecks

import jaxsolve.dense


class TestPackage(PackageChecks):
    package = jaxsolve.dense


# JAXMg 1.4's positional order and keywords (in its order), then jaxsolve's own keywords.
@pytest.mark.parametrize("name, positional, keyword", [
    ("potrs", "a b T_A=256 mesh=None matrix_specs=None",
     "in_specs=None return_logdet=False return_status=False pad=True donate=False "
     "replicate_x=True"),
    ("lu_solve", "a b T_A=256 mesh=None matrix_specs=None",
     "in_specs=None return_status=False pad=True donate=False replicate_x=True"),
    ("syevd", "a T_A=256 mesh=None matrix_specs=None",
     "in_specs=None return_eigenvectors=True return_status=False pad=True donate=False"),
    ("sygvd", "a b T_A=256 mesh=None matrix_specs=None",
     "in_specs=None return_eigenvectors=True return_status=False pad=True donate=False"),
    ("least_squares", "a b T_A=256 mesh=None matrix_specs=None",
     "in_specs=None return_status=False pad=True donate=False replicate_x=True"),
    ("qr", "a T_A=256 mesh=None matrix_specs=None",
     "in_specs=None return_status=False pad=True donate=False"),
    ("gesvd", "a T_A=256 mesh=None matrix_specs=None",
     "in_specs=None compute_u=True compute_vh=True full_matrices=False return_status=False "
     "pad=True donate=False"),
    ("polar", "a T_A=256 mesh=None matrix_specs=None",
     "in_specs=None compute_h=True return_status=False pad=True donate=False"),
    ("cho_inverse", "a T_A=256 mesh=None matrix_specs=None",
     "in_specs=None return_status=False pad=True donate=False"),
])
def test_jaxmg_signatures(name, positional, keyword):
    parameters = inspect.signature(getattr(jaxsolve.dense, name)).parameters.values()

    def shown(kinds):
        return " ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}"
                        for p in parameters if p.kind in kinds)

    assert shown((inspect.Parameter.POSITIONAL_OR_KEYWORD,)) == positional
    assert shown((inspect.Parameter.KEYWORD_ONLY,)) == keyword
