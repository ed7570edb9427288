"""potrs over two processes, started by jaxsolve.sharding's launcher on virtual CPU devices,
on a grid mesh of Auto axes and on the same grid with Explicit axes."""

import textwrap

from helpers import launch

SCRIPT = """
import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import jaxsolve.sharding as js

info = js.initialize()
jax.config.update("jax_enable_x64", True)
from jaxsolve import dense

n = 12
mesh = js.make_grid_mesh(2, 2)  # 2 processes x 2 devices: each process holds one grid row
a_global = np.diag(np.arange(1.0, n + 1))
a = jax.make_array_from_callback((n, n), NamedSharding(mesh, P("pr", "pc")),
                                 lambda index: a_global[index])
b = jax.make_array_from_callback((n,), NamedSharding(mesh, P("pr")),
                                 lambda index: np.ones(n)[index])
x, logdet, status = dense.potrs(a, b, T_A=3, return_logdet=True, return_status=True,
                                replicate_x=False)
dense.raise_on_failure(status)
assert not x.is_fully_addressable and x.sharding.spec == P("pr")
for shard in x.addressable_shards:
    np.testing.assert_allclose(shard.data, 1 / np.arange(1.0, n + 1)[shard.index], rtol=1e-14)
np.testing.assert_allclose(logdet.addressable_data(0), np.sum(np.log(np.arange(1.0, n + 1))))
_, failed = dense.potrs(-a, b, return_status=True)
assert int(failed.info.addressable_data(0)) == 1 and int(failed) == 1
x = dense.potrs(a, b, T_A=3)  # JAXMg's placement: every process holds all of x
assert x.sharding.is_fully_replicated
np.testing.assert_allclose(x.addressable_data(0), 1 / np.arange(1.0, n + 1), rtol=1e-14)

# The same grid with Explicit axes (jax.make_mesh's default): x comes back typed on it.
explicit = jax.sharding.Mesh(mesh.devices, mesh.axis_names,
                             axis_types=(jax.sharding.AxisType.Explicit,) * 2)
a = jax.make_array_from_callback((n, n), NamedSharding(explicit, P("pr", "pc")),
                                 lambda index: a_global[index])
b = jax.make_array_from_callback((n,), NamedSharding(explicit, P("pr")),
                                 lambda index: np.ones(n)[index])
x = dense.potrs(a, b, T_A=3, donate=True, replicate_x=False)
assert a.is_deleted() and x.sharding.mesh == explicit and x.sharding.spec == P("pr")
for shard in x.addressable_shards:
    np.testing.assert_allclose(shard.data, 1 / np.arange(1.0, n + 1)[shard.index], rtol=1e-14)
print("ok", info.process_id, jax.process_count(), jax.device_count())
"""


def test_potrs_over_two_processes(tmp_path):
    script = tmp_path / "potrs_two_processes.py"
    script.write_text(textwrap.dedent(SCRIPT))
    run = launch(script, 2, devices_per_process=2)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = sorted(line for line in run.stdout.splitlines() if " ok " in line)
    assert lines == ["[rank 0] ok 0 2 4", "[rank 1] ok 1 2 4"], run.stdout
