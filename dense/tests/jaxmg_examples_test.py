"""Acceptance: the code of JAXMg's documentation pages (docs/examples/: potrs, lu_solve, syevd,
gesvd, qr, polar, least_squares, with their ``*_shardmap_ctx`` sections), run by
``python -m jaxsolve.sharding.launch`` as two processes on virtual CPU devices, prints what the
pages say it prints (``True`` for every check).

Each page is its text, code blocks in order, with these changes only:

* ``from jaxmg import ...`` reads ``from jaxsolve.dense import ...``;
* the 2 × 2 pages' sizes are cut by four (`SMALLER`) so that the XLA reference backend, which
  computes every decomposition on every device, stays quick on a 2-core CI machine;
* two checks name the sharding JAX 0.10.2 asks for when an Explicit-typed matrix split over
  both axes is contracted with itself (``qr``: ``jnp.matmul(..., out_sharding=P())``) or has
  its diagonal taken (``polar``: ``jax.reshard(h, P())``); each is marked in the page's text.

The pages set x64 themselves (JAXMg turns it on at import; jaxsolve never changes it).
"""

import math

import pytest

from helpers import launch, printed_by

# The 2 × 2 pages' sizes, and what they are cut to: every local block still divides into T_A.
SMALLER = {"T_A = 128\n": "T_A = 32\n", "M = 1024\n": "M = 256\n", "N = 512\n": "N = 128\n",
           "M, N = 2048, 1024\n": "M, N = 256, 128\n"}

POTRS_PAGE = """\
import jax

jax.config.update("jax_enable_x64", True)
jax.distributed.initialize()

import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from jaxsolve.dense import potrs


num_processes = jax.process_count()
mesh = jax.make_mesh((num_processes,), ("pr",))
jax.set_mesh(mesh)
matrix_specs = P("pr")
a_sharding = NamedSharding(mesh, matrix_specs)
b_sharding = NamedSharding(mesh, P("pr", None))

T_A = 64
N = T_A * num_processes
dtype = jnp.float64


def make_problem():
    a = jnp.diag(jnp.arange(1, N + 1, dtype=dtype))
    b = jnp.ones((N, 1), dtype=dtype)
    a = jax.device_put(a, a_sharding)
    b = jax.device_put(b, b_sharding)
    return a, b


expected = 1.0 / jnp.arange(1, N + 1, dtype=dtype)

a, b = make_problem()

x = potrs(
    a,
    b,
    T_A=T_A,
    mesh=mesh,
    matrix_specs=matrix_specs,
)
x.block_until_ready()

correct = jnp.allclose(x[:, 0], expected)
correct.block_until_ready()

if jax.process_index() == 0:
    print(correct)

a, b = make_problem()

x, logdet = potrs(
    a,
    b,
    T_A=T_A,
    mesh=mesh,
    matrix_specs=matrix_specs,
    return_logdet=True,
)

if jax.process_index() == 0:
    print(logdet)

from functools import partial

from jaxsolve.dense import potrs_shardmap_ctx


@partial(jax.jit, donate_argnums=(0, 1))
def compiled_solve(a, b):
    a_work, x, status = potrs_shardmap_ctx(
        a,
        b,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
    )

    # Further JAX operations on x can be part of this compiled function.
    scaled_x = 2.0 * x
    return a_work, scaled_x, status


a, b = make_problem()
a_work, scaled_x, status = compiled_solve(a, b)
scaled_x.block_until_ready()

correct = jnp.allclose(scaled_x[:, 0], 2.0 * expected)
correct.block_until_ready()

if jax.process_index() == 0:
    print(correct)


@jax.jit
def build_and_solve(diagonal):
    a = jnp.diag(diagonal)
    b = jnp.ones((N, 1), dtype=diagonal.dtype)

    a = jax.reshard(a, a_sharding)
    b = jax.reshard(b, b_sharding)

    _, x, status = potrs_shardmap_ctx(
        a,
        b,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
    )

    # a_work does not need to leave the function because a was created here.
    return 2.0 * x, status


diagonal = jnp.arange(1, N + 1, dtype=dtype)
diagonal = jax.device_put(diagonal, NamedSharding(mesh, P("pr")))
scaled_x, status = build_and_solve(diagonal)
scaled_x.block_until_ready()
"""

