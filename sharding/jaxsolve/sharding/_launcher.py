"""`launch_processes`: start one JAX process per device on this host, and supervise them.

A multi-process JAX run needs every process started with the same coordinator address and its own
process id, and needs all of them stopped when one fails: otherwise the survivors wait in their
next collective until a heartbeat timeout minutes later. `launch_processes` (and its command line,
``python -m jaxsolve.sharding.launch``) does both on one host:

* It picks a free coordinator port on ``127.0.0.1`` and starts ``num_processes`` copies of the
  script with `sys.executable`, each with ``JAXSOLVE_COORDINATOR_ADDRESS``,
  ``JAXSOLVE_NUM_PROCESSES`` and its own ``JAXSOLVE_PROCESS_ID`` in its environment, which
  `jaxsolve.sharding.initialize` reads. A bare ``jax.distributed.initialize()`` (as JAXMg's
  scripts call it) works too: ``JAX_COORDINATOR_ADDRESS`` and ``JAX_LOCAL_DEVICE_IDS`` (the
  process's devices, counted from 0) are set, which JAX reads itself, and the process count
  and id through the variables of Open MPI's ``mpirun`` (``OMPI_COMM_WORLD_SIZE``,
  ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_LOCAL_RANK``, and ``OMPI_MCA_orte_hnp_uri``,
  which JAX's cluster detection looks for): the one launcher JAX recognizes from variables
  alone. A script that starts MPI itself (``mpi4py``) belongs under ``mpirun`` instead.
* ``platform="gpu"`` gives process ``i`` the GPUs ``i * K`` to ``(i + 1) * K - 1`` of the
  launcher's own through ``CUDA_VISIBLE_DEVICES`` (``K = devices_per_process``; counted within
  ``CUDA_VISIBLE_DEVICES`` when that is set). ``platform="cpu"``, for tests and for trying things
  out without GPUs, sets ``JAX_PLATFORMS=cpu`` and gives each process K virtual CPU devices
  (``XLA_FLAGS=--xla_force_host_platform_device_count=K``, other XLA flags kept).
* Each line a process writes is passed on as it comes, prefixed with ``[rank i]``: standard output
  to standard output, standard error to standard error (``PYTHONUNBUFFERED=1`` is set so that lines
  come when they are written).
* When a process exits with a non-zero code, or is killed by a signal, the others get ``SIGTERM``
  (``SIGKILL`` 5 s later if still running), and the launcher names the process, its exit code and
  its last lines of output, and returns its exit code (``128 + N`` for signal ``N``). When the
  `timeout` passes, all processes are stopped the same way and the launcher returns 124, as
  ``timeout(1)`` does. ``SIGINT`` and ``SIGTERM`` sent to the launcher (Ctrl-C) are forwarded to all
  processes, which get the same 5 s before ``SIGKILL``; the launcher then returns ``128 + N``.
* It returns 0 only when every process exits with 0.

Each process runs in its own session (process group), so that the launcher's signals reach its
children and grandchildren, and Ctrl-C at the terminal reaches the processes only through the
launcher. It runs on Linux and other POSIX systems.

Runs over several hosts are started by their cluster's launcher instead (``srun``, ``mpirun``),
which `jaxsolve.sharding.initialize` recognizes as well.

Command line::

    python -m jaxsolve.sharding.launch -n 4 [--timeout S] [--devices-per-process K] \\
        [--platform cpu|gpu] script.py [args ...]
"""

from __future__ import annotations

import argparse
import collections
import numbers
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Literal

from ._checks import check_positive_int
from ._initialize import ENV_COORDINATOR_ADDRESS, ENV_NUM_PROCESSES, ENV_PROCESS_ID

Platform = Literal["cpu", "gpu"]
"""The devices the launched processes use: ``"gpu"``, CUDA GPUs; ``"cpu"``, virtual CPU devices."""

