"""Compiled programs a solve keeps beside JAX's own caches, by kind.

Some programs a solve runs are compiled ahead of time (``jit(...).lower(...).compile()``)
rather than called through ``jax.jit``: an executable runs when it is called, also while a
caller's jit traces a solve on concrete values, and its key can say more than the
arguments' shapes (a size class, a strength rule).  JAX does not cache such executables,
so :class:`CompiledPrograms` does: the most recently used ones of one kind, by key.  They
hold no arrays and no values — a setup's arrays are their arguments — so
:func:`~jaxsolve.sparse.clear_cache`, which drops the setups, leaves them (a pattern set
up again, say for another operator on it, compiles nothing), and
:func:`~jaxsolve.sparse.finalize` drops every kind (:func:`clear_all`).

>>> import jax
>>> squares = CompiledPrograms("squares", kept=2)
>>> program = squares.get(3, lambda: jax.jit(lambda x: x * x).lower(3.0).compile())
>>> float(program(3.0)), len(squares)
(9.0, 1)
>>> squares.get(3, lambda: None) is program  # kept: not compiled again
True
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["CompiledPrograms", "clear_all"]


class CompiledPrograms:
    """The most recently used compiled programs of one kind, by key (thread-safe).

    Args:
      kind: what the programs compute, for their readers (``"numeric setup"``).
      kept: how many programs are kept; the least recently used beyond are dropped.
    """

    def __init__(self, kind: str, *, kept: int = 64):
        self.kind = kind
        self.kept = kept
        self._programs: collections.OrderedDict[Hashable, Any] = collections.OrderedDict()
        self._lock = threading.Lock()
        _EVERY_KIND.append(self)

    def get(self, key: Hashable, compile: Callable[[], Any]) -> Any:
        """The program kept for ``key``, else ``compile()``'s, kept from now on."""
        with self._lock:
            program = self._programs.get(key)
            if program is not None:
                self._programs.move_to_end(key)
                return program
        program = compile()
        with self._lock:
            self._programs[key] = program
            while len(self._programs) > self.kept:
                self._programs.popitem(last=False)
        return program

    def programs(self) -> list[Any]:
        """The programs kept, least recently used first."""
        with self._lock:
            return list(self._programs.values())

    def clear(self) -> None:
        """Drops every program of this kind."""
        with self._lock:
            self._programs.clear()

    def __len__(self) -> int:
        return len(self._programs)

    def __repr__(self) -> str:
        return f"CompiledPrograms({self.kind!r}, {len(self)} of {self.kept} kept)"


def clear_all() -> None:
    """Drops the programs of every kind (:func:`~jaxsolve.sparse.finalize`)."""
    for programs in _EVERY_KIND:
        programs.clear()


_EVERY_KIND: list[CompiledPrograms] = []
