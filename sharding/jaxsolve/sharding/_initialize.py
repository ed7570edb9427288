"""`initialize`: start JAX's distributed runtime from whatever launched this process.

`jax.distributed.initialize` needs four facts: the coordinator's ``host:port``, the number of
processes, this process's id and the devices it drives. JAX finds them by itself only under
Slurm, Open MPI (up to version 4) and Cloud TPU; everywhere else each script passes them by hand,
and a mistake hangs the run until a 300 s timeout. Here they are read once, from the environment
of the launcher that started the process, checked for consistency, and passed on explicitly.

Launchers recognized, first match wins (the innermost launcher is the one that counts: ``mpirun``
inside a Slurm allocation leaves Slurm's variables in place, with Slurm's view of the ranks):

================  ======================================================  ====================
source            process id, count, local rank                           coordinator address
================  ======================================================  ====================
``"jaxsolve"``    ``JAXSOLVE_PROCESS_ID``, ``JAXSOLVE_NUM_PROCESSES``      set by the launcher
                  (``python -m jaxsolve.sharding.launch``)
``"openmpi"``     ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_SIZE``,      env, else JAX derives
                  ``OMPI_COMM_WORLD_LOCAL_RANK``                           it (Open MPI <= 4)
``"mpich"``       ``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``          env (required)
                  (MPICH, Intel MPI: Hydra ``mpiexec``)
``"slurm"``       ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``,   env, else JAX derives
                  inside an ``srun`` step (``SLURM_STEP_NODELIST`` set)    it from the node list
``"single"``      none of the above: one process, nothing to initialize   --
================  ======================================================  ====================

"env" means ``JAXSOLVE_COORDINATOR_ADDRESS`` or, failing that, JAX's own
``JAX_COORDINATOR_ADDRESS``, as ``host:port`` where ``host`` is reachable from every process and
the port is free on it; e.g. ``mpirun -x JAXSOLVE_COORDINATOR_ADDRESS=$(hostname):29500 ...``
(Open MPI forwards only the variables named with ``-x``; Hydra forwards the whole environment).
Where JAX derives the address itself (Open MPI's ``OMPI_MCA_orte_hnp_uri``, Slurm's job id and
node list) it is delegated to JAX's cluster detection, which picks a port from the job id.

Under MPI and Slurm each process drives one GPU, the one at its local rank (as JAX's own Slurm and
Open MPI detection does, and as NCCL and cuSOLVERMp want: one rank per GPU), except where the
launcher has already given each process a single GPU through ``CUDA_VISIBLE_DEVICES`` (``srun
--gpus-per-task=1``), where that GPU is ordinal 0 whatever the local rank. Any other layout (one
process driving several GPUs under Slurm) is the caller's to pass to `jax.distributed.initialize`
directly; `initialize` then recognizes the running runtime as source ``"jax"``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Literal, NamedTuple

import jax

ENV_COORDINATOR_ADDRESS = "JAXSOLVE_COORDINATOR_ADDRESS"
ENV_PROCESS_ID = "JAXSOLVE_PROCESS_ID"
ENV_NUM_PROCESSES = "JAXSOLVE_NUM_PROCESSES"
_JAX_COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"

Source = Literal["jaxsolve", "openmpi", "mpich", "slurm", "jax", "single"]
"""Where `ProcessInfo` came from: our launcher, an MPI or Slurm launcher, a JAX distributed runtime
that was already running, or nothing (a single process)."""


@dataclasses.dataclass(frozen=True)
class ProcessInfo:
    """This process's place in a multi-process JAX run, as `initialize` found it.

    Attributes:
      process_id: this process's id, ``0 <= process_id < num_processes`` (`jax.process_index`).
      num_processes: how many processes take part (`jax.process_count`).
      local_device_ids: the GPU ordinals, as this process sees them, that it drives; ``None`` for
        all visible devices (and on CPU, where JAX ignores them).
      coordinator_address: ``host:port`` of the coordinator (process 0); ``None`` for a single
        process, or where JAX derives the address from the cluster (`source` ``"openmpi"`` or
        ``"slurm"`` without an address in the environment), or for ``"jax"``.
      source: which launcher's environment the facts came from (see `Source`).

    Examples:
      >>> from jaxsolve.sharding import detect_process
      >>> detect_process({})
      ProcessInfo(process_id=0, num_processes=1, local_device_ids=None, coordinator_address=None,
                  source='single')
    """

    process_id: int
    num_processes: int
    local_device_ids: tuple[int, ...] | None
    coordinator_address: str | None
    source: Source


class _Launcher(NamedTuple):
    """The environment variables through which one kind of launcher describes a process."""

    source: Source
    rank: str
    size: str
    local_rank: str
    marker: str | None  # a further variable that must be set for this launcher to count
    jax_cluster: str | None  # JAX's cluster_detection_method able to find the coordinator
    jax_cluster_needs: str | None  # the variable that JAX's detection reads the address from


_LAUNCHERS = (
    _Launcher("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
              "OMPI_COMM_WORLD_LOCAL_RANK", None, "ompi", "OMPI_MCA_orte_hnp_uri"),
    _Launcher("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", None, None, None),
    # A batch script's own shell also has SLURM_PROCID=0; only an srun step has a step node list.
    _Launcher("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_NODELIST",
              "slurm", "SLURM_JOB_ID"),
)

_MPI_SOURCES = ("openmpi", "mpich")

_initialized: ProcessInfo | None = None


def detect_process(environ: Mapping[str, str] | None = None) -> ProcessInfo:
    """Reads this process's place in a multi-process run from its environment; starts nothing.

    This is what `initialize` passes to `jax.distributed.initialize`; see the module
    documentation for the launchers recognized and the order in which they are tried.

    Args:
      environ: the environment to read; defaults to `os.environ`.

    Returns:
      A `ProcessInfo`; ``source="single"`` (process 0 of 1) when no launcher is recognized.

    Raises:
      ValueError: if the environment is inconsistent: our launcher's variables only partly set, a
        value that is not an integer or an address, ``process id >= process count``, an MPI rank
        without its size or local rank, a local rank without a GPU in ``CUDA_VISIBLE_DEVICES``, or
        an MPI launch with no coordinator address that JAX could derive.

    Examples:
      A process started by ``python -m jaxsolve.sharding.launch -n 4``:

      >>> from jaxsolve.sharding import detect_process
      >>> detect_process({"JAXSOLVE_PROCESS_ID": "2", "JAXSOLVE_NUM_PROCESSES": "4",
      ...                 "JAXSOLVE_COORDINATOR_ADDRESS": "127.0.0.1:29500"})
      ProcessInfo(process_id=2, num_processes=4, local_device_ids=None,
                  coordinator_address='127.0.0.1:29500', source='jaxsolve')

      Rank 5 of ``mpiexec -n 8`` (MPICH) on a host with 4 GPUs, where it is the second process:

      >>> env = {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1",
      ...        "JAXSOLVE_COORDINATOR_ADDRESS": "node0:29500"}
      >>> detect_process(env).local_device_ids
      (1,)
      >>> detect_process({**env, "PMI_RANK": "8"})
      Traceback (most recent call last):
        ...
      ValueError: PMI_RANK=8 is not below PMI_SIZE=8: process ids run from 0 to PMI_SIZE - 1.
    """
    env = os.environ if environ is None else environ
    if ENV_PROCESS_ID in env or ENV_NUM_PROCESSES in env:
        return _from_jaxsolve_launcher(env)
    for launcher in _LAUNCHERS:
        if all(name in env for name in (launcher.rank, launcher.size, launcher.local_rank)) and (
            launcher.marker is None or launcher.marker in env
        ):
            return _from_launcher(launcher, env)
    for launcher in _LAUNCHERS:  # an MPI rank means an MPI launch, with all of its variables
        if launcher.source in _MPI_SOURCES and launcher.rank in env:
            missing = [name for name in (launcher.size, launcher.local_rank) if name not in env]
            raise ValueError(
                f"{launcher.rank} is set, as by an MPI launcher ({launcher.source}), but "
                f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not; "
                f"initialize() needs {launcher.rank}, {launcher.size} and {launcher.local_rank}. "
                f"Unset {launcher.rank} to run a single process."
            )
    return ProcessInfo(0, 1, None, None, "single")


def initialize() -> ProcessInfo:
    """Starts JAX's distributed runtime for this process, from the launcher's environment.

    Call it first thing in a script started by one of the launchers in the module documentation,
    before anything that touches a JAX backend (`jax.devices`, any computation): afterwards
    `jax.devices` lists the devices of all processes and collectives span them. It reads
    `detect_process`, then calls `jax.distributed.initialize` with every value spelled out (JAX's
    cluster auto-detection is switched off, unless JAX is left to derive the coordinator address),
    so that a stale variable of another launcher cannot change the outcome.

    Calling it again, or after the caller started the runtime with `jax.distributed.initialize`,
    does nothing and returns the description of the running process. With a single process (no
    launcher, or a launcher started only one) nothing is initialized: plain single-process JAX is
    all there is to it.

    Returns:
      The `ProcessInfo` of this process.

    Raises:
      ValueError: if the environment is inconsistent (see `detect_process`).
      RuntimeError: from `jax.distributed.initialize`, if a JAX backend was already started in
        this process, or the coordinator cannot be reached within its timeout.

    Examples:
      A script ``solve.py`` run by ``python -m jaxsolve.sharding.launch -n 4 --platform cpu
      solve.py`` (or ``mpiexec -n 4``, or ``srun -n 4``) starts with:

      >>> import jaxsolve.sharding as js
      >>> info = js.initialize()
      >>> info.process_id < info.num_processes  # here: a single process
      True
      >>> js.initialize() == info  # a second call changes nothing
      True
    """
    global _initialized
    if _initialized is not None:
        return _initialized
    if jax.distributed.is_initialized():
        return ProcessInfo(jax.process_index(), jax.process_count(), None, None, "jax")
    info = detect_process()
    if info.num_processes == 1:
        return info
    if info.coordinator_address is None:
        cluster = next(launcher.jax_cluster for launcher in _LAUNCHERS
                       if launcher.source == info.source)
    else:
        cluster = "deactivate"
    jax.distributed.initialize(
        coordinator_address=info.coordinator_address,
        num_processes=info.num_processes,
        process_id=info.process_id,
        local_device_ids=info.local_device_ids,
        cluster_detection_method=cluster,
    )
    _initialized = info
    return info


def _from_jaxsolve_launcher(env: Mapping[str, str]) -> ProcessInfo:
    missing = [name for name in (ENV_PROCESS_ID, ENV_NUM_PROCESSES, ENV_COORDINATOR_ADDRESS)
               if name not in env]
    if missing:
        raise ValueError(
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set, but other "
            "JAXSOLVE_* variables are: python -m jaxsolve.sharding.launch sets "
            "JAXSOLVE_PROCESS_ID, JAXSOLVE_NUM_PROCESSES and JAXSOLVE_COORDINATOR_ADDRESS "
            "together. Set all three, or none to run a single process."
        )
    process_id, num_processes = _rank_and_size(env, ENV_PROCESS_ID, ENV_NUM_PROCESSES)
    address = _address(env, ENV_COORDINATOR_ADDRESS)
    return ProcessInfo(process_id, num_processes, None, address, "jaxsolve")


def _from_launcher(launcher: _Launcher, env: Mapping[str, str]) -> ProcessInfo:
    process_id, num_processes = _rank_and_size(env, launcher.rank, launcher.size)
    local_rank = _env_int(env, launcher.local_rank, low=0)
    for name in (ENV_COORDINATOR_ADDRESS, _JAX_COORDINATOR_ADDRESS):
        if name in env:
            address = _address(env, name)
            break
    else:
        address = None
        if num_processes > 1 and (launcher.jax_cluster_needs is None
                                  or launcher.jax_cluster_needs not in env):
            derived = (f"; JAX derives it only when {launcher.jax_cluster_needs} is set"
                       if launcher.jax_cluster_needs else "")
            raise ValueError(
                f"{launcher.rank}={process_id} of {launcher.size}={num_processes} "
                f"({launcher.source}) but no coordinator address{derived}. Set "
                f"{ENV_COORDINATOR_ADDRESS}=host:port for every process, with a host that all of "
                "them reach (process 0's) and a free port, or start the run with "
                "python -m jaxsolve.sharding.launch."
            )
    device_ids = _one_gpu_per_process(env, launcher.local_rank, local_rank)
    return ProcessInfo(process_id, num_processes, device_ids, address, launcher.source)


def _rank_and_size(env: Mapping[str, str], rank_name: str, size_name: str) -> tuple[int, int]:
    rank = _env_int(env, rank_name, low=0)
    size = _env_int(env, size_name, low=1)
    if rank >= size:
        raise ValueError(
            f"{rank_name}={rank} is not below {size_name}={size}: process ids run from 0 to "
            f"{size_name} - 1."
        )
    return rank, size


def _env_int(env: Mapping[str, str], name: str, low: int) -> int:
    text = env[name]
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{name}={text!r} is not an integer.") from None
    if value < low:
        raise ValueError(f"{name}={value} must be at least {low}.")
    return value


def _address(env: Mapping[str, str], name: str) -> str:
    text = env[name].strip()
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"{name}={env[name]!r} is not a coordinator address; pass host:port, e.g. "
            "node0:29500 or 10.0.0.1:29500, with a port from 1 to 65535."
        )
    return text


def _one_gpu_per_process(env: Mapping[str, str], local_rank_name: str,
                         local_rank: int) -> tuple[int, ...]:
    """The GPU of a process that drives one: ordinal 0 if it sees a single GPU, else its local
    rank."""
    visible = [entry for entry in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    if len(visible) == 1:
        return (0,)
    if visible and local_rank >= len(visible):
        raise ValueError(
            f"{local_rank_name}={local_rank} but CUDA_VISIBLE_DEVICES="
            f"{env['CUDA_VISIBLE_DEVICES']!r} lists only {len(visible)} GPUs: start at most one "
            "process per GPU on each host."
        )
    return (local_rank,)
