"""Host functions: registry and error delivery without a GPU; eager and captured with one."""

from __future__ import annotations

import functools
import gc
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import cudriver as cu
from cudriver import WaitCondition
from cudriver._lifetime import _hostfn
from cudriver._lifetime._hostfn import HostFuncRecord, registry_size

from ._support import Mapped, blocked, in_threads, until

# Made-up stream and context keys for the tests without a GPU.
_S1, _S2, _C1, _C2 = 0x51000, 0x52000, 0xC1000, 0xC2000


class _Hook:
    """Collects what reaches sys.unraisablehook."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __call__(self, args: Any) -> None:
        self.seen.append(args)


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> _Hook:
    h = _Hook()
    monkeypatch.setattr(sys, "unraisablehook", h)
    return h


@pytest.fixture
def clean() -> Iterator[None]:
    """Leave the module's registries as they were, whatever the test did."""
    yield
    with _hostfn._lock:
        for k in (_S1, _S2, 1):
            _hostfn.PENDING.pop(k, None)
            _hostfn._dead.pop(k, None)
        for key in [k for k, r in _hostfn._holds.items() if r.ctx_key in (_C1, _C2)]:
            del _hostfn._holds[key]
    mine = [k for k, r in list(_hostfn._eager.items()) if isinstance(r, HostFuncRecord)]
    for key in [k for k in mine if _hostfn._eager[k].ctx_key in (_C1, _C2)]:
        del _hostfn._eager[key]


def _eager(fn: Callable[..., Any], *args: Any, stream: int = _S1, ctx: int = _C1) -> int:
    """Register a record the way launch() does for an eager launch; return its key."""
    key = next(_hostfn._keys)
    _hostfn._eager[key] = HostFuncRecord(key, fn, args, {}, stream, ctx)
    return key


def _boom(msg: str = "boom") -> None:
    raise ValueError(msg)


# -- without a GPU ----------------------------------------------------------------------------


@pytest.mark.usefixtures("clean")
def test_trampoline_runs_a_record_once_and_forgets_it() -> None:
    out: list[Any] = []
    before = registry_size()
    key = _eager(out.append, 1)
    assert registry_size() == before + 1
    _hostfn.run_record(key)
    assert out == [1]
    assert registry_size() == before
    assert key not in _hostfn._eager


@pytest.mark.usefixtures("clean")
def test_errors_are_stored_and_raised_by_the_next_sync() -> None:
    out: list[int] = []
    _hostfn.run_record(_eager(_boom))
    _hostfn.run_record(_eager(out.append, 2))  # later callbacks still run
    assert out == [2]
    with pytest.raises(cu.HostCallbackError, match="_boom raised ValueError: boom") as ei:
        _hostfn.after_sync(_S1)
    cause = ei.value.__cause__
    assert isinstance(cause, ValueError)
    assert ei.value.errors == [cause]  # type: ignore[attr-defined]
    frames = [f.name for f in traceback.extract_tb(cause.__traceback__)]
    assert "_boom" in frames
    _hostfn.after_sync(_S1)  # collected: nothing more
    assert _S1 not in _hostfn.PENDING


@pytest.mark.usefixtures("clean")
def test_several_errors_raise_the_first_and_count_the_rest() -> None:
    for m in ("first", "second", "third"):
        _hostfn.run_record(_eager(_boom, m))
    with pytest.raises(
        cu.HostCallbackError, match=r"first \(and 2 more host-function errors"
    ) as ei:
        _hostfn.after_sync(_S1)
    errs = ei.value.errors  # type: ignore[attr-defined]
    assert [str(e) for e in errs] == ["first", "second", "third"]
    assert ei.value.__cause__ is errs[0]


@pytest.mark.usefixtures("clean")
def test_errors_stay_with_their_stream() -> None:
    _hostfn.run_record(_eager(_boom, "on s2", stream=_S2))
    _hostfn.after_sync(_S1)  # another stream: nothing
    with pytest.raises(cu.HostCallbackError, match="on s2"):
        _hostfn.after_sync(_S2)


