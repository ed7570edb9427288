"""Sparsity tracing: the pattern of a linear operator, read from its jaxpr.

A matrix-free operator ``x ↦ A x`` is a JAX function; :func:`trace_sparsity` finds
which entries ``a_ij`` can be nonzero without evaluating it ``n`` times.  It traces the
function to a jaxpr (:func:`jax.make_jaxpr`) and interprets every equation on *index
sets* instead of numbers (abstract interpretation, as SparseConnectivityTracer.jl does
for Julia): each array element carries the set of input indices ``j`` it depends on,
stored for a whole array as a boolean sparse matrix ``(size, n)``; arrays that do not
depend on ``x`` keep their concrete values (constant folding, on the host CPU).

* **Elementwise** primitives take the union of their operands' sets, except that a
  product with a constant zero (and a ``select_n`` with a constant predicate) prunes
  the structural zeros it provably creates.
* **Data movement** (``reshape``, ``transpose``, ``slice``, ``pad``, ``concatenate``,
  ``rev``, ``broadcast_in_dim``, ``gather``/``scatter`` and
  ``dynamic_slice``/``dynamic_update_slice`` with constant indices, …) is computed by
  running the primitive itself on arrays of element ids, so every option of it (strides,
  padding, fill modes, dimension numbers) is handled by JAX's own implementation.
* **Sums**: reductions, cumulative reductions, ``dot_general`` (with the zeros of a
  constant factor pruned), ``scatter-add`` (its targets from the transpose, a gather)
  and ``conv_general_dilated`` with a constant kernel (one run per nonzero tap).
* **Sparse matrices** of ``jax.experimental.sparse`` with constant indices: the
  products ``bcoo_dot_general``/``bcsr_dot_general`` (``A @ x``, ``x @ A``; a stored
  constant zero is pruned), ``bcoo_todense``/``bcsr_todense`` and ``bcoo_transpose``,
  read from the stored entries' coordinates (never an ``n × n`` array).
* **Control flow and calls**: ``scan`` and ``while_loop`` are unrolled exactly while
  their trip count is provable (a constant counter), else iterated to a fixed point of
  the union; ``cond`` takes its branch when the index is constant, else the union of all
  branches.  A ``cond`` index or a ``while`` test computed from ``x`` adds its inputs to
  every output (JAX-AMG's rule: which code runs depends on them); call primitives
  (``jit``, ``custom_jvp_call``, ``custom_vjp_call``, remat, ``shard_map``, …) are
  interpreted recursively.

A primitive the interpreter does not know (callbacks, FFI calls, data-dependent
indices) makes it give up, as does a traced pattern that fails its check by random
probes (a missed entry would corrupt the values recovered from it).  Then
:func:`trace_sparsity` gives JAX-AMG's answer: None with ``probe=False``; by default a
warning naming the primitive and the pattern probed with unit vectors, in batches of
bounded memory.

The pattern is that of the operator's Jacobian: predicates of ``select_n`` and integer
or boolean results feed no derivative and add no entries.  Only public JAX APIs are
used (``jax.make_jaxpr``, ``jax.extend.core``, ``Primitive.bind``); the primitive names
and parameters read here are JAX's internal vocabulary, which ``sparsity_tracing_test``
checks against the installed version.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jax import extend as jex

_PROBE_BATCH_BYTES = 256 * 2**20
_MAX_UNROLL = 512  # loop iterations interpreted one by one before a fixed point
_MAX_FIXED_POINT = 256
_MAX_DENSE_PAIRS = 50_000_000
_CALL_JAXPR_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")

_ELEMENTWISE = frozenset({
    "abs", "acos", "acosh", "add", "add_any", "and", "asin", "asinh", "atan", "atan2",
    "atanh", "cbrt", "ceil", "clamp", "complex", "conj", "convert_element_type", "copy",
    "copy_p", "cos", "cosh", "digamma", "div", "eq", "erf", "erf_inv", "erfc", "exp",
    "exp2", "expm1", "floor", "ge", "gt", "igamma", "igammac", "imag", "integer_pow",
    "is_finite", "le", "lgamma", "log", "log1p", "logistic", "lt", "max", "min", "mul",
    "ne", "neg", "nextafter", "not", "or", "pow", "real", "reduce_precision", "rem",
    "round", "rsqrt", "select_n", "sign", "sin", "sinh", "sqrt", "square", "sub", "tan",
    "tanh", "xor", "stop_gradient", "shift_left", "shift_right_logical",
    "shift_right_arithmetic", "population_count", "clz", "bessel_i0e", "bessel_i1e",
})
# Each output element is one element of a data operand (or a fill value).
_MOVEMENT = {  # primitive -> positions of its data operands (None: all)
    "reshape": (0,), "squeeze": (0,), "expand_dims": (0,), "transpose": (0,), "rev": (0,),
    "slice": (0,), "broadcast_in_dim": (0,), "concatenate": None, "stack": None,
    "pad": (0, 1),
    "dynamic_slice": (0,), "dynamic_update_slice": (0, 1), "gather": (0,),
    "scatter": (0, 2), "split": (0,), "unstack": (0,),
}
# Their outputs are their operands (a barrier; shard_map's cast to device-varying).
_IDENTITIES = frozenset({"optimization_barrier", "pvary"})
_REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
                         "reduce_and", "reduce_or", "reduce_xor", "argmax", "argmin"})
_CUMULATIVE = frozenset({"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"})
_SCATTER_COMBINE = frozenset({"scatter-add", "scatter_add", "scatter-mul", "scatter_mul",
                              "scatter-min", "scatter_min", "scatter-max", "scatter_max"})
# jax.experimental.sparse: a BCOO's operands are (data, indices), a BCSR's (data, indices,
# indptr); the products' last operand is the dense one.
_SPARSE_PRODUCTS = frozenset({"bcoo_dot_general", "bcsr_dot_general"})
_SPARSE_TODENSE = frozenset({"bcoo_todense", "bcsr_todense"})


class OpaquePrimitive(Exception):
    """Raised inside the interpreter when a primitive's sparsity cannot be derived."""

    def __init__(self, name: str, why: str = ""):
        super().__init__(name, why)
        self.name = name
        self.why = why

    def describe(self) -> str:
        return f"{self.name!r}" + (f" ({self.why})" if self.why else "")


