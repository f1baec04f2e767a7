"""The driver's error log in every CudaError, its logging integration, and the last holes.

The tests without a GPU feed the log reader lines through a fake source; the GPU tests
make real driver calls fail and read what the driver logged (CUDA 12.9+ drivers).
"""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import cudriver as cu
from cudriver._lifetime._coerce import refuse_offloaded, virtual_spaces
from cudriver._memory._core import mem_free_async
from cudriver._runtime import _bindings
from cudriver.errors import GUARD, make_error

from .test_safety import run_isolated


class FakeLog:
    """A stand-in for ``cuLogsDumpToMemory``: each read returns what was queued."""

    def __init__(self) -> None:
        self.queued: list[str] = []

    def add(self, text: str, thread: int | None = None, level: str = "E") -> None:
        tid = threading.get_ident() if thread is None else thread
        self.queued.append(f"[06:53:16.294][{tid}][CUDA][{level}] {text}")

    def __call__(self) -> str:
        text, self.queued = "\n".join(self.queued), []
        return text


@pytest.fixture
def fake() -> Iterator[FakeLog]:
    log = _bindings.DRIVER_LOG
    saved = log.source
    log.source = f = FakeLog()
    log.recent.clear()
    yield f
    log.forward(False, 0.1)
    log.source = saved
    log.recent.clear()


def test_an_error_carries_its_own_lines_and_shows_the_first(fake: FakeLog) -> None:
    fake.add("cudaVersion argument (13020) exceeds the driver version (13000)")
    fake.add("Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuGetProcAddress_v2")
    fake.add("Graph cycle detected")
    fake.add("Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuGraphInstantiateWithFlags")
    err = make_error(1, "cuGraphInstantiate")
    assert err.driver_log == (
        "Graph cycle detected",
        "Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuGraphInstantiateWithFlags",
    )
    assert str(err).endswith("; the driver says: Graph cycle detected")
    # Claimed: the next error of the same call does not get them again.
    assert make_error(1, "cuGraphInstantiate").driver_log == ()


def test_lines_of_other_threads_wait_for_their_own_error(fake: FakeLog) -> None:
    other: list[cu.CudaError] = []
    ready, logged = threading.Event(), threading.Event()

    def fail_later() -> None:
        fake.add("No CUDA context is current to the calling thread")
        fake.add("Returning 201 (CUDA_ERROR_INVALID_CONTEXT) from cuMemAlloc_v2")
        ready.set()
        logged.wait(10)
        other.append(make_error(201, "cuMemAlloc"))

    t = threading.Thread(target=fail_later)
    t.start()
    assert ready.wait(10)
    fake.add("Allocation not found")
    fake.add("Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuMemcpyHtoD_v2")
    mine = make_error(1, "cuMemcpyHtoD")  # reads the other thread's lines too
    logged.set()
    t.join(10)
    assert mine.driver_log[0] == "Allocation not found"
    assert "No CUDA context" not in " ".join(mine.driver_log)
    assert other[0].driver_log[0] == "No CUDA context is current to the calling thread"


def test_a_handled_failure_leaves_nothing_for_a_later_error(fake: FakeLog) -> None:
    # A failure cudriver handled (no error made), then another call fails with nothing
    # logged of its own: the first failure's lines are not blamed on it.
    fake.add("Allocation not found")
    fake.add("Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuPointerGetAttribute")
    err = make_error(1, "cuMemcpyHtoD")
    assert err.driver_log == ()
    assert "the driver says" not in str(err)
    # Its next real failure takes only its own group, not the older one.
    fake.add("CUDA kernel k has 1 parameters but none provided at launch")
    fake.add("Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuLaunchKernel")
    assert make_error(1, "cuLaunchKernel").driver_log == (
        "CUDA kernel k has 1 parameters but none provided at launch",
        "Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuLaunchKernel",
    )


