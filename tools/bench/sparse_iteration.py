"""Where an AMG-PCG iteration's time goes: the bytes it moves against the kernels it runs.

Issue 33 asks for a 3D Poisson 128³ solve within 6 ms on the H200 and for the bytes moved per
iteration against its bandwidth. One run solves 3D Poisson on an ``n × n × n`` grid
(``matrices.poisson3d_matrix``, f64, ``b`` standard normal from a fixed seed, PCG to
``‖r‖ ≤ 1e-8 ‖b‖``) on the default device, for each configuration (classical PMISC with one
aggressive level, the library's default AMG), and prints:

* **its**, **solve**: the iterations and the smallest time of ``--repeats`` solves with
  ``reuse_setup=True`` (after a warm-up), and **per it**, the solve over the iterations;
* **MB/it**: ``memory_traffic_per_iteration``, the bytes one iteration must move (each matrix
  and vector once per operation, on the rows the kernels run over), with **padding**, the part
  the size classes' padding rows cost, and **ideal**: that many bytes at ``--peak-bandwidth``
  (default 4e12 B/s, about what an H200 copies at), against which **BW** is the bandwidth the
  solve achieved (``MB/it × its / solve``);
* **kernels/it**: the instructions of the compiled solve's loop body that run as kernels (the
  jitted ``solve`` of the matrix's values and ``b``, its optimized HLO's ``while`` with the
  most SpMV calls): XLA **fusions**, **SpMV** calls (jaxsolve's native CSR product, every
  level's residual, restriction, prolongation and sweeps) and any **other** (a ``dot``, a
  ``copy``, a library call). On a GPU XLA records each as a node of the loop's CUDA graph,
  which the host launches once per trip, about 2 µs a node on the H200
  (``tools/bench/sparse_loop_launch.py``), so ``kernels/it`` bounds what the launch adds per
  iteration; on a CPU, XLA's CPU fusions are counted instead (fewer: it fuses more);

then per level the bytes of one iteration (``MemoryTraffic``'s table). The time per iteration
not explained by ``ideal`` is the kernels' shortfall from the peak (small coarse levels run at
latency, not bandwidth) and the launch.

**Running it.** ``n`` is the first argument (default 128 on a GPU, 32 on a CPU):

    tools/dev bench sparse_iteration 64
    tools/dev gpu-run python3 tools/bench/sparse_iteration.py 128
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve.sparse as jsp
from jaxsolve.sparse import matrices
from amg_configs import LEAN
from timing import smallest_time

TOLERANCE = 1e-8
CONFIGS = {
    "PMISC + 1 aggressive": {"solver": "PCG", "tolerance": TOLERANCE, "max_iters": 200,
                             "preconditioner": LEAN},
    "default": {"solver": "PCG", "tolerance": TOLERANCE, "max_iters": 200},
}
SPMV_TARGET = "jaxsolve_sparse_csr_matvec"
# Instructions that run no kernel: a loop body's bookkeeping.
_NO_KERNEL = frozenset({"parameter", "get-tuple-element", "tuple", "constant", "bitcast",
                        "after-all", "partition-id", "replica-id", "opt-barrier"})


@dataclasses.dataclass(frozen=True)
class Kernels:
    """The kernels of one trip of a compiled loop, by kind."""

    fusions: int
    spmv: int
    other: collections.Counter

    @property
    def total(self) -> int:
        return self.fusions + self.spmv + sum(self.other.values())


@dataclasses.dataclass(frozen=True)
class Row:
    """One configuration's numbers."""

    iterations: int
    seconds: float
    traffic: jsp.MemoryTraffic
    kernels: Kernels


