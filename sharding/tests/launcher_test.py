"""Tests for `jaxsolve.sharding.launch` and ``python -m jaxsolve.sharding.launch``.

The launcher runs real processes here: JAX processes on virtual CPU devices where the run needs
JAX, plain Python ones where only the supervision is under test (they start in a fraction of a
second). Every run is bounded: by the launcher's own ``--timeout`` where that is under test, else
by the `run_launcher` fixture's limit.
"""

import json
import os
import re
import signal
import time

import pytest

import jaxsolve.sharding as js

# A script's processes print their pid first, so that the test can check that none survives.
PRINT_PID = """
        import os, signal, sys, time
        rank = int(os.environ["JAXSOLVE_PROCESS_ID"])
        print("pid", os.getpid(), flush=True)
"""


def pids_of(stdout):
    """The pid that each rank printed, by rank."""
    found = re.findall(r"^\[rank (\d+)\] pid (\d+)$", stdout, re.MULTILINE)
    return {int(rank): int(pid) for rank, pid in found}


def assert_all_gone(pids):
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


class TestLaunchCommandLine:
    def test_launch_collective_over_four_processes(self, run_launcher):
        script = """
        import sys
        import jax
        import numpy as np
        from jax.experimental import multihost_utils
        from jax.sharding import NamedSharding, PartitionSpec as P
        import jaxsolve.sharding as js

        info = js.initialize()
        assert js.initialize() is info
        gathered = multihost_utils.process_allgather(np.array([info.process_id]))
        mesh = js.row_mesh()
        local = np.full(jax.local_device_count(), info.process_id, np.int32)
        x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("rows")), local)
        total = jax.shard_map(lambda v: jax.lax.psum(v, "rows"), mesh=mesh,
                              in_specs=P("rows"), out_specs=P())(x)
        print("result", info.process_id, info.num_processes, info.source,
              jax.process_index(), jax.local_device_count(), jax.device_count(),
              gathered.ravel().tolist(), total.addressable_data(0).tolist(), sys.argv[1:])
        """
        run = run_launcher(script, "-n", "4", "--devices-per-process", "2", "--platform", "cpu",
                           "--timeout", "60", args=["--size", "-n", "3"])
        assert run.returncode == 0, run.stderr
        for rank in range(4):
            results = [line for line in run.lines_of(rank) if line.startswith("result")]
            # Each process contributes its id on each of its 2 devices: 2 * (0 + 1 + 2 + 3).
            assert results == [
                f"result {rank} 4 jaxsolve {rank} 2 8 [0, 1, 2, 3] [12] ['--size', '-n', '3']"
            ]

    def test_a_bare_jax_distributed_initialize_starts_under_the_launcher(self, run_launcher):
        """JAXMg's scripts call ``jax.distributed.initialize()`` without arguments."""
        script = """
        import jax
        jax.distributed.initialize()
        print("result", jax.process_index(), jax.process_count(), jax.local_device_count(),
              jax.device_count())
        """
        run = run_launcher(script, "-n", "2", "--devices-per-process", "2", "--platform", "cpu",
                           "--timeout", "60")
        assert run.returncode == 0, run.stderr
        for rank in range(2):
            assert [line for line in run.lines_of(rank) if line.startswith("result")] == [
                f"result {rank} 2 2 4"]

    def test_launch_stops_the_run_when_one_process_fails(self, run_launcher):
        script = PRINT_PID + """
        if rank == 2:
            time.sleep(0.5)
            print("rank 2 gives up", file=sys.stderr)
            sys.exit(3)
        time.sleep(600)
        """
        run = run_launcher(script, "-n", "4", "--platform", "cpu", "--timeout", "60")
        assert run.returncode == 3
        assert run.seconds < 20
        assert "[launch] rank 2 exited with code 3; stopping ranks 0, 1, 3" in run.stderr
        assert run.stderr.endswith(
            "[launch] rank 2 failed (exited with code 3); its last lines of output:\n"
            f"[rank 2] pid {pids_of(run.stdout)[2]}\n"
            "[rank 2] rank 2 gives up\n"
        )
        assert sorted(pids_of(run.stdout)) == [0, 1, 2, 3]
        assert_all_gone(pids_of(run.stdout))

    def test_launch_timeout_stops_a_hanging_run(self, run_launcher):
        run = run_launcher(PRINT_PID + "        time.sleep(600)\n", "-n", "3", "--platform", "cpu",
                           "--timeout", "1.5")
        assert run.returncode == 124
        assert run.seconds < 15
        assert ("[launch] timed out after 1.5 s with ranks 0, 1, 2 still running; stopping them"
                in run.stderr)
        assert sorted(pids_of(run.stdout)) == [0, 1, 2]
        assert_all_gone(pids_of(run.stdout))

    def test_launch_prefixes_output_lines(self, run_launcher):
        script = """
        import os, sys
        rank = os.environ["JAXSOLVE_PROCESS_ID"]
        for i in range(3):
            print(f"line {i} of {rank}")
        print(f"error of {rank}", file=sys.stderr)
        sys.stdout.write("no newline")
        """
        run = run_launcher(script, "-n", "3", "--platform", "cpu", "--timeout", "60")
        assert run.returncode == 0
        assert run.stderr.count("\n") == 3
        for rank in range(3):
            assert run.lines_of(rank) == [f"line {i} of {rank}" for i in range(3)] + ["no newline"]
            assert f"[rank {rank}] error of {rank}\n" in run.stderr

    @pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
    def test_launch_forwards_signals(self, start_launcher, signum):
        script = PRINT_PID + """
        def stop(signum, frame):
            print("got", signal.Signals(signum).name, flush=True)
            sys.exit(0)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        time.sleep(600)
        """
        with start_launcher(script, "-n", "2", "--platform", "cpu", "--timeout", "60") as launcher:
            try:
                lines = []
                while sum(line.endswith("] ready\n") for line in lines) < 2:
                    lines.append(launcher.stdout.readline())
                    assert lines[-1], "the launcher ended before its processes were ready"
                launcher.send_signal(signum)
                stdout, stderr = launcher.communicate(timeout=30)
            finally:
                if launcher.poll() is None:
                    launcher.kill()
        stdout = "".join(lines) + stdout
        assert launcher.returncode == 128 + signum
        name = signal.Signals(signum).name
        assert f"[launch] received {name}; forwarding it to ranks 0, 1" in stderr
        for rank in range(2):
            assert f"[rank {rank}] got {name}\n" in stdout
        assert_all_gone(pids_of(stdout))

    def test_launch_usage_errors(self, run_launcher):
        run = run_launcher("", "-n", "0")
        assert run.returncode == 2
        assert "argument -n/--num-processes: must be above 0, got 0" in run.stderr