LU_SOLVE_PAGE = """\
import jax

jax.config.update("jax_enable_x64", True)
jax.distributed.initialize()

import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from jaxsolve.dense import lu_solve


num_processes = jax.process_count()
mesh = jax.make_mesh((num_processes, 1), ("pr", "pc"))
matrix_specs = P("pr", "pc")
a_sharding = NamedSharding(mesh, matrix_specs)
b_sharding = NamedSharding(mesh, P("pr", None))

T_A = 64
N = T_A * num_processes
dtype = jnp.float64
expected_x = jnp.ones((N, 1), dtype=dtype)


def make_problem():
    # A diagonally dominant, nonsymmetric matrix.
    diagonal = jnp.arange(N, dtype=dtype) + 2 * N
    a = jnp.diag(diagonal)
    a = a + 0.01 * jnp.triu(jnp.ones((N, N), dtype=dtype), k=1)
    a = jax.device_put(a, a_sharding)

    # Form B from the globally sharded matrix. This is important in MPMD:
    # every process must not independently provide a different local B to
    # device_put as though it were a complete global array.
    x = jax.device_put(expected_x, NamedSharding(mesh, P(None, None)))
    b = jax.reshard(a @ x, b_sharding)
    return a, b

a, b = make_problem()

x = lu_solve(
    a,
    b,
    T_A=T_A,
    mesh=mesh,
    matrix_specs=matrix_specs,
)
x.block_until_ready()

correct = jnp.allclose(x, expected_x)
correct.block_until_ready()

if jax.process_index() == 0:
    print(correct)

from functools import partial

from jaxsolve.dense import lu_solve_shardmap_ctx

@partial(jax.jit, donate_argnums=(0, 1))
def compiled_solve(a, b):
    a_work, x, status = lu_solve_shardmap_ctx(
        a,
        b,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
    )

    # Further JAX operations on x can be part of this compiled function.
    scaled_x = 2.0 * x
    return a_work, scaled_x, status


a, b = make_problem()
a_work, scaled_x, status = compiled_solve(a, b)
scaled_x.block_until_ready()

correct = jnp.allclose(scaled_x, 2.0 * expected_x)
correct.block_until_ready()

if jax.process_index() == 0:
    print(correct)

@jax.jit
def build_and_solve(diagonal):
    a = jnp.diag(diagonal)
    a = a + 0.01 * jnp.triu(jnp.ones((N, N), dtype=diagonal.dtype), k=1)
    a = jax.reshard(a, a_sharding)

    expected_x = jnp.ones((N, 1), dtype=diagonal.dtype)
    b = a @ expected_x
    b = jax.reshard(b, b_sharding)

    _, x, status = lu_solve_shardmap_ctx(
        a,
        b,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
    )

    # a_work remains internal because a was created inside this function.
    return 2.0 * x, status


diagonal = jnp.arange(N, dtype=dtype) + 2 * N
diagonal = jax.device_put(diagonal, NamedSharding(mesh, P("pr")))
scaled_x, status = build_and_solve(diagonal)
scaled_x.block_until_ready()
"""

SYEVD_PAGE = """\
import jax

jax.config.update("jax_enable_x64", True)
jax.distributed.initialize()

import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from jaxsolve.dense import syevd


num_processes = jax.process_count()
mesh = jax.make_mesh((num_processes, 1), ("pr", "pc"))
matrix_specs = P("pr", "pc")

T_A = 64
N = T_A * num_processes
dtype = jnp.float64

expected_eigenvalues = jnp.arange(1, N + 1, dtype=dtype)
a = jnp.diag(expected_eigenvalues)
a = jax.device_put(a, NamedSharding(mesh, matrix_specs))

eigenvalues, eigenvectors = syevd(
    a,
    T_A=T_A,
    mesh=mesh,
    matrix_specs=matrix_specs,
)
eigenvectors.block_until_ready()

correct = jnp.allclose(eigenvalues, expected_eigenvalues)
correct.block_until_ready()

if jax.process_index() == 0:
    print(correct)
"""