def test_a_code_or_call_that_does_not_match_takes_nothing(fake: FakeLog) -> None:
    fake.add("Returning 2 (CUDA_ERROR_OUT_OF_MEMORY) from cuMemAlloc_v2")
    assert make_error(1, "cuMemAlloc").driver_log == ()  # another code
    assert make_error(2, "cuStreamCreate").driver_log == ()  # another call
    assert make_error(2, "cuMemAlloc").driver_log == (
        "Returning 2 (CUDA_ERROR_OUT_OF_MEMORY) from cuMemAlloc_v2",
    )


def test_errors_not_made_by_a_driver_call_read_nothing(fake: FakeLog) -> None:
    fake.add("Returning 999 (CUDA_ERROR_UNKNOWN) from cuCtxSynchronize")
    err = cu.NotPermittedError(800, "cudriver", "not here")
    assert err.driver_log == ()
    assert len(_bindings.DRIVER_LOG.recent) == 0  # not even read
    assert fake.queued  # still waiting for a driver call's error


def test_older_format_with_the_entry_point_in_brackets(fake: FakeLog) -> None:
    tid = threading.get_ident()
    fake.queued.append(f"[22:21:32.099][{tid}][CUDA][E][cuLogsDumpToMemory] buffer cannot be NULL")
    fake.add("Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuLogsDumpToMemory")
    err = make_error(1, "cuLogsDumpToMemory")
    assert err.driver_log[0] == "cuLogsDumpToMemory: buffer cannot be NULL"


def test_without_a_log_nothing_changes(fake: FakeLog) -> None:
    _bindings.DRIVER_LOG.source = lambda: None  # a driver before CUDA 12.9
    err = make_error(2, "cuMemAlloc")
    assert err.driver_log == ()
    assert "the driver says" not in str(err)

    def broken() -> str:
        raise OSError("gone")

    _bindings.DRIVER_LOG.source = broken
    assert make_error(2, "cuMemAlloc").driver_log == ()


