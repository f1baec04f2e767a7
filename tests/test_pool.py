"""Memory pools: creation, release threshold, statistics, trim, access, IPC."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver._lifetime import _handle
from cudriver._memory import pool as pool_module
from cudriver._runtime._bindings import SUCCESS

from ._support import FAKE
from .test_safety import run_isolated

MiB = 1 << 20


def test_arguments_are_checked_before_the_driver() -> None:
    with pytest.raises(TypeError, match="device"):
        cu.MemoryPool("gpu0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ipc"):
        cu.MemoryPool(0, ipc=1)  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError), match="release_threshold"):
        cu.MemoryPool(0, release_threshold=-1)
    with pytest.raises(TypeError, match="MemoryPool"):
        cu.DeviceBuffer(16, stream=None, pool="pool")  # type: ignore[arg-type]
    assert cu.KEEP_ALL == 2**64 - 1
    assert [int(m) for m in cu.MemAccess] == [0, 1, 3]


def test_a_pool_depends_on_the_streams_it_allocated_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # pool._Destroy.note on real release states with stand-in releases (no driver).
    released: list[int] = []

    def destroy(h: int) -> None:
        released.append(h)

    def state(h: int, release: object, kind: str = "Stream") -> object:
        return _handle._State(h, release, "cuStreamDestroy", kind, (), None)

    pool_state = state(0x9000, None, "MemoryPool")
    d = pool_module._Destroy()
    d.state = pool_state
    owned, legacy, foreign = state(0x5000, destroy), state(1, None), state(0x6000, None)
    for st in (owned, legacy, foreign, owned):
        d.note(st)
    assert list(d.streams.values()) == [owned, legacy]  # a foreign stream is not waited for
    assert d.last is owned
    assert _handle.held(owned) and owned in pool_state.deps  # type: ignore[arg-type, attr-defined]
    _handle.release_state(owned)  # a close(): the stream waits for the pool
    assert owned.handle == 0x5000 and owned.closing and not released  # type: ignore[attr-defined]

    # Past 16 streams, the closed ones whose work has run are let go.
    idle = {0x5000, *range(0x7000, 0x7000 + 70, 2)}
    monkeypatch.setattr(
        pool_module._drv, "cuStreamQuery", lambda h: (SUCCESS if h in idle else None,)
    )
    more = [state(0x7000 + i, destroy) for i in range(70)]
    for st in more:
        d.note(st)
        _handle.release_state(st)
    _handle.settle()
    assert 0x5000 in released and 0x7000 in released and 0x7001 not in released
    assert all(h in idle for h in released)
    assert 0x7001 in [int(st.handle) for st in d.streams.values()]  # type: ignore[attr-defined]
    assert owned not in pool_state.deps  # type: ignore[attr-defined]
    # Nothing left queued for other tests; the rest go with the pool.
    for st in more:
        if st.handle is not None:  # type: ignore[attr-defined]
            _handle.unlink(pool_state, st)  # type: ignore[arg-type]
            _handle.queue_if_free(st)  # type: ignore[arg-type]
    _handle.settle()
    assert _handle.pending_releases() == 0


def fake_pool(*, ipc: bool = True) -> cu.MemoryPool:
    """A borrowed MemoryPool over a made-up handle: for the checks made before the driver
    (any driver call with it would fail, or find no driver)."""
    p = cu.MemoryPool.__new__(cu.MemoryPool)
    p._ipc = ipc
    p._init_handle(drv.CUmemoryPool(0x9000), release=None, func="cuMemPoolDestroy", owned=False)
    return p


def fake_pool_buffer(pool: cu.MemoryPool) -> cu.DeviceBuffer:
    """A borrowed DeviceBuffer at the fake address that holds ``pool``, as an allocation
    from it does."""
    b = cu.DeviceBuffer.__new__(cu.DeviceBuffer)
    b._set_fields(64, None, None, None, None, None, 0)
    b._init_handle(drv.CUdeviceptr(FAKE), release=None, func="cuMemFree", owned=False, keep=(pool,))
    return b


def test_pool_import_handle_checks_the_descriptor_first() -> None:
    for bad in ("3", 1.5, True, None):
        with pytest.raises(TypeError, match="fd must be a file descriptor"):
            cu.MemoryPool.import_handle(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fd must be .* >= 0"):
        cu.MemoryPool.import_handle(-1)
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(OSError):  # a closed descriptor: the OS's message
        cu.MemoryPool.import_handle(r)


def test_buffer_import_handle_checks_its_arguments_first() -> None:
    pool = fake_pool()
    data = bytes(64)
    for bad_pool in (None, "pool", 0x9000, cu.DeviceBuffer.from_handle(FAKE, 64)):
        with pytest.raises(TypeError, match="pool must be a cudriver.MemoryPool"):
            cu.DeviceBuffer.import_handle(data, 64, pool=bad_pool)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pool"):
        cu.DeviceBuffer.import_handle(data, 64)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="data must be the 64 bytes"):
        cu.DeviceBuffer.import_handle("x" * 64, 64, pool=pool)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="data must be the 64 bytes"):
        cu.DeviceBuffer.import_handle(memoryview(data), 64, pool=pool)  # type: ignore[arg-type]
    for short in (b"", bytes(63), bytearray(65)):
        with pytest.raises(ValueError, match="data must be the 64 bytes"):
            cu.DeviceBuffer.import_handle(short, 64, pool=pool)  # type: ignore[arg-type]
    for n, exc in ((0, ValueError), (-1, ValueError), (2**64, ValueError), (1.5, TypeError)):
        with pytest.raises(exc, match="nbytes"):
            cu.DeviceBuffer.import_handle(bytearray(64), n, pool=pool)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="nbytes"):
        cu.DeviceBuffer.import_handle(data, True, pool=pool)
    with pytest.raises(TypeError, match="ManagedBuffer.import_handle is not available"):
        cu.ManagedBuffer.import_handle(data, 64, pool=pool)
    pool.close()
    with pytest.raises(cu.ClosedError, match="MemoryPool is closed"):
        cu.DeviceBuffer.import_handle(data, 64, pool=pool)


def test_buffer_export_handle_says_which_allocations_travel() -> None:
    not_ipc = fake_pool(ipc=False)
    buf = fake_pool_buffer(not_ipc)
    with pytest.raises(ValueError, match="pool was not made with ipc=True"):
        buf.export_handle()
    with pytest.raises(ValueError, match=r"view \(at byte offset 16\).*buf.base.export_handle"):
        buf[16:32].export_handle()
    with pytest.raises(ValueError, match="not allocated from a cudriver.MemoryPool.*ipc=True"):
        cu.DeviceBuffer.from_handle(FAKE, 64).export_handle()
    buf.close()
    with pytest.raises(cu.ClosedError, match="DeviceBuffer is closed"):
        buf.export_handle()


def test_allocate_takes_a_stream(fake_stream: cu.Stream) -> None:
    pool = fake_pool()
    with pytest.raises(TypeError, match=r"stream is required.*Stream.legacy\(\)"):
        pool.allocate(16, stream=None)
    with pytest.raises(TypeError, match="stream"):
        pool.allocate(16)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="stream"):
        pool.allocate(16, stream="s")
    for n, exc in ((0, ValueError), (-8, ValueError), (1.5, TypeError)):
        with pytest.raises(exc, match="nbytes"):
            pool.allocate(n, stream=fake_stream)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("access", "exc"),
    [
        (True, TypeError),
        (False, TypeError),
        (1.0, TypeError),
        ("READ", TypeError),
        (None, TypeError),
        (2, ValueError),
        (-1, ValueError),
        (7, ValueError),
    ],
)
def test_set_access_checks_the_access_first(access: object, exc: type[Exception]) -> None:
    with pytest.raises(exc, match="MemAccess"):
        fake_pool().set_access(0, access)  # type: ignore[arg-type]


def test_deprecated_pointer_aliases_warn_at_the_caller() -> None:
    pool = fake_pool(ipc=False)
    with pytest.warns(DeprecationWarning, match=r"MemoryPool.export_pointer\(buf\) is dep") as rec:
        with pytest.raises(TypeError, match="DeviceBuffer"):
            pool.export_pointer("buf")  # type: ignore[arg-type]
    assert [w.filename for w in rec] == [__file__]
    with pytest.warns(DeprecationWarning, match=r"use buf.export_handle\(\)") as rec:
        with pytest.raises(ValueError, match="ipc=True"):  # what export_handle() says
            pool.export_pointer(fake_pool_buffer(pool))
    assert [w.filename for w in rec] == [__file__]
    pattern = r"MemoryPool.import_pointer.*DeviceBuffer.import_handle\(data, nbytes, pool=pool\)"
    with pytest.warns(DeprecationWarning, match=pattern) as rec:
        with pytest.raises(ValueError, match="data must be the 64 bytes"):
            pool.import_pointer(bytes(63), 64)
    assert [w.filename for w in rec] == [__file__]
    assert "Deprecated: use" in (cu.MemoryPool.export_pointer.__doc__ or "")
    assert "Deprecated: use" in (cu.MemoryPool.import_pointer.__doc__ or "")


@pytest.mark.gpu
class TestPool:
    def test_threshold_stats_and_trim(self, ctx: cu.Context, stream: cu.Stream) -> None:
        pool = cu.MemoryPool(ctx.device)
        assert pool.release_threshold == cu.KEEP_ALL  # keeps freed memory by default
        assert pool.device is ctx.device
        assert pool.used_current == 0
        bufs = [cu.DeviceBuffer(4 * MiB, stream=stream, pool=pool) for _ in range(4)]
        assert pool.used_current >= 16 * MiB
        assert pool.reserved_current >= pool.used_current
        for b in bufs:
            b.close()
        stream.synchronize()
        assert pool.used_current == 0
        assert pool.used_high >= 16 * MiB
        kept = pool.reserved_current
        assert kept >= 16 * MiB  # freed memory stayed in the pool across the sync
        # Reused without growing: the same sizes again.
        again = [cu.DeviceBuffer(4 * MiB, stream=stream, pool=pool) for _ in range(4)]
        assert pool.reserved_current == kept
        del again
        gc.collect()
        stream.synchronize()  # runs the collected buffers' releases: frees enqueued
        stream.synchronize()  # and done
        pool.trim(0)
        assert pool.reserved_current < kept
        pool.reset_high_watermarks()
        assert pool.used_high == pool.used_current == 0
        # Threshold 0: freed memory goes back at the next synchronisation.
        pool.release_threshold = 0
        assert pool.release_threshold == 0
        b = cu.DeviceBuffer(8 * MiB, stream=stream, pool=pool)
        b.close()
        stream.synchronize()
        assert pool.reserved_current == 0
        pool.close()

    def test_buffers_keep_their_pool_and_work(self, ctx: cu.Context, stream: cu.Stream) -> None:
        pool = cu.MemoryPool(ctx.device, max_size=64 * MiB)
        buf = cu.DeviceBuffer(MiB, stream=stream, pool=pool)
        pool.close()  # unusable now; destroyed once its buffers are gone
        with pytest.raises(cu.ClosedError):
            _ = pool.used_current
        x = np.arange(MiB // 4, dtype=np.uint32)
        buf.copy_from(x, stream=stream)
        out = np.empty_like(x)
        buf.copy_to(out, stream=stream)
        stream.synchronize()
        np.testing.assert_array_equal(out, x)
        buf.close()
        stream.synchronize()
        small = cu.MemoryPool(ctx.device, max_size=64 * MiB)
        with pytest.raises(cu.OutOfMemoryError):
            cu.DeviceBuffer(128 * MiB, stream=stream, pool=small)
        small.close()
        with pytest.raises(ValueError, match="stream="):
            cu.DeviceBuffer(16, pool=cu.MemoryPool.default(ctx.device))

    def test_driver_pools_are_borrowed(self, ctx: cu.Context, stream: cu.Stream) -> None:
        default = cu.MemoryPool.default(ctx.device)
        current = cu.MemoryPool.current(ctx.device)
        assert not default.owned
        assert int(default) == int(current)  # nobody changed the current pool
        b = cu.DeviceBuffer(MiB, stream=stream, pool=default)
        b.close()
        stream.synchronize()
        default.close()  # a borrowed pool is not destroyed
        again = cu.MemoryPool.default(ctx.device)
        assert again.reserved_current >= 0
        assert again.access(ctx.device) is cu.MemAccess.READ_WRITE

    def test_allocate_set_access_and_device(self, ctx: cu.Context, stream: cu.Stream) -> None:
        pool = cu.MemoryPool(ctx.device)
        buf = pool.allocate(MiB, stream=stream)
        assert type(buf) is cu.DeviceBuffer
        assert buf.nbytes == MiB and buf.stream is stream and buf.device is ctx.device
        assert pool.used_current >= MiB
        buf.fill(3, stream=stream)
        stream.synchronize()
        assert (buf.copy_to() == 3).all()
        with pytest.raises(ValueError, match="ipc=True"):
            buf.export_handle()  # the pool is not an IPC pool
        with pytest.raises(TypeError, match="stream is required"):
            pool.allocate(16, stream=None)
        pool.set_access(ctx.device)  # READ_WRITE, as the own device always has
        pool.set_access(ctx.device.ordinal, cu.MemAccess.READ_WRITE)
        for refused in (cu.MemAccess.READ, cu.MemAccess.NONE):
            with pytest.raises(ValueError, match="own device keeps read-write"):
                pool.set_access(ctx.device, refused)
        assert pool.access(ctx.device) is cu.MemAccess.READ_WRITE
        buf.close()
        stream.synchronize()
        assert pool.used_current == 0
        pool.close()

    def test_deprecated_export_pointer_gives_what_export_handle_gives(
        self, ctx: cu.Context, stream: cu.Stream
    ) -> None:
        try:
            pool = cu.MemoryPool(ctx.device, ipc=True)
        except cu.NotSupportedError as exc:
            pytest.skip(f"this device has no IPC pools: {exc}")
        buf = pool.allocate(4096, stream=stream)
        with pytest.raises(cu.InvalidValueError, match=r"call pool\.export_handle\(\) first"):
            buf.export_handle()  # the driver exports allocations of a shared pool only
        os.close(pool.export_handle())
        data = buf.export_handle()
        assert type(data) is bytes and len(data) == 64
        with pytest.warns(DeprecationWarning, match="export_pointer") as rec:
            old = pool.export_pointer(buf)
        assert [w.filename for w in rec] == [__file__]
        assert type(old) is bytes and len(old) == 64
        pool.close()  # the buffer keeps the pool: its allocation still travels
        assert len(buf.export_handle()) == 64
        buf.close()
        stream.synchronize()

    @pytest.mark.device_memory
    def test_mem_get_info(self, ctx: cu.Context) -> None:
        free, total = cu.mem_get_info()
        assert 0 < free <= total == ctx.device.total_memory
        before = ctx.device.mem_info[0]
        b = cu.DeviceBuffer(256 * MiB)
        assert ctx.device.mem_info[0] <= before - 256 * MiB + 64 * MiB
        b.close()


@pytest.mark.gpu
def test_pool_and_allocation_shared_with_another_process() -> None:
    run_isolated(
        """
        import socket, subprocess, textwrap
        ctx = make_current()
        s = cu.Stream()
        try:
            pool = cu.MemoryPool(ipc=True)
        except cu.NotSupportedError as exc:
            print("ipc not supported:", exc)
            print("OK")
            raise SystemExit(0)
        buf = pool.allocate(4096, stream=s)
        buf.copy_from(np.arange(1024, dtype=np.uint32), stream=s)
        s.synchronize()
        fd = pool.export_handle()
        data = buf.export_handle()
        assert type(data) is bytes and len(data) == 64
        try:
            buf[16:32].export_handle()
        except ValueError as exc:
            assert "view" in str(exc), exc
        else:
            raise AssertionError("a view was exported")
        plain = cu.MemoryPool().allocate(64, stream=s)  # not an IPC pool
        try:
            plain.export_handle()
        except ValueError as exc:
            assert "ipc=True" in str(exc), exc
        else:
            raise AssertionError("an allocation of a pool without ipc=True was exported")
        plain.close()
        parent, child = socket.socketpair()
        code = textwrap.dedent('''
            import socket, sys, warnings
            warnings.simplefilter("error")
            import numpy as np
            import cudriver as cu
            sock = socket.socket(fileno=int(sys.argv[1]))
            msg, fds, _flags, _addr = socket.recv_fds(sock, 64, 1)
            cu.Device(0).primary_context().set_current()
            pool = cu.MemoryPool.import_handle(fds[0], 0)
            b = cu.DeviceBuffer.import_handle(msg, 4096, pool=pool)
            assert type(b) is cu.DeviceBuffer and b.owned and b.nbytes == 4096
            assert b.device is cu.Device(0)
            pool.close()  # the buffer keeps the pool
            got = b.copy_to().view(np.uint32)
            assert (got == np.arange(1024, dtype=np.uint32)).all(), got[:8]
            b.copy_from(np.full(1024, 7, np.uint32))
            b.close()
            sock.sendall(b"done")
        ''')
        proc = subprocess.Popen([sys.executable, "-c", code, str(child.fileno())],
                                pass_fds=[child.fileno()])
        socket.send_fds(parent, [data], [fd])
        assert parent.recv(4) == b"done"
        assert proc.wait(60) == 0
        os.close(fd)
        out = buf.copy_to(stream=s)
        s.synchronize()
        assert (out.view(np.uint32) == 7).all()
        print("OK")
        """
    )


@pytest.mark.gpu
def test_a_pool_is_destroyed_only_after_the_frees_into_it_have_run() -> None:
    # Destroying a pool with frees into it still pending crashed the driver under
    # concurrent use (see the next test), so the release waits for them: on the
    # streams that allocated from the pool, whatever their context.
    run_isolated(
        """
        ctx = make_current()
        (spin_fill,) = kernels("spin_fill")
        s = cu.Stream(non_blocking=True)
        pool = cu.MemoryPool()
        b = cu.DeviceBuffer(4, stream=s, pool=pool)
        spin_fill.launch(s, 1, 1, b, np.uint32(7), 1, 200_000_000)
        b.close()  # the free runs after the kernel
        assert not s.query()
        pool.close()
        assert s.query(), "close() returned with the free into the pool pending"

        other = cu.Context.create(ctx.device)
        with other:
            (spin2,) = kernels("spin_fill")
            s2 = cu.Stream(non_blocking=True)
        pool2 = cu.MemoryPool()  # made in the primary context
        b2 = cu.DeviceBuffer(4, stream=s2, pool=pool2)  # allocated in the other one
        with other:
            spin2.launch(s2, 1, 1, b2, np.uint32(7), 1, 200_000_000)
        b2.close()
        assert not s2.query()
        pool2.close()
        assert s2.query(), "close() did not wait for the other context's free"

        # A context destroyed before the pool is skipped, without a warning.
        third = cu.Context.create(ctx.device)
        with third:
            s3 = cu.Stream()
        pool3 = cu.MemoryPool()
        b3 = cu.DeviceBuffer(4, stream=s3, pool=pool3)
        b3.close()
        s3.close()
        third.close()
        assert third.closed
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            pool3.close()
        assert not seen, [str(w.message) for w in seen]
        other.close()

        # A stream that allocated from a pool and is closed first returns at once and
        # is destroyed after the pool, which still waits for the free on it.
        s4 = cu.Stream(non_blocking=True)
        pool4 = cu.MemoryPool()
        b4 = cu.DeviceBuffer(4, stream=s4, pool=pool4)
        spin_fill.launch(s4, 1, 1, b4, np.uint32(7), 1, 200_000_000)
        done = cu.Event()
        done.record(s4)
        b4.close()
        s4.close()
        assert not done.query(), "closing the stream waited for its work"
        pool4.close()
        assert done.query(), "the pool was destroyed with the free on a closed stream pending"
        from cudriver._lifetime import _handle
        from cudriver._lifetime import _release
        assert _handle.pending_releases() == 0, _release.describe_pending()  # stream went too
        print("OK")
        """
    )


@pytest.mark.gpu
def test_a_closed_pool_is_refused_and_closing_races_allocations() -> None:
    # The compiled constructor allocates from the pool in C with the pool pinned: a
    # close() on another thread never destroys it under an allocation, and buffers
    # already made keep it alive until they are freed. Their frees have run before
    # the pool is destroyed: without that wait, this crashed inside the driver.
    run_isolated(
        """
        ctx = make_current()
        s = cu.Stream()
        pool = cu.MemoryPool()
        pool.close()
        try:
            cu.DeviceBuffer(4096, stream=s, pool=pool)
        except cu.ClosedError:
            pass
        else:
            raise AssertionError("a closed pool allocated")
        box = {"pool": cu.MemoryPool()}
        made = [0]

        def user(stop):
            ctx.set_current()
            mine = cu.Stream()
            while not stop.is_set():
                try:
                    b = cu.DeviceBuffer(65536, stream=mine, pool=box["pool"])
                except cu.ClosedError:
                    continue
                b.fill(made[0] & 0xFF)
                b.close()
                made[0] += 1
            mine.synchronize()

        def closer(stop):
            ctx.set_current()
            while not stop.is_set():
                old, box["pool"] = box["pool"], cu.MemoryPool()
                old.close()

        run_threads([user, user, user, closer])
        assert made[0] > 100, made
        box["pool"].close()
        ctx.synchronize()
        print("made", made[0])
        print("OK")
        """
    )
