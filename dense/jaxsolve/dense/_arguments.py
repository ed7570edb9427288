"""Arguments of the dense routines: checks, and the mesh/spec contract (`Layout`).

A dense routine takes a matrix sharded over a mesh in one of two ways, as JAXMg does:

* over a 2D process grid, ``P('pr', 'pc')``: rows split over the mesh axis ``'pr'`` (P_r
  devices), columns over ``'pc'`` (P_c devices), e.g. a mesh from
  `jaxsolve.sharding.make_grid_mesh`;
* over a single axis, ``P('x', None)`` (or ``P('x')``, the same) or ``P(None, 'x')``: a
  P_r × 1 (or 1 × P_c) grid, e.g. a mesh from `jaxsolve.sharding.row_mesh`.

Each dimension is split over one mesh axis or none, at least one is split, every mesh axis of
more than one device splits a dimension (a matrix replicated over a mesh axis would be solved
several times), and each split dimension divides evenly. A right-hand side ``b`` is split by rows
like the matrix's rows, or replicated. Outputs come back in the caller's sharding: solutions in
``b``'s, matrices in ``a``'s; eigenvalues, singular values, log-determinants and statuses
replicated.

When ``mesh`` and the specs are not given they are read off the arrays' shardings (a
`jax.sharding.NamedSharding`). An array without one (a NumPy array, an array on one device, a
value traced by ``jax.jit``) leaves the placement to XLA: inside ``jax.jit``, pass ``mesh`` and
``matrix_specs`` (and ``in_specs`` for ``b``'s spec) to fix it. A mesh of ``Explicit`` axes
(``jax.make_mesh``'s default) is taken as its `auto_view`, on which the routines' programs run;
`jaxsolve.dense._explicit` says how arrays typed on it go in and come out.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

SUPPORTED_DTYPES = (
    np.dtype(np.float32),
    np.dtype(np.float64),
    np.dtype(np.complex64),
    np.dtype(np.complex128),
)


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a routine's operands live: a mesh, the specs, and the block-cyclic tiling.

    ``mesh is None`` leaves placement to XLA (nothing to constrain). Otherwise ``matrix_spec``
    has two entries (mesh axis names or ``None``) and ``rhs_spec`` one per dimension of ``b``
    (``None`` when the routine has no ``b``, or when its spec is left to XLA). ``tile``
    (``T_A``) and ``pad`` are what a native backend lays the matrix out with; the XLA
    reference backend ignores them. Hashable: it is part of the compilation cache key.
    """

    mesh: Mesh | None = None
    matrix_spec: PartitionSpec | None = None
    rhs_spec: PartitionSpec | None = None
    tile: int = 256
    pad: bool = True
    device_platform: str | None = None  # without a mesh: the device's of a concrete matrix
    replicate_solution: bool = False  # x replicated (JAXMg's placement), else split like b

    @property
    def platform(self) -> str | None:
        """Where the routine runs: ``"cpu"``, ``"gpu"``, ... (the mesh's devices', else the
        matrix's device's), or None for a value traced without a mesh: its platform is the one
        the program is lowered for, which `jaxsolve.dense._backend.services` leaves to
        ``jax.lax.platform_dependent`` (JAX's default backend need not be it: a program on
        arrays committed to the CPU of a GPU host runs on the CPU)."""
        if self.mesh is not None:
            return self.mesh.devices.flat[0].platform
        return self.device_platform

    def on_platform(self, platform: str) -> Layout:
        """This layout, its matrix on one device of `platform` (a layout without a mesh)."""
        return dataclasses.replace(self, device_platform=platform)

    @property
    def grid(self) -> tuple[int, int]:
        """``(P_r, P_c)``, the process grid the matrix is split over."""
        if self.mesh is None:
            return (1, 1)
        rows, cols = self.matrix_spec
        return (_axis_size(self.mesh, rows), _axis_size(self.mesh, cols))

    def matrix_sharding(self) -> NamedSharding | None:
        """The sharding of an ``(m, n)`` matrix on this layout."""
        return None if self.mesh is None else NamedSharding(self.mesh, self.matrix_spec)

    def sharding_for(self, shape: tuple[int, ...]) -> NamedSharding | None:
        """An output matrix of `shape` split like the matrix where its dimensions divide evenly.

        A ``(k, n)`` factor (``R``, ``Vᴴ``) of an ``(m, n)`` matrix keeps the column split and
        keeps the row split only if ``k`` divides evenly; otherwise that dimension is
        replicated.
        """
        if self.mesh is None:
            return None
        entries = [axis if size % _axis_size(self.mesh, axis) == 0 else None
                   for size, axis in zip(shape, self.matrix_spec)]
        return NamedSharding(self.mesh, PartitionSpec(*entries))

    def rhs_sharding(self) -> NamedSharding | None:
        """The sharding of ``b`` and of the solution ``x``."""
        if self.mesh is None or self.rhs_spec is None:
            return None
        return NamedSharding(self.mesh, self.rhs_spec)

    def solution_sharding(self) -> NamedSharding | None:
        """The sharding of the solution ``x``: replicated with ``replicate_solution``, else
        ``b``'s."""
        return self.replicated() if self.replicate_solution else self.rhs_sharding()

    def rows_sharding(self, ndim: int) -> NamedSharding | None:
        """A ``(n,)`` or ``(n, k)`` array split by rows like the matrix's rows."""
        if self.mesh is None:
            return None
        return NamedSharding(self.mesh, PartitionSpec(self.matrix_spec[0], *[None] * (ndim - 1)))

    def replicated(self) -> NamedSharding | None:
        """Replicated over the mesh."""
        return None if self.mesh is None else NamedSharding(self.mesh, PartitionSpec())

    def with_rhs_spec(self, rhs_spec: PartitionSpec | None) -> Layout:
        return dataclasses.replace(self, rhs_spec=rhs_spec)

    def with_replicated_solution(self, replicate: bool) -> Layout:
        return dataclasses.replace(self, replicate_solution=bool(replicate))


