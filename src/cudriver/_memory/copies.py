"""Pitched (2D and 3D) copies, 2D fills, and copies between devices.

Operands are what :meth:`DeviceBuffer.copy_from` takes: device, managed and pinned
buffers, numpy arrays and bytes-like objects (host memory), and objects with
``__cuda_array_interface__``. Every size is checked against the operands before the
first driver call. Without ``stream=`` a call has completed when it returns (enqueued
on the legacy default stream, or on a private stand-in stream while a capture is open,
and waited for with ``cuEventSynchronize``); with one it is only enqueued.

Sizes are named by what they count: ``width_bytes`` (a copy's row, in bytes),
``width`` (a 2D fill's row, in elements), ``element_size`` (bytes per element of a
fill), pitches in bytes.
"""

from __future__ import annotations

from typing import Any

from cuda.bindings import driver as _drv

from .._lifetime._coerce import (
    StreamLike,
    device_address,
    nbytes_arg,
    renamed_keyword,
    uint_arg,
)
from ._copy import Operand, fill_args, memory_side, operand
from ._copy import run_copy as _run
from .memory import DeviceBuffer

__all__ = ["copy_2d", "copy_3d", "memset_2d", "copy_peer"]

_MEMSET_2D = {1: _drv.cuMemsetD2D8Async, 2: _drv.cuMemsetD2D16Async, 4: _drv.cuMemsetD2D32Async}


def _at_least(value: Any, least: int, name: str, what: str) -> int:
    """``value`` (default ``least``) as an int, refused below ``least`` (``what`` it is)."""
    if value is None:
        return least
    v = uint_arg(value, name)
    if v < least:
        raise ValueError(f"{name} ({v}) is smaller than {what}")
    return v


def _pitch(value: Any, width: int, name: str) -> int:
    return _at_least(value, width, name, f"a row ({width} bytes)")


def _fits(op: Operand, need: int, role: str) -> None:
    if op[2] < need:
        raise ValueError(f"{role} holds {op[2]} bytes; the copy needs {need}")


def copy_2d(
    dst: Any,
    src: Any,
    *,
    width_bytes: int | None = None,
    height: int,
    dst_pitch: int | None = None,
    src_pitch: int | None = None,
    stream: StreamLike = None,
    width: int | None = None,
) -> None:
    """Copy ``height`` rows of ``width_bytes`` bytes (``cuMemcpy2DAsync``).

    Row ``i`` starts at byte ``i * src_pitch`` of ``src`` and ``i * dst_pitch`` of
    ``dst``; the pitches default to ``width_bytes`` (packed rows). Any two of host,
    pinned, device and managed memory. Without ``stream``, the copy has completed on
    return (see the module docstring); ``width`` is the deprecated name of
    ``width_bytes``.

    Raises
    ------
    ValueError
        A pitch smaller than ``width_bytes``, or an operand smaller than
        ``pitch * (height - 1) + width_bytes`` bytes.
    """
    w = _width_bytes("copy_2d", width_bytes, width)
    h = nbytes_arg(height, "height")
    dp = _pitch(dst_pitch, w, "dst_pitch")
    sp = _pitch(src_pitch, w, "src_pitch")
    d = operand(dst, writable=True, role="dst")
    s = operand(src, writable=False, role="src")
    _fits(d, dp * (h - 1) + w, "dst")
    _fits(s, sp * (h - 1) + w, "src")
    p = _drv.CUDA_MEMCPY2D()
    memory_side(p, "src", s[0], s[1], s[3])
    memory_side(p, "dst", d[0], d[1], d[3])
    p.srcPitch, p.dstPitch = sp, dp
    p.WidthInBytes, p.Height = w, h
    _run(stream, (dst, src), _drv.cuMemcpy2DAsync, p, ops=(d, s), what="copy_2d")