_GRACE_PERIOD_S = 5.0  # from SIGTERM (or a forwarded signal) to SIGKILL
# How long output may still arrive after the processes exited. A reader ends as soon as it has
# read its pipe to the end, so this bound only matters when a process left a child of its own
# holding the pipe; at 1 s a loaded machine lost a process's last lines.
_DRAIN_S = 30.0
_TAIL_LINES = 20  # the last lines of a failed process shown again at the end
_TIMEOUT_EXIT_CODE = 124  # as timeout(1)
_FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def launch_processes(
    argv_or_script: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    num_processes: int,
    *,
    timeout: float | None = None,
    devices_per_process: int = 1,
    platform: Platform = "gpu",
) -> int:
    """Runs a Python script as `num_processes` processes of one JAX run on this host.

    Each process runs ``sys.executable *argv`` with the environment of this one plus the
    variables `jaxsolve.sharding.initialize` reads (see the module documentation for the
    environment, the output and how failures, the timeout and signals are handled). Blocks until
    the run is over.

    Args:
      argv_or_script: the script's path, or its command line ``[script, *args]``; any arguments
        of the Python interpreter work too (``["-m", "package.module", ...]``, ``["-c", code]``).
      num_processes: how many processes to start, ``>= 1``: with ``platform="gpu"``, one per GPU
        (or per `devices_per_process` GPUs).
      timeout: seconds after which the whole run is stopped; ``None`` waits for ever.
      devices_per_process: GPUs, or virtual CPU devices, for each process, ``>= 1``.
      platform: ``"gpu"`` (split the GPUs between the processes through
        ``CUDA_VISIBLE_DEVICES``) or ``"cpu"`` (virtual CPU devices, ``JAX_PLATFORMS=cpu``).

    Returns:
      The run's exit status: 0 when every process exited with 0; else the exit code of the first
      process that failed (``128 + N`` if killed by signal ``N``), 124 when `timeout` passed, or
      ``128 + N`` when signal ``N`` (``SIGINT``, ``SIGTERM``) stopped the launcher.

    Raises:
      TypeError: if `num_processes` or `devices_per_process` is not an int.
      ValueError: if an argument is out of range, the script does not exist, or
        ``CUDA_VISIBLE_DEVICES`` lists fewer than ``num_processes * devices_per_process`` GPUs.

    Examples:
      >>> from jaxsolve.sharding import launch_processes
      >>> launch_processes(["-c", "import os; print('process', os.environ['JAXSOLVE_PROCESS_ID'])"], 1,
      ...        platform="cpu")
      [rank 0] process 0
      0
      >>> launch_processes(["-c", "raise SystemExit(3)"], 1, platform="cpu")  # says so on stderr
      3

      A script ``solve.py`` that calls `jaxsolve.sharding.initialize`, on four GPUs, stopped if it
      has not finished within ten minutes::

          launch_processes(["solve.py", "--size", "4096"], 4, timeout=600)
    """
    argv = [os.fspath(argv_or_script)] if isinstance(argv_or_script, (str, os.PathLike)) else [
        os.fspath(arg) for arg in argv_or_script]
    if not argv:
        raise ValueError("launch_processes: argv_or_script is empty; pass a script, or [script, *args].")
    if not argv[0].startswith("-") and not os.path.exists(argv[0]):
        raise ValueError(f"launch_processes: the script {argv[0]!r} does not exist.")
    num_processes = check_positive_int("launch_processes", "num_processes", num_processes,
                                       "the number of processes to start")
    devices_per_process = check_positive_int("launch_processes", "devices_per_process", devices_per_process,
                                             "the number of devices of each process")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, numbers.Real)
                                or not timeout > 0):
        raise ValueError(f"launch_processes: timeout={timeout!r} must be a positive number of seconds, or "
                         "None to wait for ever.")
    if platform not in ("cpu", "gpu"):
        raise ValueError(f"launch_processes: platform={platform!r} is not a platform; pass 'gpu' or 'cpu'.")
    environments = _environments(num_processes, devices_per_process, platform, os.environ,
                                 _free_coordinator_address())

    group = _ProcessGroup(sys.stdout, sys.stderr)
    previous_handlers = _forward_signals_to(group.events)
    try:
        for rank, environment in enumerate(environments):
            group.start(rank, argv, environment)
        return group.supervise(timeout)
    finally:
        group.kill()
        for signum, handler in previous_handlers.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line, ``python -m jaxsolve.sharding.launch``: parses `argv`, calls `launch_processes`.

    Args:
      argv: the arguments after the program name; defaults to ``sys.argv[1:]``.

    Returns:
      `launch_processes`'s exit status. Wrong arguments exit with status 2 and a usage message instead.
    """
    parser = argparse.ArgumentParser(
        prog="python -m jaxsolve.sharding.launch",
        description="Run a Python script as N processes of one JAX run on this host: one per GPU, "
        "or per CPU device with --platform cpu. In the script, call "
        "jaxsolve.sharding.initialize() first. Output lines are prefixed with [rank i]; when one "
        "process fails, the others are stopped and the run fails.",
    )
    parser.add_argument("-n", "--num-processes", type=_positive(int), required=True, metavar="N",
                        help="how many processes to start")
    parser.add_argument("--timeout", type=_positive(float), metavar="S",
                        help="stop the whole run after S seconds (exit status 124)")
    parser.add_argument("--devices-per-process", type=_positive(int), default=1, metavar="K",
                        help="GPUs (or CPU devices) per process (default: 1)")
    parser.add_argument("--platform", choices=("cpu", "gpu"), default="gpu",
                        help="gpu: split the GPUs through CUDA_VISIBLE_DEVICES (default); "
                        "cpu: K virtual CPU devices per process")
    parser.add_argument("script", help="the Python script each process runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    options = parser.parse_args(argv)
    try:
        return launch_processes([options.script, *options.args], options.num_processes,
                      timeout=options.timeout, devices_per_process=options.devices_per_process,
                      platform=options.platform)
    except ValueError as error:
        parser.error(str(error))


def _positive(cast: Callable[[str], float]) -> Callable[[str], float]:
    """An argparse `type` that accepts numbers above 0 of the kind `cast` makes."""

    def parse(text: str) -> float:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    return parse


def _free_coordinator_address() -> str:
    """``127.0.0.1:port`` with a port that was free a moment ago (the OS's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def _environments(num_processes: int, devices_per_process: int, platform: Platform,
                  base: Mapping[str, str], coordinator_address: str) -> list[dict[str, str]]:
    """The environment of each process, by rank."""
    common = {**base, ENV_COORDINATOR_ADDRESS: coordinator_address,
              ENV_NUM_PROCESSES: str(num_processes), "PYTHONUNBUFFERED": "1"}
    gpus = None
    if platform == "cpu":
        flags = [flag for flag in base.get("XLA_FLAGS", "").split()
                 if not flag.startswith(_DEVICE_COUNT_FLAG)]
        common["XLA_FLAGS"] = " ".join([*flags, f"{_DEVICE_COUNT_FLAG}={devices_per_process}"])
        common["JAX_PLATFORMS"] = "cpu"
    else:
        needed = num_processes * devices_per_process
        visible = base.get("CUDA_VISIBLE_DEVICES")
        gpus = [str(i) for i in range(needed)] if visible is None else [
            entry.strip() for entry in visible.split(",") if entry.strip()]
        if len(gpus) < needed:
            raise ValueError(
                f"launch_processes: {num_processes} processes x {devices_per_process} GPU per process "
                f"need {needed} GPUs, but CUDA_VISIBLE_DEVICES={visible!r} lists {len(gpus)}; "
                "start fewer processes, or make more GPUs visible."
            )
    # What a bare jax.distributed.initialize() reads (see the module's docstring).
    common.update({
        "JAX_COORDINATOR_ADDRESS": coordinator_address,
        "JAX_LOCAL_DEVICE_IDS": ",".join(map(str, range(devices_per_process))),
        "OMPI_MCA_orte_hnp_uri": f"0.0;tcp://{coordinator_address}",
        "OMPI_COMM_WORLD_SIZE": str(num_processes),
    })
    environments = []
    for rank in range(num_processes):
        environment = {**common, ENV_PROCESS_ID: str(rank), "OMPI_COMM_WORLD_RANK": str(rank),
                       "OMPI_COMM_WORLD_LOCAL_RANK": str(rank)}
        if gpus is not None:
            mine = gpus[rank * devices_per_process : (rank + 1) * devices_per_process]
            environment["CUDA_VISIBLE_DEVICES"] = ",".join(mine)
        environments.append(environment)
    return environments