def show_spec(spec: Any) -> str:
    """A spec as ``P('pr', 'pc')`` whatever JAX's own repr (it changes between releases)."""
    if isinstance(spec, (PartitionSpec, tuple, list)):
        return "P(" + ", ".join(repr(entry) for entry in tuple(spec)) + ")"
    return repr(spec)


def constrain(x: Any, sharding: NamedSharding | None) -> Any:
    """``x`` constrained to `sharding` (inside ``jax.jit``); unchanged when ``None``."""
    if sharding is None:
        return x
    return jax.lax.with_sharding_constraint(x, sharding)


def _axis_size(mesh: Mesh, axis: str | None) -> int:
    return 1 if axis is None else mesh.shape[axis]


# ------------------------------------------------------------------- scalar arguments


def check_tile(caller: str, tile: Any) -> int:
    """``T_A`` as an int, after checking that it is positive."""
    if isinstance(tile, (bool, np.bool_)) or not isinstance(tile, (int, np.integer)) or tile < 1:
        raise ValueError(
            f"{caller}: T_A must be a positive int (the tile size of the 2D block-cyclic "
            f"layout), got {tile!r}."
        )
    return int(tile)


def check_flag(caller: str, name: str, value: Any) -> bool:
    """A boolean keyword argument, checked."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{caller}: {name} must be True or False, got {value!r}.")
    return bool(value)


# ------------------------------------------------------------------------- arrays


def checked_array(caller: str, name: str, x: Any) -> Any:
    """`x` as a JAX array (or tracer) of a supported dtype; NumPy input is converted."""
    if isinstance(x, jax.Array):  # includes tracers
        dtype = x.dtype
    elif not isinstance(x, (np.ndarray, np.generic)):  # lists, scalars: JAX's default dtypes
        x = jnp.asarray(x)
        dtype = x.dtype
    else:  # NumPy keeps its dtype: a float64 array without x64 is refused, not truncated
        dtype = x.dtype
        if dtype.itemsize == 8 and dtype.kind == "f" or dtype == np.complex128:
            if not jax.config.jax_enable_x64:
                raise ValueError(
                    f"{caller}: {name} has dtype {dtype}, but 64-bit arrays need "
                    "jax.config.update('jax_enable_x64', True) (jaxsolve never changes it); "
                    f"enable it, or pass {name} as "
                    f"{'complex64' if dtype.kind == 'c' else 'float32'}."
                )
    if np.dtype(dtype) not in SUPPORTED_DTYPES:
        raise ValueError(
            f"{caller}: {name} has dtype {dtype}; supported dtypes are float32, float64, "
            "complex64 and complex128."
        )
    return x if isinstance(x, jax.Array) else jnp.asarray(x)


def check_square(caller: str, a: Any) -> None:
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ValueError(
            f"{caller}: a must be a non-empty square (n, n) matrix, got shape {a.shape}; use "
            "jax.vmap for stacks of matrices."
        )


def check_matrix(caller: str, a: Any, name: str = "a") -> None:
    if a.ndim != 2 or 0 in a.shape:
        raise ValueError(
            f"{caller}: {name} must be a non-empty (m, n) matrix, got shape {a.shape}; use "
            "jax.vmap for stacks of matrices."
        )


def check_rhs(caller: str, a: Any, b: Any) -> None:
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(
            f"{caller}: b must have shape ({a.shape[0]},) or ({a.shape[0]}, k) for a of shape "
            f"{a.shape}, got {b.shape}."
        )
    if b.dtype != a.dtype:
        raise ValueError(
            f"{caller}: a and b must have the same dtype, got {a.dtype} and {b.dtype}.")


# ------------------------------------------------------------------------- layout


def auto_view(mesh: Mesh) -> Mesh:
    """`mesh` with every axis ``Auto``: the same devices and axis names (`mesh` itself when its
    axes are all ``Auto`` already)."""
    if all(kind == AxisType.Auto for kind in mesh.axis_types):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names))


def named_sharding(x: Any) -> NamedSharding | None:
    """`x`'s NamedSharding over a concrete mesh (its `auto_view`), if it has one."""
    if isinstance(x, jax.core.Tracer) or not isinstance(x, jax.Array):
        return None
    sharding = x.sharding
    if not isinstance(sharding, NamedSharding):
        return None
    return NamedSharding(auto_view(sharding.mesh), sharding.spec)


