"""The direct path of cudriver.nccl.Communicator: DeviceBuffers handed to NCCL as they are.

Each scenario runs in a spawned process with a deadline (NCCL's own waits have none):
one rank on one GPU for the checks of the direct path, two ranks on two GPUs for every
collective against numpy.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from cudriver import nccl as cnccl

from . import _nccl_children as kids
from ._support import free_port, gpu_unavailable_reason, nccl_ranks_unavailable_reason
from .test_nccl import _collect

SPAWN = multiprocessing.get_context("spawn")


def _one_rank_reason() -> str | None:
    reason = gpu_unavailable_reason()
    if reason is not None:
        return reason
    try:
        import nccl.core  # noqa: F401
    except ImportError as exc:
        return f"nccl4py is not installed (pip install '.[nccl]'): {exc}"
    return None


@pytest.mark.gpu
def test_the_direct_path_on_one_rank() -> None:
    reason = _one_rank_reason()
    if reason is not None:
        pytest.skip(reason)
    out = SPAWN.Queue()
    p = SPAWN.Process(target=kids.one_rank, args=(out,))
    p.start()
    msgs = _collect([p], out, 1, timeout=kids.HANG_S + 15)
    failed = [v for _, what, v in msgs if what == "failed"]
    passed = {v for _, what, v in msgs if what == "passed"}
    assert not failed, "\n".join(failed)
    assert passed == {
        "each_dtype_all_reduces_directly",
        "a_buffer_without_dtype_is_bytes_and_a_view_is_its_range",
        "every_collective_goes_direct",
        "other_buffers_and_a_config_go_to_nccl4py",
        "mistakes_raise_what_nccl4py_raises",
        "a_stream_ordered_buffer_notes_the_collectives_stream",
        "raw_handles_and_cuda_stream_objects_are_streams",
        "a_captured_collective_replays_and_holds_destroy",
    }


@pytest.mark.gpu
def test_every_collective_over_two_ranks_equals_numpy() -> None:
    reason = nccl_ranks_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    port = free_port()
    ranks = [cnccl.Ranks(r, 2, r, "127.0.0.1", port) for r in range(2)]
    out = SPAWN.Queue()
    procs = [SPAWN.Process(target=kids.collectives, args=(r, out)) for r in ranks]
    for p in procs:
        p.start()
    msgs = _collect(procs, out, 2, timeout=kids.HANG_S + 15)
    ok: dict[int, set[Any]] = {0: set(), 1: set()}
    for rank, what, v in msgs:
        if what == "ok":
            ok[rank].add(v)
    common = {"allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall", "send_recv"}
    assert ok[0] == common | {"reduce"}
    assert ok[1] == common
    refused = [v for _, what, v in msgs if what == "refused"]
    assert len(refused) == 2
    for msg in refused:
        assert "sendbuf is on device" in msg and "communicator is on device" in msg, msg


def test_without_nccl4py_a_communicator_has_no_direct_path() -> None:
    # A communicator that is not nccl4py's (here a stand-in) goes through its methods.
    class Fake:
        def __init__(self) -> None:
            self.calls: list[tuple[Any, ...]] = []

        def allreduce(self, *a: Any, **k: Any) -> None:
            self.calls.append(("allreduce", a, k))

        def send(self, *a: Any, **k: Any) -> None:
            self.calls.append(("send", a, k))

    fake = Fake()
    comm = cnccl.Communicator(fake)
    comm.allreduce(1, 2, 0, stream=None)
    comm.send(1, 0)
    assert fake.calls == [
        ("allreduce", (1, 2, 0), {"stream": None}),
        ("send", (1, 0), {"stream": None}),
    ]
    comm.allreduce(1, 2, 0, stream=None, config="c")  # a config is passed on as given
    assert fake.calls[-1] == ("allreduce", (1, 2, 0), {"stream": None, "config": "c"})
