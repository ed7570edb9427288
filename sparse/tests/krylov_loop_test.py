"""The work of one Krylov iteration, read from the compiled CPU program.

A solve's time is the benchmarks' business (``tools/bench/sparse_poisson3d.py``); what these
tests pin, deterministically, is what each iteration of a method's loop does besides its
``matvec`` and ``precondition``: how many reductions (each one a synchronization on a GPU),
how many passes over a vector (the loop's memory traffic: every pass over a 2 M-row f64
vector costs ~4 µs on an H200), and no branch (a ``lax.cond`` in a GPU loop body reads its
predicate back to the host every iteration).  An addition to a loop body, e.g. a copy of the
best iterate kept beside ``x``, raises these counts and fails here.
"""

import re
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pyamg
import pytest
import scipy.sparse

from jaxsolve.sparse import _krylov
from jaxsolve.sparse._csr import as_csr

# In f64, where XLA's CPU backend reduces a dot product in one fusion.
pytestmark = pytest.mark.usefixtures("x64")

# The matrix's rows; no other array in these programs has this length.
N = 4096
MATVEC = "jaxsolve_sparse_csr_matvec"


def compiled_hlo(method, **options):
    """The optimized f64 HLO text of ``method`` on a 2-D Poisson matrix with a diagonal
    preconditioner (one elementwise pass: read r, write z), on the CPU."""
    poisson = pyamg.gallery.poisson((64, 64), format="csr", dtype=np.float64)
    A = as_csr(scipy.sparse.csr_array(poisson))
    assert A.shape == (N, N)
    inverse_diagonal = 1 / A.diagonal()
    precondition = lambda r: inverse_diagonal * r
    solve = jax.jit(lambda b: method(A.matvec, b, precondition=precondition, **options))
    cpu = jax.devices("cpu")[0]
    return solve.lower(jax.device_put(jnp.ones(N, jnp.float64), cpu)).compile().as_text()


def computations(hlo):
    """``{name: [instruction lines]}`` of an HLO module's text."""
    bodies, name = {}, None
    for line in hlo.splitlines():
        if not line.startswith(" ") and line.rstrip().endswith("{"):
            name = re.match(r"(?:ENTRY )?%?([\w.\-]+)", line).group(1)
            bodies[name] = []
        elif line.startswith("}"):
            name = None
        elif name and " = " in line:
            bodies[name].append(line.strip())
    return bodies


def iteration_work(hlo):
    """Counts, over the top-level instructions of the innermost while-loop body that
    applies the matvec (one iteration): ``reductions`` (fusions or ops that reduce to a scalar),
    ``passes`` (reads and writes of length-N vectors, outside the matvec's custom call),
    ``branches`` (conditionals), ``copies`` (vector copies), ``bodies`` (such loop
    bodies in the program) and ``matvecs`` (the matvec custom calls in the program)."""
    bodies = computations(hlo)
    loops = [re.search(r"body=%?([\w.\-]+)", line).group(1)
             for lines in bodies.values() for line in lines if re.search(r"\bwhile\(", line)]
    iterations = [body for body in loops if any(MATVEC in line for line in bodies[body])
                  and not any(re.search(r"\bwhile\(", line) for line in bodies[body])]
    work = Counter(bodies=len(iterations), matvecs=hlo.count(f'custom_call_target="{MATVEC}"'))
    vector = re.compile(rf"^f64\[(?:1,)?{N}(?:,1)?\]")
    instruction = re.compile(r"(?:ROOT )?%?([\w.\-]+) = (\S+) ([\w\-]+)\((.*)")
    for body in iterations:
        shapes = {m.group(1): m.group(2) for m in map(instruction.match, bodies[body]) if m}
        for m in map(instruction.match, bodies[body]):
            if not m or m.group(3) in ("parameter", "get-tuple-element", "bitcast", "tuple",
                                       "constant", "custom-call"):
                continue
            name, shape, op, rest = m.groups()
            operands = re.findall(r"%([\w.\-]+)", rest.split("),")[0])
            called = re.search(r"calls=%?([\w.\-]+)", rest)
            inner = " ".join(bodies.get(called.group(1), [])) if called else ""
            writes = bool(vector.match(shape))
            work["passes"] += writes + sum(bool(vector.match(shapes.get(o, ""))) for o in operands)
            work["branches"] += op == "conditional"
            work["copies"] += op == "copy" and writes
            work["reductions"] += not writes and (
                op in ("reduce", "dot") or " reduce(" in inner or " dot(" in inner)
    return work


# At most these reductions and vector passes per step of the loop, the counts before the
# loops kept a copy of their best iterate (which added a select over two vectors and a copy
# of x: 5 passes).  CG: pᴴq, rᴴz and ‖r‖; passes: x += αp, r -= αq, p = z + βp (3 each),
# z = M⁻¹r (2), the reductions (2 + 2 + 1) and XLA's copy of p (2), which the matvec reads
# beside its update.  BiCGSTAB's step is half an iteration (its one call of the
# preconditioner): r̂ᴴr, r̂ᴴy, yᴴy, yᴴr and ‖r‖ for y = A M⁻¹w; passes: w = r or
# r + β (p - ω v) (4), M⁻¹w (2), x and r updated (3 each), p and v kept or replaced (3 each)
# and the reductions (2 + 2 + 1 + 2 + 1).  The stationary iteration: x += M⁻¹r (4),
# r = b - Ax (2) and ‖r‖ (1).
LIMITS = {
    "cg": (3, 18),
    "bicgstab": (5, 26),
    "stationary": (1, 7),
}


@pytest.mark.parametrize("name", LIMITS)
def test_one_iteration_does_no_more_than_the_method(name):
    reductions, passes = LIMITS[name]
    work = iteration_work(compiled_hlo(getattr(_krylov, name)))
    assert work["bodies"] == 1, work  # the step is compiled once
    assert work["reductions"] == reductions, work
    assert work["passes"] <= passes, work
    assert work["branches"] == 0, work


@pytest.mark.parametrize("name", LIMITS)
def test_reruns_and_restarts_compile_no_second_step(name):
    """A solve that fails reruns its steps up to its best iterate, and one whose true
    residual misses restarts from its iterate: the same compiled step, so the program holds
    the step's matvecs and the one (batched) matvec of the true-residual check."""
    work = iteration_work(compiled_hlo(getattr(_krylov, name)))
    assert work["matvecs"] == 1 + 1, work


def test_a_copy_of_the_best_iterate_in_the_loop_would_be_counted():
    """The counter sees what these limits guard against: CG that keeps its best iterate
    beside x (a select over two vectors each iteration) exceeds CG's limit."""

    def cg_keeping_best(matvec, b, precondition):
        def step(state):
            x, best, r, p, rho, norm, k = state
            q = matvec(p)
            alpha = rho / jnp.vdot(p, q)
            best = jnp.where(jnp.vdot(r, r) <= norm, x, best)
            x, r = x + alpha * p, r - alpha * q
            z = precondition(r)
            rho_next = jnp.vdot(r, z)
            return x, best, r, z + rho_next / rho * p, rho_next, jnp.vdot(r, r), k + 1

        z = precondition(b)
        zeros = jnp.zeros_like(b)
        state = (zeros, zeros, b, z, jnp.vdot(b, z), jnp.vdot(b, b), 0)
        return jax.lax.while_loop(lambda s: s[-1] < 10, step, state)[1]

    work = iteration_work(compiled_hlo(cg_keeping_best))
    assert work["passes"] > LIMITS["cg"][1], work
    np.testing.assert_equal(work["bodies"], 1)
