"""What the child processes of tests/test_share.py run (spawned: importable by name).

Every wait has a deadline, so a child never outlives a failed test for long.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import cudriver as cu

WAIT_S = 90.0

FILL = r"""
extern "C" __global__ void fill(unsigned* p, unsigned v, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}
"""

_kernel: Any = None


def kernel() -> Any:
    """The fill kernel, compiled once per process (the current context: device 0's)."""
    global _kernel
    if _kernel is None:
        dev = cu.Device()
        dev.set_current()
        mod = cu.Module.load(cu.compile(FILL, arch=dev.compute_capability, target="cubin"))
        _kernel = mod.kernel("fill")
    return _kernel


def fill(buf: cu.DeviceBuffer, value: int, stream: cu.Stream) -> None:
    """Write ``value`` into every 32-bit word of ``buf`` with a kernel on ``stream``."""
    n = buf.nbytes // 4
    kernel().launch(stream, (n + 255) // 256, 256, buf, np.uint32(value), np.uint64(n))


def pool_of(buf: Any) -> Any:
    """The MemoryPool an opened allocation keeps, or None."""
    root = buf.base if buf.base is not None else buf
    return next((k for k in root._state.keep or () if isinstance(k, cu.MemoryPool)), None)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def writer(inbox: Any, outbox: Any) -> None:
    """Fill each buffer received, then send back an event recorded after the kernel.

    A message is ``(what, value)``; ``what`` is a buffer, a pool (answered with what
    the child sees of it) or None (stop). The child waits for an acknowledgement
    before it lets the event go (the parent must open it first).
    """
    kernel()
    s = cu.Stream()
    pools: list[Any] = []
    while True:
        msg = inbox.get(timeout=WAIT_S)
        if msg is None:
            break
        what, value = msg
        if isinstance(what, cu.MemoryPool):
            pools.append(what)
            outbox.put(("pool", type(what).__name__, what.device.ordinal))
            continue
        fill(what, value, s)
        ev = cu.Event(interprocess=True).record(s)
        same_pool = any(p is pool_of(what) for p in pools)
        outbox.put((ev, type(what).__name__, what.nbytes, str(what.dtype), what.shape, same_pool))
        assert inbox.get(timeout=WAIT_S) == "ack"
        s.synchronize()
        ev.close()
    s.close()


def fill_and_read(buf: cu.DeviceBuffer, value: int) -> int:
    """For a ProcessPoolExecutor: fill ``buf``, wait, and return its first word."""
    s = cu.Stream()
    fill(buf, value, s)
    s.synchronize()
    first = int(buf.copy_to().view(np.uint32)[0])
    s.close()
    return first


def echo(inbox: Any, outbox: Any) -> None:
    """Receive buffers, write and drop each; report fds, memory, registries, warnings."""
    import warnings

    from cudriver._context import _share

    caught: list[str] = []
    warnings.simplefilter("always", cu.CudaWarning)
    warnings.showwarning = lambda message, *args, **kw: caught.append(str(message))
    kernel()
    s = cu.Stream()
    n = 0
    while True:
        msg = inbox.get(timeout=WAIT_S)
        if msg is None:
            break
        fill(msg, n, s)  # an opening whose memory went would fault here
        s.synchronize()
        del msg
        n += 1
        if n in (10, 200):
            import gc

            gc.collect()
            cu.Device().synchronize()
            free = cu.mem_get_info()[0]
            outbox.put((n, open_fds(), free, len(_share.POOLS), len(_share.BUFFERS), list(caught)))
        else:
            outbox.put(n)


def die_holding(inbox: Any, outbox: Any) -> None:
    """Open a buffer, say so, and die without closing anything."""
    buf = inbox.get(timeout=WAIT_S)
    outbox.put(buf.nbytes)
    outbox.close()
    outbox.join_thread()  # the message is out; os._exit would drop what is queued
    os._exit(3)


def outlive_exporter(inbox: Any, outbox: Any) -> None:
    """Open a buffer, let the exporter free it, then touch it: report what happened."""
    buf = inbox.get(timeout=WAIT_S)
    s = cu.Stream()
    fill(buf, 1, s)
    s.synchronize()
    outbox.put("opened")
    assert inbox.get(timeout=WAIT_S) == "freed"
    try:
        fill(buf, 2, s)
        s.synchronize()
        got = int(buf.copy_to().view(np.uint32)[0])
        outbox.put(f"still usable: {got}")
    except cu.CudaError as exc:
        outbox.put(f"error: {type(exc).__name__}: {exc}")


def pinned_writer(inbox: Any, outbox: Any) -> None:
    """Write a pinned pool allocation with a kernel, then read it from the host.

    Receives ``(buffer, value)``: fills the buffer through the device and answers
    ``("written", kind, nbytes)``; on ``"read"`` answers ``("host", first word)``
    read through numpy; stops on None.
    """
    buf, value = inbox.get(timeout=WAIT_S)
    stream = cu.Stream()
    fill(buf.device_buffer(), value, stream)
    stream.synchronize()
    outbox.put(("written", type(buf).__name__, buf.nbytes))
    assert inbox.get(timeout=WAIT_S) == "read"
    outbox.put(("host", int(buf.array(np.uint32)[0])))
    assert inbox.get(timeout=WAIT_S) is None
    buf.close()
    stream.close()
