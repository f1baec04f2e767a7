"""What the ranks of tests/test_nccl.py run (spawned: importable by name).

Each rank reports ``(rank, what, value)`` tuples on a queue and never waits without a
deadline: NCCL's own waits are bounded by the test, which kills a rank past its time.
"""

from __future__ import annotations

import functools
import traceback
from typing import Any

import numpy as np

import cudriver as cu
from cudriver import nccl as cnccl

MIB = 2**20
#: A rank still running after this many seconds dumps its threads' stacks and exits.
HANG_S = 70.0


def inputs(rank: int, count: int) -> np.ndarray[Any, Any]:
    """Rank ``rank``'s all-reduce input: whole numbers, so every sum is exact in float32."""
    return np.random.default_rng(rank).integers(0, 1000, count).astype(np.float32)


def allreduce(ranks: cnccl.Ranks, mib: int, replays: int, out: Any) -> None:
    """All-reduce ``mib`` MiB of float32, then replay a captured all-reduce ``replays`` times."""
    import faulthandler
    import sys

    # A rank that hangs says where, on stderr, and exits before the test's deadline.
    faulthandler.dump_traceback_later(HANG_S, exit=True)
    say = functools.partial(print, f"rank {ranks.rank}:", file=sys.stderr, flush=True)
    try:
        import nccl.core as nccl

        say("joining")
        comm = cnccl.communicator(ranks, timeout=60)
        say("joined")
        stream = cu.Stream(non_blocking=True)
        count = mib * MIB // 4
        send = cu.DeviceBuffer.from_array(inputs(ranks.rank, count))
        recv = cu.DeviceBuffer.empty(count, np.float32)
        comm.allreduce(send, recv, nccl.SUM, stream=stream)
        stream.synchronize()
        say("all-reduced")
        out.put((ranks.rank, "allreduce", recv.copy_to()))

        # Stream-ordered this time; both graphs are destroyed before comm.destroy(),
        # which otherwise waits for them forever.
        x = cu.DeviceBuffer.from_array(np.arange(1024, dtype=np.float32), stream=stream)
        with stream.capture() as graph:
            comm.allreduce(x, x, nccl.SUM, stream=stream)
        with graph, graph.instantiate() as exe:
            for _ in range(replays):
                exe.launch(stream)
            stream.synchronize()
        say("replayed")
        out.put((ranks.rank, "replayed", x.copy_to()))
        # A graph holding a collective: destroy() refuses (ncclCommDestroy would wait
        # for the graph forever), then goes once the graph and its exec are closed.
        with stream.capture() as held:
            comm.allreduce(x, x, nccl.SUM, stream=stream)
        exe = held.instantiate()
        held.close()  # the executable graph still holds it
        try:
            comm.destroy()
        except RuntimeError as exc:
            out.put((ranks.rank, "refused", str(exc)))
        else:
            raise AssertionError("destroy() was not refused")
        exe.close()
        comm.destroy()
        say("done")
        out.put((ranks.rank, "done", None))
    except BaseException:
        out.put((ranks.rank, "error", traceback.format_exc()))
    finally:
        faulthandler.cancel_dump_traceback_later()
