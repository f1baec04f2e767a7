"""Memory resources: the protocol, the built-in resources, the device's default.

A resource written in Python serves ``DeviceBuffer``, ``from_array`` and ``empty``, on
request and as the device's default; pinned and managed pools give their own buffer
types; a pinned pool travels to a child process.
"""

from __future__ import annotations

import gc
import multiprocessing
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import cudriver as cu
from cudriver import driver as cd
from cudriver._lifetime import _handle

from . import _share_children as kids

SPAWN = multiprocessing.get_context("spawn")


class Counting(cu.MemoryResource):
    """A resource written in Python: raw cuMemAlloc/cuMemAllocAsync, counting calls."""

    def __init__(self) -> None:
        self.allocs: list[tuple[int, int, Any]] = []
        self.frees: list[tuple[int, int, Any]] = []
        self.fail_free = False

    def do_allocate(self, nbytes: int, *, stream: cu.Stream | None) -> int:
        if stream is None:
            ptr = int(cd.cuMemAlloc(nbytes))
        else:
            ptr = int(cd.cuMemAllocAsync(nbytes, stream))
        self.allocs.append((ptr, nbytes, stream))
        return ptr

    def do_deallocate(self, address: int, nbytes: int, *, stream: cu.Stream | None) -> None:
        self.frees.append((address, nbytes, stream))
        if stream is None:
            cd.cuMemFree(address)
        else:
            cd.cuMemFreeAsync(address, stream)
        if self.fail_free:
            raise RuntimeError("the resource's own failure")


@pytest.fixture
def no_default(ctx: cu.Context) -> Iterator[None]:
    yield
    cu.set_default_memory_resource(None, ctx.device)


# -- without a GPU ---------------------------------------------------------------------------------
def test_an_unfinished_resource_says_what_it_lacks() -> None:
    class Half(cu.MemoryResource):
        pass

    with pytest.raises(NotImplementedError, match=r"Half does not implement do_allocate"):
        Half().do_allocate(8, stream=None)
    with pytest.raises(NotImplementedError, match=r"do_deallocate\(address, nbytes"):
        Half().do_deallocate(1, 8, stream=None)
    assert Half().name == "test_an_unfinished_resource_says_what_it_lacks.<locals>.Half"


def test_what_each_built_in_resource_is() -> None:
    pinned = cu.PinnedResource(mapped=False)
    assert (pinned.is_host_accessible, pinned.is_device_accessible, pinned.device) == (
        True,
        False,
        None,
    )
    assert cu.PinnedResource().is_device_accessible
    assert pinned.name == "cuMemHostAlloc"
    with pytest.raises(TypeError, match="mapped must be True or False"):
        cu.PinnedResource(mapped=1)  # type: ignore[arg-type]
    assert issubclass(cu.MemoryPool, cu.MemoryResource)
    assert issubclass(cu.PinnedMemoryPool, cu.MemoryPool)
    assert issubclass(cu.VirtualMemoryResource, cu.MemoryResource)


def test_a_default_resource_is_checked_before_it_is_kept() -> None:
    with pytest.raises(TypeError, match="must be a cudriver.MemoryResource or None"):
        cu.set_default_memory_resource(object(), 0)
    with pytest.raises(TypeError, match="makes PinnedBuffers, not DeviceBuffers"):
        cu.set_default_memory_resource(cu.PinnedResource(), 0)


def test_a_pinned_pool_checks_its_node_first() -> None:
    with pytest.raises(ValueError, match="numa_node must be >= 0"):
        cu.PinnedMemoryPool(-1)
    with pytest.raises(TypeError, match="numa_node must be an int or None"):
        cu.PinnedMemoryPool(True)  # type: ignore[arg-type]


