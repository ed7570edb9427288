"""Tests for `jaxsolve.sharding.detect_process` and `jaxsolve.sharding.initialize`.

The launchers' environments are written out by hand here and only parsed: starting JAX's
distributed runtime in the test process would tie it to a run of fake processes. The runtime itself
is started in the launcher tests, in real processes, and in the last test here.
"""

import re

import jax
import pytest

import jaxsolve.sharding as js
from jaxsolve.sharding import ProcessInfo

LAUNCHER = {"JAXSOLVE_PROCESS_ID": "1", "JAXSOLVE_NUM_PROCESSES": "4",
            "JAXSOLVE_COORDINATOR_ADDRESS": "127.0.0.1:29500"}
OPENMPI = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1"}
MPICH = {"PMI_RANK": "6", "PMI_SIZE": "8", "MPI_LOCALRANKID": "2"}
SLURM = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "3",
         "SLURM_STEP_NODELIST": "node[001-002]", "SLURM_JOB_ID": "4242"}


class TestDetectProcess:
    def test_detect_process_without_launcher(self):
        assert js.detect_process({}) == ProcessInfo(0, 1, None, None, "single")
        # An address alone does not make a multi-process run.
        assert js.detect_process({"JAXSOLVE_COORDINATOR_ADDRESS": "h:1"}).source == "single"

    def test_detect_process_jaxsolve_launcher(self):
        assert js.detect_process(LAUNCHER) == ProcessInfo(1, 4, None, "127.0.0.1:29500",
                                                          "jaxsolve")

    def test_detect_process_openmpi(self):
        address = {"JAXSOLVE_COORDINATOR_ADDRESS": "node0:1234"}
        assert js.detect_process({**OPENMPI, **address}) == ProcessInfo(5, 8, (1,), "node0:1234",
                                                                        "openmpi")
        # Open MPI <= 4: JAX derives the address from the launcher's URI.
        uri = {"OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://10.96.0.1:34911"}
        assert js.detect_process({**OPENMPI, **uri}) == ProcessInfo(5, 8, (1,), None, "openmpi")

    def test_detect_process_mpich(self):
        jax_address = {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:5000"}
        assert js.detect_process({**MPICH, **jax_address}) == ProcessInfo(6, 8, (2,),
                                                                          "10.0.0.1:5000", "mpich")
        ours = {"JAXSOLVE_COORDINATOR_ADDRESS": "10.0.0.2:6000"}
        assert js.detect_process({**MPICH, **jax_address, **ours}).coordinator_address == (
            "10.0.0.2:6000")

    def test_detect_process_slurm(self):
        # Inside an srun step JAX derives the address from the job id and the node list.
        assert js.detect_process(SLURM) == ProcessInfo(3, 4, (3,), None, "slurm")
        assert js.detect_process({**SLURM, "JAX_COORDINATOR_ADDRESS": "node001:7000"}) == (
            ProcessInfo(3, 4, (3,), "node001:7000", "slurm"))
        # A batch script's own shell is not task 0 of an srun step.
        batch_shell = {k: v for k, v in SLURM.items() if k != "SLURM_STEP_NODELIST"}
        assert js.detect_process(batch_shell).source == "single"

    @pytest.mark.parametrize(
        "environments, source, process_id",
        [
            ((LAUNCHER, OPENMPI, SLURM), "jaxsolve", 1),
            ((OPENMPI, SLURM), "openmpi", 5),  # mpirun inside an allocation
            ((MPICH, SLURM), "mpich", 6),  # Hydra's mpiexec inside an allocation
            ((OPENMPI, MPICH), "openmpi", 5),
        ],
        ids=["launcher", "openmpi-in-slurm", "mpich-in-slurm", "openmpi-and-pmi"],
    )
    def test_detect_process_innermost_launcher_wins(self, environments, source, process_id):
        env = {"JAXSOLVE_COORDINATOR_ADDRESS": "127.0.0.1:29500"}
        for environment in environments:
            env.update(environment)
        info = js.detect_process(env)
        assert (info.source, info.process_id) == (source, process_id)

    @pytest.mark.parametrize(
        "visible, expected",
        [(None, (2,)), ("", (2,)), ("5", (0,)), ("GPU-ab12", (0,)), ("4,5,6,7", (2,))],
        ids=["unset", "empty", "one-gpu", "one-gpu-uuid", "all-gpus"],
    )
    def test_detect_process_local_device_ids(self, visible, expected):
        env = {**MPICH, "JAXSOLVE_COORDINATOR_ADDRESS": "h:1"}
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        assert js.detect_process(env).local_device_ids == expected

    def test_detect_process_single_process_launch_needs_no_address(self):
        env = {"PMI_RANK": "0", "PMI_SIZE": "1", "MPI_LOCALRANKID": "0"}
        assert js.detect_process(env) == ProcessInfo(0, 1, (0,), None, "mpich")

    def test_detect_process_reads_os_environ(self, single_process_environment, monkeypatch):
        for name, value in LAUNCHER.items():
            monkeypatch.setenv(name, value)
        assert js.detect_process() == js.detect_process(LAUNCHER)

    @pytest.mark.parametrize(
        "env, message",
        [
            ({**LAUNCHER, "JAXSOLVE_PROCESS_ID": "4"},
             "JAXSOLVE_PROCESS_ID=4 is not below JAXSOLVE_NUM_PROCESSES=4: process ids run from "
             "0 to JAXSOLVE_NUM_PROCESSES - 1."),
            ({**OPENMPI, "OMPI_COMM_WORLD_RANK": "9", "JAX_COORDINATOR_ADDRESS": "h:1"},
             "OMPI_COMM_WORLD_RANK=9 is not below OMPI_COMM_WORLD_SIZE=8: process ids run from 0 "
             "to OMPI_COMM_WORLD_SIZE - 1."),
            ({**LAUNCHER, "JAXSOLVE_PROCESS_ID": "one"},
             "JAXSOLVE_PROCESS_ID='one' is not an integer."),
            ({**LAUNCHER, "JAXSOLVE_PROCESS_ID": "-1"},
             "JAXSOLVE_PROCESS_ID=-1 must be at least 0."),
            ({**LAUNCHER, "JAXSOLVE_NUM_PROCESSES": "0"},
             "JAXSOLVE_NUM_PROCESSES=0 must be at least 1."),
            ({**SLURM, "SLURM_LOCALID": "x"}, "SLURM_LOCALID='x' is not an integer."),
            ({"JAXSOLVE_PROCESS_ID": "0"},
             "JAXSOLVE_NUM_PROCESSES and JAXSOLVE_COORDINATOR_ADDRESS are not set, but other "
             "JAXSOLVE_* variables are: python -m jaxsolve.sharding.launch sets "
             "JAXSOLVE_PROCESS_ID, JAXSOLVE_NUM_PROCESSES and JAXSOLVE_COORDINATOR_ADDRESS "
             "together. Set all three, or none to run a single process."),
            ({"PMI_RANK": "0", "PMI_SIZE": "2"},
             "PMI_RANK is set, as by an MPI launcher (mpich), but MPI_LOCALRANKID is not; "
             "initialize() needs PMI_RANK, PMI_SIZE and MPI_LOCALRANKID. Unset PMI_RANK to run a "
             "single process."),
            ({"OMPI_COMM_WORLD_RANK": "0"},
             "OMPI_COMM_WORLD_RANK is set, as by an MPI launcher (openmpi), but "
             "OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_LOCAL_RANK are not; initialize() needs "
             "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_LOCAL_RANK. Unset "
             "OMPI_COMM_WORLD_RANK to run a single process."),
            (MPICH,
             "PMI_RANK=6 of PMI_SIZE=8 (mpich) but no coordinator address. Set "
             "JAXSOLVE_COORDINATOR_ADDRESS=host:port for every process, with a host that all of "
             "them reach (process 0's) and a free port, or start the run with python -m "
             "jaxsolve.sharding.launch."),
            (OPENMPI,
             "OMPI_COMM_WORLD_RANK=5 of OMPI_COMM_WORLD_SIZE=8 (openmpi) but no coordinator "
             "address; JAX derives it only when OMPI_MCA_orte_hnp_uri is set. Set "
             "JAXSOLVE_COORDINATOR_ADDRESS=host:port for every process, with a host that all of "
             "them reach (process 0's) and a free port, or start the run with python -m "
             "jaxsolve.sharding.launch."),
            ({k: v for k, v in SLURM.items() if k != "SLURM_JOB_ID"},
             "SLURM_PROCID=3 of SLURM_NTASKS=4 (slurm) but no coordinator address; JAX derives it "
             "only when SLURM_JOB_ID is set."),
            ({**MPICH, "CUDA_VISIBLE_DEVICES": "0,1", "JAX_COORDINATOR_ADDRESS": "h:1"},
             "MPI_LOCALRANKID=2 but CUDA_VISIBLE_DEVICES='0,1' lists only 2 GPUs: start at most "
             "one process per GPU on each host."),
        ],
    )
    def test_detect_process_inconsistent_environment(self, env, message):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
            js.detect_process(env)

    @pytest.mark.parametrize("address", ["node0", "node0:", ":29500", "node0:0", "node0:65536",
                                         "node0:http"])
    def test_detect_process_bad_address(self, address):
        with pytest.raises(ValueError, match=re.escape(
                f"JAXSOLVE_COORDINATOR_ADDRESS={address!r} is not a coordinator address; pass "
                "host:port, e.g. node0:29500 or 10.0.0.1:29500, with a port from 1 to 65535.")):
            js.detect_process({**LAUNCHER, "JAXSOLVE_COORDINATOR_ADDRESS": address})

    def test_detect_process_ipv6_address(self):
        env = {**LAUNCHER, "JAXSOLVE_COORDINATOR_ADDRESS": "[fe80::1]:29500"}
        assert js.detect_process(env).coordinator_address == "[fe80::1]:29500"


class TestInitialize:
    def test_initialize_single_process(self, single_process_environment):
        info = js.initialize()
        assert info == ProcessInfo(0, 1, None, None, "single")
        assert js.initialize() == info
        assert not jax.distributed.is_initialized()

    def test_initialize_launch_of_one_process_starts_nothing(self, single_process_environment,
                                                              monkeypatch):
        monkeypatch.setenv("JAXSOLVE_PROCESS_ID", "0")
        monkeypatch.setenv("JAXSOLVE_NUM_PROCESSES", "1")
        monkeypatch.setenv("JAXSOLVE_COORDINATOR_ADDRESS", "127.0.0.1:1")
        assert js.initialize() == ProcessInfo(0, 1, None, "127.0.0.1:1", "jaxsolve")
        assert not jax.distributed.is_initialized()

    def test_initialize_inconsistent_environment(self, single_process_environment, monkeypatch):
        monkeypatch.setenv("SLURM_PROCID", "4")
        monkeypatch.setenv("SLURM_NTASKS", "4")
        monkeypatch.setenv("SLURM_LOCALID", "0")
        monkeypatch.setenv("SLURM_STEP_NODELIST", "node001")
        monkeypatch.setenv("SLURM_JOB_ID", "1")
        message = "SLURM_PROCID=4 is not below SLURM_NTASKS=4"
        with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
            js.initialize()
        assert not jax.distributed.is_initialized()

    def test_initialize_after_jax_distributed_initialize(self, run_launcher):
        script = """
        import os
        import jax
        import jaxsolve.sharding as js

        jax.distributed.initialize(os.environ["JAXSOLVE_COORDINATOR_ADDRESS"],
                                   int(os.environ["JAXSOLVE_NUM_PROCESSES"]),
                                   int(os.environ["JAXSOLVE_PROCESS_ID"]))
        print(js.initialize())
        """
        run = run_launcher(script, "-n", "2", "--platform", "cpu", "--timeout", "60")
        assert run.returncode == 0, run.stderr
        for rank in range(2):
            assert run.lines_of(rank) == [
                f"ProcessInfo(process_id={rank}, num_processes=2, local_device_ids=None, "
                "coordinator_address=None, source='jax')"
            ]

