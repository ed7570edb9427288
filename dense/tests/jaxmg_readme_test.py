"""Acceptance: JAXMg's README example, its text with only the import line changed, run as four
processes by ``python -m jaxsolve.sharding.launch -n 4`` on virtual CPU devices, prints exactly
the output JAXMg's README documents for four ranks.

It exercises, unchanged, what JAXMg programs rely on: a bare ``jax.distributed.initialize()``
(the launcher sets what it reads), ``jax.set_mesh`` of ``jax.make_mesh``'s Explicit axes,
``x`` replicated so that process 0 prints all of it, and ``log det A`` to the last digit.
"""

from helpers import launch, printed_by

# JAXMg's README ("Complete distributed example with validation"); the import line is
# ``from jaxsolve.dense import potrs`` where it reads ``from jaxmg import potrs``.
README_EXAMPLE = """\
import jax
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
from jax.sharding import PartitionSpec as P, NamedSharding
from jaxsolve.dense import potrs


jax.distributed.initialize()

T_A = 3
dtype = jnp.float64

num_procs = jax.process_count()
N = T_A * num_procs

A = jnp.diag(jnp.arange(N, dtype=dtype) + 1)
b = jnp.ones((N, 1), dtype=dtype)

mesh = jax.make_mesh((num_procs, 1), ("pr", "pc"))
jax.set_mesh(mesh)
a_sharding = NamedSharding(mesh, P("pr", "pc"))
b_sharding = NamedSharding(mesh, P("pr", None))
A = jax.device_put(A, a_sharding)
b = jax.device_put(b, b_sharding)

out, logdet = potrs(A, b, T_A=T_A, return_logdet=True)
out.block_until_ready()
logdet.block_until_ready()

expected_out = 1.0 / (jnp.arange(N, dtype=dtype) + 1)
expected_logdet = jnp.sum(jnp.log(jnp.arange(N, dtype=dtype) + 1))
is_correct = jnp.allclose(out.flatten(), expected_out) & jnp.allclose(
    logdet, expected_logdet
)
is_correct.block_until_ready()

if jax.process_index() == 0:
    print(out)
    print(logdet)
    print(is_correct)
"""

# What JAXMg's README says the example prints on four ranks.
DOCUMENTED_OUTPUT = """\
[[1.        ]
 [0.5       ]
 [0.33333333]
 [0.25      ]
 [0.2       ]
 [0.16666667]
 [0.14285714]
 [0.125     ]
 [0.11111111]
 [0.1       ]
 [0.09090909]
 [0.08333333]]
19.987214495661885
True
"""


def test_jaxmg_readme_example_prints_the_documented_output(tmp_path):
    script = tmp_path / "readme_example.py"
    script.write_text(README_EXAMPLE)
    run = launch(script, 4)
    assert run.returncode == 0, run.stdout + run.stderr
    assert printed_by(run, 0) == DOCUMENTED_OUTPUT.splitlines(), run.stdout
    for rank in (1, 2, 3):
        assert printed_by(run, rank) == [], run.stdout
