"""Faults and misuse: each scenario that could crash or hang runs in its own process.

Every scenario is a script run with a deadline and ``faulthandler`` armed: a crash shows
as a signal exit status, a hang as the traceback faulthandler dumps before it kills the
process. The test asserts the exit status and that the script reached its end.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import cudriver as cu

TIMEOUT = 90  # seconds for one scenario, start-up and kernel compilation included

PRELUDE = """
import faulthandler, gc, os, sys, threading, warnings, weakref
faulthandler.dump_traceback_later({deadline}, exit=True)
warnings.simplefilter("error")
import numpy as np
import cudriver as cu
from cudriver import driver

FILL = r'''
extern "C" __global__ void fill(unsigned* p, unsigned v, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}}
extern "C" __global__ void spin_fill(unsigned* p, unsigned v, int n, long long cycles) {{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {{ }}
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}}
'''


def make_current():
    ctx = cu.Device(0).primary_context()
    ctx.set_current()
    return ctx


def kernels(*names):
    image = cu.compile(FILL, arch=cu.Device(0), target="cubin")
    module = cu.Module.load(image)
    return [module.kernel(n) for n in names]


def run_threads(targets, seconds=3):
    # Run each target(stop) on its own thread for `seconds`, then set `stop`; fail on a
    # thread still alive 30 s later or on any exception in a thread.
    import time
    stop = threading.Event()
    failed = []

    def guarded(fn):
        def run():
            try:
                fn(stop)
            except BaseException as exc:
                failed.append(repr(exc))
        return run

    threads = [threading.Thread(target=guarded(fn)) for fn in targets]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    assert not failed, failed
