"""Pitched copies, 2D fills and peer copies, checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import cudriver as cu


def test_sizes_are_checked_before_the_driver() -> None:
    host = np.zeros(64, np.uint8)
    with pytest.raises(ValueError, match="dst_pitch"):
        cu.copy_2d(host, host, width_bytes=16, height=2, dst_pitch=8)
    with pytest.raises(ValueError, match="needs"):
        cu.copy_2d(host, host, width_bytes=16, height=5)
    with pytest.raises(ValueError, match="width_bytes"):
        cu.copy_2d(host, host, width_bytes=0, height=1)
    with pytest.raises(TypeError, match="width_bytes"):
        cu.copy_2d(host, host, height=1)
    with pytest.raises(ValueError, match="src_height"):
        cu.copy_3d(host, host, width_bytes=4, height=4, depth=2, src_height=3)
    with pytest.raises(ValueError, match="needs"):
        cu.copy_3d(host, host, width_bytes=4, height=4, depth=5)
    with pytest.raises(TypeError, match="DeviceBuffer"):
        cu.copy_peer(host, host)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="multiples"):
        cu.memset_2d(0x1001, 0, width=4, height=2, element_size=4)


def test_renamed_size_keywords_warn_and_still_work() -> None:
    # One name per meaning: width_bytes (a copy's row), width (a 2D fill's row, in
    # elements), element_size (bytes per element). The old spellings warn; giving both
    # spellings is refused. Each fails after the warning, before any driver call.
    host = np.zeros(64, np.uint8)
    with pytest.warns(DeprecationWarning, match=r"copy_2d\(width_bytes=\.\.\.\)"):
        with pytest.raises(ValueError, match="needs"):
            cu.copy_2d(host, host, width=16, height=5)
    with pytest.warns(DeprecationWarning, match="width_bytes"):
        with pytest.raises(ValueError, match="needs"):
            cu.copy_3d(host, host, width=4, height=4, depth=5)
    with pytest.raises(TypeError, match="not both"):
        cu.copy_2d(host, host, width=16, width_bytes=16, height=1)
    with pytest.warns(DeprecationWarning, match="element_size"):
        with pytest.raises(ValueError, match="multiples"):
            cu.memset_2d(0x1001, 0, width=4, height=2, element_width=4)


@pytest.mark.gpu
class TestPitched:
    def test_2d_between_every_kind_of_memory(self, ctx: cu.Context, stream: cu.Stream) -> None:
        rows, cols = 5, 12
        a = np.arange(rows * 16, dtype=np.uint8).reshape(rows, 16)  # pitch 16, width 12
        dev = cu.DeviceBuffer(rows * 32)  # pitch 32
        pin = cu.PinnedBuffer(rows * 24)  # pitch 24
        back = np.zeros((rows, 20), np.uint8)  # pitch 20
        cu.copy_2d(dev, a, width_bytes=cols, height=rows, src_pitch=16, dst_pitch=32)
        cu.copy_2d(
            pin, dev, width_bytes=cols, height=rows, src_pitch=32, dst_pitch=24, stream=stream
        )
        stream.synchronize()
        cu.copy_2d(back, pin, width_bytes=cols, height=rows, src_pitch=24, dst_pitch=20)
        np.testing.assert_array_equal(back[:, :cols], a[:, :cols])
        assert not back[:, cols:].any()
        got = dev.copy_to().reshape(rows, 32)
        np.testing.assert_array_equal(got[:, :cols], a[:, :cols])

    def test_3d_slices(self, ctx: cu.Context) -> None:
        vol = np.arange(3 * 4 * 8, dtype=np.uint8).reshape(3, 4, 8)
        dev = cu.DeviceBuffer(3 * 6 * 16)  # slices of 6 rows, rows of 16 bytes
        cu.copy_3d(dev, vol, width_bytes=8, height=4, depth=3, dst_pitch=16, dst_height=6)
        out = np.zeros((3, 4, 8), np.uint8)
        cu.copy_3d(out, dev, width_bytes=8, height=4, depth=3, src_pitch=16, src_height=6)
        np.testing.assert_array_equal(out, vol)
        raw = dev.copy_to().reshape(3, 6, 16)
        np.testing.assert_array_equal(raw[:, :4, :8], vol)

    def test_memset_2d(self, ctx: cu.Context) -> None:
        dev = cu.DeviceBuffer(4 * 64)
        dev.fill(0)
        cu.memset_2d(dev, np.uint32(0xDEADBEEF), width=3, height=4, pitch=64)
        got = dev.copy_to().view(np.uint32).reshape(4, 16)
        assert (got[:, :3] == 0xDEADBEEF).all()
        assert not got[:, 3:].any()
        with pytest.raises(ValueError, match="needs"):
            cu.memset_2d(dev, 1, width=64, height=5, pitch=64)

    def test_copy_peer_on_one_device(self, ctx: cu.Context, stream: cu.Stream) -> None:
        a = cu.DeviceBuffer.from_array(np.arange(256, dtype=np.float32))
        b = cu.DeviceBuffer(1024)
        cu.copy_peer(b, a)
        np.testing.assert_array_equal(b.copy_to().view(np.float32), np.arange(256))
        with pytest.raises(ValueError, match="more than"):
            cu.copy_peer(b, a, 2048)
        a.close()
        with pytest.raises(cu.ClosedError):
            cu.copy_peer(b, a)


@pytest.mark.gpu
def test_a_stream_less_operation_never_breaks_a_capture(ctx: cu.Context, stream: cu.Stream) -> None:
    # stream=None means "done when the call returns". For a stream-ordered buffer whose
    # stream captures, that cannot be: refused before the driver, the capture survives.
    buf = cu.DeviceBuffer(64, stream=stream)
    plain = cu.DeviceBuffer(64)
    buf.fill(1, stream=stream)
    with stream.capture() as g:
        with pytest.raises(cu.StreamCaptureError, match="pass stream="):
            buf.copy_to()
        with pytest.raises(cu.StreamCaptureError, match="pass stream="):
            buf.fill(3)
        plain.fill(5)  # not stream-ordered: runs beside the capture, done on return
        assert (plain.copy_to() == 5).all()
        buf.fill(2, stream=stream)  # captured
    assert stream.capture_status is cu.CaptureStatus.NONE
    g.instantiate().launch(stream)
    stream.synchronize()
    assert (buf.copy_to() == 2).all()
    buf.close()
    plain.close()
