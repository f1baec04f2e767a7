"""The sync debug mode: a warning or an error naming each call that makes the host wait.

Without a GPU: the mode's parsing, the context manager, the hooks' dispatch, that nothing
is registered while it is off (and that the compiled modules read the same lists), and
the call sites that report before any driver call (borrowed objects over made-up
handles: the report comes first, the driver call after it fails for want of a driver).
With a GPU: a loop with a hidden synchronisation (a copy without ``stream=``), warned
about on every iteration at the test's line, refused before it waits in "error" mode,
and the same loop made asynchronous, which warns once, for its one synchronize; and a
release that waits for the device.
"""

from __future__ import annotations

import inspect
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import cudriver as cu
from cudriver._observe import sync_debug as sd
from cudriver._runtime import _hooks

# The sources (the .pyx files are not in an installed wheel).
SRC = Path(__file__).resolve().parents[1] / "src" / "cudriver"


@pytest.fixture(autouse=True)
def _mode_off() -> Iterator[None]:
    """Every test starts and ends with the mode off and no observer registered."""
    cu.set_sync_debug_mode(None)
    assert _hooks.SYNC == [] and _hooks.ON == []
    yield
    cu.set_sync_debug_mode(None)
    assert _hooks.SYNC == []


def _line() -> int:
    """The line number of the caller's next line."""
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno + 1


# -- the mode --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "mode"),
    [
        (None, "off"),
        ("off", "off"),
        ("default", "off"),
        (0, "off"),
        ("warn", "warn"),
        (1, "warn"),
        ("error", "error"),
        (2, "error"),
    ],
)
def test_modes_are_named_as_torch_names_them(given: object, mode: str) -> None:
    cu.set_sync_debug_mode(given)  # type: ignore[arg-type]
    assert cu.get_sync_debug_mode() == mode
    assert bool(_hooks.ON) is (mode != "off")
    assert (sd._observe in _hooks.SYNC) is (mode != "off")


@pytest.mark.parametrize("bad", ["loud", "WARN", 3, -1, ""])
def test_unknown_modes_are_refused(bad: object) -> None:
    cu.set_sync_debug_mode("warn")
    with pytest.raises(ValueError, match="sync debug mode must be"):
        cu.set_sync_debug_mode(bad)  # type: ignore[arg-type]
    assert cu.get_sync_debug_mode() == "warn"  # unchanged


