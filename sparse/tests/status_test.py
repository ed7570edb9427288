"""Tests for jaxsolve.sparse._status: Status, FailureReason, SolveInfo, raise_on_failure."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.sparse._status import (
    AMGXStatus,
    FailureReason,
    SolveError,
    SolveInfo,
    Status,
    raise_on_failure,
)


def make_info(status, reason, iterations=5, residual=0.25, max_iters=6):
    """A SolveInfo (batched if the arguments are lists) with a NaN-padded history."""
    iterations = np.asarray(iterations, np.int32)
    steps = np.arange(max_iters + 1)
    history = np.where(steps <= iterations[..., None], 0.5, np.nan).astype(np.float32)
    return SolveInfo(
        iterations=jnp.asarray(iterations),
        residual=jnp.asarray(np.broadcast_to(residual, iterations.shape), jnp.float32),
        status=jnp.asarray(status, jnp.int32),
        residual_history=jnp.asarray(history),
        failure_reason=jnp.asarray(reason, jnp.int32),
    )


class TestStatus:
    def test_status_numbering_is_amgx(self):
        assert AMGXStatus is Status
        assert [(s.name, s.value) for s in Status] == [
            ("SUCCESS", 0), ("FAILED", 1), ("DIVERGED", 2), ("NOT_CONVERGED", 3)
        ]

    def test_failure_reason_status_message_advice(self):
        assert FailureReason.NONE.status is Status.SUCCESS
        for reason in list(FailureReason)[1:]:
            assert reason.status is not Status.SUCCESS, reason
            assert reason.message and reason.advice.endswith("."), reason
        assert FailureReason.NONFINITE_RESIDUAL.status is Status.DIVERGED
        assert FailureReason.GMRES_BREAKDOWN.status is Status.FAILED


class TestSolveInfo:
    def test_solve_info_pytree(self):
        info = make_info(Status.SUCCESS, FailureReason.NONE)
        leaves, treedef = jax.tree.flatten(info)
        assert len(leaves) == 5
        assert jax.tree.unflatten(treedef, leaves) == info
        doubled = jax.jit(lambda i: jax.tree.map(lambda x: x * 2, i))(info)
        assert isinstance(doubled, SolveInfo) and int(doubled.iterations) == 10

    def test_solve_info_vmap(self):
        def info_of(k):
            residual = k.astype(jnp.float32) / 10
            history = jnp.full(3, jnp.nan).at[0].set(1.0).at[1].set(residual)
            return SolveInfo(k, residual, jnp.int32(0), history, jnp.int32(0))

        batched = jax.vmap(info_of)(jnp.arange(4, dtype=jnp.int32))
        assert batched.status.shape == (4,)
        assert batched.residual_history.shape == (4, 3)
        np.testing.assert_allclose(batched.residual_history[:, 1], [0, 0.1, 0.2, 0.3])


class TestRaiseOnFailure:
    def test_raise_on_failure_success(self):
        assert raise_on_failure(make_info(Status.SUCCESS, FailureReason.NONE)) is None
        raise_on_failure(make_info([0, 0], [0, 0], iterations=[2, 3]))

    def test_raise_on_failure_message(self):
        info = make_info(Status.NOT_CONVERGED, FailureReason.MAX_ITERS, iterations=6)
        message = (
            "jaxsolve.sparse: the solve ended with status NOT_CONVERGED (3) after 6"
            " iterations (relative residual 2.5e-01): the residual did not reach the"
            " tolerance within max_iters iterations. Increase max_iters or use a"
            " stronger preconditioner."
        )
        with pytest.raises(SolveError, match=re.escape(message)) as raised:
            raise_on_failure(info)
        assert isinstance(raised.value, RuntimeError)
        assert int(raised.value.info.status) == Status.NOT_CONVERGED

    def test_raise_on_failure_batched_names_indices(self):
        info = make_info(
            [Status.SUCCESS, Status.FAILED, Status.SUCCESS, Status.DIVERGED],
            [FailureReason.NONE, FailureReason.NOT_POSITIVE_DEFINITE,
             FailureReason.NONE, FailureReason.NONFINITE_RESIDUAL],
            iterations=[3, 1, 4, 2],
        )
        with pytest.raises(SolveError) as raised:
            raise_on_failure(info)
        lines = str(raised.value).splitlines()
        assert lines[0] == "jaxsolve.sparse: 2 of 4 solves did not succeed:"
        assert lines[1].startswith("  index 1: status FAILED (1) after 1 iterations")
        assert "pᴴAp <= 0" in lines[1] and "Use bicgstab or gmres" in lines[1]
        assert lines[2].startswith("  index 3: status DIVERGED (2) after 2 iterations")
        assert len(lines) == 3

    def test_raise_on_failure_many_failures_are_elided(self):
        n = 13
        info = make_info([3] * n, [1] * n, iterations=[6] * n)
        with pytest.raises(SolveError) as raised:
            raise_on_failure(info)
        lines = str(raised.value).splitlines()
        assert len(lines) == 1 + 10 + 1
        assert lines[-1] == "  ... and 3 more."

    def test_raise_on_failure_two_batch_axes(self):
        info = make_info([[0, 3], [0, 0]], [[0, 1], [0, 0]], iterations=[[1, 6], [1, 1]])
        with pytest.raises(SolveError, match=re.escape("index (0, 1): status NOT_CONVERGED")):
            raise_on_failure(info)

    def test_raise_on_failure_errors(self):
        with pytest.raises(TypeError, match="info must be the SolveInfo a solver returned"):
            raise_on_failure({"status": 0})
        with pytest.raises(TypeError, match=re.escape("info is traced (called inside jit")):
            jax.jit(raise_on_failure)(make_info(Status.SUCCESS, FailureReason.NONE))