@pytest.mark.usefixtures("clean")
def test_base_exceptions_are_stored_too() -> None:
    def leave() -> None:
        raise SystemExit(3)

    _hostfn.run_record(_eager(leave))  # the process survives
    with pytest.raises(cu.HostCallbackError) as ei:
        _hostfn.after_sync(_S1)
    assert isinstance(ei.value.__cause__, SystemExit)


@pytest.mark.usefixtures("clean")
def test_context_sync_collects_its_streams_errors_only() -> None:
    _hostfn.run_record(_eager(_boom, "c1 s1", stream=_S1, ctx=_C1))
    _hostfn.run_record(_eager(_boom, "c2 s1", stream=_S1, ctx=_C2))
    _hostfn.run_record(_eager(_boom, "c1 s2", stream=_S2, ctx=_C1))
    with pytest.raises(cu.HostCallbackError, match=r"c1 s1 \(and 1 more") as ei:
        _hostfn.after_context_sync(_C1)
    assert [str(e) for e in ei.value.errors] == ["c1 s1", "c1 s2"]  # type: ignore[attr-defined]
    assert _S2 not in _hostfn.PENDING
    with pytest.raises(cu.HostCallbackError, match="c2 s1"):
        _hostfn.after_sync(_S1)


@pytest.mark.usefixtures("clean")
def test_uncollected_errors_reach_unraisablehook_on_release(hook: _Hook) -> None:
    _hostfn.run_record(_eager(_boom, "never collected"))
    release = _hostfn.watch_stream(_S1)
    release()
    assert len(hook.seen) == 1
    args = hook.seen[0]
    assert isinstance(args.exc_value, cu.HostCallbackError)
    assert isinstance(args.exc_value.__cause__, ValueError)
    assert "never collected" in str(args.exc_value)
    assert "closed before synchronize() collected it" in args.err_msg
    assert args.object is _boom
    assert _S1 not in _hostfn.PENDING


@pytest.mark.usefixtures("clean")
def test_errors_after_the_stream_was_closed_are_reported_at_once(hook: _Hook) -> None:
    _hostfn.watch_stream(_S1)()
    assert hook.seen == []  # no errors, nothing reported
    _hostfn.run_record(_eager(_boom, "late"))
    assert len(hook.seen) == 1
    assert "late" in str(hook.seen[0].exc_value)
    assert _S1 not in _hostfn.PENDING
    _hostfn.watch_stream(_S1)  # the handle value reused by a new stream
    assert _S1 not in _hostfn._dead


@pytest.mark.usefixtures("clean")
def test_unknown_key_is_reported_not_crashed(hook: _Hook) -> None:
    _hostfn.run_record(987_654_321_000)
    _hostfn.run_record(0)  # a NULL user data pointer
    assert len(hook.seen) == 2
    assert "was not found" in str(hook.seen[0].exc_value)


@pytest.mark.usefixtures("clean")
def test_trampoline_lets_nothing_escape(hook: _Hook) -> None:
    class Broken:
        @property
        def fn(self) -> Any:
            raise RuntimeError("internal failure")

    key = next(_hostfn._keys)
    _hostfn._eager[key] = Broken()  # the trampoline's own reading of the record fails
    _hostfn.run_record(key)  # returns normally
    assert "internal failure" in str(hook.seen[0].exc_value)


@pytest.mark.usefixtures("clean")
def test_stream_key_write_holds_a_captured_record_until_it_ran() -> None:
    out: list[int] = []
    key = next(_hostfn._keys)
    rec = HostFuncRecord(key, out.append, (7,), {}, 0, _C1)
    assert rec.stream_key == 1  # NULL means the legacy stream
    _hostfn._captured[key] = weakref.ref(rec)
    wr = weakref.ref(rec)
    rec.stream_key = _S1  # what GraphExec.launch does, twice
    rec.stream_key = _S1
    assert rec.stream_key == _S1
    del rec
    gc.collect()
    assert wr() is not None  # held while the launches are in flight
    _hostfn.run_record(key)
    assert wr() is not None
    _hostfn.run_record(key)
    assert out == [7, 7]
    gc.collect()
    assert wr() is None
    _hostfn._captured.pop(key, None)


