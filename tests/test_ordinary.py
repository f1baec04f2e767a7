"""Ordinary programs that must not hang, stall, lose a capture or keep memory.

Each scenario is short code a user writes. Those that could hang run in their own
process with a deadline and ``faulthandler`` armed (``run_isolated``), under CUDA's
default lazy module loading.
"""

from __future__ import annotations

import pytest

from .test_safety import run_isolated

# A scenario that hangs is cut short by faulthandler well before the suite's own limit.
QUICK = 60

# -- hangs ------------------------------------------------------------------------------


@pytest.mark.gpu
def test_kernel_obtained_after_a_wait_on_a_later_write_does_not_hang() -> None:
    # Under lazy loading, getting a kernel loads its code and that load waits for the
    # device, which waits for a write enqueued after the kernel. Module.load is eager
    # by default, so nothing is loaded after the module is.
    run_isolated(
        """
        make_current()
        module = cu.Module.load(cu.compile(FILL, arch=cu.Device(0), target="cubin"))
        a, b = cu.Stream(), cu.Stream()
        flag = cu.DeviceBuffer(64)
        flag.fill(0)
        buf = cu.DeviceBuffer.from_array(np.zeros(32, np.uint32))
        b.wait_value32(flag, 1)
        module.kernel("fill").launch(b, 1, 32, buf, np.uint32(7), 32)
        module.kernel("spin_fill").launch(a, 1, 1, flag, np.uint32(0), 0, 5_000_000)
        a.write_value32(flag, 1)
        b.synchronize()
        assert (buf.copy_to().view(np.uint32) == 7).all()
        print("OK")
        """,
        timeout=QUICK,
    )


@pytest.mark.gpu
def test_lazy_module_loads_only_the_kernels_asked_for() -> None:
    run_isolated(
        """
        from cuda.bindings import driver as raw
        make_current()
        image = cu.compile(FILL, arch=cu.Device(0), target="cubin")
        loaded = raw.CUfunctionLoadingState.CU_FUNCTION_LOADING_STATE_LOADED

        def states(module):
            h = module.handle
            n = cu.check(raw.cuModuleGetFunctionCount(h), "cuModuleGetFunctionCount")
            fns = cu.check(raw.cuModuleEnumerateFunctions(n, h), "cuModuleEnumerateFunctions")
            names = [cu.Kernel.from_handle(f).name for f in fns]
            return {nm: cu.check(raw.cuFuncIsLoaded(f), "cuFuncIsLoaded") == loaded
                    for nm, f in zip(names, fns)}

        assert states(cu.Module.load(image)) == {"fill": True, "spin_fill": True}
        lazy = cu.Module.load(image, eager=False)
        assert states(lazy) == {"fill": False, "spin_fill": False}
        lazy.kernel("fill")
        assert states(lazy) == {"fill": True, "spin_fill": False}
        print("OK")
        """,
        timeout=QUICK,
    )


@pytest.mark.gpu
def test_graph_exec_with_host_nodes_dropped_with_launches_in_flight() -> None:
    run_isolated(
        """
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        gate = cu.PinnedBuffer(64)
        word = gate.array(np.uint32)
        word[:] = 0
        buf = cu.DeviceBuffer(1024)
        calls = []
        with s.capture() as g:
            fill.launch(s, 1, 256, buf, np.uint32(3), 256)
            s.launch_host_func(calls.append, 1)
        exe = g.instantiate()
        s.wait_value32(gate, 1)
        timer = threading.Timer(0.3, word.__setitem__, (0, 1))
        timer.start()
        for _ in range(100):
            exe.launch(s)
        del exe, g
        gc.collect()
        s.synchronize()
        timer.join()
        assert len(calls) == 100, len(calls)
        assert (buf.copy_to().view(np.uint32)[:256] == 3).all()
        print("OK")
        """,
        timeout=QUICK,
    )


@pytest.mark.gpu
def test_graph_exec_closed_with_blocked_launches_returns_at_once() -> None:
    # close() must not wait for launches the device has not reached: here they wait on
    # a gate that only this thread opens, after the close.
    run_isolated(
        """
        import time
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        gate = cu.PinnedBuffer(64)
        word = gate.array(np.uint32)
        word[:] = 0
        buf = cu.DeviceBuffer(1024)
        calls = []
        with s.capture() as g:
            fill.launch(s, 1, 256, buf, np.uint32(4), 256)
            s.launch_host_func(calls.append, 1)
        exe = g.instantiate()
        s.wait_value32(gate, 1)
        for _ in range(10):
            exe.launch(s)
        t0 = time.monotonic()
        exe.close()
        g.close()
        del buf
        gc.collect()
        took = time.monotonic() - t0
        word[0] = 1
        s.synchronize()
        assert took < 5, took
        assert len(calls) == 10, len(calls)
        print("OK")
        """,
        timeout=QUICK,
    )


