"""Memory pools: creation, release threshold, statistics, trim, access, IPC."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import cudriver as cu
from cudriver import _handle
from cudriver import pool as pool_module
from cudriver._bindings import SUCCESS

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
    monkeypatch.setattr(pool_module, "_cuStreamQuery", lambda h: (SUCCESS if h in idle else None,))
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
            _handle._queue_if_free(st)  # type: ignore[arg-type]
    _handle.settle()
    assert _handle.pending_releases() == 0


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
        buf = cu.DeviceBuffer(4096, stream=s, pool=pool)
        buf.copy_from(np.arange(1024, dtype=np.uint32), stream=s)
        s.synchronize()
        fd = pool.export_handle()
        data = pool.export_pointer(buf)
        parent, child = socket.socketpair()
        code = textwrap.dedent('''
            import socket, sys
            import numpy as np
            import cudriver as cu
            sock = socket.socket(fileno=int(sys.argv[1]))
            msg, fds, _flags, _addr = socket.recv_fds(sock, 64, 1)
            cu.Device(0).primary_context().set_current()
            pool = cu.MemoryPool.import_handle(fds[0], 0)
            b = pool.import_pointer(msg, 4096)
            got = b.copy_to().view(np.uint32)
            assert (got == np.arange(1024, dtype=np.uint32)).all(), got[:8]
            b.copy_from(np.full(1024, 7, np.uint32))
            b.close()
            pool.close()
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
        from cudriver import _handle
        assert _handle.pending_releases() == 0  # and the stream went after the pool
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