@pytest.mark.usefixtures("clean")
@pytest.mark.parametrize(
    ("ctx_key", "launched_on", "other_sync", "own_sync"),
    [
        (
            _C1,
            _S2,
            functools.partial(_hostfn.after_sync, _S1),
            functools.partial(_hostfn.after_sync, _S2),
        ),
        (
            _C2,
            _S1,
            functools.partial(_hostfn.after_context_sync, _C1),
            functools.partial(_hostfn.after_context_sync, _C2),
        ),
    ],
    ids=["stream", "context"],
)
def test_sync_drops_holds_of_launches_that_never_ran(
    ctx_key: int,
    launched_on: int,
    other_sync: Callable[[], None],
    own_sync: Callable[[], None],
) -> None:
    rec = HostFuncRecord(next(_hostfn._keys), print, (), {}, _S1, ctx_key)
    wr = weakref.ref(rec)
    rec.stream_key = launched_on
    del rec
    other_sync()  # another stream's or context's synchronize: still held
    assert wr() is not None
    own_sync()
    gc.collect()
    assert wr() is None
    assert _S1 not in _hostfn.PENDING


def test_launch_host_func_checks_before_the_driver(fake_stream: cu.Stream) -> None:
    s = fake_stream
    with pytest.raises(TypeError, match="needs a callable, not int"):
        s.launch_host_func(5)  # type: ignore[arg-type]
    s.close()
    with pytest.raises(cu.ClosedError, match="Stream is closed"):
        s.launch_host_func(print)


def test_launch_host_funcs_checks_every_item_before_the_driver(fake_stream: cu.Stream) -> None:
    s = fake_stream
    with pytest.raises(TypeError, match="item 1 is a int"):
        s.launch_host_funcs([print, 5, print])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not iterable"):
        s.launch_host_funcs(5)  # type: ignore[arg-type]
    s.close()
    with pytest.raises(cu.ClosedError, match="Stream is closed"):
        s.launch_host_funcs([print])
    with pytest.raises(cu.ClosedError, match="Stream is closed"):
        s.launch_host_funcs([])


def test_unraisable_args_are_the_interpreters_type() -> None:
    t = _hostfn._unraisable_args_type()
    assert t is not None
    assert t.__name__ == "UnraisableHookArgs"


# -- with a GPU --------------------------------------------------------------------------------


# The `mapped` fixture (conftest.py) is device-mapped pinned memory: word 0 gates waits.


@pytest.mark.gpu
def test_host_func_runs_in_stream_order(stream: cu.Stream) -> None:
    seen: list[tuple[str, Any]] = []

    def record(tag: str, *, fn: Any = None) -> None:
        seen.append((tag, fn))

    stream.launch_host_func(record, "a")
    stream.launch_host_func(record, "b", fn=3)  # `fn` is free for the callable's own use
    stream.synchronize()
    assert seen == [("a", None), ("b", 3)]


@pytest.mark.gpu
def test_host_func_delays_later_work(stream: cu.Stream, mapped: Mapped) -> None:
    release = threading.Event()

    def slow() -> None:
        release.wait(10)

    stream.launch_host_func(slow)
    stream.write_value32((mapped, 4), 9)
    with blocked(stream, release.set):
        assert mapped.u32[1] == 0
    stream.synchronize()
    assert mapped.u32[1] == 9