def loop_kernels(hlo: str) -> Kernels:
    """The kernels of the body of ``hlo``'s ``while`` loop with the most SpMV calls (the
    Krylov loop of a solve, inside the loops of its restarts and checks), counted through
    the computations it calls (a fusion counts once, an inner loop not at all)."""
    computations: dict[str, list[str]] = {}
    name = None
    for line in hlo.splitlines():
        header = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if header:
            name = header.group(1)
            computations[name] = []
        elif name is not None and line.startswith(" "):
            computations[name].append(line)

    def count(computation: str, counts: collections.Counter) -> collections.Counter:
        for line in computations[computation]:
            line = re.sub(r"/\*.*?\*/", "", line)  # a tuple type's /*index=5*/
            op = re.search(r"= (?:\([^=]*\)|\S+) ([\w\-]+)\(", line)
            kind = op.group(1) if op else "?"
            if kind in _NO_KERNEL:
                continue
            if kind == "while":  # an inner loop: counted as a loop of its own
                counts["while"] += 1
            elif kind in ("call", "conditional"):
                for called in re.findall(r"(?:to_apply|calls)=%?([\w.\-]+)", line):
                    count(called, counts)
                for branches in re.findall(r"branch_computations=\{([^}]*)\}", line):
                    for called in branches.split(","):
                        count(called.strip().lstrip("%"), counts)
            elif kind == "custom-call":
                counts[re.search(r'custom_call_target="([^"]+)"', line).group(1)] += 1
            else:
                counts[kind] += 1
        return counts

    bodies = [re.search(r"body=%?([\w.\-]+)", line).group(1)
              for lines in computations.values() for line in lines if " while(" in line]
    if not bodies:
        raise ValueError("the program has no while loop")
    counts = max((count(body, collections.Counter()) for body in bodies),
                 key=lambda c: c[SPMV_TARGET])
    fusions, spmv = counts.pop("fusion", 0), counts.pop(SPMV_TARGET, 0)
    return Kernels(fusions=fusions, spmv=spmv, other=counts)


def measure(n: int, config: dict, repeats: int = 3) -> Row:
    """One configuration on the ``n³`` grid."""
    A = jsp.as_csr(matrices.poisson3d_matrix(n, dtype=jnp.float64))
    b = jnp.asarray(np.random.default_rng(0).standard_normal(A.shape[0]))
    seconds, (_, info) = smallest_time(
        lambda: jsp.solve(A, b, config=config, reuse_setup=True), repeats)
    traffic = jsp.memory_traffic_per_iteration(A, config)
    solve = jax.jit(lambda values, rhs: jsp.solve(A.with_values(values), rhs, config=config,
                                                  reuse_setup=True)[0])
    hlo = solve.lower(A.values, b).compile().as_text()
    return Row(int(info.iterations), seconds, traffic, loop_kernels(hlo))


def table(rows: dict[str, Row], peak_bandwidth: float) -> str:
    """The rows, then each row's bytes per level."""
    lines = ["| configuration | its | solve ms | per it µs | MB/it | padding | ideal µs/it "
             "| BW TB/s | kernels/it (fusions, SpMV, other) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        total = row.traffic.total
        other = ", ".join(f"{kind} {k}" for kind, k in sorted(row.kernels.other.items()))
        lines.append(
            f"| {name} | {row.iterations} | {1e3 * row.seconds:.2f} "
            f"| {1e6 * row.seconds / row.iterations:.0f} | {total / 1e6:.1f} "
            f"| {100 * row.traffic.padding / total:.1f} % | {1e6 * total / peak_bandwidth:.0f} "
            f"| {row.traffic.bandwidth(row.iterations, row.seconds) / 1e12:.2f} "
            f"| {row.kernels.total} ({row.kernels.fusions}, {row.kernels.spmv}"
            f"{', ' + other if other else ''}) |")
    for name, row in rows.items():
        lines += ["", f"{name}:", str(row.traffic)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    jax.config.update("jax_enable_x64", True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("n", type=int, nargs="?",
                        help="grid side, n³ rows (default: 128 on a GPU, 32 on a CPU)")
    parser.add_argument("--peak-bandwidth", type=float, default=4e12, help="bytes per second")
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    n = args.n or (128 if jax.default_backend() == "gpu" else 32)
    print(f"3D Poisson {n}³ ({n ** 3} rows), f64, on {jax.devices()[0].device_kind}; "
          f"ideal at {args.peak_bandwidth / 1e12:g} TB/s")
    rows = {name: measure(n, CONFIGS[name], args.repeats) for name in args.configs}
    print(table(rows, args.peak_bandwidth))


if __name__ == "__main__":
    main()
