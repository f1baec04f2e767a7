from __future__ import annotations

import time

import pytest

import cudriver as cu


def test_interprocess_needs_no_timing() -> None:
    # validated before any driver call: works without a GPU
    with pytest.raises(ValueError, match="timing=False"):
        cu.Event(interprocess=True, timing=True)


def test_events_record_no_timing_by_default() -> None:
    # The defaults of cuda.core, PyTorch and Stream.record(): read from the signature,
    # so this runs without a GPU.
    import inspect

    assert inspect.signature(cu.Event).parameters["timing"].default is False


@pytest.mark.gpu
class TestEventGPU:
    def test_record_query_sync(self, stream: cu.Stream) -> None:
        ev = cu.Event()
        assert not ev.timing
        assert ev.record(stream) is ev
        ev.synchronize()
        assert ev.query() is True
        assert "no-timing" in repr(ev)
        with pytest.raises(TypeError, match=r"Stream\.legacy\(\)"):
            ev.record(None)  # type: ignore[arg-type]
        ev.close()
        assert ev.closed

    def test_synchronize_reraises_host_function_errors(self, stream: cu.Stream) -> None:
        def boom() -> None:
            raise KeyError("from the host function")

        ev = cu.Event()
        stream.launch_host_func(boom)
        ev.record(stream)
        with pytest.raises(cu.HostCallbackError, match="from the host function") as info:
            ev.synchronize()
        assert isinstance(info.value.__cause__, KeyError)
        stream.synchronize()  # collected once: nothing left to raise
        # Recorded through Stream.record(event) too, and on another stream: only the
        # errors of the stream the event was last recorded on.
        other = cu.Stream()
        try:
            stream.launch_host_func(boom)
            ev2 = other.record(cu.Event())
            ev2.synchronize()  # nothing ran on `other`: no error here
            with pytest.raises(cu.HostCallbackError):
                stream.synchronize()
            stream.launch_host_func(boom)
            stream.record(ev2)
            with pytest.raises(cu.HostCallbackError):
                ev2.synchronize()
        finally:
            other.close()

    def test_elapsed(self, stream: cu.Stream) -> None:
        a, b = cu.Event(timing=True), cu.Event(timing=True, blocking=True)
        a.record(stream)
        stream.launch_host_func(time.sleep, 0.05)  # b completes 50 ms after a, at least
        b.record(stream)
        b.synchronize()
        ms = a.elapsed_ms(b)
        assert 40.0 < ms < 10_000.0
        nt = cu.Event(timing=False)
        nt.record(stream)
        nt.synchronize()
        with pytest.raises(
            ValueError, match=r"later does not: make both with Event\(timing=True\)"
        ):
            a.elapsed_ms(nt)
        with pytest.raises(ValueError, match="this event does not"):
            nt.elapsed_ms(a)
        with pytest.raises(TypeError, match="Event"):
            a.elapsed_ms(stream)  # type: ignore[arg-type]

    def test_closed_event(self, stream: cu.Stream) -> None:
        ev = cu.Event()
        ev.close()
        with pytest.raises(cu.ClosedError, match="Event is closed"):
            ev.record(stream)
        with pytest.raises(cu.ClosedError):
            ev.query()
        with pytest.raises(cu.ClosedError):
            stream.wait(ev)
        # A closed stream is named, and neither object is left pinned.
        other, gone = cu.Event(), cu.Stream()
        gone.close()
        with pytest.raises(cu.ClosedError, match="Stream is closed"):
            other.record(gone)
        assert not other._state.pins
        assert other._state.busy == 0
        other.record(stream)  # still usable
        stream.synchronize()
        other.close()

    def test_ipc_roundtrip(self, stream: cu.Stream) -> None:
        import subprocess
        import sys

        ev = cu.Event(interprocess=True)
        data = ev.export_handle()
        with pytest.warns(DeprecationWarning, match="export_handle"):
            assert ev.ipc_handle() == data
        assert len(data) == 64
        ev.record(stream)
        stream.synchronize()
        child = (
            "import sys, cudriver as cu\n"
            "cu.Device(0).primary_context().set_current()\n"
            "ev = cu.Event.import_handle(bytes.fromhex(sys.argv[1]))\n"
            "ev.synchronize(); s = cu.Stream(); s.wait(ev); s.synchronize()\n"
            "print('opened', ev.query())\n"
        )
        p = subprocess.run(
            [sys.executable, "-c", child, data.hex()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert p.returncode == 0, p.stderr
        assert "opened True" in p.stdout
        with pytest.raises(ValueError, match="64 bytes"):
            cu.Event.import_handle(b"123")
        with pytest.raises(TypeError, match="64 bytes"):
            cu.Event.import_handle("not bytes")  # type: ignore[arg-type]
        # (Opening it in the process that exported it is refused by the driver.)
        with pytest.warns(DeprecationWarning, match="import_handle"):
            with pytest.raises(ValueError, match="64 bytes"):
                cu.Event.from_ipc_handle(b"123")
        with pytest.raises(ValueError, match="interprocess=True"):
            cu.Event().export_handle()

    def test_export_from_a_thread_without_a_context(self) -> None:
        # multiprocessing pickles on a Queue's feeder thread, where no context is current.
        import threading

        ev = cu.Event(interprocess=True)
        got: list[object] = []
        t = threading.Thread(target=lambda: got.append((cu.Context.current(), ev.export_handle())))
        t.start()
        t.join(60)
        assert got and got[0][0] is None and got[0][1] == ev.export_handle()
        ev.close()

    def test_from_handle(self, stream: cu.Stream) -> None:
        ev = cu.Event()
        b = cu.Event.from_handle(ev.handle)
        assert b == ev
        assert not b.owned
        b.record(stream)
        b.synchronize()
        with pytest.raises(ValueError, match="NULL"):
            cu.Event.from_handle(0)