class TestLaunch:
    def test_launch_reports_a_process_killed_by_a_signal(self, tmp_path, capsys):
        script = tmp_path / "script.py"
        script.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
        assert js.launch_processes(script, 1, platform="cpu", timeout=60) == 128 + signal.SIGKILL
        assert "[launch] rank 0 was killed by signal SIGKILL\n" in capsys.readouterr().err

    def test_launch_kills_processes_that_ignore_sigterm(self, tmp_path, capsys):
        script = tmp_path / "script.py"
        script.write_text(
            "import os, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('pid', os.getpid(), flush=True)\n"
            "if os.environ['JAXSOLVE_PROCESS_ID'] == '0':\n"
            "    time.sleep(0.5)\n"
            "    sys.exit(1)\n"
            "time.sleep(600)\n"
        )
        start = time.monotonic()
        assert js.launch_processes([script], 2, platform="cpu", timeout=60) == 1
        assert time.monotonic() - start < 20
        out, err = capsys.readouterr()
        assert "[launch] rank 1 still running 5 s after SIGTERM; killing them\n" in err
        assert_all_gone(pids_of(out))

    def test_launch_passes_arguments_and_environment(self, tmp_path, capsys, monkeypatch):
        monkeypatch.setenv("XLA_FLAGS",
                           "--xla_dump_to=/nowhere --xla_force_host_platform_device_count=8")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
        names = ("JAXSOLVE_PROCESS_ID", "JAXSOLVE_NUM_PROCESSES", "JAXSOLVE_COORDINATOR_ADDRESS",
                 "XLA_FLAGS", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "PYTHONUNBUFFERED",
                 "JAX_COORDINATOR_ADDRESS", "JAX_LOCAL_DEVICE_IDS", "OMPI_MCA_orte_hnp_uri",
                 "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")
        code = ("import json, os, sys; print(json.dumps([sys.argv[1:], "
                f"{{k: os.environ.get(k) for k in {names!r}}}]))")
        assert js.launch_processes(["-c", code, "a", "--b"], 2, devices_per_process=3, platform="cpu") == 0
        reports = {}
        for line in capsys.readouterr().out.splitlines():
            rank, report = re.fullmatch(r"\[rank (\d)\] (.*)", line).groups()
            reports[int(rank)] = json.loads(report)
        assert sorted(reports) == [0, 1]
        address = reports[0][1]["JAXSOLVE_COORDINATOR_ADDRESS"]
        assert re.fullmatch(r"127\.0\.0\.1:\d+", address)
        for rank, (args, env) in reports.items():
            assert args == ["a", "--b"]
            assert env == {
                "JAXSOLVE_PROCESS_ID": str(rank),
                "JAXSOLVE_NUM_PROCESSES": "2",
                "JAXSOLVE_COORDINATOR_ADDRESS": address,
                "XLA_FLAGS": "--xla_dump_to=/nowhere --xla_force_host_platform_device_count=3",
                "JAX_PLATFORMS": "cpu",
                "CUDA_VISIBLE_DEVICES": "7",  # left alone on CPU
                "PYTHONUNBUFFERED": "1",
                # What a bare jax.distributed.initialize() reads.
                "JAX_COORDINATOR_ADDRESS": address,
                "JAX_LOCAL_DEVICE_IDS": "0,1,2",
                "OMPI_MCA_orte_hnp_uri": f"0.0;tcp://{address}",
                "OMPI_COMM_WORLD_SIZE": "2",
                "OMPI_COMM_WORLD_RANK": str(rank),
                "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
            }

    @pytest.mark.parametrize(
        "visible, expected",
        [(None, ["0,1", "2,3", "4,5"]), ("3,5, 6,7,GPU-ab12,9", ["3,5", "6,7", "GPU-ab12,9"])],
        ids=["unset", "set"],
    )
    def test_launch_splits_gpus(self, capsys, monkeypatch, visible, expected):
        if visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        code = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"
        assert js.launch_processes(["-c", code], 3, devices_per_process=2, platform="gpu") == 0
        out = capsys.readouterr().out
        assert sorted(out.splitlines()) == [f"[rank {i}] {gpus}" for i, gpus in enumerate(expected)]

    @pytest.mark.parametrize(
        "args, kwargs, error, message",
        [
            (["-c", "pass"], dict(num_processes=0), ValueError,
             "launch_processes: num_processes=0 must be at least 1, the number of processes to start."),
            (["-c", "pass"], dict(num_processes="4"), TypeError,
             "launch_processes: num_processes='4' must be an int, the number of processes to start; got a "
             "str."),
            (["-c", "pass"], dict(num_processes=2, devices_per_process=0), ValueError,
             "launch_processes: devices_per_process=0 must be at least 1, the number of devices of each "
             "process."),
            (["-c", "pass"], dict(num_processes=2, timeout=0), ValueError,
             "launch_processes: timeout=0 must be a positive number of seconds, or None to wait for ever."),
            (["-c", "pass"], dict(num_processes=2, platform="tpu"), ValueError,
             "launch_processes: platform='tpu' is not a platform; pass 'gpu' or 'cpu'."),
            ([], dict(num_processes=2), ValueError,
             "launch_processes: argv_or_script is empty; pass a script, or [script, *args]."),
            (["missing.py"], dict(num_processes=2), ValueError,
             "launch_processes: the script 'missing.py' does not exist."),
            (["-c", "pass"], dict(num_processes=3, devices_per_process=2), ValueError,
             "launch_processes: 3 processes x 2 GPU per process need 6 GPUs, but "
             "CUDA_VISIBLE_DEVICES='0,1,2,3' lists 4; start fewer processes, or make more GPUs "
             "visible."),
        ],
    )
    def test_launch_errors(self, monkeypatch, args, kwargs, error, message):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            js.launch_processes(args, **kwargs)