# -- a resource written in Python ------------------------------------------------------------------
@pytest.mark.gpu
def test_a_python_resource_serves_buffers_and_from_array(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    mr = Counting()
    a = np.arange(1000, dtype=np.float32)
    buf = cu.DeviceBuffer.from_array(a, resource=mr)
    assert len(mr.allocs) == 1 and mr.allocs[0][1] == a.nbytes and mr.allocs[0][2] is None
    assert buf.ptr == mr.allocs[0][0]
    np.testing.assert_array_equal(buf.copy_to(), a)
    raw = mr.allocate(4096)
    assert isinstance(raw, cu.DeviceBuffer) and raw.nbytes == 4096
    raw.fill(7)
    assert (raw.copy_to() == 7).all()
    typed = cu.DeviceBuffer.empty((4, 4), np.int64, resource=mr)
    assert typed.shape == (4, 4) and len(mr.allocs) == 3
    # Stream-ordered: the resource gets the stream, and its free comes on it.
    on = cu.DeviceBuffer(1 << 16, stream=stream, resource=mr)
    assert mr.allocs[-1][2] is stream
    on.fill(1, stream=stream)
    mr.deallocate(on, stream=stream)
    assert mr.frees[-1] == (mr.allocs[-1][0], 1 << 16, stream)
    for b in (buf, raw, typed):
        b.close()
    assert sorted(f[0] for f in mr.frees) == sorted(x[0] for x in mr.allocs)
    # Dropped, not closed: freed through the resource all the same.
    cu.DeviceBuffer(256, resource=mr)
    gc.collect()
    _handle.settle()
    assert len(mr.frees) == len(mr.allocs) == 5


@pytest.mark.gpu
def test_a_python_resource_as_the_default_serves_every_buffer(
    ctx: cu.Context, stream: cu.Stream, no_default: None
) -> None:
    mr = Counting()
    cu.set_default_memory_resource(mr)
    assert cu.default_memory_resource() is mr
    a = cu.DeviceBuffer(1024)
    b = cu.DeviceBuffer.from_array(np.ones(64, np.uint8))
    c = cu.DeviceBuffer.empty(16, np.float64, stream=stream)
    assert [x[0] for x in mr.allocs] == [a.ptr, b.ptr, c.ptr]
    assert mr.allocs[2][2] is stream
    assert (b.copy_to() == 1).all()
    # A pool or resource given explicitly is not replaced by the default.
    own = cu.DeviceResource().allocate(512)
    assert len(mr.allocs) == 3
    cu.set_default_memory_resource(None)
    d = cu.DeviceBuffer(1024)
    assert len(mr.allocs) == 3
    assert isinstance(cu.default_memory_resource(), cu.DeviceResource)
    for x in (a, b, c, own, d):
        x.close()
    stream.synchronize()
    assert len(mr.frees) == 3


@pytest.mark.gpu
def test_a_pool_as_the_default_serves_buffers_made_without_a_stream(
    ctx: cu.Context, stream: cu.Stream, no_default: None
) -> None:
    pool = cu.MemoryPool()
    cu.set_default_memory_resource(pool)
    a = cu.DeviceBuffer.from_array(np.arange(16, dtype=np.uint32))
    b = cu.DeviceBuffer(4096, stream=stream)
    assert pool.used_current >= 4096 + 64
    assert a.stream is not None  # on the legacy default stream
    np.testing.assert_array_equal(a.copy_to().view(np.uint32), np.arange(16))
    a.close()
    b.close()
    stream.synchronize()
    pool.close()


@pytest.mark.gpu
def test_a_resource_that_fails_is_reported_never_lost(ctx: cu.Context) -> None:
    class Bad(cu.MemoryResource):
        def do_allocate(self, nbytes: int, *, stream: Any) -> Any:
            return "not an address"

    with pytest.raises(TypeError, match=r"Bad.do_allocate\(\) must return the address"):
        cu.DeviceBuffer(64, resource=Bad())

    class Zero(cu.MemoryResource):
        def do_allocate(self, nbytes: int, *, stream: Any) -> int:
            return 0

    with pytest.raises(ValueError, match="not a device address"):
        cu.DeviceBuffer(64, resource=Zero())

    class Empty(cu.MemoryResource):
        def do_allocate(self, nbytes: int, *, stream: Any) -> int:
            raise cu.OutOfMemoryError(2, "Empty.do_allocate")

    with pytest.raises(cu.OutOfMemoryError):
        cu.DeviceBuffer(64, resource=Empty())

    mr = Counting()
    mr.fail_free = True
    buf = cu.DeviceBuffer(64, resource=mr)
    with pytest.warns(cu.CudaWarning, match="the resource's own failure"):
        buf.close()
    assert len(mr.frees) == 1  # the memory was freed before the failure
    with pytest.raises(ValueError, match="pool= or resource=, not both"):
        cu.DeviceBuffer(64, resource=mr, pool=cu.MemoryPool.current())


@pytest.mark.gpu
def test_a_python_resource_is_freed_after_the_work_of_a_graph_that_uses_it(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    mr = Counting()
    buf = cu.DeviceBuffer(1 << 20, resource=mr)
    with stream.capture() as g:
        buf.fill(3, stream=stream)
    exe = g.instantiate()
    buf.close()  # the graph holds a lease: nothing is freed yet
    assert mr.frees == []
    exe.launch(stream)
    stream.synchronize()
    del exe, g
    gc.collect()
    _handle.settle()
    assert len(mr.frees) == 1


# -- the built-in resources ------------------------------------------------------------------------
@pytest.mark.gpu
def test_each_built_in_resource_allocates_its_kind(ctx: cu.Context, stream: cu.Stream) -> None:
    dev = ctx.device
    d = cu.DeviceResource(dev).allocate(1 << 20)
    assert type(d) is cu.DeviceBuffer and d.stream is None
    ds = cu.DeviceResource(dev).allocate(1 << 20, stream=stream)
    assert ds.stream is stream
    p = cu.PinnedResource().allocate(4096)
    assert isinstance(p, cu.PinnedBuffer)
    m = cu.ManagedResource(dev).allocate(4096)
    assert isinstance(m, cu.ManagedBuffer)
    v = cu.VirtualMemoryResource(dev).allocate(1 << 20)
    assert isinstance(v, cu.VirtualBuffer) and v.nbytes >= 1 << 20
    for b in (d, ds, p, m, v):
        b.fill(5) if isinstance(b, cu.DeviceBuffer) else b.array()[:].fill(5)
    assert (v.copy_to()[: 1 << 20] == 5).all()
    for r, b in (
        (cu.DeviceResource(dev), d),
        (cu.DeviceResource(dev), ds),
        (cu.PinnedResource(), p),
        (cu.ManagedResource(dev), m),
        (cu.VirtualMemoryResource(dev), v),
    ):
        r.deallocate(b, stream=stream)
        assert b.closed


@pytest.mark.gpu
def test_a_pinned_pool_gives_host_memory_kernels_use(ctx: cu.Context, stream: cu.Stream) -> None:
    try:
        pool = cu.PinnedMemoryPool()
    except cu.NotSupportedError as exc:
        pytest.skip(f"no pools of host memory on this driver: {exc}")
    assert pool.device is None and pool.is_host_accessible
    assert pool.access(ctx.device) is cu.MemAccess.READ_WRITE
    buf = pool.allocate(1 << 16, stream=stream)
    assert isinstance(buf, cu.PinnedBuffer) and buf.device_ptr == buf.handle
    kids.fill(buf.device_buffer(), 0xABCD, stream)
    stream.synchronize()
    assert (buf.array(np.uint32) == 0xABCD).all()
    before = pool.used_current
    buf.close()
    stream.synchronize()
    assert pool.used_current == before - (1 << 16)
    again = pool.allocate(1 << 16, stream=stream)  # from the pool's reserve
    assert pool.reserved_current >= 1 << 16
    again.close()
    with pytest.raises(TypeError):
        pool.allocate(64)
    with stream.capture():
        with pytest.raises(cu.StreamCaptureError, match="cannot be allocated in a capture"):
            pool.allocate(64, stream=stream)
    stream.synchronize()
    pool.close()


@pytest.mark.gpu
def test_a_managed_pool_gives_managed_buffers_or_says_why_not(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    try:
        pool = cu.ManagedMemoryPool()
    except cu.NotSupportedError as exc:
        pytest.skip(f"no managed pools here: {exc}")
    buf = pool.allocate(1 << 16, stream=stream)
    assert isinstance(buf, cu.ManagedBuffer)
    buf.fill(9, stream=stream)
    stream.synchronize()
    assert (buf.array() == 9).all()  # the host reads managed memory directly
    buf.close()
    stream.synchronize()
    pool.close()


@pytest.mark.gpu
def test_a_pinned_pool_is_shared_with_a_child_process(ctx: cu.Context, stream: cu.Stream) -> None:
    try:
        pool = cu.PinnedMemoryPool(ipc=True)
    except cu.NotSupportedError as exc:
        pytest.skip(f"no shareable pools of host memory on this driver: {exc}")
    buf = pool.allocate(4096, stream=stream)
    buf.array(np.uint32)[:] = 0
    stream.synchronize()
    inbox, outbox = SPAWN.Queue(), SPAWN.Queue()
    p = SPAWN.Process(target=kids.pinned_writer, args=(inbox, outbox))
    p.start()
    try:
        inbox.put((buf, 0x5EED))
        got = outbox.get(timeout=kids.WAIT_S)
        assert got[0] == "written", got
        assert got[1:] == ("PinnedBuffer", 4096)
        # The child's kernel wrote the host memory both processes map.
        assert (buf.array(np.uint32) == 0x5EED).all()
        buf.array(np.uint32)[:] = 0xF00D
        inbox.put("read")
        assert outbox.get(timeout=kids.WAIT_S) == ("host", 0xF00D)
        inbox.put(None)
        p.join(kids.WAIT_S)
        assert p.exitcode == 0
    finally:
        if p.is_alive():
            p.kill()
    buf.close()
    stream.synchronize()
    pool.close()


@pytest.mark.gpu
def test_dropping_buffers_of_every_resource_frees_them_all(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    mr = Counting()
    pool = cu.MemoryPool(release_threshold=0)
    made = []
    for _ in range(20):
        made.append(cu.DeviceBuffer(1 << 16, resource=mr))
        made.append(pool.allocate(1 << 16, stream=stream))
        made.append(cu.DeviceResource().allocate(1 << 16, stream=stream))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del made
        gc.collect()
        _handle.settle()
    stream.synchronize()
    assert len(mr.frees) == 20
    assert pool.used_current == 0
    pool.close()


@pytest.mark.gpu
@pytest.mark.device_memory
def test_an_allocation_out_of_memory_takes_back_what_pools_keep(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    gc.collect()
    _handle.settle()
    free, _ = ctx.mem_info
    big = (free * 6 // 10) & ~((1 << 21) - 1)
    pool = cu.MemoryPool(release_threshold=cu.KEEP_ALL)
    pool.allocate(big, stream=stream).close()
    stream.synchronize()
    assert pool.reserved_current >= big  # kept after the free, even across a sync
    # cuMemAlloc cannot use what the pool keeps: without the trim this ran out of memory.
    buf = cu.DeviceBuffer(big)
    assert pool.reserved_current < big
    buf.close()
    pool.close()


@pytest.mark.gpu
def test_a_default_resource_that_allocates_its_slab_with_cudriver_does_not_recurse(
    ctx: cu.Context, no_default: None
) -> None:
    class Slab(cu.MemoryResource):
        """Carves buffers out of one DeviceBuffer that it makes itself."""

        def __init__(self) -> None:
            self.slab: cu.DeviceBuffer | None = None
            self.next = 0

        def do_allocate(self, nbytes: int, *, stream: Any) -> int:
            if self.slab is None:
                self.slab = cu.DeviceBuffer(1 << 20)  # not served by the default: itself
            ptr = self.slab.ptr + self.next
            self.next += (nbytes + 255) & ~255
            return ptr

        def do_deallocate(self, address: int, nbytes: int, *, stream: Any) -> None:
            pass

    mr = Slab()
    cu.set_default_memory_resource(mr)
    a = cu.DeviceBuffer.from_array(np.arange(8, dtype=np.int64))
    b = cu.DeviceBuffer(512)
    assert mr.slab is not None and b.ptr == mr.slab.ptr + 256
    np.testing.assert_array_equal(a.copy_to().view(np.int64), np.arange(8))
    a.close()
    b.close()
    cu.set_default_memory_resource(None)
    mr.slab.close()


@pytest.mark.gpu
def test_threads_allocate_through_resources_while_one_captures(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    import threading

    cu.reset_memory_stats()
    cu.record_memory_history(stacks=True, max_entries=100_000)
    mr = Counting()
    pool = cu.MemoryPool()
    errors: list[BaseException] = []
    stop = threading.Event()

    def churn(k: int) -> None:
        try:
            ctx.set_current()
            s = cu.Stream(non_blocking=True)
            for i in range(200):
                bufs = [
                    cu.DeviceBuffer(4096, resource=mr),
                    pool.allocate(8192, stream=s),
                    cu.DeviceBuffer(1 << 16, stream=s),
                ]
                if i % 7 == k:
                    gc.collect()
                for b in bufs[:2]:
                    b.close()
                del bufs  # the last one dropped
            s.synchronize()
            s.close()
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    def capture() -> None:
        try:
            ctx.set_current()
            s = cu.Stream(non_blocking=True)
            while not stop.is_set():
                with s.capture() as g:
                    tmp = cu.DeviceBuffer(1 << 16, stream=s)
                    tmp.fill(1, stream=s)
                    tmp.close()  # freed in the graph
                g.instantiate().launch(s)
                s.synchronize()
            s.close()
        except BaseException as exc:
            errors.append(exc)

    try:
        cap = threading.Thread(target=capture)
        cap.start()
        workers = [threading.Thread(target=churn, args=(k,)) for k in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        stop.set()
        cap.join(60)
        assert not cap.is_alive() and not any(w.is_alive() for w in workers)
        assert errors == []
        gc.collect()
        _handle.settle()
        stream.synchronize()
        assert len(mr.frees) == len(mr.allocs) == 800
        s = cu.memory_stats(ctx.device)
        # Every buffer of the threads is freed; the capture's own allocations are the
        # graph's (counted and uncounted too).
        assert s.total.current_bytes == 0, cu.memory_summary(ctx.device)
        assert s.by_resource["Counting"].total_count == 800
        snap = cu.memory_snapshot()
        assert {e["action"] for e in snap["events"]} >= {"alloc", "free"}
    finally:
        cu.record_memory_history(False)
        cu.set_memory_accounting(False)
        cu.reset_memory_stats()
        pool.close()


@pytest.mark.gpu
def test_a_pinned_pool_buffer_is_freed_after_copies_on_other_streams(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    try:
        pool = cu.PinnedMemoryPool()
    except cu.NotSupportedError as exc:
        pytest.skip(f"no pools of host memory on this driver: {exc}")
    other = cu.Stream(non_blocking=True)
    host = pool.allocate(1 << 16, stream=stream)
    host.array(np.uint8)[:] = 7
    dev = cu.DeviceBuffer(1 << 16)
    dev.copy_from(host, stream=other)  # a use on another stream than the allocation's
    assert host._state.used_on == {int(other.handle)}
    pool.deallocate(host)  # freed after the copy on `other`
    other.synchronize()
    stream.synchronize()
    assert (dev.copy_to() == 7).all()
    dev.close()
    other.close()
    pool.close()