def _device_platform(x: Any) -> str | None:
    """The platform of a concrete array's devices; None for a traced value or NumPy input."""
    if isinstance(x, jax.core.Tracer) or not isinstance(x, jax.Array):
        return None
    return next(iter(x.devices())).platform


def _default_spec(caller: str, mesh: Mesh) -> PartitionSpec:
    names = mesh.axis_names
    if len(names) == 2:
        return PartitionSpec(names[0], names[1])
    if len(names) == 1:
        return PartitionSpec(names[0], None)
    raise ValueError(
        f"{caller}: mesh has axes {names}; pass matrix_specs to say which split the matrix's "
        "rows and columns."
    )


def _normalized_matrix_spec(caller: str, spec: Any, mesh: Mesh) -> PartitionSpec:
    if not isinstance(spec, (PartitionSpec, tuple)) or len(spec) not in (1, 2):
        raise ValueError(
            f"{caller}: matrix_specs={show_spec(spec)} must be a PartitionSpec of one or two "
            "entries, e.g. P('pr', 'pc'), P('x', None) or P('x')."
        )
    entries = (*tuple(spec), None)[:2]
    shown = show_spec(spec)
    for entry in entries:
        if entry is not None and not isinstance(entry, str):
            raise ValueError(
                f"{caller}: matrix_specs={shown} must name one mesh axis or None per matrix "
                f"dimension; got {entry!r} (several axes for one dimension are not supported)."
            )
        if entry is not None and entry not in mesh.axis_names:
            raise ValueError(
                f"{caller}: matrix_specs={shown} names axis {entry!r}, which the mesh (axes "
                f"{tuple(mesh.axis_names)}) does not have."
            )
    if entries[0] is not None and entries[0] == entries[1]:
        raise ValueError(
            f"{caller}: matrix_specs={shown} splits rows and columns over the same axis "
            f"{entries[0]!r}; use two mesh axes, e.g. P('pr', 'pc')."
        )
    if entries == (None, None):
        raise ValueError(
            f"{caller}: matrix_specs={shown} splits neither dimension; split the rows or the "
            "columns over a mesh axis, e.g. P('pr', 'pc') or P('x', None)."
        )
    for name, size in mesh.shape.items():
        if size > 1 and name not in entries:
            raise ValueError(
                f"{caller}: mesh axis {name!r} ({size} devices) is not used by "
                f"matrix_specs={shown}, so the matrix would be replicated over it; use a mesh "
                "of only the grid's axes."
            )
    return PartitionSpec(*entries)