def _forward_signals_to(events: queue.SimpleQueue) -> dict[int, object]:
    """Makes SIGINT and SIGTERM events for the supervisor; returns the handlers to restore.

    Only the main thread receives signals (and may set handlers); elsewhere this does nothing.
    `queue.SimpleQueue.put` is safe to call from a signal handler.
    """
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.signal(signum, lambda signum, frame: events.put(("signal", signum)))
            for signum in _FORWARDED_SIGNALS}


class _Child:
    """One launched process, with the last lines of its output."""

    def __init__(self, rank: int, popen: subprocess.Popen) -> None:
        self.rank = rank
        self.popen = popen
        self.tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self.readers: list[threading.Thread] = []


class _ProcessGroup:
    """The launched processes, the threads that pass their output on, and the supervisor.

    Threads only read pipes and wait for exits; every decision is taken by `supervise`, in the
    calling thread, from the events (``("exit", rank)``, ``("signal", signum)``) they post.
    """

    def __init__(self, stdout: IO[str], stderr: IO[str]) -> None:
        self._stdout = stdout
        self._stderr = stderr
        self._lock = threading.Lock()
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.children: list[_Child] = []

    def start(self, rank: int, argv: Sequence[str], environment: Mapping[str, str]) -> None:
        popen = subprocess.Popen(
            [sys.executable, *argv], env=environment, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        child = _Child(rank, popen)
        self.children.append(child)
        for pipe, out in ((popen.stdout, self._stdout), (popen.stderr, self._stderr)):
            reader = threading.Thread(target=self._pass_on, args=(child, pipe, out), daemon=True)
            reader.start()
            child.readers.append(reader)
        threading.Thread(target=self._await_exit, args=(child,), daemon=True).start()

    def supervise(self, timeout: float | None) -> int:
        """Waits for all processes to exit, or for the first failure, the timeout or a signal."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for _ in self.children:
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                kind, value = self.events.get(timeout=wait)
            except queue.Empty:
                self._say(f"timed out after {timeout:g} s with {_ranks(self._running())} still "
                          "running; stopping them")
                self._stop(signal.SIGTERM)
                return _TIMEOUT_EXIT_CODE
            if kind == "signal":
                name = signal.Signals(value).name
                self._say(f"received {name}; forwarding it to {_ranks(self._running())}")
                self._stop(value)
                return 128 + value
            code = self.children[value].popen.returncode
            if code != 0:
                return self._fail(self.children[value], code)
        self._drain()
        return 0

    def kill(self) -> None:
        """Kills whatever still runs (after an error in the launcher itself) and drains output."""
        self._signal(self._running(), signal.SIGKILL)
        for child in self.children:
            child.popen.wait()
        self._drain()

    def _fail(self, child: _Child, code: int) -> int:
        others = self._running()
        self._say(f"rank {child.rank} {_describe(code)}"
                  + (f"; stopping {_ranks(others)}" if others else ""))
        self._stop(signal.SIGTERM)
        if child.tail:
            self._say(f"rank {child.rank} failed ({_describe(code)}); its last lines of output:")
            with self._lock:
                self._stderr.write("".join(line + "\n" for line in child.tail))
                self._stderr.flush()
        else:
            self._say(f"rank {child.rank} failed ({_describe(code)}) without any output")
        return code if code > 0 else 128 - code

    def _stop(self, signum: int) -> None:
        """Sends `signum` to every running process, and SIGKILL to those still running later."""
        self._signal(self._running(), signum)
        deadline = time.monotonic() + _GRACE_PERIOD_S
        for child in self.children:
            try:
                child.popen.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                pass
        stubborn = self._running()
        if stubborn:
            self._say(f"{_ranks(stubborn)} still running {_GRACE_PERIOD_S:g} s after "
                      f"{signal.Signals(signum).name}; killing them")
            self.kill()
        self._drain()

    def _running(self) -> list[_Child]:
        return [child for child in self.children if child.popen.poll() is None]

    @staticmethod
    def _signal(children: Sequence[_Child], signum: int) -> None:
        for child in children:
            try:
                os.killpg(child.popen.pid, signum)  # its session: the process and its children
            except ProcessLookupError:  # exited since
                pass

    def _drain(self) -> None:
        deadline = time.monotonic() + _DRAIN_S
        for child in self.children:
            for reader in child.readers:
                reader.join(max(deadline - time.monotonic(), 0.0))

    def _pass_on(self, child: _Child, pipe: IO[bytes], out: IO[str]) -> None:
        prefix = f"[rank {child.rank}] "
        with pipe:
            for raw in iter(pipe.readline, b""):
                line = prefix + raw.decode(errors="replace").rstrip("\r\n")
                with self._lock:
                    child.tail.append(line)
                    out.write(line + "\n")
                    out.flush()

    def _await_exit(self, child: _Child) -> None:
        child.popen.wait()
        self.events.put(("exit", child.rank))

    def _say(self, message: str) -> None:
        with self._lock:
            self._stderr.write(f"[launch] {message}\n")
            self._stderr.flush()


def _describe(code: int) -> str:
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by signal {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def _ranks(children: Sequence[_Child]) -> str:
    ranks = [child.rank for child in children]
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