# -----------------------------------------------------------------------------
# Abstract values


class _Const:
    """An array that does not depend on ``x``, with its concrete value."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = np.asarray(value)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape


class _Deps:
    """An array whose element ``k`` depends on the inputs ``rows[k]`` (CSR, ``(size, n)``).

    Elements with empty rows are constants of unknown value.
    """

    __slots__ = ("shape", "rows")

    def __init__(self, shape: Sequence[int], rows: scipy.sparse.csr_array):
        self.shape = tuple(shape)
        self.rows = rows


def _size(shape: Sequence[int]) -> int:
    return int(math.prod(shape))


def _deps_of(value: _Const | _Deps, n: int) -> _Deps:
    if isinstance(value, _Deps):
        return value
    return _Deps(value.shape, _empty(_size(value.shape), n))


def _empty(rows: int, n: int) -> scipy.sparse.csr_array:
    return scipy.sparse.csr_array((rows, n), dtype=bool)


def _take_rows(rows: scipy.sparse.csr_array, index: np.ndarray) -> scipy.sparse.csr_array:
    """Rows ``index`` of ``rows`` (an empty row where ``index < 0``)."""
    index = np.asarray(index, np.int64).ravel()
    m = rows.shape[0]
    # One empty row appended (no copy of the entries): index -1 selects it.
    extended = scipy.sparse.csr_array(
        (rows.data, rows.indices, np.append(rows.indptr, rows.indptr[-1])),
        shape=(m + 1, rows.shape[1]))
    return scipy.sparse.csr_array(extended[np.where(index < 0, m, index)], dtype=bool)


def _gather_union(rows: scipy.sparse.csr_array, out_size: int, targets: np.ndarray,
                  sources: np.ndarray) -> scipy.sparse.csr_array:
    """Row ``o`` of the result: the union of ``rows[s]`` over pairs ``(o, s)``."""
    keep = (targets >= 0) & (sources >= 0)
    select = scipy.sparse.csr_array(
        (np.ones(int(keep.sum()), np.float32), (targets[keep], sources[keep])),
        shape=(out_size, rows.shape[0]))
    product = (select @ rows.astype(np.float32)).tocsr()
    return scipy.sparse.csr_array(
        (np.ones(product.nnz, bool), product.indices, product.indptr), shape=product.shape)


def _union(shape: Sequence[int], parts: Sequence[scipy.sparse.csr_array], n: int) -> _Deps:
    parts = [part for part in parts if part.nnz]
    if not parts:
        return _Deps(shape, _empty(_size(shape), n))
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    if total.dtype != bool:
        total = scipy.sparse.csr_array(total, dtype=bool)
    return _Deps(shape, total)


def _broadcast_rows(value: _Deps, shape: Sequence[int]) -> scipy.sparse.csr_array:
    """``value``'s rows broadcast (NumPy rules) to ``shape``."""
    if tuple(value.shape) == tuple(shape):
        return value.rows
    ids = np.broadcast_to(np.arange(_size(value.shape)).reshape(value.shape), shape)
    return _take_rows(value.rows, ids)


def _merge(a: _Const | _Deps, b: _Const | _Deps, n: int) -> _Const | _Deps:
    """The least upper bound of two values of one array (a loop's carry, cond's branches)."""
    if (isinstance(a, _Const) and isinstance(b, _Const) and a.value.shape == b.value.shape
            and np.array_equal(a.value, b.value, equal_nan=a.value.dtype.kind in "fc")):
        return a
    da, db = _deps_of(a, n), _deps_of(b, n)
    return _union(da.shape, [da.rows, db.rows], n)


def _same(a: _Const | _Deps, b: _Const | _Deps) -> bool:
    if isinstance(a, _Const) != isinstance(b, _Const):
        return False
    if isinstance(a, _Const):
        return a.value.shape == b.value.shape and np.array_equal(
            a.value, b.value, equal_nan=a.value.dtype.kind in "fc")
    return a.rows.nnz == b.rows.nnz  # merged values only grow


# -----------------------------------------------------------------------------
# The interpreter