# -- stalls -----------------------------------------------------------------------------


@pytest.mark.gpu
def test_a_blocked_host_function_stalls_only_its_own_stream() -> None:
    run_isolated(
        """
        import time
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        other = cu.Stream()
        buf = cu.DeviceBuffer(1024)
        release = threading.Event()
        s.launch_host_func(release.wait, 30)
        try:
            fill.launch(other, 1, 256, buf, np.uint32(9), 256)
            ev = other.record()
            deadline = time.monotonic() + 10
            while not ev.query():
                assert time.monotonic() < deadline, "the other stream stalled"
                time.sleep(0.001)
        finally:
            release.set()
        s.synchronize()
        print("OK")
        """,
        timeout=QUICK,
    )


@pytest.mark.gpu
def test_a_blocked_host_function_does_not_stall_a_module_load() -> None:
    # Loading and first use of a module while a host function blocks its stream.
    run_isolated(
        """
        import time
        make_current()
        s = cu.Stream()
        other = cu.Stream()
        buf = cu.DeviceBuffer(1024)
        release = threading.Event()
        s.launch_host_func(release.wait, 30)
        try:
            (fill,) = kernels("fill")
            fill.launch(other, 1, 256, buf, np.uint32(9), 256)
            ev = other.record()
            deadline = time.monotonic() + 10
            while not ev.query():
                assert time.monotonic() < deadline, "the other stream stalled"
                time.sleep(0.001)
        finally:
            release.set()
        s.synchronize()
        print("OK")
        """,
        timeout=QUICK,
    )


# -- captures and the legacy stream -----------------------------------------------------


@pytest.mark.gpu
def test_threads_capturing_and_copying_do_not_break_each_other() -> None:
    run_isolated(
        """
        make_current()
        (fill,) = kernels("fill")
        failed = []

        def work(i):
            try:
                make_current()
                s = cu.Stream()
                b = cu.DeviceBuffer.from_array(np.zeros(256, np.uint32))
                for j in range(30):
                    with s.capture() as g:
                        fill.launch(s, 1, 256, b, np.uint32(i * 100 + j), 256)
                        s.launch_host_func(lambda: None)
                    exe = g.instantiate()
                    exe.launch(s)
                    exe.launch(s)
                    s.synchronize()
                    got = b.copy_to()
                    assert (got == i * 100 + j).all(), (i, j, np.unique(got))
                    exe.close()
                    g.close()
            except BaseException as exc:
                failed.append(repr(exc))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
            assert not t.is_alive()
        assert not failed, failed[:3]
        print("OK")
        """,
        timeout=QUICK + 30,
    )


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["GLOBAL", "THREAD_LOCAL"])
def test_releases_of_dropped_objects_never_break_a_capture(mode: str) -> None:
    # One thread drops buffers (stream-ordered ones after their stream was closed,
    # plain ones, pinned ones) in reference cycles, so their releases run on the
    # releasing thread at any moment; another thread captures all the while. The
    # dropping thread allocates too, which a GLOBAL capture forbids to threads not
    # in RELAXED mode: it says RELAXED, as a program that allocates beside such a
    # capture must; the releases themselves are cudriver's to keep out of the way.
    run_isolated(
        f"""
        make_current()
        (fill,) = kernels("fill")
        stop = threading.Event()
        failed = []

        def drop():
            try:
                make_current()
                cu.driver.cuThreadExchangeStreamCaptureMode(
                    cu.driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
                )
                while not stop.is_set():
                    s = cu.Stream()
                    a = cu.DeviceBuffer(1 << 16, stream=s)
                    a.fill(1, stream=s)
                    b = cu.DeviceBuffer(1 << 16)
                    h = cu.PinnedBuffer(4096)
                    s.close()
                    cycle = [a, b, h]
                    cycle.append(cycle)
                    del a, b, h, cycle, s
                    gc.collect()
            except BaseException as exc:
                failed.append(repr(exc))

        t = threading.Thread(target=drop)
        t.start()
        try:
            s = cu.Stream()
            out = cu.DeviceBuffer(1024)
            for i in range(300):
                with s.capture(cu.CaptureMode.{mode}) as g:
                    fill.launch(s, 1, 256, out, np.uint32(i), 256)
                exe = g.instantiate()
                exe.launch(s)
                s.synchronize()
                assert out.copy_to().view(np.uint32)[0] == i
        finally:
            stop.set()
            t.join(30)
        assert not t.is_alive()
        assert not failed, failed[:3]
        print("OK")
        """,
        timeout=QUICK,
    )


