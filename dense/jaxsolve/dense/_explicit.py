"""Meshes of ``Explicit`` axes: the dense routines on arrays whose types carry their sharding.

``jax.make_mesh`` makes ``Explicit`` axes by default, and an array put on such a mesh carries
its sharding in its type (``jax.typeof(a)`` is ``f32[8@pr,8@pc]``): ``jax.numpy`` and
``jax.lax`` then propagate shardings by type rules, and refuse what the rules cannot decide. The
dense routines' programs are written for ``Auto`` axes (XLA places what is not constrained;
``lax.linalg`` of a sharded matrix gathers it), so they run on the **Auto view** of the mesh —
the same devices and axis names with every axis ``Auto`` (`_arguments.auto_view`) — and their
outputs are typed back onto the caller's mesh:

* concrete arrays (a call outside ``jax.jit``) are viewed on the Auto mesh with
  ``jax.device_put``, which moves no data (same devices, same split), so ``donate=True`` is
  still in place; the outputs are viewed back the same way;
* traced arrays (inside ``jax.jit``, ``jax.grad``, ``jax.vmap``) enter the program through
  ``jax.sharding.auto_axes``, which drops the sharding from their types for its duration.

A context mesh of ``Explicit`` axes (``jax.set_mesh(jax.make_mesh(...))``, as JAXMg's examples
do) types every array a program makes on it, and ``with_sharding_constraint`` turns into an
assertion there; so a call outside ``jax.jit`` runs its program under the context's Auto view
(`auto_context`). Inside ``jax.jit``, ``jax.sharding.auto_axes`` switches the context itself.

Either way an output gets the spec `output_spec` gives it: the spec of the (last) input of its
shape, so that a solution comes back split like ``b`` and eigenvectors, factors and ``Q`` like
``a``; another matrix is split like ``a`` where its dimensions divide evenly (``R``, ``Vᴴ``, as
`Layout.sharding_for` splits them on Auto meshes); vectors and scalars (eigenvalues, singular
values, log-determinants, statuses) are replicated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from ._arguments import named_sharding


def _typed_sharding(x: Any) -> NamedSharding | None:
    """The sharding in `x`'s type, where its mesh has an ``Explicit`` axis."""
    sharding = getattr(jax.typeof(x), "sharding", None)
    mesh = getattr(sharding, "mesh", None)
    if mesh is None or not any(kind == AxisType.Explicit for kind in mesh.axis_types):
        return None
    return sharding


def explicit_mesh(leaves: Sequence[Any]) -> Any:
    """The (abstract) ``Explicit`` mesh the inputs are typed on, if any; a ValueError when
    there are two."""
    meshes = {sharding.mesh for sharding in map(_typed_sharding, leaves) if sharding is not None}
    if len(meshes) > 1:
        raise ValueError(
            "the dense routines' inputs are typed on different Explicit meshes; put them on "
            "one mesh.")
    return next(iter(meshes), None)


def output_spec(shape: tuple[int, ...], inputs: Sequence[Any]) -> PartitionSpec:
    """The spec of an output of `shape`: the last input's of that shape, else for a matrix
    the first input matrix's split where the dimensions divide evenly, else replicated."""
    for x in reversed(inputs):
        if tuple(x.shape) == tuple(shape):
            sharding = _typed_sharding(x)
            return PartitionSpec() if sharding is None else sharding.spec
    matrices = [sharding for x in inputs if len(x.shape) == 2
                if (sharding := _typed_sharding(x)) is not None]
    if len(shape) != 2 or not matrices:
        return PartitionSpec()
    split, sizes = matrices[0].spec, matrices[0].mesh.shape
    entries = (*tuple(split), None, None)[:2]
    return PartitionSpec(*[axis if axis is None or size % sizes[axis] == 0 else None
                           for size, axis in zip(shape, entries)])


@contextlib.contextmanager
def auto_context() -> Iterator[None]:
    """Runs its body with the context mesh's ``Explicit`` axes made ``Auto`` (the same
    devices, names and sizes; ``Manual`` axes of an enclosing ``shard_map`` stay), where
    ``jax.set_mesh`` set a mesh with ``Explicit`` axes; otherwise changes nothing."""
    context = jax.sharding.get_abstract_mesh()
    explicit = {name: AxisType.Auto for name, kind in zip(context.axis_names, context.axis_types)
                if kind == AxisType.Explicit}
    if not explicit:
        yield
        return
    with jax.sharding.use_abstract_mesh(context.update_axis_types(explicit)):
        yield


def call(program: Callable[..., Any], arrays: tuple[Any, ...], mesh: Any,
         replicated: tuple[tuple[int, ...], ...] = ()) -> Any:
    """``program(*arrays)`` (an Auto-mesh program) on `arrays` typed on the Explicit `mesh`
    (`explicit_mesh`), outputs typed back onto it (see the module's docstring); the outputs
    under the tuple positions in `replicated` (``(0,)`` is the first output, ``(0, 1)`` the
    second element of the first) come back replicated."""
    leaves = jax.tree.leaves(arrays)
    prefixes = [tuple(map(jax.tree_util.SequenceKey, position)) for position in replicated]

    def place(outputs, put):  # put(output, its spec) for every output leaf
        def spec(path, out):
            if any(tuple(path[:len(prefix)]) == prefix for prefix in prefixes):
                return PartitionSpec()
            return output_spec(out.shape, leaves)
        return jax.tree_util.tree_map_with_path(lambda path, out: put(out, spec(path, out)),
                                                outputs)

    if not any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        concrete = next(x.sharding.mesh for x in leaves if _typed_sharding(x) is not None)
        with auto_context():
            outputs = program(*jax.tree.map(_on_auto_view, arrays))
        return place(outputs, lambda out, spec: jax.device_put(out, NamedSharding(concrete, spec)))
    # The outputs' shapes first (any out_sharding serves to trace it), then their specs.
    replicated = NamedSharding(mesh, PartitionSpec())
    shapes = jax.eval_shape(jax.sharding.auto_axes(program, out_sharding=replicated), *arrays)
    out_sharding = place(shapes, lambda out, spec: NamedSharding(mesh, spec))
    return jax.sharding.auto_axes(program, out_sharding=out_sharding)(*arrays)


def _on_auto_view(x: Any) -> Any:
    """A concrete array typed on an Explicit mesh, viewed on that mesh's Auto view (no copy)."""
    if _typed_sharding(x) is None:
        return x
    return jax.device_put(x, named_sharding(x))
