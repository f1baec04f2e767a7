from __future__ import annotations

import time

import pytest

import cudriver as cu


def test_interprocess_needs_no_timing() -> None:
    # validated before any driver call: works without a GPU
    with pytest.raises(ValueError, match="timing=False"):
        cu.Event(interprocess=True)


@pytest.mark.gpu
class TestEventGPU:
    def test_record_query_sync(self, stream: cu.Stream) -> None:
        ev = cu.Event()
        assert ev.timing
        assert ev.record(stream) is ev
        ev.synchronize()
        assert ev.query() is True
        assert "timing" in repr(ev)
        ev.close()
        assert ev.closed

    def test_elapsed(self, stream: cu.Stream) -> None:
        a, b = cu.Event(), cu.Event(blocking=True)
        a.record(stream)
        stream.launch_host_func(time.sleep, 0.05)  # b completes 50 ms after a, at least
        b.record(stream)
        b.synchronize()
        ms = a.elapsed_ms(b)
        assert 40.0 < ms < 10_000.0
        nt = cu.Event(timing=False)
        nt.record(stream)
        nt.synchronize()
        with pytest.raises(ValueError, match="timing=True"):
            a.elapsed_ms(nt)
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

    def test_ipc_roundtrip(self, stream: cu.Stream) -> None:
        import subprocess
        import sys

        ev = cu.Event(interprocess=True, timing=False)
        data = ev.ipc_handle()
        assert len(data) == 64
        ev.record(stream)
        stream.synchronize()
        child = (
            "import sys, cudriver as cu\n"
            "cu.Device(0).primary_context().set_current()\n"
            "ev = cu.Event.from_ipc_handle(bytes.fromhex(sys.argv[1]))\n"
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
            cu.Event.from_ipc_handle(b"123")
        with pytest.raises(ValueError, match="interprocess=True"):
            cu.Event().ipc_handle()

    def test_from_handle(self, stream: cu.Stream) -> None:
        ev = cu.Event()
        b = cu.Event.from_handle(ev.handle)
        assert b == ev
        assert not b.owned
        b.record(stream)
        b.synchronize()
        with pytest.raises(ValueError, match="NULL"):
            cu.Event.from_handle(0)
