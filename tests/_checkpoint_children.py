"""What the child process of tests/test_checkpoint.py runs (spawned: importable by name).

The child holds device memory with known contents and a live stream, says it is ready,
then answers commands from the parent; every wait has a deadline, and a child still
running past ``HANG_S`` dumps its threads' stacks and exits.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import traceback
from typing import Any

import numpy as np

import cudriver as cu

#: Seconds the child waits for each command from the parent.
WAIT_S = 120.0
#: Seconds after which a child still running dumps its stacks and exits.
HANG_S = 300.0


def pattern(nbytes: int) -> np.ndarray[Any, Any]:
    """The known contents: ``nbytes`` bytes of a uint32 sequence no fill would give."""
    i = np.arange(nbytes // 4, dtype=np.uint64)
    return ((i * 2654435761 + 12345) % 2**32).astype(np.uint32)


def holder(conn: Any, nbytes: int) -> None:
    """Hold ``nbytes`` of device memory and a stream; answer the parent's commands.

    Sends ``("ready", pid)`` once the memory holds :func:`pattern` and work has run on
    the stream. Then, for ``"verify"``: checks both buffers' contents, runs more work on
    the same stream (a fill and a device-to-device copy) and sends ``("verified",
    contents_ok, stream_ok)``; for ``"stop"`` (or no command within ``WAIT_S``): exits.
    Any exception is sent as ``("error", traceback)``.
    """
    faulthandler.dump_traceback_later(HANG_S, exit=True)
    try:
        dev = cu.Device(0)
        dev.set_current()
        stream = cu.Stream()
        expected = pattern(nbytes)
        buf = cu.DeviceBuffer.from_array(expected)  # cuMemAlloc, copied on return
        second = cu.DeviceBuffer(nbytes)
        second.copy_from(buf, stream=stream)  # work on the stream before the checkpoint
        stream.synchronize()
        conn.send(("ready", os.getpid()))
        while True:
            if not conn.poll(WAIT_S):
                print("checkpoint child: no command from the parent", file=sys.stderr)
                break
            cmd = conn.recv()
            if cmd != "verify":
                break
            contents_ok = bool(
                np.array_equal(buf.copy_to().view(np.uint32), expected)
                and np.array_equal(second.copy_to().view(np.uint32), expected)
            )
            buf.fill(0x5A, stream=stream)  # the stream made before the checkpoint
            second.copy_from(buf, stream=stream)
            stream.synchronize()
            stream_ok = bool((second.copy_to() == 0x5A).all())
            second.copy_from(expected)  # as it was, for the next round
            buf.copy_from(expected)
            conn.send(("verified", contents_ok, stream_ok))
        stream.close()
        buf.close()
        second.close()
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        raise
    finally:
        faulthandler.cancel_dump_traceback_later()