@pytest.mark.gpu
def test_buffer_operations_stay_ordered_after_blocking_streams_while_another_captures() -> None:
    run_isolated(
        """
        make_current()
        (fill, spin_fill) = kernels("fill", "spin_fill")
        capturing = threading.Event()
        done = threading.Event()
        failed = []

        def capture_elsewhere():
            try:
                make_current()
                c = cu.Stream()
                scratch = cu.DeviceBuffer(1024)
                with c.capture(cu.CaptureMode.THREAD_LOCAL) as g:
                    fill.launch(c, 1, 256, scratch, np.uint32(1), 256)
                    capturing.set()
                    done.wait(30)
                    fill.launch(c, 1, 256, scratch, np.uint32(2), 256)
                assert g.num_nodes == 2
            except BaseException as exc:
                failed.append(repr(exc))
                capturing.set()

        t = threading.Thread(target=capture_elsewhere)
        t.start()
        assert capturing.wait(30)
        try:
            s = cu.Stream()
            assert not s.non_blocking
            assert cu.Stream.legacy().is_capturing is False
            assert cu.Stream.legacy().capture_status is cu.CaptureStatus.NONE
            n = 1 << 16
            buf = cu.DeviceBuffer(4 * n)
            buf.fill(0)
            for v in (6, 7):
                spin_fill.launch(s, n // 256, 256, buf, np.uint32(v), n, 2_000_000)
                got = buf.copy_to().view(np.uint32)  # after the kernel on s
                assert (got == v).all(), np.unique(got)
            host = np.full(n, 11, np.uint32)
            spin_fill.launch(s, n // 256, 256, buf, np.uint32(8), n, 2_000_000)
            buf.copy_from(host)  # after the kernel: 11 wins
            assert (buf.copy_to().view(np.uint32) == 11).all()
        finally:
            done.set()
            t.join(30)
        assert not failed, failed
        print("OK")
        """,
        timeout=QUICK,
    )


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["THREAD_LOCAL", "GLOBAL"])
def test_end_capture_from_another_thread_is_refused_and_the_capture_survives(mode: str) -> None:
    run_isolated(
        f"""
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        buf = cu.DeviceBuffer(1024)
        ref = weakref.ref(buf)
        s.begin_capture(cu.CaptureMode.{mode})
        fill.launch(s, 1, 256, buf, np.uint32(4), 256)
        del buf
        errors = []

        def end_elsewhere():
            make_current()
            try:
                s.end_capture()
            except cu.StreamCaptureError as exc:
                errors.append(exc)

        t = threading.Thread(target=end_elsewhere)
        t.start()
        t.join()
        assert len(errors) == 1 and "another thread" in str(errors[0]), errors
        del errors
        gc.collect()
        assert s.capture_status is cu.CaptureStatus.ACTIVE
        assert ref() is not None
        g = s.end_capture()
        exe = g.instantiate()
        exe.launch(s)
        s.synchronize()
        assert (ref().copy_to().view(np.uint32)[:256] == 4).all()
        print("OK")
        """,
        timeout=QUICK,
    )


# -- captured frees and what graphs keep ------------------------------------------------


