"""JAX-AMG's configuration helpers (``jaxsolve.sparse.config``), on `parse_amgx_config`.

JAX-AMG's ``jaxamg.config`` names with JAX-AMG's arguments and meaning, as thin adapters
over :func:`jaxsolve.sparse.parse_amgx_config`, so that code written against JAX-AMG runs
with only its import changed:

* `prepare_config`: a user config (flat or nested) merged into the defaults, keyword
  overrides applied and residual tracking switched on, as AmgX's ``config_version: 2``
  JSON text, each scope named (what ``solve`` runs);
* `validate_config`: raises for a configuration ``solve`` would refuse;
* `outer_max_iters`: the outer solver's ``max_iters`` of such a text.

Examples:
  >>> import json
  >>> from jaxsolve.sparse.config import outer_max_iters, prepare_config
  >>> text = prepare_config({"solver": "CG", "max_iters": 100}, max_iters=50)
  >>> amgx = json.loads(text)
  >>> amgx["config_version"], amgx["solver"]["solver"], amgx["solver"]["store_res_history"]
  (2, 'CG', 1)
  >>> outer_max_iters(text)
  50
"""

from __future__ import annotations

import json
from typing import Any

from ._config import parse_amgx_config, with_overrides

__all__ = ["outer_max_iters", "prepare_config", "validate_config"]

# JAX-AMG switches these on in the outer scope so that info has residuals and a history.
_TRACKING = {"monitor_residual": 1, "store_res_history": 1}


def prepare_config(user_config: dict | str | None = None, save_stats: bool = False,
                   mpi: bool = False, block_dim: int = 1, **kwargs: Any) -> str:
    """The configuration ``solve`` runs, as AmgX's ``config_version: 2`` JSON text.

    ``user_config`` (flat, nested, or JSON text) is merged into jaxsolve's defaults
    (:func:`jaxsolve.sparse.parse_amgx_config` lists them), ``kwargs`` override keys of
    the outer solver's scope, and residual tracking (``monitor_residual``,
    ``store_res_history``) is switched on, as JAX-AMG does; ``save_stats`` switches on
    ``print_solve_stats`` and ``print_grid_stats``.

    Args:
      user_config: the configuration, or ``None`` for the defaults.
      save_stats: whether the solve reports its statistics.
      mpi: whether the solve is distributed (``solve(..., comm=...)``); jaxsolve's
        distributed solve accepts every configuration its single-process one does.
      block_dim: unknowns per node (``solve(..., block_dim=...)``), an int >= 1; it
        changes how ``solve`` runs the configuration, not the configuration.
      **kwargs: keys of the outer solver's scope, overriding ``user_config``'s.

    Returns:
      The JSON text, canonical (sorted keys): equal configurations give equal texts.

    Raises:
      ValueError, TypeError: as :func:`jaxsolve.sparse.parse_amgx_config`, or for a
        ``block_dim`` that is not an int >= 1.
    """
    del mpi  # no configuration is refused for distributed solves alone
    if isinstance(block_dim, bool) or not isinstance(block_dim, int) or block_dim < 1:
        raise ValueError(f"prepare_config: block_dim must be an int >= 1, got {block_dim!r}.")
    overrides = {**_TRACKING, **kwargs}
    if save_stats:
        overrides.update(print_solve_stats=1, print_grid_stats=1)
    config = with_overrides(user_config, overrides)
    return json.dumps(parse_amgx_config(config).to_amgx_dict(), sort_keys=True)


def validate_config(config: dict | str, *, mpi: bool = False, block_dim: int = 1) -> None:
    """Raises ``ValueError``/``TypeError`` for a configuration ``solve`` would refuse.

    The errors are :func:`jaxsolve.sparse.parse_amgx_config`'s: a key that is not AmgX's,
    a value out of range, a component jaxsolve does not implement.
    """
    prepare_config(config, mpi=mpi, block_dim=block_dim)


def outer_max_iters(config_str: str) -> int:
    """The outer solver's ``max_iters`` in a configuration (e.g. `prepare_config`'s text)."""
    return parse_amgx_config(config_str).max_iters