"""


def run_isolated(body: str, *, env: dict[str, str] | None = None, timeout: float = TIMEOUT) -> str:
    """Run ``body`` (after PRELUDE) in a fresh interpreter; return its stdout.

    Fails the test on a non-zero exit status (a crash, a hang cut short by
    faulthandler after ``timeout`` less 10 seconds, an exception) or when the script
    did not print ``OK`` last.
    """
    script = PRELUDE.format(deadline=timeout - 10) + textwrap.dedent(body)
    full_env = {**os.environ, **(env or {})}
    full_env.pop("CUDA_MODULE_LOADING", None)  # the driver's default: lazy loading
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit status {proc.returncode}:\n{out[-6000:]}"
    assert proc.stdout.rstrip().endswith("OK"), out[-6000:]
    return proc.stdout


# -- crashes ----------------------------------------------------------------------------


@pytest.mark.gpu
def test_dropping_a_context_keeps_what_was_made_in_it() -> None:
    run_isolated(
        """
        ctx = cu.Device(0).primary_context()
        with ctx:
            s = cu.Stream()
            buf = cu.DeviceBuffer(4096)
            (fill,) = kernels("fill")
        del ctx
        gc.collect()
        # The primary context must still live: the stream, buffer and kernel hold it.
        s.context.set_current()
        fill.launch(s, 4, 256, buf, np.uint32(7), 1024)
        s.synchronize()
        assert (buf.copy_to().view(np.uint32) == 7).all()
        print("OK")
        """
    )


@pytest.mark.gpu
def test_created_context_dropped_under_live_objects() -> None:
    run_isolated(
        """
        ctx = cu.Context.create(0)
        with ctx:
            s = cu.Stream()
            buf = cu.DeviceBuffer(4096)
        del ctx
        gc.collect()
        buf.fill(3, stream=s)
        s.synchronize()
        assert (buf.copy_to() == 3).all()
        del s, buf
        gc.collect()
        print("OK")
        """
    )


@pytest.mark.gpu
def test_mirror_host_function_survives_replays() -> None:
    run_isolated(
        """
        import ctypes
        make_current()
        calls = []

        @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        def c_callback(data):
            calls.append(("c", data))

        s = cu.Stream()
        with s.capture() as g:
            driver.cuLaunchHostFunc(s, c_callback, 42)
            driver.cuLaunchHostFunc(s, lambda data: calls.append(("py", data)), 7)
        exe = g.instantiate()
        for _ in range(3):
            exe.launch(s)
        s.synchronize()
        assert calls == [("c", 42), ("py", 7)] * 3, calls
        print("OK")
        """
    )


@pytest.mark.gpu
def test_a_raw_copy_on_memory_cudriver_freed_is_refused_not_a_crash() -> None:
    # Found from outside: cuMemcpy(p, p, 16) through the mirror, p a freed 1 KiB
    # allocation, killed the process without a message (unified addressing takes an
    # unknown address for host memory).
    run_isolated(
        """
        from cuda.bindings import driver as raw
        from cudriver.compat import driver as compat
        make_current()
        host = np.zeros(64, np.uint8)
        buf = cu.DeviceBuffer(1024)
        p = int(buf)
        buf.close()
        q = driver.cuMemAlloc(4096)  # freed through the mirror: cudriver freed it too
        driver.cuMemFree(q)
        for face in (driver, compat):
            for call, ptr in (
                (lambda a: face.cuMemcpy(a, a, 16), p),
                (lambda a: face.cuMemcpy(host.ctypes.data, a + 512, 16), p),
                (lambda a: face.cuMemcpyDtoH(host.ctypes.data, a, 16), p),
                (lambda a: face.cuMemsetD8(a + 8, 0, 16), p),
                (lambda a: face.cuMemcpy(a, a, 16), int(q)),
                (lambda a: face.cuMemFree(a), int(q)),
            ):
                try:
                    call(ptr)
                except cu.InvalidValueError as exc:
                    assert f"allocation at {ptr:#x}" in str(exc), exc
                else:
                    raise AssertionError("not refused")
        # Handed out again (the driver reuses the address): allowed, as any live memory.
        again = [cu.DeviceBuffer(1024) for _ in range(64)]
        live = [b for b in again if int(b) <= p < int(b) + 1024]
        assert live, "the driver never handed the address out again"
        driver.cuMemsetD8(p, 7, 16)
        compat.cuMemcpy(p + 16, p, 16)
        assert (live[0].copy_to()[:32] == 7).all()
        print("OK")
        """
    )


@pytest.mark.gpu
def test_releases_beside_a_torch_graph_capture_leave_it_valid() -> None:
    # A release that waits for the device (cuMemFree, cuStreamDestroy, ...) during a
    # capture begun outside cudriver, in GLOBAL mode, invalidated it.
    pytest.importorskip("torch")
    run_isolated(
        """
        import torch
        make_current()
        x = torch.zeros(16, device="cuda")
        torch.cuda.synchronize()
        bufs = [cu.DeviceBuffer(4096) for _ in range(4)]
        pinned = cu.PinnedBuffer(4096)
        ev = cu.Event()
        st = cu.Stream()
        other = cu.Stream(non_blocking=True)
        ordered = cu.DeviceBuffer(4096, stream=other)
        module = cu.Module.load(cu.compile(FILL, arch=cu.Device(0), target="cubin"))
        other.synchronize()
        states = [b._state for b in bufs] + [pinned._state, ordered._state, module._state]
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):  # capture_error_mode="global"
            x += 1
            bufs[0].close()  # on the capturing thread
            del bufs[1]
            pinned.close()
            ev.close()
            st.close()
            ordered.close()
            del module
            gc.collect()
            t = threading.Thread(target=lambda: bufs.pop().close())  # on another thread
            t.start()
            t.join()
            x += 1
        g.replay()
        torch.cuda.synchronize()
        assert (x == 2).all(), x
        del bufs
        gc.collect()
        cu.Context.current().synchronize()
        assert all(s.handle is None for s in states), [s.handle for s in states]
        print("OK")
        """
    )


@pytest.mark.gpu
def test_a_stream_ordered_free_stays_out_of_a_raw_capture_of_its_stream() -> None:
    # A raw cuStreamBeginCapture on a cudriver stream: dropping a buffer allocated on
    # that stream captured its cuMemFreeAsync into the foreign graph.
    run_isolated(
        """
        import time
        from cuda.bindings import driver as raw
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream(non_blocking=True)
        buf = cu.DeviceBuffer(4096, stream=s)
        s.synchronize()
        state = buf._state
        out = cu.DeviceBuffer(4096)
        mode = raw.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
        assert int(raw.cuStreamBeginCapture(s.handle, mode)[0]) == 0
        fill.launch(s, 4, 256, out, np.uint32(5), 1024)
        import io
        err = sys.stderr = io.StringIO()  # where a failed release writes its warning
        del buf
        gc.collect()
        time.sleep(0.1)  # the releasing thread had its chance
        r = raw.cuStreamEndCapture(s.handle)
        assert int(r[0]) == 0, r
        nodes = raw.cuGraphGetNodes(r[1], 0)
        assert int(nodes[0]) == 0 and nodes[2] == 1, nodes  # the kernel alone
        deadline = time.monotonic() + 10
        while state.handle is not None:  # freed once the capture ended
            assert time.monotonic() < deadline, "never freed"
            time.sleep(0.01)
        raw.cuGraphDestroy(r[1])
        s.synchronize()
        sys.stderr = sys.__stderr__
        # Freed for real: no release failed (a free captured, or refused, warns).
        assert "cudriver:" not in err.getvalue(), err.getvalue()
        print("OK")
        """
    )


# -- hangs ------------------------------------------------------------------------------


@pytest.mark.gpu
def test_first_launch_while_another_stream_waits_does_not_hang() -> None:
    # Under lazy loading, a kernel's first launch loads its code and waits for the
    # device, which here is blocked on a value that only comes after the kernel.
    run_isolated(
        """
        make_current()
        (fill,) = kernels("fill")
        flag = cu.DeviceBuffer(4)
        flag.fill(0)
        out = cu.DeviceBuffer(4096)
        a = cu.Stream(non_blocking=True)
        b = cu.Stream(non_blocking=True)
        b.wait_value32(flag, 1, cu.WaitCondition.EQ)
        fill.launch(a, 4, 256, out, np.uint32(5), 1024)
        a.write_value32(flag, 1)
        a.synchronize()
        b.synchronize()
        assert (out.copy_to().view(np.uint32) == 5).all()
        print("OK")
        """
    )


@pytest.mark.gpu
def test_kernel_lookup_after_an_eager_load_does_not_wait_under_lazy_loading() -> None:
    # With CUDA_MODULE_LOADING=LAZY set, cuModuleGetFunction on an eagerly loaded
    # module blocked behind b's wait (measured): Module.kernel() must not call it.
    run_isolated(
        """
        make_current()
        module = cu.Module.load(cu.compile(FILL, arch=cu.Device(0), target="cubin"))
        gate = cu.DeviceBuffer(4)
        gate.fill(0)
        a = cu.Stream(non_blocking=True)
        b = cu.Stream(non_blocking=True)
        b.wait_value32(gate, 1, cu.WaitCondition.GEQ)
        module.kernel("fill").launch(a, 1, 1, gate, np.uint32(1), 1)
        module.kernel("spin_fill").launch(a, 1, 1, gate, np.uint32(2), 1, 10)
        a.synchronize()
        b.synchronize()
        assert int(gate.copy_to().view(np.uint32)[0]) == 2
        assert module.kernel("fill").num_params == 3
        print("OK")
        """,
        env={"CUDA_MODULE_LOADING": "LAZY"},
    )


SIX_KERNELS = r"""
extern "C" __global__ void setflag(unsigned* p, unsigned v) { *p = v; }
extern "C" __global__ void setflag2(unsigned* p, unsigned v) { *p = v + 1u; }
extern "C" __global__ void add1(unsigned* p) { *p += 1u; }
extern "C" __global__ void zero(unsigned* p) { *p = 0u; }
extern "C" __global__ void copy(unsigned* d, const unsigned* s) { *d = *s; }
extern "C" __global__ void twice(unsigned* p) { *p *= 2u; }
"""


@pytest.mark.gpu
@pytest.mark.parametrize("run", range(4))
def test_lookup_from_a_ptx_file_behind_a_pinned_gate_under_lazy_loading(
    run: int, tmp_path: pathlib.Path
) -> None:
    # Found from outside: a module of six kernels loaded from a PTX file, two
    # blocking streams, a gate in pinned memory that b waits on; the kernel that
    # opens the gate is looked up and launched after the wait. It blocked once in
    # two runs: each run here is a fresh process.
    ptx = tmp_path / "six.ptx"
    ptx.write_bytes(
        run_isolated(
            f"""
            image = cu.compile({SIX_KERNELS!r}, arch=cu.Device(0), target="ptx")
            sys.stdout.write(image.decode() if isinstance(image, bytes) else image)
            print("OK")
            """
        )
        .rstrip()[: -len("OK")]
        .encode()
    )
    run_isolated(
        f"""
        import pathlib
        make_current()
        mod = cu.Module.load(pathlib.Path({str(ptx)!r}))
        gate = cu.PinnedBuffer(4)
        gate.array(np.uint32)[0] = 0
        a = cu.Stream()
        b = cu.Stream()
        b.wait_value32(gate, 1, cu.WaitCondition.GEQ)
        mod.kernel("setflag2").launch(a, 1, 1, gate.device_ptr, np.uint32(1))
        a.synchronize()
        b.synchronize()
        assert int(gate.array(np.uint32)[0]) == 2
        gc.collect()
        print("OK")
        """,
        env={"CUDA_MODULE_LOADING": "LAZY"},
    )


@pytest.mark.gpu
@pytest.mark.parametrize("loading", ["LAZY", "EAGER", None])
def test_lookup_and_launch_never_run_a_release_that_waits_for_the_device(
    loading: str | None,
) -> None:
    # What made the outside program block once in two runs: garbage collected before the
    # lookup left a synchronous free (cuMemFree, cuMemFreeHost, cuModuleUnload: each
    # waits for the whole device, behind b's wait) that the lookup's new Kernel ran
    # on the calling thread, before the launch that opens the gate.
    run_isolated(
        """
        make_current()
        module = cu.Module.load(cu.compile(FILL, arch=cu.Device(0), target="cubin"))
        gate = cu.PinnedBuffer(4)
        gate.array(np.uint32)[0] = 0
        junk = [cu.DeviceBuffer(1024), cu.PinnedBuffer(1024),
                cu.Module.load(cu.compile(FILL, arch=cu.Device(0), target="cubin"))]
        a = cu.Stream()
        b = cu.Stream()
        b.wait_value32(gate, 1, cu.WaitCondition.GEQ)
        del junk  # queued: the releasing thread runs them, once b lets the device idle
        kernel = module.kernel("fill")
        kernel.launch(a, 1, 1, gate.device_ptr, np.uint32(1), 1)
        extra = cu.DeviceBuffer(64)  # a constructor, a close: none runs them either
        extra.close()
        cu.Event().record(a)
        a.synchronize()
        b.synchronize()
        assert int(gate.array(np.uint32)[0]) == 1
        print("OK")
        """,
        env={"CUDA_MODULE_LOADING": loading} if loading else None,
        timeout=60,
    )


@pytest.mark.gpu
def test_a_stream_wait_does_not_wait_for_a_release_stuck_behind_another_stream() -> None:
    # b waits for the host; a free queued meanwhile waits for the whole device. a's
    # synchronize() waits for a only: it must not wait for that release, since the host
    # opens b's gate only after it returns.
    run_isolated(
        """
        import time
        from cudriver._lifetime import _release
        ctx = make_current()
        gate = cu.PinnedBuffer(4)
        gate.array(np.uint32)[0] = 0
        a = cu.Stream()
        b = cu.Stream(non_blocking=True)
        done = cu.Event()
        b.wait_value32(gate, 1, cu.WaitCondition.GEQ)
        junk = cu.DeviceBuffer(1024)
        del junk
        deadline = time.monotonic() + 5
        while not _release.releasing():  # the releasing thread is in cuMemFree now
            assert time.monotonic() < deadline
            time.sleep(0.001)
        a.synchronize()
        done.record(a)
        done.synchronize()
        gate.array(np.uint32)[0] = 1
        b.synchronize()
        ctx.synchronize()
        assert _release.pending_releases() == 0, _release.describe_pending()
        print("OK")
        """,
        timeout=60,
    )


@pytest.mark.gpu
def test_eager_module_load_loads_every_function() -> None:
    run_isolated(
        """
        from cuda.bindings import driver as raw
        make_current()
        module = cu.Module.load(cu.compile(FILL, arch=cu.Device(0), target="cubin"), eager=True)
        n = cu.check(raw.cuModuleGetFunctionCount(module.handle), "cuModuleGetFunctionCount")
        fns = cu.check(raw.cuModuleEnumerateFunctions(n, module.handle), "enumerate")
        states = [cu.check(raw.cuFuncIsLoaded(f), "cuFuncIsLoaded") for f in fns]
        loaded = raw.CUfunctionLoadingState.CU_FUNCTION_LOADING_STATE_LOADED
        assert n == 2 and all(st == loaded for st in states), states
        print("OK")
        """
    )


@pytest.mark.gpu
def test_host_function_calling_cuda_gets_an_error_not_a_hang() -> None:
    run_isolated(
        """
        make_current()
        s = cu.Stream()
        other = cu.Stream()
        seen = []

        def misbehave():
            for call in (s.synchronize, other.query, other.synchronize, cu.Event):
                try:
                    call()
                except cu.NotPermittedError as exc:
                    seen.append(str(exc))
            s.synchronize()  # raised out of the host function

        s.launch_host_func(misbehave)
        try:
            s.synchronize()
        except cu.HostCallbackError as exc:
            assert isinstance(exc.__cause__, cu.NotPermittedError), exc
        else:
            raise AssertionError("no HostCallbackError")
        assert len(seen) == 4 and all("inside a host function" in m for m in seen), seen
        other.synchronize()  # ordinary threads are not refused
        print("OK")
        """
    )


@pytest.mark.gpu
def test_collection_under_the_host_function_lock_does_not_deadlock() -> None:
    run_isolated(
        """
        from cudriver._lifetime import _hostfn
        make_current()
        s = cu.Stream()
        s.launch_host_func(lambda: 1 / 0)
        doomed = [cu.Stream() for _ in range(4)]
        with _hostfn._lock:
            del doomed
            gc.collect()  # their releases take this lock: they must wait, not run here
        try:
            s.synchronize()
        except cu.HostCallbackError:
            pass
        print("OK")
        """
    )


@pytest.mark.gpu
def test_forked_child_refuses_cuda_and_frees_nothing() -> None:
    run_isolated(
        """
        make_current()
        s = cu.Stream()
        buf = cu.DeviceBuffer(1024)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded fork"
            pid = os.fork()
        if pid == 0:
            status = 1
            try:
                s.synchronize()
            except cu.NotPermittedError as exc:
                status = 0 if "forked" in str(exc) else 2
            try:
                cu.Stream()
                status = 3
            except cu.NotPermittedError:
                pass
            del buf, s  # nothing is freed in the child
            gc.collect()
            os._exit(status)
        _, st = os.waitpid(pid, 0)
        assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, st
        buf.fill(1)  # the parent's objects are untouched
        s.synchronize()
        print("OK")
        """
    )


# -- silent corruption ------------------------------------------------------------------


@pytest.mark.gpu
def test_prepared_launch_after_its_buffer_closed_never_hits_another_buffer() -> None:
    run_isolated(
        """
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        n = 1 << 20
        a = cu.DeviceBuffer(4 * n)
        plan = fill.prepare(n // 256, 256, a, np.uint32(7), n)
        a_ptr = a.ptr
        a.close()
        others = [cu.DeviceBuffer(4 * n) for _ in range(8)]
        assert a_ptr not in [b.ptr for b in others]  # a's memory is still reserved
        for b in others:
            b.fill(0)
        plan.launch(s)
        s.synchronize()
        assert all((b.copy_to() == 0).all() for b in others)
        del plan
        gc.collect()
        cu.Stream().close()  # any cudriver call runs the releases that waited
        again = [cu.DeviceBuffer(4 * n) for _ in range(8)]
        del again
        print("OK")
        """
    )


@pytest.mark.gpu
def test_buffer_closed_during_its_own_launch_is_released_after_it() -> None:
    # A close() that lands while a launch is using the buffer (here: from the launch's
    # own bookkeeping, the last step before the launch lets go) must wait for it.
    run_isolated(
        """
        from cudriver._lifetime import _handle
        ctx = make_current()
        (spin,) = kernels("spin_fill")
        s = cu.Stream(non_blocking=True)
        n = 1 << 16
        seen = []

        class Closing(cu.DeviceBuffer):
            def _note_use(self, stream):
                st = self._state
                self.close()
                seen.append(st.handle is not None)  # still allocated: pinned
                super()._note_use(stream)

        for ordered in (False, True):
            buf = Closing(4 * n, stream=cu.Stream() if ordered else None)
            st = buf._state
            buf.fill(0)
            if ordered:
                buf.stream.synchronize()
            spin.launch(s, n // 256, 256, buf, np.uint32(5), n, 1 << 22)
            assert buf.closed and seen == [True] * len(seen) and seen, seen
            # Queued once the launch let go (the launching thread runs no release):
            # the releasing thread frees it, after the kernel (a synchronous free
            # waits for it; a stream-ordered one is ordered after it).
            s.synchronize()  # the kernel ran on memory still allocated: no fault
            ctx.synchronize()
            assert st.handle is None
        from cudriver._lifetime import _release
        assert _handle.pending_releases() == 0, _release.describe_pending()
        print("OK")
        """
    )


@pytest.mark.gpu
def test_buffers_closed_while_another_thread_launches_on_them() -> None:
    run_isolated(
        """
        import time
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream(non_blocking=True)
        n = 1 << 16
        errors = []
        for i in range(40):
            buf = cu.DeviceBuffer(4 * n)
            stop = threading.Event()

            def run(buf=buf, stop=stop):
                launched = 0
                try:
                    while not stop.is_set():
                        fill.launch(s, n // 256, 256, buf, np.uint32(i), n)
                        launched += 1
                except cu.ClosedError as exc:
                    if "DeviceBuffer is closed" not in str(exc):
                        errors.append(repr(exc))
                except BaseException as exc:
                    errors.append(repr(exc))

            t = threading.Thread(target=run)
            t.start()
            time.sleep(0.001 * (i % 5))
            buf.close()
            stop.set()
            t.join(30)
            assert not t.is_alive()
            fresh = cu.DeviceBuffer(4 * n)  # may take the freed address: must stay 0
            fresh.fill(0)
            s.synchronize()
            assert (fresh.copy_to() == 0).all()
            fresh.close()
        assert not errors, errors
        print("OK")
        """
    )


@pytest.mark.gpu
def test_a_view_in_a_prepared_launch_keeps_its_buffer_allocated() -> None:
    run_isolated(
        """
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        n = 1 << 20
        a = cu.DeviceBuffer(4 * n)
        plan = fill.prepare(n // 256, 256, a[0 : 4 * n], np.uint32(7), n)
        a.close()
        others = [cu.DeviceBuffer(4 * n) for _ in range(8)]
        for b in others:
            b.fill(0)
        plan.launch(s)
        s.synchronize()
        assert all((b.copy_to() == 0).all() for b in others)
        print("OK")
        """
    )


@pytest.mark.gpu
def test_stream_ordered_free_waits_for_graph_launches_on_other_streams() -> None:
    run_isolated(
        """
        make_current()
        (spin_fill,) = kernels("spin_fill")
        n = 1 << 16
        s1 = cu.Stream(non_blocking=True)
        s2 = cu.Stream(non_blocking=True)
        gate = cu.PinnedBuffer(4, mapped=True)
        gate.array(np.uint32)[0] = 0
        buf = cu.DeviceBuffer(4 * n, stream=s1)
        buf.fill(0, stream=s1)
        s1.synchronize()
        with s2.capture() as g:
            spin_fill.launch(s2, n // 256, 256, buf, np.uint32(9), n, 1000)
        exe = g.instantiate()
        s2.wait_value32(gate, 1)  # holds the graph launch in flight
        exe.launch(s2)
        del exe, g
        buf.close()
        cu.Event().close()  # any cudriver call runs the releases that waited: buf's free
        other = cu.DeviceBuffer(4 * n, stream=s1)  # may reuse buf's block, after the graph
        other.fill(0, stream=s1)
        gate.array(np.uint32)[0] = 1
        s2.synchronize()
        s1.synchronize()
        got = np.empty(4 * n, np.uint8)
        other.copy_to(got, stream=s1)
        s1.synchronize()
        assert (got == 0).all(), np.unique(got)
        print("OK")
        """
    )


# -- leaks ------------------------------------------------------------------------------


@pytest.mark.gpu
def test_closing_graphs_lets_go_of_what_they_captured() -> None:
    run_isolated(
        """
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        big = cu.DeviceBuffer(64 << 20)
        ref = weakref.ref(big)
        with s.capture() as g:
            fill.launch(s, 1, 256, big, np.uint32(1), 256)
        exe = g.instantiate()
        exe.launch(s)
        s.synchronize()
        del big
        gc.collect()
        assert ref() is not None  # the graph keeps it
        g.close()
        exe.close()
        gc.collect()
        assert ref() is None
        print("OK")
        """
    )


@pytest.mark.gpu
def test_update_lets_go_of_the_replaced_graphs_objects() -> None:
    run_isolated(
        """
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()

        def capture():
            b = cu.DeviceBuffer(1024)
            with s.capture() as g:
                fill.launch(s, 1, 256, b, np.uint32(2), 256)
            return g, weakref.ref(b)

        g, first = capture()
        exe = g.instantiate()
        refs = [first]
        for _ in range(200):
            g, ref = capture()
            exe.update(g)
            g.close()
            refs.append(ref)
            exe.launch(s)
        s.synchronize()
        gc.collect()
        alive = [r for r in refs if r() is not None]
        assert len(alive) == 1 and alive[0] is refs[-1], len(alive)
        print("OK")
        """
    )


@pytest.mark.gpu
@pytest.mark.device_memory
def test_buffer_dying_in_a_host_function_is_freed_on_an_ordinary_thread() -> None:
    run_isolated(
        """
        make_current()
        from cuda.bindings import driver as raw
        s = cu.Stream()
        free0 = cu.check(raw.cuMemGetInfo(), "cuMemGetInfo")[0]
        buf = cu.DeviceBuffer(256 << 20)
        s.launch_host_func(lambda b: None, buf)  # the last reference dies on that thread
        del buf
        s.synchronize()
        cu.Stream().close()  # runs the release that waited
        free1 = cu.check(raw.cuMemGetInfo(), "cuMemGetInfo")[0]
        assert free1 >= free0 - (16 << 20), (free0, free1)
        print("OK")
        """
    )


# -- wrong or lost errors ---------------------------------------------------------------


@pytest.mark.gpu
def test_callback_exception_with_a_broken_str_is_not_lost() -> None:
    run_isolated(
        """
        make_current()

        class Nasty(Exception):
            def __str__(self):
                raise RuntimeError("str failed")

            def __repr__(self):
                raise RuntimeError("repr failed")

        def boom():
            raise Nasty()

        s = cu.Stream()
        s.launch_host_func(boom)
        try:
            s.synchronize()
        except cu.HostCallbackError as exc:
            assert isinstance(exc.__cause__, Nasty)
            assert "Nasty" in str(exc)
        else:
            raise AssertionError("lost")
        print("OK")
        """
    )


@pytest.mark.gpu
def test_raw_end_capture_is_noticed() -> None:
    run_isolated(
        """
        from cuda.bindings import driver as raw
        make_current()
        s = cu.Stream()
        s.begin_capture()
        graph = cu.check(raw.cuStreamEndCapture(s.handle), "cuStreamEndCapture")
        s.begin_capture()  # not "already capturing"
        g = s.end_capture()
        g.close()
        raw.cuGraphDestroy(graph)
        print("OK")
        """
    )


@pytest.mark.gpu
def test_closing_a_capturing_stream_ends_its_capture() -> None:
    run_isolated(
        """
        from cudriver._lifetime import capture
        from cudriver import errors
        make_current()
        s = cu.Stream()
        s.begin_capture()
        s.close()
        assert not capture.ACTIVE and not errors.GUARD.captures
        t = cu.Stream()
        t.begin_capture()
        del t
        gc.collect()
        assert not capture.ACTIVE and not errors.GUARD.captures
        print("OK")
        """
    )


@pytest.mark.gpu
def test_buffer_collected_during_a_capture_does_not_invalidate_it() -> None:
    run_isolated(
        """
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        keep = cu.DeviceBuffer(1024)
        junk = cu.DeviceBuffer(1 << 20)
        with s.capture() as g:
            fill.launch(s, 1, 256, keep, np.uint32(1), 256)
            del junk  # its free would be an unsafe call inside the capture: it waits
            gc.collect()
            fill.launch(s, 1, 256, keep, np.uint32(2), 256)
        exe = g.instantiate()
        exe.launch(s)
        s.synchronize()
        assert (keep.copy_to().view(np.uint32)[:256] == 2).all()
        print("OK")
        """
    )


@pytest.mark.gpu
def test_streams_and_buffers_collected_in_cycles_do_not_crash() -> None:
    # Garbage collection finalises a reference cycle's objects in no set order: the
    # stream may be finalised before the stream-ordered buffer that still needs it. The
    # order itself is checked without a GPU (test_handle); this runs the real thing.
    run_isolated(
        """
        make_current()
        (fill,) = kernels("fill")

        class Box:
            pass

        for i in range(300):
            s = cu.Stream(non_blocking=True)
            b = cu.DeviceBuffer(4096, stream=s)
            fill.launch(s, 4, 256, b, np.uint32(i), 1024)
            box = Box()
            box.items = [b, s, box] if i % 2 else [s, b, box]
            del s, b, box
            if i % 7 == 0:
                gc.collect()
        gc.collect()
        cu.Stream().close()  # runs what waited
        print("OK")
        """
    )


@pytest.mark.gpu
def test_exit_with_a_blocked_stream_and_waiting_releases_does_not_hang() -> None:
    # A synchronous free waits for the device; here the device waits for a value no one
    # writes, so a release run at exit would never return.
    run_isolated(
        """
        make_current()
        gate = cu.PinnedBuffer(4, mapped=True)
        gate.array(np.uint32)[0] = 0
        s = cu.Stream(non_blocking=True)
        s.wait_value32(gate, 1)  # never satisfied

        class Box:
            pass

        box = Box()
        box.buffer = cu.DeviceBuffer(1 << 20)
        box.me = box
        del box
        gc.collect()  # its release waits in the queue
        print("OK")
        """
    )


# -- threads ----------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.device_memory
def test_threads_making_using_and_dropping_objects_with_collection_running() -> None:
    run_isolated(
        """
        from cuda.bindings import driver as raw
        from cudriver._lifetime import _handle, capture
        ctx = cu.Device(0).primary_context()
        ctx.set_current()
        (fill,) = kernels("fill")
        free0 = cu.check(raw.cuMemGetInfo(), "cuMemGetInfo")[0]
        failures = []

        def work(seed):
            ctx.set_current()
            rng = np.random.default_rng(seed)
            try:
                for i in range(400):
                    s = cu.Stream(non_blocking=True)
                    b = cu.DeviceBuffer(4096, stream=s) if i % 2 else cu.DeviceBuffer(4096)
                    plan = fill.prepare(4, 256, b, np.uint32(i), 1024)
                    plan.launch(s)
                    if i % 3 == 0:
                        with s.capture() as g:
                            plan.launch(s)
                            s.launch_host_func(lambda: None)
                        exe = g.instantiate()
                        exe.launch(s)
                    s.launch_host_func(lambda x: None, b)
                    if rng.random() < 0.5:
                        b.close()  # while the plan (and maybe a graph) still holds it
                    if rng.random() < 0.3:
                        gc.collect()
                    s.synchronize()
                    del s, b, plan
            except BaseException as exc:
                failures.append(repr(exc))

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == [], failures[:3]
        gc.collect()
        ctx.synchronize()
        assert not capture.ACTIVE and _handle.pending_releases() == 0
        free1 = cu.check(raw.cuMemGetInfo(), "cuMemGetInfo")[0]
        assert free1 >= free0 - (64 << 20), (free0, free1)
        print("OK")
        """
    )


# -- ordering ---------------------------------------------------------------------------


@pytest.mark.gpu
def test_default_stream_orders_before_buffer_operations() -> None:
    run_isolated(
        """
        make_current()
        (spin_fill,) = kernels("spin_fill")
        s = cu.Stream()
        assert not s.non_blocking
        n = 1 << 16
        buf = cu.DeviceBuffer(4 * n)
        buf.fill(0)
        spin_fill.launch(s, n // 256, 256, buf, np.uint32(6), n, 2_000_000)
        got = buf.copy_to().view(np.uint32)  # on the legacy stream: after the kernel
        assert (got == 6).all(), np.unique(got)
        print("OK")
        """
    )


@pytest.mark.gpu
@pytest.mark.device_memory
def test_memory_dropped_just_before_an_allocation_serves_it() -> None:
    # A dropped buffer's cuMemFree runs on the releasing thread, soon but not at once: a
    # constructor never waits for the device on behalf of another object. An allocation
    # that needs the memory of a buffer dropped just before must still get it (the
    # queued frees run, then it is tried once more), not raise OutOfMemoryError.
    run_isolated(
        """
        ctx = make_current()
        s = cu.Stream(non_blocking=True)
        pool = cu.MemoryPool()
        n = (cu.mem_get_info()[0] * 2 // 3) & ~((1 << 21) - 1)
        for make in (
            lambda: cu.DeviceBuffer(n),
            lambda: cu.DeviceBuffer(n, stream=s),
            lambda: cu.DeviceBuffer(n, stream=s, pool=pool),
        ):
            for _ in range(6):
                b = make()
                del b  # queued: its free waits for the device
                b = make()  # needs that memory
                b.close()
            s.synchronize()  # pools keep freed memory until a synchronisation
        # Out of memory for good still says so, after one more try.
        try:
            cu.DeviceBuffer(cu.mem_get_info()[1] * 2)
        except cu.OutOfMemoryError as exc:
            assert "cuMemAlloc" in str(exc), exc
        else:
            raise AssertionError("twice the device's memory was allocated")
        pool.close()
        print("OK")
        """
    )


SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""


@pytest.mark.gpu
def test_a_capture_begun_while_a_free_waits_for_the_device_stays_valid(
    ctx: cu.Context,
) -> None:
    # A synchronous free (cuMemFree, cuMemFreeHost) waits for the whole device; one in
    # flight on another thread when a capture of a blocking stream began invalidated
    # that capture. Captures now begin only after such a release ends, and none starts
    # while a capture is open.
    import threading

    from cudriver._lifetime import _release

    dev = ctx.device
    spin = cu.Module.load(cu.compile(SPIN, arch=dev.compute_capability, target="cubin")).kernel(
        "spin"
    )
    busy = cu.Stream(non_blocking=True)
    s = cu.Stream()  # blocking: what a device-wide wait touches
    stop = threading.Event()
    errors: list[BaseException] = []

    def free_while_busy() -> None:
        try:
            ctx.set_current()
            while not stop.is_set():
                spin.launch(busy, 1, 1, np.int64(2_000_000))
                cu.PinnedBuffer(4096).close()  # cuMemFreeHost: waits for the spin
                cu.DeviceBuffer(1 << 20).close()  # cuMemFree: waits too
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=free_while_busy)
    t.start()
    try:
        buf = cu.DeviceBuffer(1 << 12)
        for _ in range(300):
            with s.capture() as g:
                buf.fill(1, stream=s)
            g.close()
    finally:
        stop.set()
        t.join(60)
    assert not t.is_alive()
    assert errors == []
    busy.synchronize()
    buf.close()

    # The order itself: a capture waits for a device-waiting release that holds the lock.
    held = threading.Event()
    let_go = threading.Event()

    def hold() -> None:
        with _release.WAITER_LOCK:
            held.set()
            let_go.wait(10)

    h = threading.Thread(target=hold)
    h.start()
    assert held.wait(10)
    timer = threading.Timer(0.3, let_go.set)
    timer.start()
    t0 = time.monotonic()
    with s.capture() as g:
        pass
    waited = time.monotonic() - t0
    h.join(10)
    assert waited >= 0.25, waited
    g.close()