@pytest.mark.parametrize("bad", [True, False, 1.0, b"warn", ["warn"]])
def test_modes_of_other_types_are_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="sync debug mode must be"):
        cu.set_sync_debug_mode(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        with cu.sync_debug(bad):  # type: ignore[arg-type]
            pass  # pragma: no cover
    assert cu.get_sync_debug_mode() == "off"


def test_the_context_manager_restores_the_previous_mode() -> None:
    with cu.sync_debug():  # "warn" by default
        assert cu.get_sync_debug_mode() == "warn"
        with cu.sync_debug("error"):
            assert cu.get_sync_debug_mode() == "error"
        assert cu.get_sync_debug_mode() == "warn"
        with pytest.raises(KeyError):
            with cu.sync_debug(None):
                assert cu.get_sync_debug_mode() == "off"
                raise KeyError("restored on the way out")
        assert cu.get_sync_debug_mode() == "warn"
    assert cu.get_sync_debug_mode() == "off"
    assert _hooks.ON == []


def test_public_names() -> None:
    assert issubclass(cu.SyncWarning, cu.CudaWarning)
    assert issubclass(cu.SyncError, RuntimeError)
    assert not issubclass(cu.SyncError, cu.CudaError)  # no driver status: nothing failed
    for f in (cu.set_sync_debug_mode, cu.get_sync_debug_mode, cu.sync_debug):
        assert f.__module__ == "cudriver"


# -- free when off ------------------------------------------------------------------------


def test_lists_are_empty_when_off_and_never_rebound() -> None:
    lists = (_hooks.ON, _hooks.SYNC, _hooks.MARKS)
    cu.set_sync_debug_mode("warn")
    cu.set_sync_debug_mode("error")
    cu.set_sync_debug_mode(None)
    assert (_hooks.ON, _hooks.SYNC, _hooks.MARKS) == ([], [], [])
    assert all(a is b for a, b in zip(lists, (_hooks.ON, _hooks.SYNC, _hooks.MARKS), strict=True))


def _c_bindings(name: str) -> int:
    """How many compiled modules bind ``_hooks.<name>`` as a ``cdef list`` at import."""
    return sum(f"= _hooks.{name}\n" in p.read_text(encoding="utf-8") for p in SRC.rglob("*.pyx"))


def test_the_compiled_modules_hold_the_hooks_own_lists() -> None:
    # Each ``cdef list X = _hooks.ON`` holds a reference to the very list the observers
    # change: the module's, plus one per compiled module, plus getrefcount's argument.
    # A copy made at import (or a rebinding) would show as a missing reference.
    on, marks = _c_bindings("ON"), _c_bindings("MARKS")
    assert on >= 2 and marks >= 3  # _work._core, _release; _graph, _memory, _hostfn
    assert sys.getrefcount(_hooks.ON) >= 2 + on
    assert sys.getrefcount(_hooks.MARKS) >= 2 + marks


# -- the hooks -------------------------------------------------------------------------


def test_host_wait_tells_the_sync_observers_once_per_outermost_wait() -> None:
    seen: list[tuple[str, bool]] = []

    def cb(call: str, can_raise: bool) -> None:
        seen.append((call, can_raise))

    _hooks.register_sync(cb)
    try:
        assert _hooks.ON
        outer = _hooks.host_wait("Outer.wait (cuA)")
        inner = _hooks.host_wait("a queued release (cuB waits)", False)  # within: not told
        _hooks.end(inner)
        _hooks.end(outer)
        _hooks.end(_hooks.host_wait("Release (cuC)", False))
        assert seen == [("Outer.wait (cuA)", True), ("Release (cuC)", False)]
        assert outer == inner == ()  # no markers: nothing to close
    finally:
        _hooks.unregister_sync(cb)
    assert _hooks.ON == []


def test_a_refusing_observer_leaves_nothing_open() -> None:
    calls: list[str] = []

    def refuse(call: str, can_raise: bool) -> None:
        calls.append(call)
        if can_raise:
            raise cu.SyncError(call)

    _hooks.register_sync(refuse)
    try:
        with pytest.raises(cu.SyncError):
            _hooks.host_wait("first")
        # The refused wait was not counted as open: the next one is outermost again.
        _hooks.end(_hooks.host_wait("second", False))
        assert calls == ["first", "second"]
    finally:
        _hooks.unregister_sync(refuse)


def test_helpers_do_nothing_when_nothing_is_registered() -> None:
    assert _hooks.push("x") == ()
    _hooks.pop(())
    _hooks.mark("x", 5)
    _hooks.end(_hooks.host_wait("x"))


def test_warn_points_at_the_callers_line() -> None:
    cu.set_sync_debug_mode("warn")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        line = _line()
        _hooks.end(_hooks.host_wait("Some.call (cuX)"))
    assert [str(w.message) for w in seen] == ["Some.call (cuX) makes the host wait for the device"]
    assert seen[0].category is cu.SyncWarning
    assert (seen[0].filename, seen[0].lineno) == (__file__, line)


def test_error_raises_before_the_wait_and_releases_only_warn() -> None:
    cu.set_sync_debug_mode("error")
    with pytest.raises(cu.SyncError, match=r"Some\.call \(cuX\) would make the host wait"):
        _hooks.host_wait("Some.call (cuX)")
    with pytest.warns(cu.SyncWarning, match="waits for the device"):
        _hooks.end(_hooks.host_wait("Buf.close (cuMemFree waits for the device)", False))


def test_a_release_report_never_raises(capsys: pytest.CaptureFixture[str]) -> None:
    cu.set_sync_debug_mode("warn")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would be an exception: not in a release
        _hooks.end(_hooks.host_wait("Buf.close (cuMemFree waits for the device)", False))
    assert "SyncWarning: Buf.close (cuMemFree waits for the device)" in capsys.readouterr().err


# -- the call sites, reporting before any driver call (no GPU needed) --------------------


def _state(func: str, calls: list[object]) -> object:
    from cuda.bindings import driver as drv

    from cudriver._lifetime import _release

    def free(handle: object) -> tuple[object]:
        calls.append(handle)
        return (drv.CUresult.CUDA_SUCCESS,)

    return _release.State(123, free, func, "DeviceBuffer", (), None)


def test_a_release_that_waits_for_the_device_reports_and_never_raises() -> None:
    from cudriver._lifetime import _release

    calls: list[object] = []
    with cu.sync_debug("error"), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        line = _line()
        _release.release_state(_state("cuMemFree", calls))  # what close() runs
        _release.release(_state("cuMemFreeHost", calls))  # a queued one, run here
        _release.release_state(_state("cuStreamDestroy", calls))  # does not wait
    assert calls == [123, 123, 123]  # all released: "error" did not stop them
    assert [str(w.message) for w in seen] == [
        "DeviceBuffer.close (cuMemFree waits for the device) makes the host wait for the device",
        "a queued DeviceBuffer release (cuMemFreeHost waits for the device) makes the host "
        "wait for the device",
    ]
    assert all(w.category is cu.SyncWarning for w in seen)
    assert (seen[0].filename, seen[0].lineno) == (__file__, line)


def test_a_release_inside_a_reported_wait_is_not_reported_again() -> None:
    from cudriver._lifetime import _release

    calls: list[object] = []
    with cu.sync_debug("warn"), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        token = _hooks.host_wait("Stream.synchronize (cuStreamSynchronize)")
        _release.release(_state("cuMemFree", calls))  # as synchronize's settle() runs it
        _hooks.end(token)
    assert calls == [123]
    assert [str(w.message).split(" makes")[0] for w in seen] == [
        "Stream.synchronize (cuStreamSynchronize)"
    ]


def _borrowed() -> tuple[cu.Context, cu.DeviceBuffer]:
    ctx = cu.Context.from_handle(0x1234)
    return ctx, cu.DeviceBuffer.from_handle(0x10000, 64, context=ctx)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda c, b: cu.Stream.from_handle(0x1230).synchronize(), "Stream.synchronize"),
        (lambda c, b: c.synchronize(), "Context.synchronize (cuCtxSynchronize)"),
        (lambda c, b: b.copy_to(), "DeviceBuffer.copy_to without stream= (cuEventSync"),
        (lambda c, b: b.copy_to(np.empty(64, np.uint8)), "DeviceBuffer.copy_to without"),
        (lambda c, b: b.copy_from(bytes(64)), "DeviceBuffer.copy_from without stream="),
        (lambda c, b: b.fill(7), "DeviceBuffer.fill without stream= (cuEventSynchronize)"),
        (lambda c, b: cu.copy_2d(b, b, width_bytes=8, height=2), "copy_2d without stream="),
    ],
)
def test_error_mode_refuses_the_waiting_calls_before_the_driver(
    call: Callable[[cu.Context, cu.DeviceBuffer], object], name: str
) -> None:
    ctx, buf = _borrowed()
    with cu.sync_debug("error"):
        with pytest.raises(cu.SyncError, match=re.escape(name)):
            call(ctx, buf)