class _Interpreter:
    def __init__(self, n: int):
        self.n = n
        self.cpu = jax.devices("cpu")[0]

    # --- jaxprs

    def closed(self, closed_jaxpr: Any, args: Sequence[Any]) -> list[Any]:
        consts = [self.const_input(c) for c in closed_jaxpr.consts]
        return self.jaxpr(closed_jaxpr.jaxpr, consts, args)

    def const_input(self, value: Any) -> _Const | _Deps:
        if isinstance(value, jax.core.Tracer):  # a caller's traced closure: unknown values
            return _Deps(np.shape(value), _empty(_size(np.shape(value)), self.n))
        return _Const(np.asarray(value))

    def jaxpr(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        env: dict[Any, Any] = {}

        def read(atom):
            if isinstance(atom, jex.core.Literal):
                return _Const(np.asarray(atom.val))
            return env[atom]

        for var, value in zip(jaxpr.constvars, consts, strict=True):
            env[var] = value
        for var, value in zip(jaxpr.invars, args, strict=True):
            env[var] = value
        for eqn in _live_equations(jaxpr):
            outs = self.equation(eqn, [read(v) for v in eqn.invars])
            for var, value in zip(eqn.outvars, outs, strict=True):
                if not isinstance(var, jex.core.DropVar):
                    env[var] = value
        return [read(v) for v in jaxpr.outvars]

    # --- one equation

    def equation(self, eqn: Any, args: list[Any]) -> list[Any]:
        name = eqn.primitive.name
        params = dict(eqn.params)
        out_shapes = [tuple(v.aval.shape) for v in eqn.outvars]
        if name == "scan":
            return self.scan(params, args)
        if name == "while":
            return self.while_loop(params, args)
        if name == "cond":
            return self.cond(params, args)
        sub = _call_jaxpr(params, eqn)
        if sub is not None:
            return self.closed(_closed_jaxpr(sub), args)
        if all(isinstance(a, _Const) for a in args):
            return self.fold(eqn, args, out_shapes)
        if name in _ELEMENTWISE:
            return [self.elementwise(name, args, out_shapes[0])]
        if name in _IDENTITIES:
            return list(args)
        if name in _MOVEMENT:
            return self.movement(eqn, args, out_shapes)
        if name in _REDUCTIONS:
            return [self.reduction(params, args[0], out_shapes[0])]
        if name in _CUMULATIVE:
            return [self.cumulative(params, args[0])]
        if name == "dot_general":
            return [self.dot_general(params, args, out_shapes[0])]
        if name in _SCATTER_COMBINE:
            return [self.scatter_combine(eqn, args, out_shapes[0])]
        if name == "conv_general_dilated":
            return [self.convolution(eqn, args, out_shapes[0])]
        if name in _SPARSE_PRODUCTS:
            return [self.sparse_product(eqn, args, out_shapes[0])]
        if name in _SPARSE_TODENSE:
            return [self.sparse_todense(eqn, args, out_shapes[0])]
        if name == "bcoo_transpose":
            return self.sparse_transpose(eqn, args, out_shapes)
        raise OpaquePrimitive(name)

    def bind(self, eqn: Any, values: Sequence[Any], **overrides: Any) -> list[np.ndarray]:
        params = {**eqn.params, **overrides}
        with jax.default_device(self.cpu), jax.ensure_compile_time_eval():
            out = eqn.primitive.bind(*[jnp.asarray(v) for v in values], **params)
        outs = out if eqn.primitive.multiple_results else [out]
        return [np.asarray(o) for o in outs]

    def fold(self, eqn: Any, args: list[_Const], out_shapes: list[tuple]) -> list[Any]:
        """Constant folding; a primitive that cannot run here yields unknown constants."""
        try:
            return [_Const(v) for v in self.bind(eqn, [a.value for a in args])]
        except Exception:  # noqa: BLE001 — e.g. a callback or an effect: values unknown
            return [_Deps(s, _empty(_size(s), self.n)) for s in out_shapes]

    # --- elementwise

    def elementwise(self, name: str, args: list[Any], shape: tuple) -> _Deps:
        if name == "select_n":
            predicate, cases = args[0], args[1:]
            if isinstance(predicate, _Const):
                return self.movement_select(predicate, cases, shape)
            return _union(shape, [_broadcast_rows(_deps_of(c, self.n), shape) for c in cases
                                  if isinstance(c, _Deps)], self.n)
        parts = []
        zeros = None
        if name == "mul":  # a product with a constant zero is a structural zero
            for a in args:
                if isinstance(a, _Const):
                    mask = np.broadcast_to(a.value == 0, shape).ravel()
                    zeros = mask if zeros is None else zeros | mask
        for a in args:
            if isinstance(a, _Deps):
                parts.append(_broadcast_rows(a, shape))
        result = _union(shape, parts, self.n)
        if zeros is not None and zeros.any():
            index = np.where(zeros, -1, np.arange(zeros.size))
            result = _Deps(shape, _take_rows(result.rows, index))
        return result

    def movement_select(self, predicate: _Const, cases: list[Any], shape: tuple) -> Any:
        choice = np.broadcast_to(predicate.value.astype(np.int64), shape).ravel()
        stacked, offsets = self.stack(cases)
        index = np.empty(choice.size, np.int64)
        for k, case in enumerate(cases):
            ids = np.broadcast_to(np.arange(_size(case.shape)).reshape(case.shape), shape).ravel()
            here = choice == k
            index[here] = offsets[k] + ids[here]
        return _Deps(shape, _take_rows(stacked, index))

    def stack(self, values: Sequence[Any]) -> tuple[scipy.sparse.csr_array, list[int]]:
        offsets, total = [], 0
        for v in values:
            offsets.append(total)
            total += _size(v.shape)
        parts = [_deps_of(v, self.n).rows for v in values]
        return scipy.sparse.csr_array(scipy.sparse.vstack(parts, format="csr"), dtype=bool), offsets

    # --- data movement, by running the primitive on element ids

    def movement(self, eqn: Any, args: list[Any], out_shapes: list[tuple]) -> list[Any]:
        name = eqn.primitive.name
        data = _MOVEMENT[name]
        data = range(len(args)) if data is None else data
        data_values = [args[k] for k in data]
        stacked, offsets = self.stack(data_values)
        operands = []
        for k, a in enumerate(args):
            if k in data:
                offset = offsets[list(data).index(k)]
                operands.append(offset + np.arange(_size(a.shape), dtype=np.int64).reshape(a.shape))
            elif isinstance(a, _Const):
                operands.append(a.value)
            else:
                raise OpaquePrimitive(name, "with data-dependent indices")
        total = stacked.shape[0]
        dtype = np.int32 if total < 2**31 - 1 else np.int64
        operands = [o.astype(dtype) if k in data else o for k, o in enumerate(operands)]
        # A gather's out-of-bounds fill becomes the id -1: no input.
        overrides = {"fill_value": -1} if "fill_value" in eqn.params else {}
        outs = self.bind(eqn, operands, **overrides)
        results = []
        for ids, out_shape in zip(outs, out_shapes, strict=True):
            ids = ids.astype(np.int64).ravel()
            ids = np.where((ids >= 0) & (ids < total), ids, -1)
            results.append(_Deps(out_shape, _take_rows(stacked, ids)))
        return results

    # --- sums

    def reduction(self, params: dict, operand: _Deps, out_shape: tuple) -> _Deps:
        axes = tuple(params["axes"]) if "axes" in params else (params["axis"],)
        shape = operand.shape
        kept = [d for d in range(len(shape)) if d not in axes]
        multi = np.unravel_index(np.arange(_size(shape)), shape) if shape else ()
        if kept:
            target = np.ravel_multi_index(tuple(multi[d] for d in kept),
                                          tuple(shape[d] for d in kept))
        else:
            target = np.zeros(_size(shape), np.int64)
        return _Deps(out_shape, _gather_union(operand.rows, _size(out_shape), target,
                                              np.arange(_size(shape))))

    def cumulative(self, params: dict, operand: _Deps) -> _Deps:
        shape, axis = operand.shape, params["axis"]
        length = shape[axis]
        if _size(shape) * length > _MAX_DENSE_PAIRS:
            raise OpaquePrimitive("cumsum", "too long to expand")
        ids = np.moveaxis(np.arange(_size(shape)).reshape(shape), axis, -1)
        lower = np.tril(np.ones((length, length), bool))
        if params.get("reverse", False):
            lower = lower.T
        target_pos, source_pos = np.nonzero(lower)
        targets = ids[..., target_pos].ravel()
        sources = ids[..., source_pos].ravel()
        return _Deps(shape, _gather_union(operand.rows, _size(shape), targets, sources))

    def dot_general(self, params: dict, args: list[Any], out_shape: tuple) -> _Deps:
        (lc, rc), (lb, rb) = params["dimension_numbers"]
        lhs, rhs = args
        lf = [d for d in range(len(lhs.shape)) if d not in lc and d not in lb]
        rf = [d for d in range(len(rhs.shape)) if d not in rc and d not in rb]
        B = _size([lhs.shape[d] for d in lb])
        K = _size([lhs.shape[d] for d in lc])
        FL = _size([lhs.shape[d] for d in lf])
        FR = _size([rhs.shape[d] for d in rf])

        def arranged(value, order, shape3):
            ids = np.arange(_size(value.shape)).reshape(value.shape).transpose(order)
            if isinstance(value, _Const):
                mask = (value.value != 0).transpose(order).reshape(shape3)
            else:
                mask = np.ones(shape3, bool)
            return ids.reshape(shape3), mask

        l_ids, l_mask = arranged(lhs, [*lb, *lf, *lc], (B, FL, K))
        r_ids, r_mask = arranged(rhs, [*rb, *rc, *rf], (B, K, FR))
        parts = []
        if isinstance(lhs, _Deps):
            b, k, j = np.nonzero(r_mask)
            if b.size * FL > _MAX_DENSE_PAIRS:
                raise OpaquePrimitive("dot_general", "too dense to expand")
            i = np.arange(FL)
            targets = ((b[:, None] * FL + i[None, :]) * FR + j[:, None]).ravel()
            sources = l_ids[b[:, None], i[None, :], k[:, None]].ravel()
            parts.append(_gather_union(lhs.rows, _size(out_shape), targets, sources))
        if isinstance(rhs, _Deps):
            b, i, k = np.nonzero(l_mask)
            if b.size * FR > _MAX_DENSE_PAIRS:
                raise OpaquePrimitive("dot_general", "too dense to expand")
            j = np.arange(FR)
            targets = ((b[:, None] * FL + i[:, None]) * FR + j[None, :]).ravel()
            sources = r_ids[b[:, None], k[:, None], j[None, :]].ravel()
            parts.append(_gather_union(rhs.rows, _size(out_shape), targets, sources))
        return _union(out_shape, parts, self.n)

    def scatter_combine(self, eqn: Any, args: list[Any], out_shape: tuple) -> _Deps:
        operand, indices, updates = args[0], args[1], args[2]
        if not isinstance(indices, _Const):
            raise OpaquePrimitive(eqn.primitive.name, "with data-dependent indices")
        # Each update lands where the transpose (a gather) reads it from: take the vjp of
        # a scatter-add with respect to its updates, applied to the output's ids.
        size = _size(out_shape)
        params = dict(eqn.params)

        def scatter(u):
            with jax.default_device(self.cpu):
                zeros = jnp.zeros(out_shape, u.dtype)
                return jax.lax.scatter_add(zeros, jnp.asarray(indices.value), u,
                                           params["dimension_numbers"],
                                           indices_are_sorted=params["indices_are_sorted"],
                                           unique_indices=params["unique_indices"],
                                           mode=params["mode"])

        targets = _exact_linear_ids(
            lambda ids: jax.vjp(scatter, jnp.zeros(updates.shape, ids.dtype))[1](ids)[0],
            np.arange(size).reshape(out_shape), self.cpu)
        parts = [_gather_union(_deps_of(updates, self.n).rows, size, targets,
                               np.arange(_size(updates.shape)))]
        if isinstance(operand, _Deps):
            parts.append(operand.rows)
        return _union(out_shape, parts, self.n)

    def convolution(self, eqn: Any, args: list[Any], out_shape: tuple) -> _Deps:
        lhs, rhs = args
        if not isinstance(rhs, _Const) or not isinstance(lhs, _Deps):
            raise OpaquePrimitive("conv_general_dilated", "without a constant kernel")
        taps = np.flatnonzero(rhs.value.ravel() != 0)
        parts = []
        for tap in taps:
            kernel = np.zeros(rhs.value.size, np.float32)
            kernel[tap] = 1
            kernel = kernel.reshape(rhs.shape)

            def conv(ids, kernel=kernel):
                return eqn.primitive.bind(ids, jnp.asarray(kernel), **{
                    **eqn.params, "preferred_element_type": None})

            sources = _exact_linear_ids(conv, np.arange(_size(lhs.shape)).reshape(lhs.shape),
                                        self.cpu)
            parts.append(_gather_union(lhs.rows, _size(out_shape),
                                       np.arange(_size(out_shape)), sources))
        return _union(out_shape, parts, self.n)

    # --- jax.experimental.sparse, with constant indices

    def stored_entries(self, eqn: Any, args: list[Any]) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
        """``(positions, rows, cols)`` of the stored entries of the sparse operand of a
        ``bcoo_*``/``bcsr_*`` equation (``args``: data, then its index arrays), padding
        dropped.  Only an unbatched 2-D matrix with constant indices is read."""
        name = eqn.primitive.name
        spinfo = eqn.params.get("lhs_spinfo", eqn.params.get("spinfo"))
        data, indices = args[0], args[1:3 if name.startswith("bcsr") else 2]
        if not all(isinstance(i, _Const) for i in indices):
            raise OpaquePrimitive(name, "with data-dependent indices")
        if len(spinfo.shape) != 2 or len(data.shape) != 1:
            raise OpaquePrimitive(name, "with batch or dense dimensions")
        m, n = spinfo.shape
        if name.startswith("bcsr"):
            cols, indptr = (i.value.astype(np.int64) for i in indices)
            nnz = int(indptr[-1])
            positions = np.arange(nnz)
            rows, cols = np.repeat(np.arange(m), np.diff(indptr)), cols[:nnz]
        else:
            rows, cols = indices[0].value.astype(np.int64).T
            positions = np.arange(rows.size)
        inside = (rows >= 0) & (rows < m) & (cols >= 0) & (cols < n)
        return positions[inside], rows[inside], cols[inside]

    def sparse_product(self, eqn: Any, args: list[Any], out_shape: tuple) -> _Deps:
        """``bcoo_dot_general``/``bcsr_dot_general`` of a sparse matrix (rows or columns
        contracted) with a dense array: entry ``(i, j)`` joins ``rhs``'s slice ``j`` (or
        ``i``) to the output's row ``i`` (or ``j``); stored constant zeros are pruned."""
        name = eqn.primitive.name
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        if lb or rb or len(lc) != 1:
            raise OpaquePrimitive(name, "other than a matrix times an array")
        data, rhs = args[0], args[-1]
        positions, rows, cols = self.stored_entries(eqn, args[:-1])
        free, contracted = (rows, cols) if tuple(lc) == (1,) else (cols, rows)
        # rhs as (K, FR): its contracted axis first, its free axes in order (as the output).
        axes = [rc[0], *[d for d in range(len(rhs.shape)) if d != rc[0]]]
        k, fr = rhs.shape[rc[0]], _size(rhs.shape) // max(1, rhs.shape[rc[0]])
        rhs_ids = np.arange(_size(rhs.shape)).reshape(rhs.shape).transpose(axes).reshape(k, fr)
        if positions.size * fr > _MAX_DENSE_PAIRS:
            raise OpaquePrimitive(name, "too dense to expand")
        size, parts = _size(out_shape), []
        f = np.arange(fr)
        if isinstance(rhs, _Deps):
            use = (np.ones(positions.size, bool) if isinstance(data, _Deps)
                   else data.value[positions] != 0)
            targets = (free[use, None] * fr + f[None, :]).ravel()
            parts.append(_gather_union(rhs.rows, size, targets,
                                       rhs_ids[contracted[use]].ravel()))
        if isinstance(data, _Deps):
            mask = (np.ones((positions.size, fr), bool) if isinstance(rhs, _Deps)
                    else rhs.value.transpose(axes).reshape(k, fr)[contracted] != 0)
            entry, column = np.nonzero(mask)
            parts.append(_gather_union(data.rows, size, free[entry] * fr + column,
                                       positions[entry]))
        return _union(out_shape, parts, self.n)

    def sparse_todense(self, eqn: Any, args: list[Any], out_shape: tuple) -> _Deps:
        """``bcoo_todense``/``bcsr_todense``: each stored entry lands on its ``(i, j)``."""
        positions, rows, cols = self.stored_entries(eqn, args)
        return _Deps(out_shape, _gather_union(_deps_of(args[0], self.n).rows,
                                              _size(out_shape), rows * out_shape[1] + cols,
                                              positions))

    def sparse_transpose(self, eqn: Any, args: list[Any], out_shapes: list[tuple]) -> list:
        """``bcoo_transpose``: the indices, folded; the data, moved as the primitive moves
        it (run on the data's element ids)."""
        data, indices = args
        if not isinstance(indices, _Const):
            raise OpaquePrimitive("bcoo_transpose", "with data-dependent indices")
        (_, new_indices) = self.bind(eqn, [np.zeros(data.shape, np.float32), indices.value])
        sources = _exact_linear_ids(
            lambda ids: eqn.primitive.bind(ids, jnp.asarray(indices.value), **eqn.params)[0],
            np.arange(_size(data.shape)).reshape(data.shape), self.cpu)
        return [_Deps(out_shapes[0], _take_rows(data.rows, sources)), _Const(new_indices)]

    # --- control flow

    def scan(self, params: dict, args: list[Any]) -> list[Any]:
        body, length = _closed_jaxpr(params["jaxpr"]), params["length"]
        nc, nk = scan_operand_counts(params)
        consts, carry, xs = args[:nc], list(args[nc:nc + nk]), args[nc + nk:]
        if length <= _MAX_UNROLL:
            steps = range(length - 1, -1, -1) if params["reverse"] else range(length)
            ys_by_step: dict[int, list[Any]] = {}
            for t in steps:
                outs = self.closed(body, [*consts, *carry, *[self.slice_of(x, t) for x in xs]])
                carry, ys_by_step[t] = outs[:nk], outs[nk:]
            ys = [self.stack_steps([ys_by_step[t][k] for t in range(length)])
                  for k in range(len(body.jaxpr.outvars) - nk)]
            return [*carry, *ys]
        x_all = [self.merge_steps(x) for x in xs]
        for _ in range(_MAX_FIXED_POINT):
            outs = self.closed(body, [*consts, *carry, *x_all])
            merged = [_merge(c, o, self.n) for c, o in zip(carry, outs[:nk], strict=True)]
            if all(_same(c, m) for c, m in zip(carry, merged, strict=True)):
                ys = [self.stack_steps([y] * length) for y in outs[nk:]]
                return [*carry, *ys]
            carry = merged
        raise OpaquePrimitive("scan", "its carry's fixed point did not converge")

    def slice_of(self, x: Any, t: int) -> Any:
        if isinstance(x, _Const):
            return _Const(x.value[t])
        inner = x.shape[1:]
        per = _size(inner)
        return _Deps(inner, _take_rows(x.rows, np.arange(t * per, (t + 1) * per)))

    def merge_steps(self, x: Any) -> Any:
        inner = x.shape[1:]
        if isinstance(x, _Const):
            return _Deps(inner, _empty(_size(inner), self.n))
        per = _size(inner)
        targets = np.tile(np.arange(per), x.shape[0])
        return _Deps(inner, _gather_union(x.rows, per, targets, np.arange(_size(x.shape))))

    def stack_steps(self, values: list[Any]) -> Any:
        if all(isinstance(v, _Const) for v in values):
            return _Const(np.stack([v.value for v in values]))
        shape = (len(values), *values[0].shape)
        rows = scipy.sparse.vstack([_deps_of(v, self.n).rows for v in values], format="csr")
        return _Deps(shape, scipy.sparse.csr_array(rows, dtype=bool))

    def while_loop(self, params: dict, args: list[Any]) -> list[Any]:
        cond, body = params["cond_jaxpr"], params["body_jaxpr"]
        cn, bn = params["cond_nconsts"], params["body_nconsts"]
        cond_consts, body_consts, carry = args[:cn], args[cn:cn + bn], list(args[cn + bn:])
        for _ in range(_MAX_UNROLL):  # while the trip count is provable, step by step
            (go,) = self.closed(cond, [*cond_consts, *carry])
            if not isinstance(go, _Const):
                break
            if not bool(go.value):
                return carry
            carry = self.closed(body, [*body_consts, *carry])
        for _ in range(_MAX_FIXED_POINT):  # else the union over all trip counts
            (go,) = self.closed(cond, [*cond_consts, *carry])
            outs = self.closed(body, [*body_consts, *carry])
            if isinstance(go, _Deps):
                outs = self.with_predicate(outs, go)
            merged = [_merge(c, o, self.n) for c, o in zip(carry, outs, strict=True)]
            if all(_same(c, m) for c, m in zip(carry, merged, strict=True)):
                return carry
            carry = merged
        raise OpaquePrimitive("while", "its carry's fixed point did not converge")

    def cond(self, params: dict, args: list[Any]) -> list[Any]:
        branches = params["branches"]
        index, operands = args[0], args[1:]
        if isinstance(index, _Const):
            k = int(np.clip(index.value, 0, len(branches) - 1))
            return self.closed(branches[k], operands)
        results = [self.closed(branch, operands) for branch in branches]
        merged = results[0]
        for other in results[1:]:
            merged = [_merge(a, b, self.n) for a, b in zip(merged, other, strict=True)]
        return self.with_predicate(merged, index)

    def with_predicate(self, values: list[Any], predicate: _Deps) -> list[Any]:
        """``values``, each element also depending on what ``predicate`` depends on.

        Which code runs depends on ``x`` there (a ``cond`` index, a ``while`` test): the
        pattern must hold for every ``x``, so it takes the predicate's inputs in too, as
        JAX-AMG's tracer does (a selection by ``select_n`` is elementwise and does not).
        """
        columns = np.unique(predicate.rows.indices)
        if not columns.size:
            return values
        inputs = scipy.sparse.csr_array(
            (np.ones(columns.size, bool), (np.zeros(columns.size, np.int64), columns)),
            shape=(1, self.n))
        out = []
        for value in values:
            value = _deps_of(value, self.n)
            everywhere = _take_rows(inputs, np.zeros(_size(value.shape), np.int64))
            out.append(_union(value.shape, [value.rows, everywhere], self.n))
        return out


def _exact_linear_ids(linear: Callable[[jax.Array], jax.Array], ids: np.ndarray,
                      cpu: Any) -> np.ndarray:
    """``linear`` (which moves one element per output, or none) applied to ``ids``, exactly.

    ``ids + 1`` travel in two float32 halves of 12 bits, each exact; 0 means "none".
    """
    shifted = ids.astype(np.int64) + 1
    with jax.default_device(cpu), jax.ensure_compile_time_eval():
        low = np.asarray(linear(jnp.asarray((shifted % 4096).astype(np.float32))))
        high = np.asarray(linear(jnp.asarray((shifted // 4096).astype(np.float32))))
    result = np.rint(high).astype(np.int64) * 4096 + np.rint(low).astype(np.int64) - 1
    return result.ravel()


def _call_jaxpr(params: dict, eqn: Any) -> Any:
    """The jaxpr a call-like primitive (jit, custom_jvp_call, remat, …) runs, if it is one:
    on the equation's operands as they are (a ``shard_map`` over several devices runs its
    body on shards, and is not)."""
    for key in _CALL_JAXPR_PARAMS:
        sub = params.get(key)
        inner = getattr(sub, "jaxpr", sub)
        if isinstance(sub, (jex.core.ClosedJaxpr, jex.core.Jaxpr)) and (
                _shapes(inner.invars) == _shapes(eqn.invars)
                and _shapes(inner.outvars) == _shapes(eqn.outvars)):
            return sub
    return None


def _shapes(atoms: Sequence[Any]) -> list[tuple[int, ...]]:
    return [tuple(getattr(atom.aval, "shape", ())) for atom in atoms]


def scan_operand_counts(params: dict) -> tuple[int, int]:
    """How many of a ``scan`` equation's operands are constants and how many its carry.

    The rest are the scanned ``xs``. JAX 0.10 records the counts as ``num_consts`` and
    ``num_carry``; JAX 0.11 as ``ft_in``, a flat tree of the operands whose ``unpack()``
    gives its (constants, carry, xs) parts, each as long as its operands.
    """
    if "num_consts" in params:
        return params["num_consts"], params["num_carry"]
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts), len(carry)


def _closed_jaxpr(jaxpr: Any) -> Any:
    """``jaxpr`` as a ``ClosedJaxpr`` (call and control-flow primitives may hold either)."""
    if isinstance(jaxpr, jex.core.ClosedJaxpr):
        return jaxpr
    return jex.core.ClosedJaxpr(jaxpr, ())


def _live_equations(jaxpr: Any) -> list[Any]:
    """The equations the outputs depend on (dead code, e.g. an unused callback, dropped)."""
    live = {v for v in jaxpr.outvars if not isinstance(v, jex.core.Literal)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if any(v in live for v in eqn.outvars if not isinstance(v, jex.core.DropVar)):
            kept.append(eqn)
            live.update(v for v in eqn.invars if not isinstance(v, jex.core.Literal))
    return kept[::-1]


# -----------------------------------------------------------------------------
# Public entry point and the fallback


def normalized_shape(caller: str, shape: Any) -> tuple[int, int]:
    """``shape`` as ``(n_rows, n_cols)`` of positive sizes: an int ``n`` means ``(n, n)``."""
    given = shape
    if _is_size(shape):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(_is_size(s) for s in shape):
        raise TypeError(f"{caller}: shape must be an int n or a pair (n_rows, n_cols) of ints,"
                        f" got {given!r}.")
    shape = tuple(int(s) for s in shape)
    if len(shape) == 1:
        shape = shape * 2
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(
            f"{caller}: shape must be n or (n_rows, n_cols), sizes >= 1, got {given!r}.")
    return shape


def _is_size(value: Any) -> bool:
    """Whether ``value`` is an integer (an int, a NumPy or a 0-d JAX integer), not a bool."""
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, jax.Array):
        return value.ndim == 0 and jnp.issubdtype(value.dtype, jnp.integer)
    return isinstance(value, (int, np.integer))


def default_dtype(dtype: Any) -> np.dtype:
    return np.dtype(jnp.result_type(float) if dtype is None else dtype)


def trace_sparsity(operator: Callable[[jax.Array], jax.Array], shape: Any,
                   dtype: Any = None, *, probe: bool = True) -> scipy.sparse.csr_array | None:
    r"""The sparsity pattern of a linear operator ``x ↦ A x``, read from its jaxpr.

    The operator is traced once to a jaxpr, and each equation is interpreted on the sets
    of input indices its elements depend on (see the module documentation for the
    primitives understood); nothing of size ``n × n`` is formed and the operator is not
    evaluated ``n`` times.  The result contains every entry that can be nonzero (for
    code without data-dependent branches, exactly those; a product with a constant zero
    is pruned).  It is checked with random probes before it is returned.  Where tracing
    cannot decide — a callback, an FFI call, indices computed from ``x``, or a pattern
    that fails its check — the answer is JAX-AMG's: with ``probe=False``, None (as its
    ``trace_sparsity_pattern`` returns, for the caller to fall back); by default, a
    ``RuntimeWarning`` naming the primitive and the pattern found by probing with unit
    vectors, ``n`` of them in batches of at most 256 MiB (as its ``get_sparsity_pattern``
    does; never without the warning).

    Understood beyond ``jax.numpy``/``lax``: the products of ``jax.experimental.sparse``
    (``bcoo_dot_general``, ``bcsr_dot_general``: ``A @ x`` and ``x @ A`` for a BCOO or
    BCSR ``A`` with constant indices, whose stored constant zeros are pruned), their
    ``todense`` and BCOO's transpose; ``lax.cond`` with a predicate computed from ``x``
    (the union of the branches, every output also depending on the predicate's inputs,
    JAX-AMG's rule), ``scan`` and ``while_loop`` bodies (unrolled while the trip count is
    provable, else to a fixed point, the test's inputs added like a ``cond``'s),
    ``custom_jvp``/``custom_vjp`` functions, ``jit``/``pjit``, ``remat`` and
    ``shard_map`` bodies.

    Args:
      operator: a function of ``x`` of shape ``(n_cols,)`` returning ``(n_rows,)``;
        linear in ``x`` (it may close over arrays, which must be concrete).
      shape: ``n`` for a square operator, or ``(n_rows, n_cols)``.
      dtype: the dtype of ``x`` (default: JAX's default float).
      probe: where tracing cannot decide, probe with unit vectors (with a warning);
        ``False``: return None instead.

    Returns:
      A ``scipy.sparse.csr_array`` of booleans, ``(n_rows, n_cols)``, sorted indices; or
      None (only with ``probe=False``).

    Raises:
      TypeError: if ``shape`` is not an int or a pair of ints.
      ValueError: if the operator's output does not have shape ``(n_rows,)``.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import sparse
      >>> laplacian = lambda x: 2 * x - jnp.roll(x, 1) - jnp.roll(x, -1)
      >>> sparse.trace_sparsity(laplacian, 4).toarray().astype(int)
      array([[1, 1, 0, 1],
             [1, 1, 1, 0],
             [0, 1, 1, 1],
             [1, 0, 1, 1]])
    """
    shape = normalized_shape("trace_sparsity", shape)
    dtype = default_dtype(dtype)
    pattern, _ = trace_pattern(operator, shape, dtype, probe=probe)
    return pattern


def trace_pattern(operator: Callable, shape: tuple[int, int], dtype: np.dtype,
                  closed_jaxpr: Any = None, *, probe: bool = True
                  ) -> tuple[scipy.sparse.csr_array | None, str]:
    """The pattern and how it was found: ``"traced"``, ``"probed"``, or, without ``probe``,
    ``(None, "untraceable")`` where tracing cannot decide."""
    m, n = shape
    if closed_jaxpr is None:
        closed_jaxpr = jax.make_jaxpr(operator)(jax.ShapeDtypeStruct((n,), dtype))
    out_avals = closed_jaxpr.out_avals
    if len(out_avals) != 1 or tuple(out_avals[0].shape) != (m,):
        raise ValueError(f"trace_sparsity: the operator must map ({n},) to ({m},), got"
                         f" outputs {[tuple(a.shape) for a in out_avals]}.")
    interpreter = _Interpreter(n)
    identity = _Deps((n,), scipy.sparse.csr_array(scipy.sparse.identity(n, dtype=bool,
                                                                         format="csr")))
    try:
        (out,) = interpreter.closed(closed_jaxpr, [identity])
    except OpaquePrimitive as opaque:
        if not probe:
            return None, "untraceable"
        warnings.warn(
            f"trace_sparsity: primitive {opaque.describe()} cannot be traced; probing"
            f" the operator with {n} unit vectors instead (in batches).",
            RuntimeWarning, stacklevel=3)
        return probe_pattern(operator, shape, dtype), "probed"
    pattern = _deps_of(out, n).rows
    pattern = scipy.sparse.csr_array(pattern, dtype=bool)
    pattern.sum_duplicates()
    pattern.sort_indices()
    if not _verified(operator, pattern, dtype):
        if not probe:
            return None, "untraceable"
        warnings.warn(
            "trace_sparsity: the traced pattern failed its check by random probes (the"
            " operator may not be linear, or a primitive was misread); probing the"
            f" operator with {n} unit vectors instead.", RuntimeWarning, stacklevel=3)
        return probe_pattern(operator, shape, dtype), "probed"
    return pattern, "traced"


def _verified(operator: Callable, pattern: scipy.sparse.csr_array, dtype: np.dtype,
              probes: int = 4) -> bool:
    """Random probes: with ``x`` supported on a random set ``S`` of columns, every row with
    no pattern entry in ``S`` must give what ``x = 0`` gives."""
    m, n = pattern.shape
    if n == 0 or m == 0:
        return True
    rng = np.random.default_rng(1234)
    real = np.finfo(dtype).dtype if np.issubdtype(dtype, np.complexfloating) else dtype
    row_nnz = int(np.diff(pattern.indptr).max(initial=0))
    apply = operator  # eagerly: a compilation would cost more than these few calls
    base = np.asarray(apply(jnp.zeros(n, dtype)))
    for k in range(probes):
        density = 0.5 if k == 0 else 1 / (1 + row_nnz) * (1 if k < probes - 1 else 0.25)
        support = rng.random(n) < density
        x = np.where(support, rng.uniform(0.5, 1.5, n), 0).astype(real).astype(dtype)
        y = np.asarray(apply(jnp.asarray(x)))
        touched = (pattern @ support.astype(np.int64)) > 0
        if np.any(y[~touched] != base[~touched]):
            return False
    return True


def probe_pattern(operator: Callable, shape: tuple[int, int],
                  dtype: np.dtype) -> scipy.sparse.csr_array:
    """The pattern by unit vectors, ``op(e_j)``, in batches of at most 256 MiB."""
    m, n = shape
    itemsize = np.dtype(dtype).itemsize
    batch = int(max(1, min(n, _PROBE_BATCH_BYTES // max(1, (m + n) * itemsize))))
    apply = jax.jit(jax.vmap(operator))
    try:
        jax.eval_shape(apply, jax.ShapeDtypeStruct((batch, n), dtype))
    except NotImplementedError:  # e.g. a callback without a vmap_method: one at a time
        apply = jax.jit(lambda seeds: jax.lax.map(operator, seeds))
    rows, cols = [], []
    for start in range(0, n, batch):
        columns = np.arange(start, start + batch)
        seeds = (columns[:, None] == np.arange(n)[None, :]).astype(dtype)  # padded: zeros
        out = np.asarray(apply(jnp.asarray(seeds)))
        c, r = np.nonzero(out)
        keep = columns[c] < n
        rows.append(r[keep])
        cols.append(columns[c[keep]])
    rows_all = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    cols_all = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    pattern = scipy.sparse.csr_array((np.ones(rows_all.size, bool), (rows_all, cols_all)),
                                     shape=(m, n))
    pattern.sum_duplicates()
    pattern.sort_indices()
    return pattern