@pytest.mark.gpu
def test_stream_ordered_buffer_closed_in_its_capture_becomes_a_free_node() -> None:
    run_isolated(
        """
        make_current()
        s = cu.Stream()
        with s.capture() as g:
            tmp = cu.DeviceBuffer(1 << 20, stream=s)
            tmp.fill(1, stream=s)
            tmp.close()
        assert g.num_nodes == 3, g.num_nodes
        kinds = sorted(n.type.name for n in g.nodes())
        assert kinds == ["MEMSET", "MEM_ALLOC", "MEM_FREE"], kinds
        exe = g.instantiate()
        for _ in range(3):
            exe.launch(s)
        s.synchronize()
        print("OK")
        """,
        timeout=QUICK,
    )


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["GLOBAL", "THREAD_LOCAL", "RELAXED"])
def test_graph_with_a_captured_allocation_and_free_relaunches(mode: str) -> None:
    run_isolated(
        f"""
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        n = 256
        src = np.arange(n, dtype=np.uint32)
        pin = cu.PinnedBuffer(4 * n)
        pin.array(np.uint32)[:] = src
        out = cu.PinnedBuffer(4 * n)
        with s.capture(cu.CaptureMode.{mode}) as g:
            tmp = cu.DeviceBuffer(4 * n, stream=s)
            tmp.copy_from(pin, stream=s)
            for v in (1, 2, 3):
                fill.launch(s, 1, 256, tmp, np.uint32(v), n // 2)
            tmp.copy_to(out, stream=s)
            tmp.close()
        exe = g.instantiate()
        exe.upload(s)
        for _ in range(3):
            out.array(np.uint32)[:] = 0
            exe.launch(s)
            s.synchronize()
            got = out.array(np.uint32)
            assert (got[: n // 2] == 3).all() and (got[n // 2 :] == src[n // 2 :]).all()
        print("OK")
        """,
        timeout=QUICK,
    )


@pytest.mark.gpu
def test_what_a_graph_kept_goes_with_the_last_executable_graph() -> None:
    run_isolated(
        """
        import time
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        buf = cu.DeviceBuffer(1024)
        src = cu.DeviceBuffer(1024)
        dst = cu.DeviceBuffer(1024)
        flag = cu.DeviceBuffer(64)
        plan = fill.prepare(1, 256, buf, np.uint32(5), 256)

        class Marker:
            pass

        marker = Marker()
        with s.capture() as g:
            fill.launch(s, 1, 256, buf, np.uint32(4), 256)
            s.launch_host_func(lambda m=marker: None)
            s.write_value32(flag, 1)
            dst.copy_from(src, stream=s)
            plan.launch(s)
        exe = g.instantiate()
        refs = [weakref.ref(o) for o in (buf, src, dst, flag, plan, marker)]
        del buf, src, dst, flag, plan, marker, g
        gc.collect()
        for _ in range(20):
            exe.launch(s)
        s.synchronize()
        assert refs[0]() is not None  # the graph keeps buf
        del exe
        gc.collect()
        # No later cudriver call: the releasing thread lets go of what the graph kept.
        deadline = time.monotonic() + 10
        while any(r() is not None for r in refs) and time.monotonic() < deadline:
            time.sleep(0.001)
        alive = [r() for r in refs if r() is not None]
        assert not alive, alive
        print("OK")
        """,
        timeout=QUICK,
    )


@pytest.mark.gpu
def test_a_plain_capture_lets_go_of_its_kernel_and_marker() -> None:
    run_isolated(
        """
        import time
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        buf = cu.DeviceBuffer(1024)

        class Marker:
            pass

        marker = Marker()
        with s.capture() as g:
            fill.launch(s, 1, 256, buf, np.uint32(4), 256)
            s.launch_host_func(lambda m=marker: None)
        exe = g.instantiate()
        refs = [weakref.ref(buf), weakref.ref(marker)]
        del buf, marker, g
        exe.launch(s)
        s.synchronize()
        del exe
        gc.collect()
        deadline = time.monotonic() + 10
        while any(r() is not None for r in refs) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert all(r() is None for r in refs), [r() for r in refs]
        print("OK")
        """,
        timeout=QUICK,
    )


@pytest.mark.gpu
def test_a_buffer_never_advertises_a_destroyed_stream() -> None:
    run_isolated(
        """
        from cuda.bindings import driver as raw
        make_current()
        s2 = cu.Stream()
        b = cu.DeviceBuffer(64, stream=s2)
        named = b.__cuda_array_interface__["stream"]
        assert named == int(s2.handle)
        s2.synchronize()
        s2.close()
        del s2
        gc.collect()
        # The buffer keeps its stream's handle until it is freed there: still named,
        # still a live stream.
        st = b.__cuda_array_interface__["stream"]
        assert st == named
        assert raw.cuStreamQuery(raw.CUstream(st))[0] == raw.CUresult.CUDA_SUCCESS
        try:
            b.fill(3)  # its default queue is the closed Stream
        except cu.ClosedError as exc:
            assert "stream" in str(exc)
        else:
            raise AssertionError("a closed stream was used")
        other = cu.Stream()
        b.fill(3, stream=other)
        out = np.zeros(64, np.uint8)
        b.copy_to(out, stream=other)
        other.synchronize()
        assert (out == 3).all()
        b.close()
        gc.collect()
        print("OK")
        """,
        timeout=QUICK,
    )
