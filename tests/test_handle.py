from __future__ import annotations

import gc
import os
import threading
import time
import warnings
from typing import Any

import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver._lifetime import _handle, _release
from cudriver._lifetime._handle import Handle, pending_releases, release_state, settle
from cudriver._lifetime._pins import pin, pin_all, unpin, unpin_all

from ._support import keeps_alive, package_root

OK = (drv.CUresult.CUDA_SUCCESS,)


class Thing(Handle):
    __slots__ = ()
    _kind = "Thing"

    def __init__(
        self,
        value: int,
        log: list[Any],
        *,
        owned: bool = True,
        owner: Any = None,
        keep: tuple[Any, ...] = (),
        status: Any = OK,
    ) -> None:
        def release(h: Any) -> Any:
            log.append(int(h))
            return status

        self._init_handle(
            drv.CUstream(value),
            release=release,
            func="cuThingDestroy",
            owned=owned,
            owner=owner,
            keep=keep,
        )

    def use(self) -> int:
        h = self._h
        if h is None:
            self._raise_closed()
        return int(h)


def test_close_twice_releases_once() -> None:
    log: list[int] = []
    t = Thing(0x10, log)
    assert not t.closed
    t.close()
    t.close()
    assert t.closed
    assert log == [0x10]


def test_with_closes() -> None:
    log: list[int] = []
    with Thing(0x11, log) as t:
        assert t.use() == 0x11
    assert t.closed
    assert log == [0x11]


def test_use_after_close_raises_before_driver() -> None:
    log: list[int] = []
    t = Thing(0x12, log)
    t.close()
    with pytest.raises(cu.ClosedError, match="Thing is closed"):
        t.use()
    with pytest.raises(ValueError, match="Thing is closed"):
        _ = t.handle
    with pytest.raises(cu.ClosedError):
        int(t)
    with pytest.raises(cu.ClosedError), t:
        pass
    assert log == [0x12]


def test_collection_queues_the_release_for_the_releasing_thread() -> None:
    gc.collect()  # other tests' garbage would be queued here too
    settle()
    log: list[int] = []
    threads: list[str] = []

    class Named(Thing):
        __slots__ = ()

    t = Named(0x13, log)
    t._state.release = lambda h: (threads.append(threading.current_thread().name), OK)[1]
    # Collection may happen anywhere (inside a lock, on the driver's thread): the
    # release is queued, and the releasing thread runs it (held back here meanwhile).
    with _release._reaping:
        del t
        gc.collect()
        assert threads == []
        assert pending_releases() == 1
    deadline = time.monotonic() + 10
    while not threads and time.monotonic() < deadline:
        time.sleep(0.001)
    assert threads == ["cudriver-releases"]
    settle()
    assert pending_releases() == 0


def test_a_new_handle_leaves_waiting_releases_to_the_releasing_thread() -> None:
    # A release may wait for the whole device (cuMemFree behind another stream's
    # wait_value32): a constructor, a lookup or a launch never runs one. Those that
    # never wait (a stream's or an event's destroy) still run at once.
    log: list[int] = []
    with _release._reaping:  # the releasing thread held back
        waiting = Thing(0x15, log)
        waiting._state.func = "cuMemFree"  # a release that waits for the device
        Thing(0x14, log)
        del waiting
        gc.collect()
        t = Thing(0x16, log)
        assert log == [0x14]
        assert _release.pending_releases() == 1
    settle()
    assert log == [0x14, 0x15]
    t.close()  # its own release, asked for: here
    assert log == [0x14, 0x15, 0x16]


def test_lease_defers_the_release_until_it_goes() -> None:
    log: list[int] = []
    t = Thing(0x17, log)
    lease = t._lease()
    t.close()
    assert t.closed
    assert log == []  # something can still use the handle
    del lease
    settle()
    assert log == [0x17]