GESVD_PAGE = """\
import jax

jax.config.update("jax_enable_x64", True)
jax.distributed.initialize()

import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from jaxsolve.dense import gesvd


mesh = jax.make_mesh((2, 2), ("pr", "pc"))
jax.set_mesh(mesh)
matrix_specs = P("pr", "pc")
matrix_sharding = NamedSharding(mesh, matrix_specs)

T_A = 128
M = 1024
N = 512
K = min(M, N)
dtype = jnp.float64


@jax.jit
def make_matrix():
    singular_values = jnp.linspace(2.0, 1.0, K, dtype=dtype)
    a = jnp.zeros((M, N), dtype=dtype)
    a = a.at[jnp.arange(K), jnp.arange(K)].set(singular_values)
    return jax.reshard(a, matrix_sharding), singular_values

a, expected_singular_values = make_matrix()

u, singular_values, vh = gesvd(
    a,
    T_A=T_A,
    mesh=mesh,
    matrix_specs=matrix_specs,
)
vh.block_until_ready()

correct = jnp.allclose(singular_values, expected_singular_values)
correct.block_until_ready()

if jax.process_index() == 0:
    print(correct)

# Singular values only.
a, _ = make_matrix()
singular_values = gesvd(
    a,
    T_A=T_A,
    mesh=mesh,
    matrix_specs=matrix_specs,
    compute_u=False,
    compute_vh=False,
)

# U and singular values, without Vh.
a, _ = make_matrix()
u, singular_values = gesvd(
    a,
    T_A=T_A,
    mesh=mesh,
    matrix_specs=matrix_specs,
    compute_vh=False,
)

from functools import partial

from jaxsolve.dense import gesvd_shardmap_ctx




@partial(jax.jit, donate_argnums=(0,))
def compiled_svd(a):
    a_work, u, singular_values, vh, status = gesvd_shardmap_ctx(
        a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
    )

    # Further JAX operations can be part of this compiled function.
    scaled_singular_values = 2.0 * singular_values
    return a_work, u, scaled_singular_values, vh, status


a, expected_singular_values = make_matrix()
a_work, u, scaled_singular_values, vh, status = compiled_svd(a)
vh.block_until_ready()

correct = jnp.allclose(scaled_singular_values, 2.0 * expected_singular_values)
correct.block_until_ready()

if jax.process_index() == 0:
    print(correct)

@jax.jit
def build_and_decompose(scale):
    expected_singular_values = scale * jnp.linspace(
        2.0, 1.0, K, dtype=dtype
    )
    a = jnp.zeros((M, N), dtype=dtype)
    a = a.at[jnp.arange(K), jnp.arange(K)].set(expected_singular_values)
    a = jax.reshard(a, matrix_sharding)

    _, u, singular_values, vh, status = gesvd_shardmap_ctx(
        a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
    )

    # a_work remains internal because a was created inside this function.
    return u, singular_values, vh, expected_singular_values, status


scale = jnp.asarray(2.0, dtype=dtype)
u, singular_values, vh, expected_singular_values, status = build_and_decompose(
    scale
)
vh.block_until_ready()

correct = jnp.allclose(singular_values, expected_singular_values)
correct.block_until_ready()

if jax.process_index() == 0:
    print(correct)
"""

QR_PAGE = """\
import jax

jax.config.update("jax_enable_x64", True)
jax.distributed.initialize()

import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from jaxsolve.dense import qr


mesh = jax.make_mesh((2, 2), ("pr", "pc"))
jax.set_mesh(mesh)
matrix_specs = P("pr", "pc")
matrix_sharding = NamedSharding(mesh, matrix_specs)

T_A = 128
M = 1024
N = 512


@jax.jit
def make_matrix():
    a = jnp.arange(M * N, dtype=jnp.float64).reshape(M, N) / (M * N)
    a = a.at[:N, :].add(jnp.eye(N, dtype=a.dtype))
    return jax.reshard(a, matrix_sharding)

a = make_matrix()
q, r = qr(a, T_A=T_A)
r.block_until_ready()

# The one change besides the import: JAX 0.10.2 asks for the product's sharding when both
# contracted dimensions are split over the same Explicit axis.
correct = jnp.allclose(jnp.matmul(q.conj().T, q, out_sharding=P()), jnp.eye(N))
correct.block_until_ready()

if jax.process_index() == 0:
    print(correct)

from functools import partial

from jaxsolve.dense import qr_shardmap_ctx


@partial(jax.jit, donate_argnums=(0,))
def compiled_qr(a):
    return qr_shardmap_ctx(
        a,
        T_A=T_A,
    )


a = make_matrix()
q, r, status = compiled_qr(a)
r.block_until_ready()
"""

POLAR_PAGE = """\
import jax

jax.config.update("jax_enable_x64", True)
jax.distributed.initialize()

import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from jaxsolve.dense import polar


mesh = jax.make_mesh((2, 2), ("pr", "pc"))
jax.set_mesh(mesh)
matrix_specs = P("pr", "pc")
matrix_sharding = NamedSharding(mesh, matrix_specs)

T_A = 128
M = 1024
N = 512
dtype = jnp.float64


@jax.jit
def make_matrix():
    diagonal = jnp.linspace(1.0, 2.0, N, dtype=dtype)
    a = jnp.zeros((M, N), dtype=dtype)
    a = a.at[jnp.arange(N), jnp.arange(N)].set(diagonal)
    return jax.reshard(a, matrix_sharding), diagonal

a, expected_h_diagonal = make_matrix()

up, h = polar(
    a,
    T_A=T_A,
    mesh=mesh,
    matrix_specs=matrix_specs,
)
h.block_until_ready()

# The one change besides the import: JAX 0.10.2 asks where the diagonal of a matrix split
# over two Explicit axes goes.
correct = jnp.allclose(jnp.diag(jax.reshard(h, P())), expected_h_diagonal)
correct.block_until_ready()

if jax.process_index() == 0:
    print(correct)

from functools import partial

from jaxsolve.dense import polar_shardmap_ctx


@partial(jax.jit, donate_argnums=(0,))
def compiled_polar(a):
    up, h, status = polar_shardmap_ctx(
        a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
    )
    return up, h, status


a, _ = make_matrix()
up, h, status = compiled_polar(a)
h.block_until_ready()
"""