def test_calls_with_a_stream_are_not_reported(fake_stream: cu.Stream) -> None:
    _ctx, buf = _borrowed()
    with cu.sync_debug("error"):
        # They fail at the driver (none here), not at the mode: they do not wait.
        with pytest.raises(cu.CudaError):
            buf.fill(7, stream=fake_stream)
        with pytest.raises(cu.CudaError):
            fake_stream.query()


def test_a_closed_stream_says_closed_before_the_mode_speaks() -> None:
    s = cu.Stream.from_handle(0x1230)
    s.close()
    with cu.sync_debug("error"):
        with pytest.raises(cu.ClosedError):
            s.synchronize()


# -- with a GPU ------------------------------------------------------------------------------

# Hand-written PTX (no NVRTC needed): *out = v.
SET_VALUE_PTX = """
.version 8.0
.target sm_75
.address_size 64

.visible .entry set_value(
    .param .u64 set_value_param_0,
    .param .u32 set_value_param_1
)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;

    ld.param.u64 %rd1, [set_value_param_0];
    ld.param.u32 %r1, [set_value_param_1];
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r1;
    ret;
}
"""


def _sync_warnings(seen: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in seen if issubclass(w.category, cu.SyncWarning)]


@pytest.mark.gpu
def test_warn_mode_catches_a_hidden_synchronisation_in_a_loop(ctx: cu.Context) -> None:
    s = cu.Stream()  # blocking: the legacy stream's copy is ordered after its kernel
    with cu.Module.load(SET_VALUE_PTX) as m, cu.DeviceBuffer(4) as buf:
        k = m.kernel("set_value")
        out = np.zeros(1, np.uint32)
        got = []
        with cu.sync_debug("warn"), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for i in range(10):
                k.launch(s, 1, 1, buf, i)
                line = _line()
                buf.copy_to(out)  # waits: the hidden synchronisation
                got.append(int(out[0]))
        s.synchronize()
    s.close()
    assert got == list(range(10))
    sync = _sync_warnings(seen)
    assert len(sync) == 10, [str(w.message) for w in seen]
    for w in sync:
        assert str(w.message) == (
            "DeviceBuffer.copy_to without stream= (cuEventSynchronize) makes the host wait "
            "for the device"
        )
        assert (w.filename, w.lineno) == (__file__, line)


