"""jaxsolve's own NCCL communicators on a GPU: NCCL loads, and a communicator is created once.

Run by ``tools/dev gpu-test`` on a GPU host (marked ``gpu``; skipped without a GPU).
"""

import jax
import pytest

import jaxsolve.sharding as js
from jaxsolve.sharding import _nccl

GPU = next((d for d in jax.devices() if d.platform == "gpu"), None)
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU is None, reason="needs a GPU")]


def test_nccl_loads_new_enough_for_cublasmp():
    assert js.nccl_version() >= 22902  # cuBLASMp 0.10 needs ncclCommQueryProperties


def test_communicator_is_ours_and_cached():
    communicator = js.nccl_communicator([GPU])
    assert js.nccl_communicator([GPU]) is communicator
    assert communicator.size == 1 and communicator.local_ranks == (0,)
    assert _nccl.member_rank(communicator, GPU) == (0, 1)
