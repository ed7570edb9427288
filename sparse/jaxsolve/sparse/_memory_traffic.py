"""Memory traffic: the bytes one iteration of a solve moves through device memory.

A sparse solve is bound by memory bandwidth: each step reads a matrix or a vector once and
does a few flops per number.  :func:`memory_traffic_per_iteration` counts, from the
hierarchy a solve keeps and its configuration, the bytes that one iteration of the Krylov
method (or of the stationary iteration) must read and write, so that a measured time per
iteration turns into an *effective bandwidth*, ``bytes × iterations / seconds``, to set
against the device's (an H200's HBM3e: 4.8 TB/s on NVIDIA's datasheet, about 4.3 TB/s
for a device-to-device copy).  Its docstring states the model; the count walks the
iteration as :mod:`._krylov`, :mod:`._cycle` and :mod:`._relaxation` run it, on the rows
the kernels run over (the size classes a hierarchy's arrays are padded to,
:mod:`._size_classes`) and the entries they read (the patterns' own: no kernel reads a
padding entry), and says how much of it the padding costs.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, NamedTuple

import numpy as np

from . import _blocks
from ._config import AMGConfig, RelaxationConfig, SolverConfig, parse_amgx_config
from ._default_method import as_solved
from ._device_setup import DeviceStructure
from ._hierarchy import HierarchyStructure
from ._krylov import KRYLOV_METHODS
from ._multicolor import MULTICOLOR_SMOOTHERS
from ._relaxation import _UNROLLED_SWEEPS
from ._setup import System, amg_config, checked_inputs

INDEX_BYTES = 4
"""Bytes of one column index or row pointer (int32)."""


@dataclasses.dataclass(frozen=True)
class MemoryTraffic:
    """The bytes one iteration of a solve reads and writes in device memory, part by part.

    Attributes:
      levels: per level of the preconditioner, finest first and the coarsest last, the
        bytes of each of its steps summed over one iteration's visits: ``"pre-smoothing"``,
        ``"residual"``, ``"restriction"``, ``"prolongation"`` (with the correction) and
        ``"post-smoothing"``, the coarsest level's ``"coarse solve"``; on the finest,
        ``"precision casts"`` (a single-precision hierarchy) and ``"repeated cycles"`` (the
        residuals between a preconditioner's cycles when its ``max_iters`` is above 1).  A
        relaxation as preconditioner or solver is one level with ``"smoothing"``; without
        a preconditioner, none.
      method: the Krylov method's (or stationary iteration's) own bytes: its
        ``"products"`` with ``A`` and its ``"vector operations"`` (updates, inner products,
        norms).
      padding: the bytes of :attr:`total` that the size classes' padding costs: the
        padding rows' row pointers and vector entries, which every pass over a padded
        level reads or writes, and the coarsest dense inverse's padding rows and
        columns; what a hierarchy of its own sizes would save.
    """

    levels: tuple[dict[str, int], ...]
    method: dict[str, int]
    padding: int = 0

    @property
    def total(self) -> int:
        """The bytes of one iteration, every part summed."""
        return sum(self.method.values()) + sum(sum(level.values()) for level in self.levels)

    def bandwidth(self, iterations: int, seconds: float) -> float:
        """The effective bandwidth of a solve that took ``seconds`` for ``iterations``:
        ``total × iterations / seconds``, in bytes per second."""
        return self.total * iterations / seconds

    def __str__(self) -> str:
        total = self.total
        lines = [f"memory traffic per iteration: {total / 1e6:.3f} MB (minimum, one pass"
                 f" per operation), of it size-class padding {self.padding / 1e6:.3f} MB"
                 f" ({100 * self.padding / max(total, 1):.1f} %)"]
        for name, part in [(f"level {index}", level) for index, level in enumerate(self.levels)] \
                + [("method", self.method)]:
            size = sum(part.values())
            lines.append(f" {name:8s} {size / 1e6:12.3f} MB {100 * size / max(total, 1):5.1f} %  "
                         + ", ".join(f"{step} {bytes_ / 1e6:.3f}" for step, bytes_ in part.items()))
        return "\n".join(lines)


def memory_traffic_per_iteration(A: Any, config: Any = None, *,
                                 near_nullspace: Any = None,
                                 block_dim: int | None = None) -> MemoryTraffic:
    """The bytes one iteration of :func:`solve` moves through device memory, at least.

    Counts, for ``config``'s method and preconditioner as :func:`solve` runs them on ``A``
    (its default cycle for the matrix's dtype included), the reads and writes of one
    iteration.  An AMG preconditioner's hierarchy is the one :func:`solve` keeps, taken
    from the setup cache or set up now.  ``bytes × iterations / solve time`` is then the
    bandwidth a solve achieved (:meth:`MemoryTraffic.bandwidth`);
    ``tools/bench/sparse_poisson3d.py`` prints it against the device's peak.

    **The model: one pass per operation, each array once.**  Every operation of the
    iteration, as the code performs it, reads each array it takes once and writes its
    result once; nothing stays in a cache from one operation to the next:

    * a product ``y = A x`` with a CSR matrix of ``n`` rows, ``m`` columns and ``nnz``
      entries reads its values and int32 column indices, its ``n + 1`` int32 row pointers,
      ``x`` (its ``m`` entries once: a gather that hits an entry read before is free) and
      writes ``y``: ``nnz (s + 4) + 4 (n + 1) + s (m + n)`` bytes for numbers of ``s``;
    * an update that the product's kernel forms as it writes (the residual ``b − A x``, the
      correction ``x + P e``, a Jacobi sweep ``x + ω D⁻¹ (b − A x)``) reads its other
      operands in the same pass: ``s n`` more for each;
    * a vector operation (``x + α p``, an inner product, a norm) reads each distinct vector
      once and writes its result, if a vector; the coarsest level's dense inverse is read
      once per product with it.

    So it is a lower bound on what the compiled program moves: fusion saves passes but
    never reads a needed matrix fewer times.

    **Size classes.**  A solve with an AMG hierarchy runs on its padded sizes
    (:mod:`._size_classes`): the Krylov method's vectors and every level's have the
    padded rows, and the coarsest inverse is a square of them.  The count takes those
    rows, as every pass reads or writes a vector's padding entries and a product's kernel
    a padding row's pointer (the CPU and CUDA products run over every row).  It takes the
    patterns' own entries: an operator's padding entries lie past its last row's end,
    where no product reads them (each row reads the entries between its row pointers).
    :attr:`MemoryTraffic.padding` is the difference from the count on the true sizes.
    The multicolor smoothers' color chunks are counted at the rows they hold, not the
    chunk windows their padded shape sweeps.

    Not counted: scalars, a masked loop's unneeded work (GMRES's Gram-Schmidt runs all ``m`` steps;
    counted: the ``j + 1`` that step ``j`` needs; BiCGSTAB's loop steps by half
    iterations, each computing what either half needs) and the work before the loop
    (``b − A x₀``, ``‖r₀‖``).  One iteration: for CG one preconditioner application, one
    product and 14 vector passes; for BiCGSTAB two of each, 25 passes; for GMRES and
    FGMRES one Arnoldi step, the once-a-cycle work (the update of ``x``, the restart's
    residual) spread over the ``m`` steps of a cycle.  An AMG
    application counts, per level and visit (a W-cycle visits level ``ℓ`` ``2^ℓ`` times),
    the pre-smoothing (a first sweep from zero needs no product), the residual, the
    restriction ``R r``, the prolongation with its correction, the post-smoothing, and on
    the coarsest level its dense inverse, sweeps or Krylov iterations; a
    single-precision hierarchy reads its own numbers at their size and converts the
    cycle's input and output.  A multicolor sweep over the colors reads ``L`` and ``U``
    (``A``'s entries off the diagonal; a pass from zero one of them, counted as half), the
    diagonal, the scaling and the vectors once, plus the permutations into and out of
    the color order.

    Args:
      A: the ``(n, n)`` matrix, with concrete values when an AMG is set up.
      config: the solver configuration; None for the default.
      near_nullspace, block_dim: as for :func:`solve`.

    Returns:
      A :class:`MemoryTraffic`; ``print`` it for the table per level and step.

    Raises:
      ValueError: as :func:`solve` for bad input.

    Examples:
      Jacobi-preconditioned CG on a 1D Laplacian of 10 rows (28 stored entries, float32):
      its product reads 28 · (4 + 4) + 4 · 11 bytes of the matrix and the 10 + 10 numbers
      of ``p`` and ``q``; the sweep from zero reads ``r`` and ``D⁻¹`` and writes ``z``;
      the vector operations take 14 passes of 10 numbers:

      >>> import numpy as np, scipy.sparse
      >>> from jaxsolve import sparse
      >>> A = scipy.sparse.diags([-1, 2, -1], [-1, 0, 1], shape=(10, 10), format="csr",
      ...                        dtype=np.float32)
      >>> config = {"solver": "PCG", "preconditioner": {
      ...     "solver": "BLOCK_JACOBI", "relaxation_factor": 1.0, "max_iters": 1}}
      >>> traffic = sparse.memory_traffic_per_iteration(A, config)
      >>> traffic.method, traffic.levels
      ({'products': 348, 'vector operations': 560}, ({'smoothing': 120},))
      >>> traffic.total
      1028

      A second sweep (backward, from the first's iterate) is one fused kernel that reads
      the matrix, ``x``, ``b`` and ``D⁻¹`` and writes ``x``: 268 + 4 · 40 bytes more.

      >>> config["preconditioner"]["max_iters"] = 2
      >>> sparse.memory_traffic_per_iteration(A, config).total - traffic.total
      428
    """
    name = "memory_traffic_per_iteration"
    config = parse_amgx_config(config)
    block_dim = _blocks.block_dim_of(name, A, block_dim)
    matrix, _, _, near_nullspace = checked_inputs(
        name, A, np.zeros(np.shape(A)[0], np.float32), None, near_nullspace, True)
    dtype = np.dtype(matrix.values.dtype)
    config = as_solved(name, config, matrix, block_dim)
    structure = None
    if amg_config(config) is not None:
        system = System.for_matrix(matrix, config, near_nullspace, reuse_setup=False,
                                   check=True)
        structure, _ = system.setup
    operator = _Operator(matrix.shape[0], matrix.shape[1], matrix.nnz)
    counted = traffic(config, operator, dtype, structure)
    unpadded = traffic(config, operator, dtype, structure, padded=False)
    return dataclasses.replace(counted, padding=counted.total - unpadded.total)


# -----------------------------------------------------------------------------
# The count, from sizes


class _Operator(NamedTuple):
    """A CSR matrix's sizes (rows and columns padded or not, the pattern's own
    nonzeros), and the bytes of the passes that read it; ``padding_rows`` of a square
    one's rows are a size class's padding, with no diagonal."""

    rows: int
    cols: int
    nnz: int
    padding_rows: int = 0

    def matrix(self, s: int) -> int:
        """Its values (``s`` bytes each), column indices and row pointers, read once."""
        return self.nnz * (s + INDEX_BYTES) + INDEX_BYTES * (self.rows + 1)

    def product(self, s: int) -> int:
        """``y = A x``."""
        return self.matrix(s) + s * (self.cols + self.rows)

    def fused(self, s: int, vectors: int) -> int:
        """``A x`` with ``vectors`` more row-long operands read in the same pass (the
        residual ``b − A x``: 1; ``P e + x``: 1; a Jacobi sweep: 2, ``b`` and the scaling,
        its ``x`` being the product's)."""
        return self.product(s) + s * vectors * self.rows

    @property
    def off_diagonal(self) -> int:
        """The entries of ``L`` and ``U`` (a stored diagonal per row taken)."""
        return max(self.nnz - min(self.rows, self.cols) + self.padding_rows, 0)


class _Tally:
    """Bytes by level and step, added as the count walks the cycle."""

    def __init__(self) -> None:
        self.levels: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)

    def add(self, level: int, step: str, amount: float) -> None:
        self.levels[level][step] += amount


def traffic(config: SolverConfig, A: _Operator, dtype: np.dtype,
            structure: HierarchyStructure | DeviceStructure | None, *,
            padded: bool = True) -> MemoryTraffic:
    """The :class:`MemoryTraffic` of ``config`` on a matrix of ``A``'s sizes and ``dtype``,
    its AMG's hierarchy ``structure`` (None without AMG), on the hierarchy's padded rows
    (the solve's, ``A``'s among them) or, without ``padded``, its true ones."""
    s = dtype.itemsize
    tally = _Tally()
    hierarchy = None
    if structure is not None:
        hierarchy = _Levels.of(structure, padded)
        if hierarchy.levels:  # the solve runs on the finest level's padded rows
            A = hierarchy.levels[0].a
    stationary = config.preconditioner is None and config.solver not in KRYLOV_METHODS
    preconditioner = config if stationary else config.preconditioner
    restart = config.gmres_n_restart or 20
    if preconditioner is None or preconditioner.solver == "NOSOLVER":
        cost = _krylov(config.solver, A, s, False, restart, config.max_iters)
        applications = 0.0
    else:
        if stationary:
            cost = _stationary(A, s)
        else:
            cost = _krylov(config.solver, A, s, True, restart, config.max_iters)
        applications = cost.applications
        repeats = 1 if stationary else preconditioner.max_iters
        if preconditioner.solver == "AMG":
            _amg(tally, preconditioner.amg, hierarchy, A, dtype, repeats)
        else:
            relaxation = preconditioner.relaxation
            tally.add(0, "smoothing", _relax_forward_backward(
                A, _scale_entries(relaxation, A.rows, relaxation.block_dim), relaxation, s,
                False, repeats))
    levels = tuple({step: round(applications * amount) for step, amount in tally.levels[i].items()}
                   for i in sorted(tally.levels))
    method = {"products": round(cost.products), "vector operations": round(cost.vectors)}
    return MemoryTraffic(levels=levels, method=method)


class _Cost(NamedTuple):
    """A method's bytes per iteration, and its preconditioner applications."""

    products: float
    vectors: float
    applications: float


def _krylov(method: str, A: _Operator, s: int, preconditioned: bool, restart: int,
            max_iters: int) -> _Cost:
    """One iteration of a Krylov method of :mod:`._krylov` on ``A`` (passes of ``n``
    numbers counted from its code); ``restart`` and ``max_iters`` bound GMRES's cycle."""
    n = A.rows
    if method in ("CG", "PCG"):
        # ⟨r, z⟩ (⟨r, r⟩ unpreconditioned), p = z + β p, q = A p, ⟨p, q⟩, x += α p,
        # r −= α q, ‖r‖.
        return _Cost(A.product(s), s * n * ((2 if preconditioned else 1) + 3 + 2 + 3 + 3 + 1),
                     1.0)
    if method in ("BICGSTAB", "PBICGSTAB"):
        # ⟨r̂, r⟩, p = r + β (p − ω v), v = A p̂, ⟨r̂, v⟩, s = r − α v, x½ = x + α p̂, ‖s‖,
        # t = A ŝ, ⟨t, t⟩, ⟨t, s⟩, x = x½ + ω ŝ, r = s − ω t, ‖r‖.
        return _Cost(2 * A.product(s), s * n * (2 + 4 + 2 + 3 + 3 + 1 + 1 + 2 + 3 + 3 + 1), 2.0)
    # GMRES(m), FGMRES(m): a step's w = A M⁻¹ v_j, Gram-Schmidt against the j + 1 vectors
    # so far (⟨v_i, w⟩, w −= h v_i: 5 passes each; on average (m + 1) / 2 of them), ‖w‖
    # and v_{j+1} = w / ‖w‖; once a cycle v_0 = r / β, the update of x (FGMRES: x + Z y;
    # GMRES: x + M⁻¹ (V y), one more application) and the restart's residual b − A x, ‖r‖.
    m = max(1, min(restart, max_iters, n))
    flexible = method == "FGMRES"
    step = 5 * (m + 1) / 2 + 1 + 2
    update = (m + 2) if flexible else (m + 1 + 3)
    per_cycle = 2 + update + 1
    applications = 1 + (0 if flexible or not preconditioned else 1 / m)
    return _Cost(A.product(s) + A.fused(s, 1) / m, s * n * (step + per_cycle / m), applications)


def _stationary(A: _Operator, s: int) -> _Cost:
    """One step ``x ← x + M⁻¹ r``, ``r = b − A x``, ``‖r‖`` of the stationary iteration."""
    return _Cost(A.fused(s, 1), s * A.rows * (3 + 1), 1.0)


class _Level(NamedTuple):
    """A level's operator ``a``, prolongation ``p`` and restriction ``r``, and its unknowns
    per node."""

    a: _Operator
    p: _Operator
    r: _Operator
    block_dim: int


class _Levels(NamedTuple):
    """A hierarchy's sizes: every level but the coarsest, and the coarsest's operator and
    unknowns per node."""

    levels: tuple[_Level, ...]
    coarsest: _Operator
    coarsest_block_dim: int

    @classmethod
    def of(cls, structure: HierarchyStructure | DeviceStructure, padded: bool = True
           ) -> _Levels:
        """The sizes of a structure built on the host (its patterns) or on the device (its
        true level sizes: unsmoothed scalar aggregation, whose ``P`` holds one entry per
        fine row and ``R = Pᵀ`` as many): its levels' rows padded to their size classes
        (``padded``) or their own, with the patterns' own nonzeros."""
        if isinstance(structure, DeviceStructure):
            true = [rows for rows, _ in structure.sizes]
            nnz = [nnz for _, nnz in structure.sizes]
            block_dims = [1] * len(true)
        else:
            patterns = [level.a for level in structure.levels] + [structure.coarsest]
            true = [pattern.n_rows for pattern in patterns]
            nnz = [pattern.nnz for pattern in patterns]
            block_dims = [level.block_dim for level in structure.levels] + [
                structure.coarsest_block_dim]
        rows = ([level.rows for level in structure.shape.levels]
                + [structure.shape.coarsest[0]]) if padded else true

        def operator(i: int) -> _Operator:  # level i's
            return _Operator(rows[i], rows[i], nnz[i], rows[i] - true[i])

        levels = []
        for i in range(len(true) - 1):
            if isinstance(structure, DeviceStructure):
                p_nnz = r_nnz = true[i]
            else:
                p_nnz, r_nnz = structure.levels[i].p.nnz, structure.levels[i].r.nnz
            levels.append(_Level(operator(i), _Operator(rows[i], rows[i + 1], p_nnz),
                                 _Operator(rows[i + 1], rows[i], r_nnz), block_dims[i]))
        return cls(tuple(levels), operator(len(levels)), block_dims[-1])


def _amg(tally: _Tally, amg: AMGConfig, hierarchy: _Levels, A: _Operator, dtype: np.dtype,
         repeats: int) -> None:
    """One preconditioner application: ``repeats`` cycles (AmgX's ``max_iters``)."""
    s_solve = dtype.itemsize
    s = _hierarchy_itemsize(amg, dtype)
    if s != s_solve:  # r rounded to the hierarchy's precision, the correction back
        tally.add(0, "precision casts", repeats * 2 * A.rows * (s + s_solve))
    for repeat in range(repeats):
        if repeat:  # x + cycle(r − A x)
            tally.add(0, "repeated cycles", A.fused(s_solve, 1) + 3 * s_solve * A.rows)
        _cycle(tally, amg, hierarchy, s, 0, False, amg.cycle)


def _hierarchy_itemsize(amg: AMGConfig, dtype: np.dtype) -> int:
    """Bytes of one number of the hierarchy: ``dtype``'s, or single precision's."""
    if amg.hierarchy_precision == "SINGLE":
        return np.dtype(np.complex64 if np.issubdtype(dtype, np.complexfloating)
                        else np.float32).itemsize
    return dtype.itemsize


def _cycle(tally: _Tally, amg: AMGConfig, hierarchy: _Levels, s: int, index: int,
           from_x: bool, kind: str) -> None:
    """Level ``index``'s part of a cycle, and of the coarser levels it visits, as
    :func:`._cycle._cycle` runs them (``from_x``: from an iterate, not from zero)."""
    if index == len(hierarchy.levels):
        _coarsest(tally, amg, hierarchy, s, index, from_x)
        return
    a, p, r, block_dim = hierarchy.levels[index]
    scale = _scale_entries(amg.smoother, a.rows, block_dim)
    tally.add(index, "pre-smoothing", _relax(a, scale, amg.smoother, s, from_x, amg.presweeps))
    tally.add(index, "residual", a.fused(s, 1))
    tally.add(index, "restriction", r.product(s))
    visits = {"V": (("V", False),), "W": (("W", False), ("W", True)),
              "F": (("F", False), ("V", True))}[kind]
    for coarse_kind, coarse_from_x in visits:
        _cycle(tally, amg, hierarchy, s, index + 1, coarse_from_x, coarse_kind)
    tally.add(index, "prolongation", p.fused(s, 1))
    tally.add(index, "post-smoothing", _relax(a, scale, amg.smoother, s, True, amg.postsweeps,
                                              backward=True))


def _coarsest(tally: _Tally, amg: AMGConfig, hierarchy: _Levels, s: int, index: int,
              from_x: bool) -> None:
    a = hierarchy.coarsest
    n = a.rows
    if amg.coarse_iterations is not None:  # a Krylov method, unpreconditioned
        # (with the methods' default restart, 20)
        cost = _krylov(amg.coarse_solver, a, s, False, 20, amg.coarse_iterations)
        start = a.fused(s, 1) if from_x else 0
        bytes_ = start + amg.coarse_iterations * (cost.products + cost.vectors)
    elif amg.coarse_solver == "NOSOLVER":
        scale = _scale_entries(amg.smoother, n, hierarchy.coarsest_block_dim)
        bytes_ = _relax_forward_backward(a, scale, amg.smoother, s, from_x, amg.coarsest_sweeps)
    elif from_x:  # x + A_c⁻¹ (b − A_c x)
        bytes_ = a.fused(s, 1) + s * (n * n + 3 * n)
    else:  # A_c⁻¹ b
        bytes_ = s * (n * n + 2 * n)
    tally.add(index, "coarse solve", bytes_)


def _scale_entries(relaxation: RelaxationConfig, rows: int, block_dim: int) -> int:
    """The numbers of a Jacobi's ``ω D⁻¹``: one per row, or a ``k × k`` block per node."""
    if block_dim > 1 and relaxation.solver in ("BLOCK_JACOBI", "JACOBI_L1"):
        return rows * block_dim
    return rows


def _relax_forward_backward(a: _Operator, scale: int, relaxation: RelaxationConfig, s: int,
                            from_x: bool, sweeps: int) -> float:
    """:func:`._relaxation.relax_forward_backward`: half the sweeps forward, then back."""
    backward = sweeps // 2
    forward = _relax(a, scale, relaxation, s, from_x, sweeps - backward)
    return forward + _relax(a, scale, relaxation, s, True, backward, backward=True)


def _relax(a: _Operator, scale: int, relaxation: RelaxationConfig, s: int, from_x: bool,
           sweeps: int, backward: bool = False) -> float:
    """``sweeps`` sweeps of :func:`._relaxation.relax` (``from_x``: from an iterate)."""
    del backward  # a backward sweep costs what a forward one does
    if sweeps == 0:
        return 0
    if sweeps > _UNROLLED_SWEEPS:  # one sweep, then a loop of single sweeps
        return (_relax(a, scale, relaxation, s, from_x, 1)
                + (sweeps - 1) * _relax(a, scale, relaxation, s, True, 1))
    if relaxation.solver in MULTICOLOR_SMOOTHERS:
        return _multicolor(a, relaxation, s, from_x, sweeps)
    n, total = a.rows, 0.0
    for _ in range(sweeps):
        if relaxation.solver == "CHEBYSHEV_POLY":
            total += _chebyshev(a, s, from_x, relaxation.chebyshev_polynomial_order)
        elif not from_x:  # x = ω D⁻¹ b: no product
            total += s * (scale + 2 * n)
        elif scale == n:  # one kernel: x + ω D⁻¹ (b − A x)
            total += a.fused(s, 2)
        else:  # b − A x, then x + (ω D⁻¹) r by blocks
            total += a.fused(s, 1) + s * (scale + 3 * n)
        from_x = True
    return total


def _chebyshev(a: _Operator, s: int, from_x: bool, degree: int) -> float:
    """One Chebyshev sweep of ``degree`` (:func:`._relaxation._chebyshev`)."""
    n = a.rows
    start = (a.fused(s, 1) + 3 * s * n) if from_x else 3 * s * n  # r = D⁻¹ (b − A x)
    direction = 2 * s * n  # d = r / θ
    updates = 3 * s * n * (degree if from_x else degree - 1)  # x += d (free from zero)
    # r −= D⁻¹ A d (one kernel, reading d, D⁻¹ and r), d = c₁ d + c₂ r
    steps = (degree - 1) * (a.fused(s, 2) + 3 * s * n)
    return start + direction + updates + steps


def _multicolor(a: _Operator, relaxation: RelaxationConfig, s: int, from_x: bool,
                sweeps: int) -> float:
    """``sweeps`` multicolor Gauss-Seidel or DILU sweeps (:mod:`._multicolor`)."""
    n = a.rows
    permute = n * (2 * s + INDEX_BYTES)  # v[order]: v and the order read, one vector written
    half = a.off_diagonal // 2 * (s + INDEX_BYTES) + INDEX_BYTES * (n + 1)  # L or U
    if relaxation.solver == "MULTICOLOR_DILU":
        total = 0.0
        for _ in range(sweeps):
            residual = a.fused(s, 1) if from_x else 0
            # forward (E + L) y = r and backward (E + U) z = E y: each reads its block,
            # the scaling, its right-hand side and its own unknowns, and writes them.
            solves = 2 * (half + 4 * s * n)
            total += residual + 2 * permute + solves + (3 * s * n if from_x else 0)
            from_x = True
        return total
    passes = (1 + relaxation.symmetric_gs) * sweeps
    # A pass reads L and U, the diagonal, the scaling, b and x, and writes x; a pass from
    # zero reads one of L or U, the scaling and b, and writes x.
    full = 2 * half + 5 * s * n
    total = (2 + from_x) * permute  # b (and x) into the color order, x out of it
    if not from_x:
        total += half + 4 * s * n
        passes -= 1
    return total + passes * full