def test_a_lease_in_a_reference_cycle_still_lets_the_handle_go() -> None:
    # The garbage collector frees a cycle by clearing its members: the lease's state
    # must survive that, or the closed handle would never be released.
    log: list[int] = []
    t = Thing(0x1C, log)
    lease = t._lease()
    box: list[Any] = [lease]
    lease.target = box  # lease -> box -> lease
    t.close()
    assert log == [] and len(t._state.leases) == 1
    was = gc.isenabled()
    gc.disable()
    try:
        del lease, box
        settle()
        assert log == []  # only the collector can free the cycle
        gc.collect()
    finally:
        if was:
            gc.enable()
    settle()
    assert log == [0x1C]
    assert len(t._state.leases) == 0


def test_lease_fields_weak_references_and_misuse() -> None:
    import weakref

    log: list[int] = []
    t = Thing(0x1D, log)
    lease = t._lease()
    assert lease._state is t._state and lease.target is t
    assert t._state.leases == {id(lease)}
    ref = weakref.ref(lease)
    with pytest.raises(RuntimeError, match="made once"):
        lease.__init__(t._state, t)  # type: ignore[misc]
    assert t._state.leases == {id(lease)}
    with pytest.raises(TypeError):
        _handle.Lease("not a state", t)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        lease._state = None  # type: ignore[misc]
    del lease
    assert ref() is None
    assert t._state.leases == set()
    t.close()  # no lease left: released here
    assert log == [0x1D]