@pytest.mark.gpu
def test_captured_host_func_runs_on_every_replay_without_user_references(
    stream: cu.Stream,
) -> None:
    calls: list[tuple[int, str, str]] = []

    class Payload:
        tag = "payload"

    def make() -> Callable[..., None]:
        def cb(a: int, p: Payload, *, c: str) -> None:
            calls.append((a, p.tag, c))

        return cb

    base = registry_size()
    payload = Payload()
    wr_payload = weakref.ref(payload)
    with stream.capture() as g:
        stream.launch_host_func(make(), 1, payload, c="kw")
    del payload
    exe = g.instantiate()
    del g
    gc.collect()
    for _ in range(4):
        exe.launch(stream)
        gc.collect()
        stream.synchronize()
    assert calls == [(1, "payload", "kw")] * 4
    assert wr_payload() is not None
    del exe
    gc.collect()
    stream.synchronize()  # runs the executable graph's release, which waited
    assert wr_payload() is None
    assert registry_size() == base


@pytest.mark.gpu
def test_exec_dropped_while_its_launch_is_in_flight(stream: cu.Stream, mapped: Mapped) -> None:
    calls: list[str] = []
    base = registry_size()
    with stream.capture() as g:
        stream.launch_host_func(calls.append, "ran")
    exe = g.instantiate()
    del g
    stream.wait_value32(mapped, 1, WaitCondition.EQ)
    exe.launch(stream)
    # Open the gate from another thread, so that even a destroy that waited for the
    # launch could not hang this test.
    timer = threading.Timer(0.3, mapped.open)
    timer.start()
    try:
        del exe
        gc.collect()  # cuGraphExecDestroy while the launch waits behind the gate
        stream.synchronize()
    finally:
        timer.join()
    assert calls == ["ran"]
    gc.collect()
    assert registry_size() == base


@pytest.mark.gpu
def test_exception_reraised_by_stream_synchronize(stream: cu.Stream) -> None:
    ran: list[int] = []

    def bad() -> None:
        raise ValueError("boom in a callback")

    stream.launch_host_func(bad)
    stream.launch_host_func(ran.append, 1)
    with pytest.raises(cu.HostCallbackError, match="boom in a callback") as ei:
        stream.synchronize()
    cause = ei.value.__cause__
    assert isinstance(cause, ValueError)
    assert "bad" in [f.name for f in traceback.extract_tb(cause.__traceback__)]
    assert ran == [1]
    stream.synchronize()  # collected once
    stream.launch_host_func(ran.append, 2)  # the stream still works
    stream.synchronize()
    assert ran == [1, 2]


@pytest.mark.gpu
def test_exception_reraised_by_context_synchronize(ctx: cu.Context, stream: cu.Stream) -> None:
    stream.launch_host_func(_boom, "via the context")
    with pytest.raises(cu.HostCallbackError, match="via the context"):
        ctx.synchronize()
    stream.synchronize()
    ctx.synchronize()


@pytest.mark.gpu
def test_replay_errors_go_to_the_launch_stream(ctx: cu.Context, stream: cu.Stream) -> None:
    other = cu.Stream(context=ctx)
    try:
        with stream.capture() as g:
            stream.launch_host_func(_boom, "in a replay")
        exe = g.instantiate()
        exe.launch(other)
        with pytest.raises(cu.HostCallbackError, match="in a replay"):
            other.synchronize()
        stream.synchronize()
        for _ in range(3):
            exe.launch(other)
        with pytest.raises(cu.HostCallbackError, match=r"in a replay \(and 2 more"):
            other.synchronize()
    finally:
        other.close()


@pytest.mark.gpu
def test_uncollected_error_reaches_unraisablehook_on_close(ctx: cu.Context, hook: _Hook) -> None:
    s = cu.Stream(context=ctx)
    s.launch_host_func(_boom, "uncollected")
    cu.driver.cuStreamSynchronize(s)  # ran, but no cudriver synchronize collected it
    assert hook.seen == []
    s.close()
    assert len(hook.seen) == 1
    assert isinstance(hook.seen[0].exc_value, cu.HostCallbackError)
    assert isinstance(hook.seen[0].exc_value.__cause__, ValueError)