def _check_divisible(caller: str, name: str, shape: tuple[int, ...], layout: Layout) -> None:
    for dim, (what, axis) in enumerate(zip(("rows", "columns"), layout.matrix_spec)):
        parts = _axis_size(layout.mesh, axis)
        if shape[dim] % parts:
            raise ValueError(
                f"{caller}: {name} has {shape[dim]} {what}, which the {parts} devices of mesh "
                f"axis {axis!r} cannot split evenly; pad the matrix or use another mesh."
            )


def split_in_specs(caller: str, in_specs: Any) -> tuple[Any, Any]:
    """JAXMg's ``in_specs`` as ``(matrix spec, rhs spec or None)``.

    JAXMg 1.x takes it as an alias of ``matrix_specs``: a `PartitionSpec`, or a sequence of
    one; JAXMg 0.x took the pair ``(matrix spec, rhs spec)``. All three are accepted.
    """
    if isinstance(in_specs, PartitionSpec):
        return in_specs, None
    if isinstance(in_specs, (tuple, list)) and len(in_specs) in (1, 2) and all(
            isinstance(spec, (PartitionSpec, tuple)) for spec in in_specs):
        return in_specs[0], (in_specs[1] if len(in_specs) == 2 else None)
    raise ValueError(
        f"{caller}: in_specs must be the matrix's PartitionSpec, a sequence of one, or the pair "
        f"(matrix spec, rhs spec); got {in_specs!r}."
    )


def matrix_layout(
    caller: str,
    a: Any,
    mesh: Any,
    matrix_specs: Any,
    *,
    in_specs: Any = None,
    tile: int = 256,
    pad: bool = True,
) -> Layout:
    """The `Layout` of a routine's matrix `a` (the rhs spec left unset)."""
    if in_specs is not None:
        matrix_in_specs, _ = split_in_specs(caller, in_specs)
        if matrix_specs is not None and tuple(matrix_specs) != tuple(matrix_in_specs):
            raise ValueError(
                f"{caller}: matrix_specs={show_spec(matrix_specs)} and the matrix spec of "
                f"in_specs, {show_spec(matrix_in_specs)}, differ; pass one of them."
            )
        matrix_specs = matrix_in_specs
    if mesh is not None and not isinstance(mesh, Mesh):
        raise ValueError(
            f"{caller}: mesh must be a jax.sharding.Mesh (e.g. from "
            f"jaxsolve.sharding.make_grid_mesh), got {type(mesh).__name__}."
        )
    if mesh is not None:
        mesh = auto_view(mesh)
    named = named_sharding(a)
    if mesh is None:
        if named is None:
            if matrix_specs is not None:
                raise ValueError(
                    f"{caller}: matrix_specs={show_spec(matrix_specs)} was given without a "
                    "mesh, and a is not sharded over one; pass mesh= as well."
                )
            return Layout(tile=tile, pad=pad, device_platform=_device_platform(a))
        mesh = named.mesh
        if matrix_specs is None and any(named.spec):
            matrix_specs = named.spec
    elif matrix_specs is None and named is not None and named.mesh == mesh and any(named.spec):
        matrix_specs = named.spec
    check_on_mesh(caller, "a", a, mesh)
    if matrix_specs is None:
        matrix_specs = _default_spec(caller, mesh)
    layout = Layout(mesh=mesh, matrix_spec=_normalized_matrix_spec(caller, matrix_specs, mesh),
                    tile=tile, pad=pad)
    _check_divisible(caller, "a", a.shape, layout)
    return layout