def test_a_lease_alive_at_interpreter_exit_is_quiet() -> None:
    import subprocess
    import sys

    code = (
        "import faulthandler; faulthandler.enable()\n"
        "from tests.test_handle import Thing\n"
        "log = []\n"
        "t = Thing(0x1E, log)\n"
        "KEEP = [t._lease(), t._lease()]\n"
        "t.close()\n"
        "print('ok', log)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = (package_root(), root, os.environ.get("PYTHONPATH"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok []"
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr


def test_pin_defers_a_close_until_the_call_ends() -> None:
    # A driver call without the GIL pins the handle: a close() on another thread
    # meanwhile must not destroy it under the call.
    log: list[int] = []
    t = Thing(0x18, log)
    st = pin(t)
    st2 = pin(t)  # two threads in calls on the same handle
    t.close()
    assert t.closed
    assert log == []
    unpin(st2)
    assert log == []
    unpin(st)  # the last pin queues the release: the releasing thread runs it
    settle()
    assert log == [0x18]
    assert st.pins == []


def test_pin_of_a_closed_handle_raises_and_leaves_no_pin() -> None:
    log: list[int] = []
    t = Thing(0x19, log)
    t.close()
    with pytest.raises(cu.ClosedError, match="Thing is closed"):
        pin(t)
    assert t._state.pins == []


def test_pin_all_is_all_or_nothing() -> None:
    log: list[int] = []
    a, b = Thing(0x1A, log), Thing(0x1B, log)
    b.close()
    with pytest.raises(cu.ClosedError):
        pin_all(a, None, 5, b)
    assert a._state.pins == []
    states = pin_all(a, None, drv.CUstream(3))  # raw handles and None are skipped
    assert len(states) == 1
    a.close()
    assert log == [0x1B]
    unpin_all(states)
    settle()
    assert log == [0x1B, 0x1A]


def test_last_unpin_during_a_global_capture_queues_the_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[int] = []
    t = Thing(0x1C, log)
    st = pin(t)
    t.close()
    monkeypatch.setattr(cu.errors.GUARD, "captures", {1})  # a GLOBAL capture is open
    unpin(st)
    assert log == []
    assert pending_releases() == 1
    monkeypatch.undo()
    settle()
    assert log == [0x1C]


class WaitingRelease:
    """A release that waits for the device, as a VirtualBuffer's does."""

    waits_for_device = True

    def __init__(self, log: list[int]) -> None:
        self.log = log

    def __call__(self, h: Any) -> Any:
        self.log.append(int(h))
        return OK


def test_a_release_that_waits_for_the_device_is_never_drained_beside_a_capture(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Another thread's capture (any mode) is open when the last pin goes: the release
    # (a device-wide wait) is left to the releasing thread, which idles until the
    # capture ends; ordinary releases queued beside it still run here.
    log: list[int] = []
    t = Thing(0x1D, log)
    t._state.release = WaitingRelease(log)
    plain = Thing(0x1E, log)
    st, st2 = pin(t), pin(plain)
    t.close()
    plain.close()
    monkeypatch.setattr(cu.errors.GUARD, "open", {7})  # a RELAXED capture elsewhere
    unpin(st)
    unpin(st2)  # the ordinary one runs here; the waiting one is queued
    assert log == [0x1E]
    assert pending_releases() == 1
    _handle.drain()  # still not here
    assert log == [0x1E] and pending_releases() == 1
    monkeypatch.undo()
    settle()
    assert log == [0x1E, 0x1D]
    assert pending_releases() == 0


def test_a_close_beside_a_capture_defers_a_release_that_waits_for_the_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An explicit close (no pin, no collection) while another thread's capture is open:
    # a stream-ordered free or a pool's destroy would be captured, or break the capture.
    log: list[int] = []
    t = Thing(0x1F, log)
    t._state.release = WaitingRelease(log)
    plain = Thing(0x20, log)
    monkeypatch.setattr(cu.errors.GUARD, "open", {8})
    t.close()
    plain.close()  # an ordinary release still runs at once
    assert log == [0x20]
    assert pending_releases() == 1
    monkeypatch.undo()
    settle()
    assert log == [0x20, 0x1F]
    assert pending_releases() == 0


def test_borrowed_never_releases() -> None:
    log: list[int] = []
    t = Thing(0x14, log, owned=False)
    assert not t.owned
    t.close()
    del t
    gc.collect()
    assert log == []


def test_owner_kept_alive() -> None:
    log: list[int] = []
    keeps_alive(lambda owner: Thing(0x15, log, owned=False, owner=owner))
    assert log == []  # borrowed: nothing released


def test_dependants_released_before_dependencies() -> None:
    log: list[int] = []
    parent = Thing(0x20, log)
    child = Thing(0x21, log, keep=(parent,))
    del parent
    gc.collect()
    assert log == []  # the child keeps the parent alive
    del child
    gc.collect()
    settle()
    assert log == [0x21, 0x20]


def test_cycle_collected_in_dependency_order() -> None:
    log: list[int] = []
    parent = Thing(0x30, log)
    child = Thing(0x31, log, keep=(parent,))
    box: list[Any] = [child]
    box.append(box)  # a reference cycle through the child
    del parent, child, box
    gc.collect()
    gc.collect()
    settle()
    assert log == [0x31, 0x30]


def test_dependency_released_after_its_dependant_whatever_the_collection_order() -> None:
    # Garbage collection finalises the objects of a reference cycle in no set order: a
    # parent may be finalised before the child that keeps it.
    gc.collect()
    settle()
    log: list[int] = []
    parent = Thing(0x32, log)
    child = Thing(0x33, log, keep=(parent,))
    release_state(parent._state, collected=True)  # as if collected first
    settle()
    assert log == []  # the child still needs it
    release_state(child._state, collected=True)
    settle()
    assert log == [0x33, 0x32]
    for t in (parent, child):
        if t._finalizer is not None:  # pure mode: a weakref.finalize per object
            t._finalizer.detach()


def test_failing_release_becomes_warning() -> None:
    log: list[int] = []
    t = Thing(0x40, log, status=(drv.CUresult.CUDA_ERROR_INVALID_HANDLE,))
    with pytest.warns(cu.CudaWarning, match="cuThingDestroy failed: CUDA_ERROR_INVALID_HANDLE"):
        t.close()
    assert t.closed


def test_failing_release_in_finaliser_never_raises() -> None:
    log: list[int] = []

    class Boom(Thing):
        __slots__ = ()

    t = Boom(0x41, log, status=(drv.CUresult.CUDA_ERROR_INVALID_HANDLE,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # even warnings-as-errors must not escape
        release_state(t._state)
    assert log == [0x41]


def test_release_raising_becomes_warning() -> None:
    class Raiser(Handle):
        __slots__ = ()
        _kind = "Raiser"

        def __init__(self) -> None:
            def release(h: Any) -> Any:
                raise RuntimeError("library gone")

            self._init_handle(drv.CUstream(1), release=release, func="cuX")

    r = Raiser()
    with pytest.warns(cu.CudaWarning, match="library gone"):
        r.close()


def test_forked_child_does_not_release() -> None:
    log: list[int] = []
    t = Thing(0x50, log)
    t._state.pid = os.getpid() + 1  # as seen from a forked child
    t.close()
    assert log == []


def test_repr_without_driver_calls() -> None:
    log: list[int] = []
    t = Thing(0x60, log)
    assert repr(t) == "<cudriver.Thing 0x60 owned>"
    b = Thing(0x61, log, owned=False)
    assert repr(b) == "<cudriver.Thing 0x61 borrowed>"
    t.close()
    assert repr(t) == "<cudriver.Thing closed>"


def test_eq_hash_agree() -> None:
    log: list[int] = []
    a = Thing(0x70, log, owned=False)
    b = Thing(0x70, log, owned=False)
    c = Thing(0x71, log, owned=False)
    assert a == b
    assert hash(a) == hash(b)
    assert a != c
    assert a != 0x70  # never equal to a bare int
    assert len({a, b, c}) == 2


def test_int_for_raw_calls() -> None:
    log: list[int] = []
    t = Thing(0x80, log, owned=False)
    assert int(t) == 0x80
    assert int(drv.CUstream(t)) == 0x80  # a cudriver object goes where a handle goes


def test_not_picklable() -> None:
    import pickle

    t = Thing(0x90, [], owned=False)
    with pytest.raises(TypeError, match="cannot pickle"):
        pickle.dumps(t)


def _handle_classes() -> list[type]:
    import cudriver

    seen: dict[str, type] = {}
    stack = list(Handle.__subclasses__())
    while stack:
        c = stack.pop()
        stack.extend(c.__subclasses__())
        if c.__module__.startswith("cudriver") and getattr(cudriver, c.__name__, None) is c:
            seen[c.__name__] = c
    return [seen[n] for n in sorted(seen)]


@pytest.mark.parametrize("cls", _handle_classes(), ids=lambda c: c.__name__)
def test_an_object_made_without_its_constructor_is_closed_not_broken(cls: type) -> None:
    # Found last round: such an object raised AttributeError from a pinned call.
    import inspect

    obj = cls.__new__(cls)
    assert obj.closed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # old names call the new ones
        for name, member in inspect.getmembers(cls):
            if name.startswith("_") or name in ("closed", "owned") or isinstance(member, type):
                continue
            try:
                if isinstance(member, property):
                    getattr(obj, name)
                elif callable(member) and not isinstance(
                    inspect.getattr_static(cls, name), (staticmethod, classmethod)
                ):
                    getattr(obj, name)()
            except (cu.ClosedError, TypeError, NotImplementedError):
                pass  # closed; or the method needs arguments
            except AttributeError as exc:
                raise AssertionError(f"{cls.__name__}.{name}: {exc!r}") from None
    with pytest.raises(cu.ClosedError):
        _ = obj.handle


# -- streams that may wait for the host (_runtime._gates) -------------------------------------


class _FakeGateDriver:
    """The few driver calls _gates makes, on streams whose pending state the test sets."""

    def __init__(self) -> None:
        self.pending: set[int] = set()
        self.destroyed: set[int] = set()
        self.asked: list[int] = []

    def cuThreadExchangeStreamCaptureMode(self, mode: Any) -> tuple[Any, ...]:
        return (drv.CUresult.CUDA_SUCCESS, mode)

    def cuStreamIsCapturing(self, h: Any) -> tuple[Any, ...]:
        assert int(h) not in self.destroyed, "asked about a destroyed stream"
        return (drv.CUresult.CUDA_SUCCESS, drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)

    def cuStreamQuery(self, h: Any) -> tuple[Any, ...]:
        assert int(h) not in self.destroyed, "asked about a destroyed stream"
        self.asked.append(int(h))
        ready = int(h) not in self.pending
        return (drv.CUresult.CUDA_SUCCESS if ready else drv.CUresult.CUDA_ERROR_NOT_READY,)


def test_a_wait_holds_back_only_releases_that_wait_for_the_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # cuMemFree behind a stream that waits for the host stops every thread's driver
    # calls (measured): it waits until the stream has no work pending; others do not.
    from cudriver._runtime import _gates

    fake = _FakeGateDriver()
    for name in ("cuThreadExchangeStreamCaptureMode", "cuStreamIsCapturing", "cuStreamQuery"):
        monkeypatch.setattr(_gates._drv, name, getattr(fake, name))
    monkeypatch.setattr(_gates, "WAITING", _gates.WAITING)  # restored after the test
    marks: list[int] = []  # the events busy() records on a busy stream (none here)
    monkeypatch.setattr(_gates, "_record", lambda h: marks.append(int(h)))
    _gates.WAITING.clear()
    gated = Thing(0x1C0, [])  # an owned "stream" where a wait was enqueued
    _gates.note(gated)
    _gates.note(gated)  # one entry covers every later wait
    assert list(_gates.WAITING) == [0x1C0]
    fake.pending.add(0x1C0)
    log: list[int] = []
    free = Thing(0x1C1, log)
    free._state.func = "cuMemFree"
    plain = Thing(0x1C2, log)
    free.close()
    plain.close()
    assert log == [0x1C2]  # the free waits; the other release does not
    assert pending_releases() == 1
    settle()  # still pending: tried, held back again, never waited for
    assert log == [0x1C2] and pending_releases() == 1
    fake.pending.clear()  # the gate opened and the stream drained
    settle()
    assert log == [0x1C2, 0x1C1] and pending_releases() == 0
    assert _gates.WAITING == {}  # forgotten once idle
    assert marks and set(marks) == {0x1C0}  # a busy stream gets a mark of what came first
    # An owned stream retired before its destroy is never asked about afterwards.
    _gates.note(gated)
    fake.pending.add(0x1C0)
    _gates.retire(drv.CUstream(0x1C0))
    fake.destroyed.add(0x1C0)
    assert not _gates.busy()
    for raw_stream in (0, 1, 2):  # the NULL streams are never noted
        _gates.note(raw_stream)
    assert _gates.WAITING == {}


def test_a_forked_child_never_waits_on_the_lock_a_parent_thread_held() -> None:
    # A release that waits for the device runs under _release.WAITER_LOCK; a child
    # forked while another thread of the parent held it frees nothing and must not
    # take it (the holder does not exist in the child: it would wait forever).
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import faulthandler, os, threading, sys
        faulthandler.dump_traceback_later(20, exit=True)
        from cudriver._lifetime import _release
        freed = []
        st = _release.State(0x1000, freed.append, "cuMemFree", "DeviceBuffer", (), None)
        held, done = threading.Event(), threading.Event()
        def hold():
            with _release.WAITER_LOCK:
                held.set()
                done.wait(30)
        t = threading.Thread(target=hold)
        t.start()
        held.wait(10)
        pid = os.fork()
        if pid == 0:
            _release.release(st)  # the parent's state: nothing freed, no lock taken
            os._exit(0 if freed == [] and st.handle is None else 3)
        _, status = os.waitpid(pid, 0)
        done.set()
        t.join()
        _release.release(st)  # here it runs, under the lock
        print(os.waitstatus_to_exitcode(status), freed)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "[4096]"], out.stdout + out.stderr