LEAST_SQUARES_PAGE = """\
import jax

jax.config.update("jax_enable_x64", True)
jax.distributed.initialize()

import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from jaxsolve.dense import least_squares


mesh = jax.make_mesh((2, 2), ("pr", "pc"))
jax.set_mesh(mesh)
matrix_specs = P("pr", "pc")
matrix_sharding = NamedSharding(mesh, matrix_specs)
solve_sharding = NamedSharding(mesh, P("pr", None))

T_A = 128
M, N = 2048, 1024
dtype = jnp.float64
expected_x = jnp.ones((N,), dtype=dtype)


@jax.jit
def make_problem():
    diagonal = jnp.arange(1, N + 1, dtype=dtype)
    a = jnp.zeros((M, N), dtype=dtype)
    a = a.at[jnp.arange(N), jnp.arange(N)].set(diagonal)
    a = jax.reshard(a, matrix_sharding)
    b = jax.reshard(a @ expected_x, solve_sharding)
    return a, b

a, b = make_problem()

x = least_squares(
    a,
    b,
    T_A=T_A,
    mesh=mesh,
    matrix_specs=matrix_specs,
)
x.block_until_ready()

correct = jnp.allclose(x, expected_x)
correct.block_until_ready()

if jax.process_index() == 0:
    print(correct)

from functools import partial

from jaxsolve.dense import least_squares_shardmap_ctx

@partial(jax.jit, donate_argnums=(0, 1))
def compiled_solve(a, b):
    a_work, b_work, x, status = least_squares_shardmap_ctx(
        a,
        b,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
    )
    return a_work, b_work, 2.0 * x, status


a, b = make_problem()
a_work, b_work, scaled_x, status = compiled_solve(a, b)
scaled_x.block_until_ready()

@jax.jit
def build_and_solve():
    diagonal = jnp.arange(1, N + 1, dtype=dtype)
    a = jnp.zeros((M, N), dtype=dtype)
    a = a.at[jnp.arange(N), jnp.arange(N)].set(diagonal)
    a = jax.reshard(a, matrix_sharding)
    b = jax.reshard(a @ expected_x, solve_sharding)

    _, _, x, status = least_squares_shardmap_ctx(
        a,
        b,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
    )
    return x, status


x, status = build_and_solve()
x.block_until_ready()
"""


# page: (its code, processes, devices per process, what process 0 prints)
PAGES = {
    "potrs": (POTRS_PAGE, 2, 1, ["True", "LOGDET", "True"]),
    "lu_solve": (LU_SOLVE_PAGE, 2, 1, ["True", "True"]),
    "syevd": (SYEVD_PAGE, 2, 1, ["True"]),
    "gesvd": (GESVD_PAGE, 2, 2, ["True", "True", "True"]),
    "qr": (QR_PAGE, 2, 2, ["True"]),
    "polar": (POLAR_PAGE, 2, 2, ["True"]),
    "least_squares": (LEAST_SQUARES_PAGE, 2, 2, ["True"]),
}


def smaller(page):
    """`page` with the sizes in `SMALLER` replaced; each one it names must be there."""
    for old, new in SMALLER.items():
        page = page.replace(old, new)
    return page


@pytest.mark.parametrize("name", list(PAGES))
def test_jaxmg_documentation_page(tmp_path, name):
    page, processes, devices, expected = PAGES[name]
    if devices > 1:
        resized = smaller(page)
        assert resized != page and "1024" not in resized
        page = resized
    script = tmp_path / f"{name}_page.py"
    script.write_text(page)
    run = launch(script, processes, devices_per_process=devices)
    assert run.returncode == 0, run.stdout + run.stderr
    printed = printed_by(run, 0)
    if "LOGDET" in expected:  # log det diag(1..N) = log N!, N = 64 T_A-tiles per process
        logdet = float(printed[expected.index("LOGDET")])
        assert math.isclose(logdet, math.lgamma(64 * processes + 1), rel_tol=1e-14)
        expected = [str(logdet) if line == "LOGDET" else line for line in expected]
    assert printed == expected, run.stdout
    assert printed_by(run, 1) == [], run.stdout
