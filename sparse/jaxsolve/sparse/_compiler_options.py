"""The XLA options jaxsolve compiles its solves and setups with: a first call that compiles
in seconds on a CPU.

A solve's first call compiles its programs (the numeric setup, the Krylov loop with its
cycle), and on a CPU that compilation is most of the call: XLA's CPU backend emits each
fusion of a program as a kernel of its own and optimizes it with LLVM, tens of
milliseconds apiece, and an AMG solve has hundreds of small fusions (a level's vectors have
a shape of their own, and the Krylov method's bookkeeping is scalar fusions). XLA's
*fusion emitters* (its MLIR code generator for those kernels, the CPU default since 2025)
take about twice as long per kernel as its elemental emitters, for kernels that run no
faster here: each of a solve's fusions is a pass over one or two vectors, bound by memory.
Measured on 100 k rows on two cores (``tools/bench/sparse_first_call.py``): the programs of
the default solve compile in 3.6 s instead of 6.5 s of CPU time, and the warm solve takes
as long (72 against 77 ms).

They apply to the programs jaxsolve compiles itself: a concrete ``solve``'s loop
(:func:`jit`, ``jax.jit`` with these options) and the numeric setups it compiles ahead of
time (``lowered.compile(compiler_options=COMPILER_OPTIONS)``). JAX refuses compiler options
on a ``jit`` staged into another's trace, so a function of :func:`jit` called while the
caller's ``jax.jit`` traces (a solve on arrays it closes over) runs as a plain ``jax.jit``,
compiled with the caller's options. GPU compilers ignore them.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
from jax.extend.core import unsafe_am_i_under_a_jit_DO_NOT_USE

COMPILER_OPTIONS: dict[str, Any] = {"xla_cpu_use_fusion_emitters": False}
"""XLA's debug options for jaxsolve's programs (see the module's docstring)."""


def staging() -> bool:
    """Whether a caller's ``jax.jit`` is tracing now (JAX's own test for it).

    A jitted function called then is staged into the caller's program: its results are
    tracers even when every argument is a concrete array the caller closed over, so
    nothing may read them on the host.
    """
    return unsafe_am_i_under_a_jit_DO_NOT_USE()


def jit(fun: Any = None, **kwargs: Any) -> Any:
    """``jax.jit(fun, **kwargs)`` compiling with :data:`COMPILER_OPTIONS` when called outside
    any trace, and without them inside one (see the module); without ``fun``, a decorator
    (``@jit(static_argnums=0)``). Its ``lower``, ``trace`` and the like are the optioned
    ``jax.jit``'s.

    >>> import jax, jax.numpy as jnp
    >>> double = jit(lambda x: 2 * x)
    >>> double(jnp.ones(2)), jax.jit(lambda: double(jnp.ones(2)))()
    (Array([2., 2.], dtype=float32), Array([2., 2.], dtype=float32))
    """
    if fun is None:
        return functools.partial(jit, **kwargs)
    return _OutsideTraces(fun, kwargs)


class _OutsideTraces:
    """A function jitted twice: with :data:`COMPILER_OPTIONS` for calls outside any trace,
    without them for calls staged into a caller's trace."""

    def __init__(self, fun: Any, kwargs: dict[str, Any]):
        functools.update_wrapper(self, fun)
        self._optioned = jax.jit(fun, compiler_options=COMPILER_OPTIONS, **kwargs)
        self._plain = jax.jit(fun, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return (self._plain if staging() else self._optioned)(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._optioned, name)
