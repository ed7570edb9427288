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

They apply to the programs jaxsolve compiles itself, outside any trace: a concrete
``solve``'s loop (:func:`jit`, ``jax.jit`` with these options) and the numeric setups it
compiles ahead of time (``lowered.compile(compiler_options=COMPILER_OPTIONS)``). JAX refuses
compiler options on a ``jit`` staged into another's trace, so a function that may run inside
the caller's ``jax.jit`` keeps the plain ``jax.jit``, and is compiled with the caller's
options. GPU compilers ignore them.
"""

from __future__ import annotations

import functools
from typing import Any

import jax

COMPILER_OPTIONS: dict[str, Any] = {"xla_cpu_use_fusion_emitters": False}
"""XLA's debug options for jaxsolve's programs (see the module's docstring)."""


def jit(fun: Any = None, **kwargs: Any) -> Any:
    """``jax.jit(fun, **kwargs)`` compiling with :data:`COMPILER_OPTIONS`; without ``fun``,
    a decorator (``@jit(static_argnums=0)``). Only for a function called outside any trace
    (JAX raises ``ValueError`` when a trace stages it).

    >>> import jax.numpy as jnp
    >>> jit(lambda x: 2 * x)(jnp.ones(2))
    Array([2., 2.], dtype=float32)
    """
    if fun is None:
        return functools.partial(jit, **kwargs)
    return jax.jit(fun, compiler_options=COMPILER_OPTIONS, **kwargs)
