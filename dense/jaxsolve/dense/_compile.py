"""Compiled programs of the dense routines, cached per static configuration; `clear_cache`."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import jax

from . import _explicit
from ._arguments import Layout
from ._backend import clear_backends, preferred_backend, prepare_backends


@functools.lru_cache(maxsize=None)
def _program(body: Callable[..., Any], statics: tuple[Any, ...], arity: int,
             donate: bool, backend: str | None = None, return_work: bool = False
             ) -> Callable[..., Any]:
    del backend  # only a cache key: the preferred backend the program was traced under
    def program(*arrays):
        outputs, work = body(*statics, *arrays)
        return (outputs, work) if donate or return_work else outputs

    return jax.jit(program, donate_argnums=tuple(range(arity)) if donate else ())


def run(body: Callable[..., Any], statics: tuple[Any, ...], arrays: tuple[Any, ...],
        donate: bool = False, *, replicated_outputs: tuple[int, ...] = (),
        return_work: bool = False) -> Any:
    """``body(*statics, *arrays)``'s outputs, computed by one ``jax.jit`` program.

    `body` returns ``(outputs, work)``: ``work`` holds arrays of the donated inputs' shapes,
    shardings and dtypes (a factor that takes the input's place), returned only with `donate`
    so that XLA can write them into the donated buffers, and deleted at once. With `donate`,
    every input is deleted afterwards, also one that no output could reuse (XLA's warning about
    it is silenced: the caller asked for the buffer to go). `donate` is ignored when any input
    is traced (inside ``jax.jit``, ``jax.grad``, ``jax.jvp``, ``jax.vmap``): a transformation
    may need the inputs again (reverse mode keeps the primal), and the concrete arrays beside
    the traced ones are the caller's, never ours to delete. The program is built once per
    `body`, `statics` (hashable: layouts, flags), `donate` and preferred backend
    (`use_backend`); ``jax.jit`` then compiles it once per shape and dtype. Backends first
    ready what they cannot make while traced (`prepare_backends`). Arrays typed on a mesh of
    ``Explicit`` axes, or called under a context mesh of them (``jax.set_mesh``), go through the
    program on its Auto view (`jaxsolve.dense._explicit`); there the outputs at the positions
    `replicated_outputs` come back replicated (the body replicates them on Auto meshes).
    With `return_work` (and without `donate`) the result is ``(outputs, work)``, for the
    ``*_shardmap_ctx`` forms, whose caller's ``jax.jit`` donates.
    """
    for static in statics:
        if isinstance(static, Layout):
            prepare_backends(static)
    leaves = jax.tree.leaves(arrays)
    donate = donate and not any(isinstance(leaf, jax.core.Tracer) for leaf in leaves)
    if donate and len({id(leaf) for leaf in leaves}) < len(leaves):
        raise ValueError(
            "donate=True, but the same array is passed twice (e.g. as both a and b): a"
            " buffer can be donated once. Pass a copy, or donate=False."
        )
    program = _program(body, statics, len(arrays), donate, preferred_backend(), return_work)
    call = functools.partial(_call, program, donate)
    mesh = _explicit.explicit_mesh(leaves)
    if mesh is None:
        if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            return call(*arrays)
        with _explicit.auto_context():
            return call(*arrays)
    outputs = _explicit.call(call, arrays, mesh, tuple(
        (*([0] if return_work else []), position) for position in replicated_outputs))
    if donate:  # the donated buffers were the Auto views'; these arrays held them too
        _delete(leaves)
    return outputs


def run_for_context(body: Callable[..., Any], statics: tuple[Any, ...],
                    arrays: tuple[Any, ...], work_count: int, *,
                    replicated_outputs: tuple[int, ...] = ()) -> tuple[Any, ...]:
    """`run` for a ``*_shardmap_ctx`` form: ``(*work, *outputs)``, nothing donated here.

    ``work`` are `work_count` buffers of the first inputs' shapes, dtypes and shardings, for the
    caller's ``jax.jit`` to alias its donated inputs into (JAXMg returns them first): the
    body's work (a factor computed in place of ``a``) where it has one, else the input itself.
    """
    outputs, work = run(body, statics, arrays, replicated_outputs=replicated_outputs,
                        return_work=True)
    return (*work, *arrays[len(work):work_count], *outputs)


def _call(program: Callable[..., Any], donate: bool, *arrays: Any) -> Any:
    if not donate:  # (with return_work, the program's own (outputs, work))
        return program(*arrays)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
        outputs, work = program(*arrays)
    _delete([*jax.tree.leaves(work), *jax.tree.leaves(arrays)])
    return outputs


def _delete(leaves: list[Any]) -> None:
    for leaf in leaves:
        if isinstance(leaf, jax.Array) and not leaf.is_deleted():
            leaf.delete()


def clear_cache() -> None:
    """Drops every compiled dense program and every backend's cached state.

    The next call of each routine traces and compiles again. Native backends free their cached
    solver handles, process grids and workspaces here; the XLA reference backend keeps none.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> x = dense.potrs(jnp.eye(2), jnp.ones(2))
      >>> dense.clear_cache()
      >>> dense.potrs(jnp.eye(2), jnp.ones(2))
      Array([1., 1.], dtype=float32)
    """
    _program.cache_clear()
    clear_backends()
