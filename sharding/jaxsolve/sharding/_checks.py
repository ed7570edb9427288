"""Argument checks shared by the public functions of ``jaxsolve.sharding``."""

from __future__ import annotations

import numbers


def check_positive_int(function: str, name: str, value: object, meaning: str) -> int:
    """Returns `value` as an int, or raises if it is not an integer ``>= 1``.

    Args:
      function: the public function checked, for the message (``"make_grid_mesh"``).
      name: the argument's name.
      value: the argument.
      meaning: what the argument counts, for the message (``"the number of process rows"``).

    Raises:
      TypeError: if `value` is not an integer (a `bool` is not one here).
      ValueError: if `value` is below 1.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{function}: {name}={value!r} must be an int, {meaning}; "
            f"got a {type(value).__name__}."
        )
    if value < 1:
        raise ValueError(f"{function}: {name}={value} must be at least 1, {meaning}.")
    return int(value)


def check_rank(function: str, rank: object, nranks: int) -> int:
    """`rank` as an int, or raises if it is not one of ``0 .. nranks - 1``."""
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise TypeError(f"{function}: rank={rank!r} must be an int, this rank's number; got a "
                        f"{type(rank).__name__}.")
    if not 0 <= rank < nranks:
        raise ValueError(f"{function}: rank={rank} is not one of the {nranks} ranks 0 to "
                         f"{nranks - 1}.")
    return int(rank)