def check_on_mesh(caller: str, name: str, x: Any, mesh: Mesh) -> None:
    """Raises if a concrete `x` committed to devices lies on others than `mesh`'s (where
    ``jax.jit`` would refuse it); an uncommitted array goes where the mesh is."""
    if isinstance(x, jax.core.Tracer) or not isinstance(x, jax.Array) or not x.committed:
        return
    devices = set(mesh.devices.flat)
    if x.sharding.device_set != devices:
        def ids(group):
            return sorted(device.id for device in group)
        raise ValueError(
            f"{caller}: {name} lies on devices {ids(x.sharding.device_set)}, but the mesh is "
            f"over devices {ids(devices)}; put {name} on the mesh's devices (jax.device_put "
            "with a NamedSharding of that mesh)."
        )


def rhs_layout(caller: str, layout: Layout, b: Any, in_specs: Any = None) -> Layout:
    """`layout` with the spec of the right-hand side `b`: given, read off `b`, or replicated."""
    if layout.mesh is None:
        return layout
    check_on_mesh(caller, "b", b, layout.mesh)
    spec = None if in_specs is None else split_in_specs(caller, in_specs)[1]
    if spec is None and isinstance(b, jax.core.Tracer):
        # Traced (inside jax.jit): b's sharding is not known here, so x's is left to XLA's
        # propagation; in_specs fixes it.
        return layout.with_rhs_spec(None)
    if spec is None:
        named = named_sharding(b)
        if named is not None and named.mesh == layout.mesh:
            spec = named.spec
    spec = PartitionSpec() if spec is None else spec
    if not isinstance(spec, (PartitionSpec, tuple)) or len(spec) > b.ndim:
        raise ValueError(
            f"{caller}: the spec of b, {show_spec(spec)}, must be a PartitionSpec of at most "
            f"{b.ndim} entries for b of shape {b.shape}."
        )
    entries = (*tuple(spec), None, None)[: b.ndim]
    row_axis = layout.matrix_spec[0]
    if entries[0] not in (None, row_axis) or any(e is not None for e in entries[1:]):
        raise ValueError(
            f"{caller}: b's spec {show_spec(spec)} must split b's rows like a's "
            f"rows (over {row_axis!r}) or not at all, and must not split its columns."
        )
    return layout.with_rhs_spec(PartitionSpec(*entries))


# ---------------------------------------------------------------- whole argument lists


def prepare_matrix(
    caller: str,
    a: Any,
    tile: Any,
    mesh: Any,
    matrix_specs: Any,
    *,
    flags: dict[str, Any],
    square: bool = True,
    in_specs: Any = None,
) -> tuple[Any, Layout]:
    """Checks a routine's matrix, tile, flags and mesh; returns ``(a, layout)``.

    ``flags`` holds the routine's boolean keywords (``pad`` among them, where it has one).
    """
    tile = check_tile(caller, tile)
    for name, value in flags.items():
        check_flag(caller, name, value)
    a = checked_array(caller, "a", a)
    if square:
        check_square(caller, a)
    else:
        check_matrix(caller, a)
    return a, matrix_layout(caller, a, mesh, matrix_specs, in_specs=in_specs, tile=tile,
                            pad=bool(flags.get("pad", True)))


def prepare_rhs(caller: str, a: Any, b: Any, layout: Layout, in_specs: Any = None, *,
                replicate_x: bool = False) -> tuple[Any, Layout]:
    """Checks a right-hand side against `a` and `layout`; returns ``(b, layout)``, the layout
    with ``b``'s spec and, with `replicate_x`, a replicated solution."""
    b = checked_array(caller, "b", b)
    check_rhs(caller, a, b)
    return b, rhs_layout(caller, layout, b, in_specs).with_replicated_solution(replicate_x)


def work_matrix(factor: Any, a: Any, layout: Layout) -> tuple[Any, ...]:
    """The leaf of a factor pytree that can take `a`'s place (``donate=True``), if any."""
    for leaf in jax.tree.leaves(factor):
        if leaf.shape == a.shape and leaf.dtype == a.dtype:
            return (constrain(leaf, layout.matrix_sharding()),)
    return ()
