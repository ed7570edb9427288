"""Tests of the bookkeeping of jaxsolve's NCCL communicators that runs without a GPU.

Creating a communicator needs GPUs and NCCL (nccl_gpu_test.py does it on the GPU host).
Here: which ranks a process holds, the checks of the device set, and that the unique id
reaches every process through JAX's public multihost broadcast (two real processes on CPU
devices, started by our launcher). The error that names a missing NCCL wheel is
jaxsolve.runtime's (runtime/tests/cuda_test.py).
"""

import jax
import pytest

import jaxsolve.sharding as js
from jaxsolve.sharding import _nccl


class TestDevices:
    def test_ranks_follow_the_given_order(self):
        cpus = jax.devices("cpu")
        devices = [cpus[3], cpus[0], cpus[5]]
        ranks, ordinals = _nccl.local_members(devices, jax.process_index())
        assert ranks == (0, 1, 2)
        assert ordinals == (cpus[3].local_hardware_id, cpus[0].local_hardware_id,
                            cpus[5].local_hardware_id)

    def test_a_process_holds_only_its_own_devices(self):
        assert _nccl.local_members(jax.devices("cpu")[:2], jax.process_index() + 1) == ((), ())

    @pytest.mark.parametrize("devices, message", [
        ([], "at least one device"),
        ("twice", "cannot hold a device twice"),
        (["cpu:0"], "expected jax.Device"),
    ])
    def test_bad_device_sets_are_refused(self, devices, message):
        if devices == "twice":
            devices = [jax.devices("cpu")[0]] * 2
        with pytest.raises(ValueError, match=message):
            _nccl.check_devices(devices)

    def test_cpu_devices_get_no_communicator(self):
        with pytest.raises(ValueError, match="NCCL communicators are for GPUs"):
            js.nccl_communicator(jax.devices("cpu")[:2])
        assert _nccl.cached_communicators() == ()


class TestUniqueId:
    def test_one_process_makes_the_id_itself(self):
        calls = []

        def make():
            calls.append(True)
            return bytes(range(128))

        assert _nccl.exchange_unique_id(jax.devices("cpu")[:4], make, 128) == bytes(range(128))
        assert calls == [True]

    def test_an_id_of_the_wrong_length_is_refused(self):
        with pytest.raises(ValueError, match="has 3 bytes, expected 128"):
            _nccl.exchange_unique_id(jax.devices("cpu")[:1], lambda: b"abc", 128)

    def test_the_id_reaches_every_process(self, run_launcher):
        # Two processes with two CPU devices each; the set holds devices of both, so process 0
        # (the lowest holding one) makes a random id and process 1 receives it.
        script = """
            import os
            import jax
            import jaxsolve.sharding as js
            from jaxsolve.sharding import _nccl

            js.initialize()
            made = []
            devices = [jax.devices()[3], jax.devices()[0]]
            unique_id = _nccl.exchange_unique_id(
                devices, lambda: made.append(1) or os.urandom(128), 128)
            print("id", unique_id.hex(), "made", len(made), flush=True)
        """
        run = run_launcher(script, "-n", "2", "--devices-per-process", "2", "--platform", "cpu",
                           "--timeout", "100", limit=120.0)
        assert run.returncode == 0, run.stdout + run.stderr
        (_, id0, _, made0), (_, id1, _, made1) = (
            next(line.split() for line in run.lines_of(rank) if line.startswith("id "))
            for rank in (0, 1))
        assert id0 == id1 and len(bytes.fromhex(id0)) == 128 and id0 != "00" * 128
        assert (made0, made1) == ("1", "0")


def test_inside_jit_the_exchange_says_what_to_do(run_launcher):
    script = """
        import os
        import jax, jax.numpy as jnp
        import jaxsolve.sharding as js
        from jaxsolve.sharding import _nccl

        js.initialize()

        def traced(x):
            _nccl.exchange_unique_id(jax.devices()[:3], lambda: os.urandom(128), 128)
            return x

        try:
            jax.jit(traced)(jnp.ones(2))
        except RuntimeError as error:
            print("refused:", "create the communicator before tracing" in str(error), flush=True)
    """
    run = run_launcher(script, "-n", "2", "--devices-per-process", "2", "--platform", "cpu",
                       "--timeout", "100", limit=120.0)
    assert run.returncode == 0, run.stdout + run.stderr
    for rank in (0, 1):
        assert "refused: True" in run.lines_of(rank), run.stdout
