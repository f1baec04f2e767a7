"""``__cuda_stream__`` and ``__cuda_array_interface__`` as the protocols specify, and
objects of cuda.core and numba-cuda going both ways where those are installed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudriver as cu
from cudriver._memory._copy import parse_cai

from ._support import FAKE, import_or_skip


def _cai(**extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"data": (FAKE, False), "shape": (4,), "typestr": "<f4"}
    d.update(extra)
    return d


def test_cai_versions_are_checked() -> None:
    for v in (0, 1, 2, 3):
        assert parse_cai(_cai(version=v), "src")[:2] == (FAKE, 16)
    with pytest.raises(ValueError, match="version 4; cudriver reads up to version 3"):
        parse_cai(_cai(version=4), "src")
    for bad in (None, "3", -1, True, 3.0):
        with pytest.raises(ValueError, match="no valid 'version'"):
            parse_cai(_cai(version=bad), "src")
    with pytest.raises(ValueError, match="no valid 'version'"):
        parse_cai(_cai(), "src")  # the key is required


def test_cai_stream_zero_is_refused() -> None:
    # CAI v3: 0 is ambiguous and not allowed; 1 is the legacy default stream.
    with pytest.raises(ValueError, match="stream 0"):
        parse_cai(_cai(version=3, stream=0), "src")
    assert parse_cai(_cai(version=3, stream=1), "src")[3] == 1


def test_cuda_stream_protocol_versions_are_checked() -> None:
    class Future:
        def __cuda_stream__(self) -> tuple[int, int]:
            return (1, 0x1234)

    class Broken:
        def __cuda_stream__(self) -> int:
            return 5

    with pytest.raises(ValueError, match="version"):
        cu.Stream.from_handle(Future())
    with pytest.raises(TypeError, match="expected \\(version, handle\\)"):
        cu.Stream.from_handle(Broken())


def _core() -> Any:
    cc = import_or_skip("cuda.core")
    if not hasattr(cc, "Device"):
        cc = import_or_skip("cuda.core.experimental")
    return cc


@pytest.mark.gpu
def test_cuda_core_streams_both_ways(ctx: cu.Context) -> None:
    cc = _core()
    dev = cc.Device(0)
    dev.set_current()
    theirs = dev.create_stream()
    mine = cu.Stream.from_handle(theirs)  # their __cuda_stream__ read by us
    assert int(mine.handle) == int(theirs.handle)
    ours = cu.Stream(context=ctx)
    wrapped = dev.create_stream(ours)  # our __cuda_stream__ read by them
    assert int(wrapped.handle) == int(ours.handle)
    buf = cu.DeviceBuffer(1 << 20)
    buf.fill(7, stream=mine)
    ev = mine.record()
    ours.wait(ev)
    out = np.empty(1 << 20, np.uint8)
    buf.copy_to(out, stream=ours)
    wrapped.sync()
    assert (out == 7).all()
    ctx.set_current()


@pytest.mark.gpu
def test_cuda_core_reads_our_array_interface(ctx: cu.Context) -> None:
    cc = _core()
    utils = pytest.importorskip("cuda.core.utils") if hasattr(cc, "utils") else None
    view_type = getattr(utils, "StridedMemoryView", None) if utils is not None else None
    if view_type is None:
        pytest.skip("this cuda.core has no StridedMemoryView")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    buf = cu.DeviceBuffer.from_array(x)
    make = getattr(view_type, "from_cuda_array_interface", None)
    view = make(buf, stream_ptr=-1) if make is not None else view_type(buf, stream_ptr=-1)
    assert int(view.ptr) == buf.ptr
    assert tuple(view.shape) == (3, 4)
    assert view.is_device_accessible


@pytest.mark.gpu
def test_numba_arrays_both_ways(ctx: cu.Context) -> None:
    numba_cuda = import_or_skip("numba.cuda")
    x = np.arange(64, dtype=np.int32)
    buf = cu.DeviceBuffer.from_array(x)
    arr = numba_cuda.as_cuda_array(buf)  # our CAI read by numba
    np.testing.assert_array_equal(arr.copy_to_host(), x)
    theirs = numba_cuda.to_device(np.full(64, 5, np.int32))
    back = cu.DeviceBuffer.empty(64, np.int32)
    back.copy_from(theirs)  # numba's CAI read by us
    np.testing.assert_array_equal(back.copy_to(), np.full(64, 5, np.int32))
