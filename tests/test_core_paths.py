"""The compiled fast paths against their slow paths, and the faults they must survive.

A compiled method and the slow path it falls back to must give the same result or the
same error for every input, and the C host-function trampoline must survive exceptions,
several threads, and exit while host functions are still queued.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import cudriver as cu

from ._support import AXPY_KERNEL, load_kernels
from .test_safety import run_isolated


def _outcome(call: Callable[[], Any]) -> tuple[str, str]:
    try:
        r = call()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return "returned", repr(r)


def _same(compiled: Callable[..., Any], slow: Callable[..., Any], *args: Any, **kw: Any) -> None:
    a = _outcome(lambda: compiled(*args, **kw))
    b = _outcome(lambda: slow(*args, **kw))
    assert a == b, (args, kw)


@pytest.mark.gpu
def test_memory_operations_fall_back_with_the_same_errors(ctx: cu.Context) -> None:
    s = cu.Stream(context=ctx)
    buf = cu.DeviceBuffer(64)
    buf.fill(0)
    closed = cu.DeviceBuffer(64)
    closed.close()
    try:
        bad: list[tuple[Any, Any]] = [
            (buf.ptr + 2, 1),  # misaligned
            (buf, -1),  # value out of range
            (buf, 1 << 32),
            (buf, True),  # a bool is not a value
            (buf, 1.0),
            (closed, 1),
            (0, 1),  # NULL
            ((buf, 62), 1),  # beyond the end
            ("nonsense", 1),
        ]
        # (No case may enqueue a wait that is not already satisfied: the stream would
        # never drain.)
        bad64: list[tuple[Any, Any]] = [
            (buf.ptr + 4, 1),  # misaligned for 8 bytes
            (buf, -1),
            (buf, 1 << 64),
            (buf, True),
            (closed, 1),
            ((buf, 60), 1),  # beyond the end
            ("nonsense", 1),
        ]
        s.write_value64(buf, 0)  # the first call reads the device's 64-bit capability
        for addr, value in bad:
            _same(cu.Stream.write_value32, cu.Stream._write_value32_slow, s, addr, value)
            _same(cu.Stream.wait_value32, cu.Stream._wait_value32_slow, s, addr, value)
        for addr, value in bad64:
            _same(cu.Stream.write_value64, cu.Stream._write_value64_slow, s, addr, value)
            _same(cu.Stream.wait_value64, cu.Stream._wait_value64_slow, s, addr, value)
        for cond in (None, 7, -1, "GEQ", cu.WaitCondition.GEQ):  # waits for >= 0: satisfied
            _same(cu.Stream.wait_value32, cu.Stream._wait_value32_slow, s, buf, 0, cond)
            _same(cu.Stream.wait_value64, cu.Stream._wait_value64_slow, s, buf, 0, cond)
        # The fast paths write what the slow ones do.
        for write, width, dtype in (
            (cu.Stream.write_value32, 4, np.uint32),
            (cu.Stream._write_value32_slow, 4, np.uint32),
            (cu.Stream.write_value64, 8, np.uint64),
            (cu.Stream._write_value64_slow, 8, np.uint64),
        ):
            big = (1 << (8 * width)) - 3
            write(s, (buf, 8), big)
            s.synchronize()
            assert int(buf.copy_to()[8 : 8 + width].view(dtype)[0]) == big
        s.synchronize()
    finally:
        buf.close()
        s.close()


@pytest.mark.gpu
def test_launches_fall_back_with_the_same_errors(ctx: cu.Context) -> None:
    k = load_kernels(ctx, AXPY_KERNEL, "axpy")["axpy"]
    s = cu.Stream(context=ctx)
    x = cu.DeviceBuffer.from_array(np.ones(32, np.float32))
    y = cu.DeviceBuffer.from_array(np.zeros(32, np.float32))
    closed_buf = cu.DeviceBuffer(128)
    closed_buf.close()
    closed_stream = cu.Stream(context=ctx)
    closed_stream.close()
    try:
        k.launch(s, 1, 32, 1.0, x, y, 32)  # learn the layout
        cases: list[tuple[Any, ...]] = [
            (s, 0, 32, 1.0, x, y, 32),  # grid 0
            (s, 1, (32, 1, 1, 1), 1.0, x, y, 32),
            (s, 1, 32, 1.0, x, y),  # too few arguments
            (s, 1, 32, "a", x, y, 32),
            (s, 1, 32, 1.0, x, y, 1 << 40),  # does not fit an int
            (s, 1, 32, 1e300, x, y, 32),  # does not fit a float
            (s, 1, 32, 1.0, closed_buf, y, 32),
            (closed_stream, 1, 32, 1.0, x, y, 32),
            ("stream", 1, 32, 1.0, x, y, 32),
            (None, 1, 32, 1.0, x, y, 32),  # the stream rule: None names Stream.legacy()
            (s, 1, 1 << 20, 1.0, x, y, 32),  # too many threads: the driver refuses
            (s, cu.LaunchConfig(grid=1, block=32), 1.0, x, y),  # too few, config form
            (s, cu.LaunchConfig(priority=0), 1.0, x, y, 32),  # a config without a shape
        ]
        for args in cases:
            _same(cu.Kernel.launch, cu.Kernel._launch_slow, k, *args)
        _same(cu.Kernel.launch, cu.Kernel._launch_slow, k, *cases[0], shared_mem=-1)
        _same(cu.Kernel.launch, cu.Kernel._launch_slow, k, s, 1, 32, 1.0, x, y, 32, shared_mem=1.5)
        plan = k.prepare(1, 32, 1.0, x, y, 32)
        for st in (closed_stream, "stream", 3.0, None):
            _same(cu.LaunchPlan.launch, cu.LaunchPlan._launch_slow, plan, st)
        ev = cu.Event()
        for st in (closed_stream, "stream", -1, None):
            _same(cu.Event.record, cu.Event._record_slow, ev, st)
        for other in (closed_stream, "x", 5.0):
            _same(cu.Stream.wait, cu.Stream._wait_slow, s, other)
        _same(cu.Stream.record, cu.Stream._record_slow, s, "event")
        s.synchronize()
        # The fast path packs exactly what the slow one does.
        y.fill(0)
        for args in ((2.0, x, y, 32), (np.float32(2.0), x, y, np.int32(32))):
            k.launch(s, 1, 32, *args)
            k._launch_slow(s, 1, 32, *args)
        got = np.empty(32, np.float32)
        y.copy_to(got)
        assert (got == 8.0).all()
    finally:
        for o in (x, y, s):
            o.close()


@pytest.mark.gpu
def test_configured_launches_run_in_c_with_the_slow_results(
    ctx: cu.Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    k = load_kernels(ctx, AXPY_KERNEL, "axpy")["axpy"]
    s = cu.Stream(context=ctx)
    x = cu.DeviceBuffer.from_array(np.ones(64, np.float32))
    y = cu.DeviceBuffer.from_array(np.zeros(64, np.float32))
    closed_stream = cu.Stream(context=ctx)
    closed_stream.close()
    cfg = cu.LaunchConfig(priority=0, mem_sync_domain=0)
    try:
        k.launch(s, 2, 32, 1.0, x, y, 64)  # learn the layout
        fallbacks: list[str] = []
        real, real_plan = cu.Kernel._launch_slow, cu.LaunchPlan._launch_slow

        def counted(*a: Any, **kw: Any) -> Any:
            fallbacks.append("launch")
            return real(*a, **kw)

        def counted_plan(*a: Any, **kw: Any) -> Any:
            fallbacks.append("plan")
            return real_plan(*a, **kw)

        monkeypatch.setattr(cu.Kernel, "_launch_slow", counted)
        monkeypatch.setattr(cu.LaunchPlan, "_launch_slow", counted_plan)
        k.launch(s, 2, 32, 2.0, x, y, 64, config=cfg)
        plan = k.prepare(2, 32, 3.0, x, y, 64, config=cfg)
        plan.launch(s)
        s.synchronize()
        assert fallbacks == []  # both went through cuLaunchKernelEx in C
        assert (y.copy_to().view(np.float32) == 6.0).all()  # 1 + 2 + 3
        # A config with the shape, in place of grid and block: the slow path takes the
        # shape from it once, then the launch runs in C with the config's attributes.
        shaped = cu.LaunchConfig(grid=2, block=32, priority=0)
        k.launch(s, shaped, 1.0, x, y, 64)
        s.synchronize()
        assert fallbacks == ["launch"]
        assert (y.copy_to().view(np.float32) == 7.0).all()
        monkeypatch.undo()
        cases: list[tuple[Any, dict[str, Any]]] = [
            ((closed_stream, 2, 32, 1.0, x, y, 64), {"config": cfg}),
            ((s, 2, 32, 1.0, x, y), {"config": cfg}),
            ((s, 2, 32, 1.0, x, y, 64), {"config": "cluster"}),
            ((s, 2, 32, 1.0, x, y, 64), {"config": shaped}),  # a shape goes in their place
            ((None, 2, 32, 1.0, x, y, 64), {"config": cfg}),
            ((s, 2, 1 << 20, 1.0, x, y, 64), {"config": cfg}),  # refused by the driver
        ]
        if ctx.device.compute_capability >= (9, 0):
            cases.append(((s, 3, 32, 1.0, x, y, 64), {"config": cu.LaunchConfig(cluster=2)}))
        for args, kw in cases:
            _same(cu.Kernel.launch, cu.Kernel._launch_slow, k, *args, **kw)
        for st in (closed_stream, "stream", None):
            _same(cu.LaunchPlan.launch, cu.LaunchPlan._launch_slow, plan, st)
        s.synchronize()
    finally:
        for o in (x, y, s):
            o.close()


_BUFFER_FIELDS = (
    "_nbytes",
    "_context",
    "_stream",
    "_stream_int",
    "_sync_h",
    "_dtype",
    "_shape",
    "_base",
    "_offset",
    "_views",
    "_owned",
    "_owner",
    "_finalizer",
)


def _slow_buffer(nbytes: int, **kw: Any) -> cu.DeviceBuffer:
    b = cu.DeviceBuffer.__new__(cu.DeviceBuffer)
    cu.DeviceBuffer._init_slow(b, nbytes, **kw)
    return b


@pytest.mark.gpu
def test_buffers_from_the_compiled_constructor_match_the_slow_ones(ctx: cu.Context) -> None:
    s = cu.Stream(context=ctx)
    try:
        for kw in ({}, {"stream": s}):
            a = cu.DeviceBuffer(4096, **kw)
            b = _slow_buffer(4096, **kw)
            try:
                for f in _BUFFER_FIELDS:
                    assert getattr(a, f) == getattr(b, f), (kw, f)
                sa, sb = a._state, b._state
                for f in ("func", "kind", "pid", "closing", "used_on", "leases", "dependants"):
                    assert getattr(sa, f) == getattr(sb, f), (kw, f)
                assert [type(k) for k in sa.keep] == [type(k) for k in sb.keep]
                assert sa.keep == sb.keep and sa.deps == sb.deps
                assert isinstance(sa.handle, type(sb.handle))
                a.fill(7, **kw)
                b.copy_from(a, **kw)
                s.synchronize()
                assert (b.copy_to() == 7).all()
            finally:
                a.close()
                b.close()
            assert a.closed and a._state.handle is None  # released at once
        s.synchronize()
        bad: list[tuple[Any, dict[str, Any]]] = [
            (0, {}),
            (-1, {}),
            (1.5, {}),
            (True, {}),
            (1 << 64, {}),
            (16, {"stream": "s"}),
            (16, {"context": "c"}),
            (1 << 60, {}),  # out of memory
            (1 << 60, {"stream": s}),
        ]
        for n, kw in bad:
            _same(cu.DeviceBuffer, _slow_buffer, n, **kw)
    finally:
        s.close()


@pytest.mark.gpu
def test_compiled_methods_refuse_inside_host_functions(stream: cu.Stream) -> None:
    seen: list[str] = []

    def inside() -> None:
        for call in (stream.query, stream.synchronize, lambda: stream.write_value32(8, 1)):
            try:
                call()
            except cu.NotPermittedError:
                seen.append("refused")

    stream.launch_host_func(inside)
    stream.synchronize()
    assert seen == ["refused"] * 3


@pytest.mark.gpu
def test_memory_operations_on_stream_ordered_memory_are_refused(ctx: cu.Context) -> None:
    # The driver refuses them (measured: CUDA 13.0), so no stream-ordered free ever
    # needs ordering after a memory operation on another stream.
    s = cu.Stream(context=ctx)
    buf = cu.DeviceBuffer(64, stream=s)
    try:
        with pytest.raises(cu.InvalidValueError, match="cuStreamWriteValue32"):
            s.write_value32(buf, 1)
        with pytest.raises(cu.InvalidValueError, match="cuStreamWaitValue32"):
            s.wait_value32(buf, 0)
        s.synchronize()
    finally:
        buf.close()
        s.close()


@pytest.mark.gpu
def test_exit_with_host_functions_still_queued_does_not_crash() -> None:
    # The host functions run on the driver's thread after the kernel: by then the
    # interpreter may be finalising. The process must end cleanly either way.
    run_isolated(
        """
        make_current()
        (spin_fill,) = kernels("spin_fill")
        s = cu.Stream(non_blocking=True)
        buf = cu.DeviceBuffer(4)
        ran = []
        spin_fill.launch(s, 1, 1, buf, np.uint32(1), 1, 300_000_000)
        for i in range(20):
            s.launch_host_func(ran.append, i)
        print("OK")
        """
    )


@pytest.mark.gpu
def test_host_functions_from_many_threads_run_once_and_report_errors() -> None:
    run_isolated(
        """
        make_current()
        counts = [0] * 8

        def bump(i):
            counts[i] += 1
            if counts[i] % 50 == 0:
                raise ValueError(f"thread {i} at {counts[i]}")

        failed = []

        def worker(i):
            try:
                make_current()
                s = cu.Stream(non_blocking=True)
                errors = 0
                for _ in range(4):
                    for _ in range(50):
                        s.launch_host_func(bump, i)
                    try:
                        s.synchronize()
                    except cu.HostCallbackError as e:
                        assert isinstance(e.__cause__, ValueError)
                        errors += len(e.errors)
                s.close()
                assert errors == 4, errors
            except BaseException as exc:
                failed.append(repr(exc))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
            assert not t.is_alive()
        assert not failed, failed
        assert counts == [200] * 8, counts
        print("OK")
        """
    )


@pytest.mark.gpu
def test_closing_what_another_thread_is_waiting_on_does_not_crash() -> None:
    # Measured: destroying an event another thread waits on in cuEventSynchronize
    # crashed the process. A wait pins its object; the close() releases it afterwards.
    run_isolated(
        """
        ctx = make_current()
        (spin_fill,) = kernels("spin_fill")
        spin = cu.DeviceBuffer(4)
        box = {"s": cu.Stream(non_blocking=True), "e": cu.Event(timing=False)}
        waits = [0]

        def waiter(stop):
            ctx.set_current()
            while not stop.is_set():
                s, e = box["s"], box["e"]
                for wait in (s.synchronize, e.synchronize):
                    try:
                        wait()
                        waits[0] += 1
                    except cu.ClosedError:
                        pass

        def closer(stop):
            ctx.set_current()
            while not stop.is_set():
                s = cu.Stream(non_blocking=True)
                e = cu.Event(timing=False)
                spin_fill.launch(s, 1, 1, spin, np.uint32(1), 1, 200_000)
                e.record(s)
                old_s, old_e = box["s"], box["e"]
                box["s"], box["e"] = s, e
                old_e.close()
                old_s.close()

        run_threads([waiter, waiter, waiter, closer])
        assert waits[0] > 100, waits
        ctx.synchronize()
        print("OK")
        """
    )


@pytest.mark.gpu
def test_closing_what_another_thread_is_enqueuing_on_does_not_crash() -> None:
    # Measured: closing a stream while another thread was inside a launch, record,
    # memory operation or capture query on it crashed the process. Every call that
    # hands a handle to the driver pins it; a close() meanwhile releases it when the
    # call returns. The only error the users may see is ClosedError (never an
    # invalid-handle error from the driver).
    run_isolated(
        """
        ctx = make_current()
        image = cu.compile(FILL, arch=cu.Device(0), target="cubin")

        def generation():
            s = cu.Stream(non_blocking=True)
            module = cu.Module.load(image)
            k = module.kernel("fill")
            buf = cu.DeviceBuffer(64)
            with s.capture() as g:
                k.launch(s, 1, 1, buf, np.uint32(2), 1)
            exe = g.instantiate()
            plan = k.prepare(1, 1, buf, np.uint32(3), 1)
            return dict(s=s, e=cu.Event(timing=False), module=module, k=k, buf=buf,
                        exe=exe, plan=plan)

        box = generation()
        calls = [0]

        def user(stop):
            ctx.set_current()
            while not stop.is_set():
                b = box
                s, e, k, buf, exe, plan = (b["s"], b["e"], b["k"], b["buf"], b["exe"],
                                           b["plan"])
                ops = (
                    lambda: k.launch(s, 1, 1, buf, np.uint32(1), 1),
                    lambda: plan.launch(s),
                    lambda: exe.launch(s),
                    lambda: exe.upload(s),
                    lambda: e.record(s),
                    lambda: s.record(e),
                    lambda: s.wait(e),
                    e.query,
                    s.query,
                    lambda: s.write_value32(buf, 1),
                    lambda: s.wait_value32(buf, 0),
                    lambda: s.launch_host_func(len, ()),
                    s.synchronize,
                    e.synchronize,
                    lambda: buf.fill(0, stream=s),
                    lambda: buf.copy_from(np.zeros(16, np.uint32), stream=s),
                    lambda: s.priority,
                    lambda: s.capture_status,
                    lambda: k.max_threads_per_block,
                )
                for op in ops:
                    try:
                        op()
                    except cu.ClosedError:
                        pass
                    calls[0] += 1

        def closer(stop):
            global box
            ctx.set_current()
            while not stop.is_set():
                old, box = box, generation()
                for name in ("plan", "exe", "e", "buf", "module", "s"):
                    o = old[name]
                    if hasattr(o, "close"):
                        o.close()
                del old

        run_threads([user, user, user, closer])
        assert calls[0] > 1000, calls
        ctx.synchronize()
        print("calls", calls[0])
        print("OK")
        """
    )