def copy_3d(
    dst: Any,
    src: Any,
    *,
    width_bytes: int | None = None,
    height: int,
    depth: int,
    dst_pitch: int | None = None,
    src_pitch: int | None = None,
    dst_height: int | None = None,
    src_height: int | None = None,
    stream: StreamLike = None,
    width: int | None = None,
) -> None:
    """Copy ``depth`` slices of ``height`` rows of ``width_bytes`` bytes (``cuMemcpy3DAsync``).

    Row ``j`` of slice ``k`` starts at byte ``(k * <side>_height + j) * <side>_pitch``
    of each operand. Pitches default to ``width_bytes``, slice heights (in rows) to
    ``height``. Any two of host, pinned, device and managed memory. ``width`` is the
    deprecated name of ``width_bytes``.
    """
    w = _width_bytes("copy_3d", width_bytes, width)
    h = nbytes_arg(height, "height")
    z = nbytes_arg(depth, "depth")
    dp = _pitch(dst_pitch, w, "dst_pitch")
    sp = _pitch(src_pitch, w, "src_pitch")
    dh = _rows(dst_height, h, "dst_height")
    sh = _rows(src_height, h, "src_height")
    d = operand(dst, writable=True, role="dst")
    s = operand(src, writable=False, role="src")
    _fits(d, dp * (dh * (z - 1) + h - 1) + w, "dst")
    _fits(s, sp * (sh * (z - 1) + h - 1) + w, "src")
    p = _drv.CUDA_MEMCPY3D()
    memory_side(p, "src", s[0], s[1], s[3])
    memory_side(p, "dst", d[0], d[1], d[3])
    p.srcPitch, p.dstPitch = sp, dp
    p.srcHeight, p.dstHeight = sh, dh
    p.WidthInBytes, p.Height, p.Depth = w, h, z
    _run(stream, (dst, src), _drv.cuMemcpy3DAsync, p, ops=(d, s), what="copy_3d")


def _width_bytes(func: str, width_bytes: Any, width: Any) -> int:
    """``width_bytes`` checked, or the deprecated ``width=`` it was given as."""
    if width is not None:
        width_bytes = renamed_keyword(func, "width", width, "width_bytes", width_bytes)
    if width_bytes is None:
        raise TypeError(f"{func}() missing the keyword argument width_bytes (a row, in bytes)")
    return nbytes_arg(width_bytes, "width_bytes")


def _rows(value: Any, height: int, name: str) -> int:
    return _at_least(value, height, name, f"the copy's height ({height} rows)")


def memset_2d(
    dst: Any,
    value: Any,
    *,
    width: int,
    height: int,
    pitch: int | None = None,
    element_size: int | None = None,
    stream: StreamLike = None,
    element_width: int | None = None,
) -> None:
    """Set ``height`` rows of ``width`` elements to ``value`` (``cuMemsetD2D8/16/32Async``).

    ``value`` and ``element_size`` (1, 2 or 4 bytes) as for :meth:`DeviceBuffer.fill`;
    ``pitch`` is in bytes (default: the row's size). ``dst`` is device memory: a
    buffer or an address. ``element_width`` is the deprecated name of ``element_size``.
    """
    if element_width is not None:
        element_size = renamed_keyword(
            "memset_2d", "element_width", element_width, "element_size", element_size
        )
    ew, v = fill_args(value, element_size)
    w = nbytes_arg(width, "width")
    h = nbytes_arg(height, "height")
    pt = _pitch(pitch, w * ew, "pitch")
    addr, size, _obj = device_address(dst)
    need = pt * (h - 1) + w * ew
    if size is not None and size < need:
        raise ValueError(f"dst holds {size} bytes; the fill needs {need}")
    if addr % ew or pt % ew:
        raise ValueError(f"the address and pitch must be multiples of {ew} bytes")
    _run(stream, (dst,), _MEMSET_2D[ew], _drv.CUdeviceptr(addr), pt, v, w, h, what="memset_2d")


def copy_peer(
    dst: DeviceBuffer, src: DeviceBuffer, nbytes: int | None = None, *, stream: StreamLike = None
) -> None:
    """Copy ``nbytes`` (default: all of ``src``) between buffers of two contexts.

    Calls ``cuMemcpyPeerAsync`` with each buffer's context, so the devices need no
    peer access (the driver stages the copy when they have none).
    """
    for role, b in (("dst", dst), ("src", src)):
        if not isinstance(b, DeviceBuffer):
            raise TypeError(f"{role} must be a cudriver.DeviceBuffer, not {type(b).__name__}")
    n = src._nbytes if nbytes is None else nbytes_arg(nbytes)
    if n > src._nbytes or n > dst._nbytes:
        raise ValueError(
            f"nbytes={n} is more than src ({src._nbytes}) or dst ({dst._nbytes}) holds"
        )
    dctx, sctx = dst.context, src.context
    args = (dst.handle, dctx._live(), src.handle, sctx._live(), n)
    _run(stream, (dst, src, dctx, sctx), _drv.cuMemcpyPeerAsync, *args, what="copy_peer")