def test_an_error_in_a_child_forked_while_the_log_was_being_read_does_not_hang() -> None:
    # Another thread holds the reader's lock across fork(): the child must neither wait
    # for that lock nor read the log (CUDA cannot be used in a forked child).
    script = textwrap.dedent(
        """
        import faulthandler, os, sys, threading
        faulthandler.dump_traceback_later(20, exit=True)
        from cudriver._runtime import _bindings
        from cudriver.errors import make_error
        log = _bindings.DRIVER_LOG
        line = "[0][%d][CUDA][E] Returning 2 (X) from cuMemAlloc_v2"
        log.source = lambda: line % threading.get_ident()
        held, release = threading.Event(), threading.Event()

        def hold():
            with log.lock:
                held.set()
                release.wait(10)

        t = threading.Thread(target=hold)
        t.start()
        held.wait(10)
        pid = os.fork()
        if pid == 0:
            err = make_error(2, "cuMemAlloc")
            os._exit(0 if err.driver_log == () and "driver says" not in str(err) else 3)
        release.set()
        t.join()
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pickled_errors_keep_their_lines_without_reading_the_log(fake: FakeLog) -> None:
    fake.add("Graph cycle detected")
    fake.add("Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuGraphInstantiateWithFlags")
    err = make_error(1, "cuGraphInstantiate")
    fake.add("Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuGraphInstantiateWithFlags")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cu.InvalidValueError
    assert back.driver_log == err.driver_log and str(back) == str(err)
    assert back.code is err.code and back.func == err.func
    assert fake.queued  # unpickling read nothing
    upd = cu.GraphUpdateError(910, "cuGraphExecUpdate", "TOPOLOGY", "a node was added", object())
    back_upd = pickle.loads(pickle.dumps(upd))
    assert (back_upd.result, back_upd.reason, back_upd.node) == (
        "TOPOLOGY",
        "a node was added",
        None,
    )


def test_no_lookup_inside_a_host_function(fake: FakeLog) -> None:
    fake.add("Returning 2 (CUDA_ERROR_OUT_OF_MEMORY) from cuMemAlloc_v2")
    GUARD.enter_host_function()
    try:
        assert make_error(2, "cuMemAlloc").driver_log == ()
    finally:
        GUARD.leave_host_function()
    assert make_error(2, "cuMemAlloc").driver_log != ()


def test_driver_messages_go_to_the_logging_logger(
    fake: FakeLog, caplog: pytest.LogCaptureFixture
) -> None:
    fake.add("logged before: not sent")
    caplog.set_level(logging.WARNING, logger="cudriver.driver")
    cu.log_driver_messages(interval=0.005)
    fake.add("cudaVersion argument (13020) exceeds the driver version (13000)")
    fake.add("Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuGetProcAddress_v2")
    fake.add("a warning of the driver", level="W")
    fake.add("Returning 700 (CUDA_ERROR_ILLEGAL_ADDRESS) from cuCtxSynchronize", thread=12345)
    deadline = time.monotonic() + 10
    while len(caplog.records) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    cu.log_driver_messages(False)
    got = [(r.levelno, r.getMessage(), getattr(r, "driver_thread", None)) for r in caplog.records]
    assert got == [
        (logging.WARNING, "a warning of the driver", threading.get_ident()),
        (logging.ERROR, "Returning 700 (CUDA_ERROR_ILLEGAL_ADDRESS) from cuCtxSynchronize", 12345),
    ]
    # Stopped: nothing more is sent, and an error still gets its lines.
    caplog.clear()
    fake.add("Returning 2 (CUDA_ERROR_OUT_OF_MEMORY) from cuMemAlloc_v2")
    assert make_error(2, "cuMemAlloc").driver_log
    assert caplog.records == []


@pytest.mark.parametrize("interval", [0, -1, 0.0001, "1", None, True, float("nan")])
def test_log_driver_messages_refuses_a_bad_interval(interval: Any) -> None:
    with pytest.raises(ValueError, match="interval"):
        cu.log_driver_messages(interval=interval)


# -- the holes ------------------------------------------------------------------------


@pytest.mark.parametrize("version", [(12, 8, 0), (12, 9, 0), (12,)])
def test_bindings_that_hold_the_gil_are_refused(version: tuple[int, ...]) -> None:
    with pytest.raises(ImportError, match=r"12\.9\.1 or newer.*hold the GIL"):
        _bindings.refuse_old_bindings(version)


@pytest.mark.parametrize("version", [(12, 9, 1), (12, 9, 10), (13, 0, 0), (13, 3, 1)])
def test_bindings_that_release_the_gil_are_accepted(version: tuple[int, ...]) -> None:
    _bindings.refuse_old_bindings(version)


def test_releases_that_touch_streams_say_so() -> None:
    # What keeps them from running beside an open capture (_handle.release_state/drain).
    assert mem_free_async(0, None, set(), 0, 0).waits_for_device is True
    from cudriver._memory.pool import _Destroy

    assert _Destroy.waits_for_device is True


class _Space:
    def __init__(self) -> None:
        self.asleep = False
        self.closed = False


class _Virtual:
    def __init__(self, sp: _Space, base: Any = None) -> None:
        self._sp, self._base = sp, base

    def _space(self) -> _Space:
        return self._sp


def test_an_offloaded_virtual_argument_is_refused_before_a_prepared_launch() -> None:
    sp = _Space()
    root = _Virtual(sp)

    class View:  # a view without _space of its own, over the buffer
        _base = root

    spaces = virtual_spaces((1, root, View(), "x", None))
    assert spaces == (sp,)
    refuse_offloaded(spaces)
    sp.asleep = True
    with pytest.raises(cu.ClosedError, match=r"offloaded: restore\(\) it"):
        refuse_offloaded(spaces)
    sp.closed = True  # closed, not offloaded: the plan's lease keeps the memory
    refuse_offloaded(spaces)


# -- on the GPU -----------------------------------------------------------------------

# Indented as the bodies are (run_isolated dedents the whole script).
NEEDS_LOG = """
        if cu.driver_version() < (12, 9):
            print("the driver has no error log"); print("OK"); sys.exit(0)
"""


@pytest.mark.gpu
def test_real_failures_carry_the_driver_reason() -> None:
    out = run_isolated(
        NEEDS_LOG
        + """
        import threading
        from cuda.bindings import driver as raw
        ctx = make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        buf = cu.DeviceBuffer(4096)

        def reason(exc_type, call, *names):
            try:
                call()
            except exc_type as exc:
                assert exc.driver_log, (str(exc), exc.driver_log)
                text = " | ".join(exc.driver_log)
                assert "the driver says: " + exc.driver_log[0] in str(exc), str(exc)
                for n in names:
                    assert n in text, (n, text)
                print(type(exc).__name__, "|", text)
                return exc
            raise AssertionError("no error")

        # 2048 threads per block
        launch = lambda: fill.launch(s, 1, 2048, buf, np.uint32(1), 1)
        reason(cu.CudaError, launch, "cuLaunchKernel")
        # 2**50 bytes
        reason(cu.OutOfMemoryError, lambda: cu.DeviceBuffer(2**50), "cuMemAlloc")
        # a kernel name that does not exist, where the module asks the driver
        image = cu.compile(FILL, arch=cu.Device(0), target="cubin")
        lazy = cu.Module.load(image, eager=False)
        reason(cu.NotFoundError, lambda: lazy.kernel("no_such_kernel"), "cuModuleGetFunction")
        # a graph with an illegal topology: a cycle
        g = cu.Graph()
        a = driver.cuGraphAddEmptyNode(g.handle, None, 0)
        b = driver.cuGraphAddEmptyNode(g.handle, [a], 1)
        try:
            driver.cuGraphAddDependencies(g.handle, [b], [a], None, 1)
        except TypeError:  # cuda-bindings 12.x
            driver.cuGraphAddDependencies(g.handle, [b], [a], 1)
        reason(cu.InvalidValueError, g.instantiate, "Graph cycle detected", "cuGraphInstantiate")
        # cuMemcpyHtoD to a pointer freed behind cudriver's back, through the mirror
        p = driver.cuMemAlloc(1 << 20)
        raw.cuMemFree(p)
        host = np.zeros(16, np.uint8)
        reason(cu.InvalidValueError, lambda: driver.cuMemcpyHtoD(p, host, 16),
               "Allocation not found", "cuMemcpyHtoD")

        # Two threads failing at once, 50 times: each error has its own lines.
        bad = []
        for i in range(50):
            barrier = threading.Barrier(2)
            got = {}

            def oom():
                ctx.set_current()
                barrier.wait()
                try:
                    cu.DeviceBuffer(2**50)
                except cu.CudaError as exc:
                    got["oom"] = exc.driver_log

            def no_context():
                barrier.wait()
                try:
                    driver.cuMemAlloc(1024)
                except cu.CudaError as exc:
                    got["ctx"] = exc.driver_log

            ts = [threading.Thread(target=oom), threading.Thread(target=no_context)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(30)
            if not (got.get("oom") and "OUT_OF_MEMORY" in got["oom"][-1]
                    and "INVALID_CONTEXT" not in " ".join(got["oom"])
                    and got.get("ctx") and "No CUDA context" in got["ctx"][0]
                    and "OUT_OF_MEMORY" not in " ".join(got["ctx"])):
                bad.append(got)
        assert not bad, bad[:3]
        print("OK")
        """
    )
    print(out)


@pytest.mark.gpu
def test_driver_messages_reach_the_logger_from_a_thread_of_cudriver() -> None:
    run_isolated(
        NEEDS_LOG
        + """
        import logging, time
        from cuda.bindings import driver as raw
        make_current()
        records = []

        class Keep(logging.Handler):
            def emit(self, record):
                records.append((record.levelno, record.getMessage(), threading.get_ident()))

        logging.getLogger("cudriver.driver").addHandler(Keep())
        logging.getLogger("cudriver.driver").setLevel(logging.WARNING)
        cu.log_driver_messages(interval=0.01)
        # A raw call failing: no CudaError made; the forwarding thread sends it.
        assert raw.cuMemAlloc(2**50)[0] == raw.CUresult.CUDA_ERROR_OUT_OF_MEMORY
        deadline = time.monotonic() + 20
        while not records and time.monotonic() < deadline:
            time.sleep(0.01)
        cu.log_driver_messages(False)
        assert records and records[0][0] == logging.ERROR, records
        assert "cuMemAlloc" in records[0][1], records
        assert records[0][2] != threading.get_ident()  # sent by cudriver's thread
        assert not any("cudaVersion argument" in r[1] for r in records), records
        print("OK")
        """
    )


@pytest.mark.gpu
def test_a_pool_closed_during_a_relaxed_capture_waits_for_its_end() -> None:
    # Before: the pool's destroy synchronised the stream that was capturing, which
    # broke the capture (a warning, then an invalidated graph).
    run_isolated(
        """
        from cudriver._lifetime import _handle
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        pool = cu.MemoryPool()
        out = cu.DeviceBuffer(1024)
        pool.allocate(1 << 20, stream=s).close()  # the pool notes s
        with s.capture(cu.CaptureMode.RELAXED) as g:
            pool.close()
            fill.launch(s, 1, 256, out, np.uint32(7), 256)
        assert pool.closed
        exe = g.instantiate()
        exe.launch(s)
        s.synchronize()
        assert (out.copy_to(np.empty(256, np.uint32)) == 7).all()
        assert _handle.pending_releases() == 0
        print("OK")
        """
    )


@pytest.mark.gpu
def test_a_stream_ordered_buffer_closed_during_a_capture_of_its_stream_is_not_captured() -> None:
    # Before: the free went into the graph (a MEM_FREE node), so the buffer was freed
    # only if and when the graph ran.
    run_isolated(
        """
        import time
        from cudriver._lifetime import _handle
        make_current()
        (fill,) = kernels("fill")
        for mode in (cu.CaptureMode.RELAXED, cu.CaptureMode.THREAD_LOCAL):
            s, other = cu.Stream(), cu.Stream()
            b = cu.DeviceBuffer(64 << 20, stream=s)
            fill.launch(other, 1, 256, b, np.uint32(1), 256)  # used on another stream
            other.close()  # gone before the free: the free cannot be ordered after it
            s.synchronize()
            out = cu.DeviceBuffer(1024)
            with s.capture(mode) as g:
                fill.launch(s, 1, 256, out, np.uint32(3), 256)
                b.close()
            types = [n.type for n in g.nodes()]
            assert types == [cu.GraphNodeType.KERNEL], types
            s.synchronize()
            cu.Event().close()
            deadline = time.monotonic() + 10
            while _handle.pending_releases() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert _handle.pending_releases() == 0
            g.instantiate().launch(s)
            s.synchronize()
            assert (out.copy_to(np.empty(256, np.uint32)) == 3).all()
        print("OK")
        """
    )


@pytest.mark.gpu
def test_a_prepared_launch_of_an_offloaded_virtual_buffer_is_refused() -> None:
    run_isolated(
        """
        make_current()
        (fill,) = kernels("fill")
        s = cu.Stream()
        vb = cu.VirtualBuffer(4 << 20, nbytes=2 << 20)
        plan = fill.prepare(1, 256, vb, np.uint32(5), 256)
        view_plan = fill.prepare(1, 256, vb.view(4096, 1024), np.uint32(6), 256)
        plan.launch(s)
        s.synchronize()
        vb.offload()
        for p in (plan, view_plan):
            try:
                p.launch(s)
            except cu.ClosedError as exc:
                assert "offloaded" in str(exc), exc
            else:
                raise AssertionError("launched on unmapped memory")
        vb.restore()
        plan.launch(s)
        view_plan.launch(s)
        s.synchronize()
        got = vb.copy_to(np.empty(vb.nbytes // 4, np.uint32))
        assert (got[:256] == 5).all() and (got[1024:1280] == 6).all(), got[:4]
        print("OK")
        """
    )


@pytest.mark.gpu
def test_host_node_graph_launches_blocked_by_the_driver_let_a_python_thread_open_the_gate() -> None:
    # A launch blocked inside the driver must not hold the GIL: the thread that opens
    # the gate is Python. The launch is blocked for certain here: another thread sits
    # in a raw cuMemFree behind b's wait, which holds a driver lock that launches need
    # (measured on CUDA 13.0; the host-node launch queue that blocked after about 28
    # launches once did not block at 20,000 on the same driver).
    run_isolated(
        """
        import time
        from cuda.bindings import driver as raw
        make_current()
        s, b, cap = cu.Stream(), cu.Stream(non_blocking=True), cu.Stream()
        ran = []
        with cap.capture() as g:
            cap.launch_host_func(ran.append, 1)
        exe = g.instantiate()
        gate = cu.PinnedBuffer(4, mapped=True)
        gate.array(np.uint32)[0] = 0
        b.wait_value32(gate, 1)
        victim = raw.cuMemAlloc(1024)[1]
        freer = threading.Thread(target=lambda: raw.cuMemFree(victim))
        freer.start()
        time.sleep(0.3)  # inside cuMemFree now, behind b's wait
        opened = []

        def opener():
            time.sleep(1.0)
            opened.append(time.monotonic())  # before the gate opens: see below
            gate.array(np.uint32)[0] = 1

        t = threading.Thread(target=opener)
        t.start()
        t0 = time.monotonic()
        for _ in range(100):
            exe.launch(s)
        t1 = time.monotonic()
        t.join(30)
        freer.join(30)
        s.synchronize()
        assert opened and len(ran) == 100, (opened, len(ran))
        # The launching thread was blocked in the driver until the gate opened (else
        # this test shows nothing): its loop ended after the opener's timestamp.
        assert t1 >= opened[0], ("the launches never blocked", t1 - t0)
        print("blocked launches waited", round(t1 - t0, 2), "s for the gate")
        print("OK")
        """
    )


@pytest.mark.gpu
def test_a_release_waiting_for_a_python_host_function_completes() -> None:
    # The pool's destroy synchronises its stream, whose host function needs the GIL.
    run_isolated(
        """
        import time
        make_current()
        s = cu.Stream()
        pool = cu.MemoryPool()
        pool.allocate(1 << 20, stream=s).close()
        ran = []
        s.launch_host_func(lambda: (time.sleep(0.3), ran.append(1)))
        t0 = time.monotonic()
        pool.close()  # waits for the host function, which needs the GIL
        del pool
        cu.Event().close()
        s.synchronize()
        assert ran == [1]
        print("OK")
        """
    )


def test_a_handler_that_raises_does_not_stop_the_forwarding(fake: FakeLog) -> None:
    seen: list[str] = []

    class Flaky(logging.Handler):
        def handle(self, record: logging.LogRecord) -> bool:
            seen.append(record.getMessage())
            if len(seen) == 1:
                raise RuntimeError("a broken handler")
            return True

    logger = logging.getLogger("cudriver.driver")
    handler = Flaky()
    logger.addHandler(handler)
    try:
        cu.log_driver_messages(interval=0.005)
        fake.add("first", level="W")
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.005)
        fake.add("second", level="W")
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        cu.log_driver_messages(False)
    finally:
        logger.removeHandler(handler)
    assert seen[:2] == ["first", "second"]


def test_an_error_keeps_its_reasons_among_many_lines_of_other_threads(fake: FakeLog) -> None:
    fake.add("first reason")
    for i in range(40):
        fake.add(f"another thread's line {i}", thread=999)
    fake.add("second reason")
    fake.add("Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuMemcpyHtoD_v2")
    assert make_error(1, "cuMemcpyHtoD").driver_log == (
        "first reason",
        "second reason",
        "Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuMemcpyHtoD_v2",
    )