@pytest.mark.gpu
def test_error_after_close_reaches_unraisablehook(
    ctx: cu.Context, mapped: Mapped, hook: _Hook
) -> None:
    s = cu.Stream(context=ctx)
    s.wait_value32(mapped, 1, WaitCondition.EQ)
    s.launch_host_func(_boom, "after close")
    s.close()  # the driver finishes the stream's work after this returns
    mapped.open()
    assert until(lambda: len(hook.seen) == 1)
    assert "after close" in str(hook.seen[0].exc_value)
    ctx.synchronize()  # nothing left to raise


@pytest.mark.gpu
def test_ten_thousand_host_funcs_in_order_without_growth(stream: cu.Stream) -> None:
    out: list[int] = []
    fn = out.append
    n = 10_000
    gc.collect()
    stream.synchronize()
    reg = registry_size()
    objs = len(gc.get_objects())
    for i in range(n):
        stream.launch_host_func(fn, i)
    stream.synchronize()
    assert out == list(range(n))
    out.clear()
    gc.collect()
    assert registry_size() == reg
    assert len(gc.get_objects()) - objs < 50


@pytest.mark.gpu
def test_a_batch_runs_in_order_after_earlier_work_and_before_later(
    stream: cu.Stream, mapped: Mapped
) -> None:
    seen: list[int] = []
    base = registry_size()
    stream.launch_host_func(seen.append, -1)
    stream.launch_host_funcs(functools.partial(seen.append, i) for i in range(500))
    stream.launch_host_funcs([])
    stream.launch_host_func(seen.append, 500)
    stream.write_value32((mapped, 4), 7)
    stream.synchronize()
    assert seen == list(range(-1, 501))
    assert mapped.u32[1] == 7
    assert registry_size() == base


@pytest.mark.gpu
def test_a_batch_holds_later_work_until_its_last_function_returns(
    stream: cu.Stream, mapped: Mapped
) -> None:
    release = threading.Event()
    stream.launch_host_funcs([lambda: None, lambda: release.wait(10), lambda: None])
    stream.write_value32((mapped, 4), 3)
    with blocked(stream, release.set):
        assert mapped.u32[1] == 0
    stream.synchronize()
    assert mapped.u32[1] == 3


@pytest.mark.gpu
def test_errors_in_a_batch_are_raised_by_the_next_sync(stream: cu.Stream) -> None:
    ran: list[int] = []

    def boom(i: int) -> None:
        ran.append(i)
        raise ValueError(f"boom {i}")

    stream.launch_host_funcs([functools.partial(boom, 0), lambda: ran.append(1),
                              functools.partial(boom, 2)])  # fmt: skip
    with pytest.raises(cu.HostCallbackError) as info:
        stream.synchronize()
    assert ran == [0, 1, 2]
    assert [str(e) for e in info.value.errors] == ["boom 0", "boom 2"]
    stream.synchronize()  # collected once


@pytest.mark.gpu
def test_a_captured_batch_replays_in_order_without_user_references(stream: cu.Stream) -> None:
    seen: list[int] = []
    base = registry_size()
    with stream.capture() as g:
        stream.launch_host_funcs(functools.partial(seen.append, i) for i in range(3))
    exe = g.instantiate()
    del g
    gc.collect()
    for _ in range(3):
        exe.launch(stream)
    stream.synchronize()
    assert seen == [0, 1, 2] * 3
    del exe
    gc.collect()
    stream.synchronize()
    assert registry_size() == base


@pytest.mark.gpu
def test_batches_from_threads_with_collections_keep_each_order(ctx: cu.Context) -> None:
    streams = [cu.Stream(non_blocking=True) for _ in range(4)]
    seen: dict[int, list[int]] = {k: [] for k in range(4)}

    def work(k: int) -> None:
        s = streams[k]
        for j in range(20):
            s.launch_host_funcs(functools.partial(seen[k].append, j * 50 + i) for i in range(50))
            if j % 5 == 0:
                gc.collect()
        s.synchronize()

    errors = in_threads(work, 4)
    for s in streams:
        s.synchronize()
        s.close()
    assert not errors, errors
    assert all(seen[k] == list(range(1000)) for k in range(4))