@pytest.mark.gpu
def test_error_mode_raises_at_the_first_hidden_synchronisation_before_it_waits(
    ctx: cu.Context,
) -> None:
    s = cu.Stream()
    with cu.Module.load(SET_VALUE_PTX) as m, cu.DeviceBuffer(4) as buf:
        k = m.kernel("set_value")
        out = np.full(1, 0xDEAD, np.uint32)
        done = 0
        with cu.sync_debug("error"):
            with pytest.raises(cu.SyncError, match=r"DeviceBuffer\.copy_to without stream="):
                for i in range(10):
                    k.launch(s, 1, 1, buf, 41 + i)
                    buf.copy_to(out)
                    done += 1  # pragma: no cover - never reached
        s.synchronize()
        assert done == 0
        assert out[0] == 0xDEAD  # the copy was refused, not made
        assert buf.copy_to(np.zeros(1, np.uint32))[0] == 41  # the kernel ran, once
    s.close()


@pytest.mark.gpu
def test_the_loop_made_asynchronous_warns_once_for_its_synchronize(ctx: cu.Context) -> None:
    s = cu.Stream()
    with cu.Module.load(SET_VALUE_PTX) as m, cu.DeviceBuffer(4) as buf:
        k = m.kernel("set_value")
        outs = [np.zeros(1, np.uint32) for _ in range(10)]
        with cu.sync_debug("warn"), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for i in range(10):
                k.launch(s, 1, 1, buf, i)
                buf.copy_to(outs[i], stream=s)
            line = _line()
            s.synchronize()
    s.close()
    assert [int(o[0]) for o in outs] == list(range(10))
    sync = _sync_warnings(seen)
    assert [str(w.message) for w in sync] == [
        "Stream.synchronize (cuStreamSynchronize) makes the host wait for the device"
    ]
    assert (sync[0].filename, sync[0].lineno) == (__file__, line)


@pytest.mark.gpu
def test_event_and_context_synchronize_are_reported(ctx: cu.Context) -> None:
    s = cu.Stream()
    ev = s.record()
    with cu.sync_debug("warn"), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ev.synchronize()
        ctx.synchronize()
    names = [str(w.message).split(" makes")[0] for w in _sync_warnings(seen)]
    assert names == [
        "Event.synchronize (cuEventSynchronize)",
        "Context.synchronize (cuCtxSynchronize)",
    ]
    with cu.sync_debug("error"), pytest.raises(cu.SyncError, match="Event.synchronize"):
        ev.synchronize()
    ev.close()
    s.close()


@pytest.mark.gpu
def test_a_release_that_waits_for_the_device_warns_and_never_raises(ctx: cu.Context) -> None:
    for mode in ("warn", "error"):  # a release never raises: "error" warns too
        buf = cu.DeviceBuffer(1 << 20)  # cuMemAlloc: its cuMemFree waits for the device
        with cu.sync_debug(mode), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            line = _line()
            buf.close()
        sync = _sync_warnings(seen)
        want = "DeviceBuffer.close (cuMemFree waits for the device) makes the host wait"
        assert [str(w.message) for w in sync] == [f"{want} for the device"], mode
        assert (sync[0].filename, sync[0].lineno) == (__file__, line)
    # A stream-ordered free only enqueues: nothing to report.
    s = cu.Stream()
    buf = cu.DeviceBuffer(1 << 20, stream=s)
    with cu.sync_debug("error"), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        buf.close()
    assert _sync_warnings(seen) == []
    s.synchronize()
    s.close()
