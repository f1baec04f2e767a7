"""TMA tensor maps: every rule checked before the driver, the order the driver gets, packing.

Without a GPU, ``cuTensorMapEncodeTiled`` and ``cuTensorMapReplaceAddress`` are replaced by
fakes that record their arguments; the device arrays are ``__cuda_array_interface__``
stand-ins at a made-up address. The GPU test loads one tile with ``cp.async.bulk.tensor``.
"""

from __future__ import annotations

import enum
import gc
import struct
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver._launch import _packing
from cudriver._launch._packing import ArgLayout, PackedArgs, pack_arg, pack_fast
from cudriver._memory import tensormap
from cudriver._memory.tensormap import (
    TensorMap,
    TensorMapDataType,
    TensorMapFloatOOBFill,
    TensorMapInterleave,
    TensorMapL2Promotion,
    TensorMapSwizzle,
)

from ._support import CAI, FAKE, FakeBuffer, load_kernels, needs_nvrtc, no_driver

_ENCODE_ARGS = (
    "tensorDataType",
    "tensorRank",
    "globalAddress",
    "globalDim",
    "globalStrides",
    "boxDim",
    "elementStrides",
    "interleave",
    "swizzle",
    "l2Promotion",
    "oobFill",
)
_OPAQUE = [0x0101010101010101 * (i + 1) for i in range(16)]
_SUCCESS = drv.CUresult.CUDA_SUCCESS


@dataclass
class FakeDriver:
    """What the fakes of the two driver calls were given."""

    encodes: list[dict[str, Any]] = field(default_factory=list)
    replaces: list[tuple[Any, int]] = field(default_factory=list)
    status: Any = _SUCCESS

    def encode(self, *args: Any) -> tuple[Any, Any]:
        self.encodes.append(dict(zip(_ENCODE_ARGS, args, strict=True)))
        if self.status is not _SUCCESS:
            return (self.status, None)
        m = drv.CUtensorMap()
        m.opaque = _OPAQUE
        return (_SUCCESS, m)

    def replace(self, m: Any, address: int) -> tuple[Any]:
        self.replaces.append((m, address))
        if self.status is _SUCCESS:
            m.opaque = [address, *_OPAQUE[1:]]
        return (self.status,)

    def last(self) -> dict[str, Any]:
        """The last encode's arguments, with the arrays as lists of ints."""
        d = dict(self.encodes[-1])
        for k in ("globalDim", "globalStrides", "boxDim", "elementStrides"):
            d[k] = [int(v) for v in d[k]]
        return d


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    f = FakeDriver()

    def cuTensorMapEncodeTiled(*args: Any) -> tuple[Any, Any]:
        return f.encode(*args)

    def cuTensorMapReplaceAddress(m: Any, address: int) -> tuple[Any]:
        return f.replace(m, address)

    monkeypatch.setattr(tensormap, "_driver_ready", lambda: None)
    monkeypatch.setattr(tensormap, "_cuTensorMapEncodeTiled", cuTensorMapEncodeTiled)
    monkeypatch.setattr(tensormap, "_cuTensorMapReplaceAddress", cuTensorMapReplaceAddress)
    return f


def arr(shape: tuple[int, ...], typestr: Any = "<f4", ptr: int | None = FAKE, **kw: Any) -> CAI:
    return CAI(ptr, shape=shape, typestr=typestr, **kw)


# -- what the driver gets: innermost first, strides in bytes ---------------------------


def test_a_matrix_is_sent_innermost_first(fake: FakeDriver) -> None:
    rows, cols = 32, 48
    tm = TensorMap(arr((rows, cols)), (8, 16))
    d = fake.last()
    assert d["tensorDataType"] == drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32
    assert d["tensorRank"] == 2
    assert d["globalAddress"] == FAKE
    assert d["globalDim"] == [cols, rows]
    assert d["globalStrides"] == [cols * 4]  # the row pitch in bytes; the innermost is implicit
    assert d["boxDim"] == [16, 8]
    assert d["elementStrides"] == [1, 1]
    assert d["interleave"] == drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE
    assert d["swizzle"] == drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE
    assert d["l2Promotion"] == drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE
    assert d["oobFill"] == drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
    assert all(isinstance(v, drv.cuuint64_t) for v in fake.encodes[0]["globalDim"])
    assert all(isinstance(v, drv.cuuint32_t) for v in fake.encodes[0]["boxDim"])
    # The map itself speaks numpy order.
    assert (tm.shape, tm.strides, tm.box, tm.element_strides) == (
        (32, 48),
        (192, 4),
        (8, 16),
        (1, 1),
    )
    assert tm.data_type is TensorMapDataType.FLOAT32
    assert tm.dtype == np.float32
    assert tm.element_size == 4
    assert tm.address == FAKE
    with pytest.raises(AttributeError):
        tm.shape = (1, 1)  # type: ignore[misc]


def test_rank_3_reversal_with_element_strides(fake: FakeDriver) -> None:
    TensorMap(arr((5, 6, 32), "<f2"), (2, 3, 16), element_strides=(2, 1, 1))
    d = fake.last()
    assert d["tensorDataType"] == drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    assert d["tensorRank"] == 3
    assert d["globalDim"] == [32, 6, 5]
    assert d["globalStrides"] == [32 * 2, 6 * 32 * 2]
    assert d["boxDim"] == [16, 3, 2]
    assert d["elementStrides"] == [1, 1, 2]


def test_rank_1_sends_no_strides(fake: FakeDriver) -> None:
    TensorMap(arr((1000,), "<u1"), 64)
    d = fake.last()
    assert (d["tensorRank"], d["globalDim"], d["globalStrides"], d["boxDim"]) == (
        1,
        [1000],
        [],
        [64],
    )
    assert d["tensorDataType"] == drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8


def test_rank_5(fake: FakeDriver) -> None:
    TensorMap(arr((2, 3, 4, 5, 8), "<f4"), (1, 1, 2, 5, 4))
    d = fake.last()
    assert d["globalDim"] == [8, 5, 4, 3, 2]
    assert d["globalStrides"] == [32, 160, 640, 1920]
    assert d["boxDim"] == [4, 5, 2, 1, 1]


def test_strides_come_from_the_array(fake: FakeDriver) -> None:
    # A pitched matrix: 16 float32 per row, rows 256 bytes apart.
    tm = TensorMap(arr((8, 16), strides=(256, 4)), (8, 16))
    assert fake.last()["globalStrides"] == [256]
    assert tm.strides == (256, 4)


def test_shape_and_strides_can_be_given(fake: FakeDriver) -> None:
    src = arr((1024,))  # 4096 bytes of float32
    TensorMap(src, (4, 4), shape=(32, 32))
    assert fake.last()["globalDim"] == [32, 32]
    assert fake.last()["globalStrides"] == [128]
    TensorMap(src, (4, 4), shape=(16, 8), strides=(256, 4))
    assert fake.last()["globalDim"] == [8, 16]
    assert fake.last()["globalStrides"] == [256]
    TensorMap(arr((16, 64)), (4, 4), strides=(128, 4))  # the array's shape, other strides
    assert fake.last()["globalStrides"] == [128]


def test_options_are_passed_as_the_bindings_enums(fake: FakeDriver) -> None:
    TensorMap(
        arr((64, 64), "<f2"),
        (8, 64),
        swizzle=TensorMapSwizzle.SWIZZLE_128B,
        l2_promotion=TensorMapL2Promotion.L2_256B,
        oob_fill=TensorMapFloatOOBFill.NAN_REQUEST_ZERO_FMA,
    )
    d = fake.last()
    assert d["swizzle"] == drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
    assert d["l2Promotion"] == drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B
    assert (
        d["oobFill"]
        == drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
    )
    TensorMap(arr((64, 64), "<f2"), (8, 32), swizzle=2, l2_promotion=1)  # ints work too
    assert fake.last()["swizzle"] == drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B
    # Interleaved: rank 3, 32-byte strides, SWIZZLE_32B.
    TensorMap(
        arr((2, 4, 16), "<u2"),
        (1, 2, 16),
        interleave=TensorMapInterleave.INTERLEAVE_32B,
        swizzle=TensorMapSwizzle.SWIZZLE_32B,
    )
    assert fake.last()["interleave"] == drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_32B


@pytest.mark.parametrize(
    ("typestr", "expected"),
    [
        ("|u1", "UINT8"),
        ("<u2", "UINT16"),
        ("<u4", "UINT32"),
        ("<i4", "INT32"),
        ("<u8", "UINT64"),
        ("<i8", "INT64"),
        ("<f2", "FLOAT16"),
        ("<f4", "FLOAT32"),
        ("<f8", "FLOAT64"),
    ],
)
def test_numpy_dtypes_map_to_data_types(fake: FakeDriver, typestr: str, expected: str) -> None:
    size = np.dtype(typestr).itemsize
    tm = TensorMap(arr((4, 64), typestr), (2, 16 // size))
    assert tm.data_type is TensorMapDataType[expected]
    assert fake.last()["tensorDataType"] == getattr(
        drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{expected}"
    )


def test_data_type_can_be_given(fake: FakeDriver) -> None:
    tm = TensorMap(arr((4, 64), "|i1"), (2, 16), data_type=TensorMapDataType.UINT8)
    assert tm.data_type is TensorMapDataType.UINT8
    assert tm.dtype == np.int8
    TensorMap(arr((4, 64)), (2, 4), data_type=TensorMapDataType.TFLOAT32)
    assert fake.last()["tensorDataType"] == drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_TFLOAT32
    TensorMap(arr((4, 64), "<u2"), (2, 8), data_type=9)  # BFLOAT16 bits in a uint16 array
    assert fake.last()["tensorDataType"] == drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16


def test_bfloat16_from_ml_dtypes(fake: FakeDriver) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    src = arr((4, 64), np.dtype(ml_dtypes.bfloat16))
    assert TensorMap(src, (2, 8)).data_type is TensorMapDataType.BFLOAT16


# -- every rule, refused before the driver with the numbers -----------------------------

_I16, _I32 = TensorMapInterleave.INTERLEAVE_16B, TensorMapInterleave.INTERLEAVE_32B
_S32 = TensorMapSwizzle.SWIZZLE_32B
_NAN = TensorMapFloatOOBFill.NAN_REQUEST_ZERO_FMA
_M = (8, 16)  # a float32 matrix

# (the buffer, box, keyword arguments, the exception, what its message says)
# fmt: off
RULES: dict[str, tuple[Any, Any, dict[str, Any], type[Exception], str]] = {
    # rank 1..5, 3..5 with interleave
    "rank 0": (arr(()), (), {}, ValueError, r"rank 1 to 5; shape \(\) has rank 0"),
    "rank 6": (arr((2,) * 5 + (16,)), (1,) * 6, {}, ValueError, r"16\) has rank 6"),
    "interleave rank": (arr(_M, "<u2"), (8, 8), {"interleave": _I16}, ValueError,
                        "with interleave INTERLEAVE_16B the rank must be 3 to 5, not 2"),
    # the global address: 16-byte aligned, 32 with INTERLEAVE_32B
    "address": (arr(_M, ptr=FAKE + 8), _M, {}, ValueError,
                r"global address 0x7f0000000008 is not 16-byte aligned \(address % 16 = 8\)"),
    "address 32B": (arr((2, 4, 16), "<u2", ptr=FAKE + 16), (1, 2, 16),
                    {"interleave": _I32, "swizzle": _S32}, ValueError,
                    r"0x7f0000000010 is not 32-byte aligned \(address % 32 = 16\) as INTERLEAVE"),
    "NULL": (arr(_M, ptr=None), _M, {}, ValueError, "address is NULL"),
    # global strides: multiples of 16 (32 with INTERLEAVE_32B), below 2**40; the
    # innermost is the element size
    "stride 16": (arr((4, 5)), (4, 4), {}, ValueError,
                  r"strides\[0\] = 20 bytes is not a multiple of 16 \(remainder 4\)"),
    "stride 2**40": (arr((2, 16)), (2, 4), {"strides": (2**40, 4)}, ValueError,
                     r"strides\[0\] = 1099511627776 bytes is not below 2\*\*40"),
    "stride 32B": (arr((2, 2, 24), "<u2"), (1, 1, 16), {"interleave": _I32, "swizzle": _S32},
                   ValueError, r"strides\[1\] = 48 bytes is not a multiple of 32 \(remainder 16\)"),
    "innermost stride": (arr((4, 8), strides=(64, 8)), (4, 4), {}, ValueError,
                         r"strides\[1\] = 8 bytes must be the element size \(4 bytes\)"),
    "negative stride": (arr((4, 8), strides=(-32, 4)), (4, 4), {}, ValueError, "negative stride"),
    "strides rank": (arr((4, 8)), (4, 4), {"strides": (32,)}, ValueError,
                     r"strides \(32,\) must have one entry"),
    # global dimensions: 1 .. 2**32 (2**32 passes the rule; this buffer is too small for it)
    "dim 0": (arr((0, 16)), (1, 4), {}, ValueError,
              r"shape\[0\] = 0 is out of range: each dimension is 1 to 2\*\*32"),
    "dim 2**32 + 1": (arr((16,)), (1, 4), {"shape": (2**32 + 1, 4)}, ValueError,
                      r"shape\[0\] = 4294967297 is out of range"),
    "dim 2**32": (arr((16,)), (1, 4), {"shape": (2**32, 4)}, ValueError,
                  "the map spans 68719476736 bytes"),
    # the map lies within the buffer
    "extent": (arr((1024,)), (4, 4), {"shape": (64, 32)}, ValueError,
               "the map spans 8192 bytes from the address but the CAI describes 4096 bytes"),
    "extent strided": (arr((16, 16)), (4, 4), {"strides": (64, 4), "shape": (17, 1)},
                       ValueError, "spans 1028 bytes"),
    # box: one entry per dimension, 1..256; the inner one a multiple of 16 bytes
    "box rank": (arr(_M), (8,), {}, ValueError, r"box \(8,\) has 1 dimensions; the tensor has 2"),
    "box 257": (arr((512, 16)), (257, 4), {}, ValueError, r"box\[0\] = 257 is out of range 1..256"),
    "box 0": (arr(_M), (8, 0), {}, ValueError, r"box\[1\] = 0 is out of range 1..256"),
    "box inner": (arr(_M), (8, 2), {}, ValueError,
                  r"box\[1\] = 2 elements x 4 bytes = 8 bytes is not a multiple of 16 bytes"),
    "box inner u8": (arr((2, 4, 64), "|u1"), (1, 1, 24), {}, ValueError,
                     r"box\[2\] = 24 elements x 1 bytes = 24 bytes is not a multiple of 16"),
    # element strides: one per dimension, 1..8
    "element stride 9": (arr(_M), (8, 4), {"element_strides": (1, 9)}, ValueError,
                         r"element_strides\[1\] = 9 is out of range 1..8"),
    "element stride 0": (arr(_M), (8, 4), {"element_strides": (0, 1)}, ValueError,
                         r"element_strides\[0\] = 0 is out of range 1..8"),
    "element strides rank": (arr(_M), (8, 4), {"element_strides": (1, 1, 1)}, ValueError,
                             r"element_strides \(1, 1, 1\) has 3 entries; the tensor has 2"),
    # INTERLEAVE_32B needs SWIZZLE_32B
    "interleave 32B swizzle": (arr((2, 4, 16), "<u2"), (1, 2, 16), {"interleave": _I32},
                               ValueError, "INTERLEAVE_32B needs swizzle SWIZZLE_32B, not NONE"),
    # the NaN fill: floating-point types only
    "NaN int32": (arr((8, 64), "<i4"), (8, 4), {"oob_fill": _NAN}, ValueError,
                  "oob_fill NAN_REQUEST_ZERO_FMA needs a floating-point data type, not INT32"),
    "NaN uint8": (arr((8, 64), "|u1"), (8, 16), {"oob_fill": _NAN}, ValueError, "not UINT8"),
    "NaN uint64": (arr((8, 64), "<u8"), (8, 2), {"oob_fill": _NAN}, ValueError, "not UINT64"),
    # data types
    "data_type size": (arr((8, 64), "|u1"), (8, 16), {"data_type": TensorMapDataType.FLOAT32},
                       TypeError, "FLOAT32 has 4-byte elements but the buffer's dtype uint8 has 1"),
    # argument types
    "box str": (arr(_M), "ab", {}, TypeError, "box must be a sequence of ints, not str"),
    "box float": (arr(_M), (1.5, 4), {}, TypeError, r"box\[0\] must be an int, not float"),
    "box bool": (arr(_M), (True, 4), {}, TypeError, r"box\[0\] must be an int, not bool"),
    "swizzle str": (arr(_M), (8, 4), {"swizzle": "128B"}, TypeError,
                    "swizzle must be a cudriver.TensorMapSwizzle, not str"),
    "swizzle 9": (arr(_M), (8, 4), {"swizzle": 9}, ValueError,
                  "swizzle must be a cudriver.TensorMapSwizzle .* not 9"),
    "data_type 13": (arr(_M), (8, 4), {"data_type": 13}, ValueError,
                     "data_type must be a cudriver.TensorMapDataType .* not 13"),
    # device arrays only
    "object": (object(), (4,), {}, TypeError, "maps a device array.*not a object"),
    "numpy": (np.zeros(_M, np.float32), (8, 4), {}, TypeError,
              r"host numpy array \(shape \(8, 16\)\)"),
    "malformed": (CAI(shape="x"), (4,), {}, ValueError, "malformed __cuda_array_interface__"),
    "masked": (arr(_M, mask=object()), (8, 4), {}, ValueError, "masked array"),
}
# fmt: on


@pytest.mark.parametrize("case", RULES)
def test_every_rule_is_checked_before_the_driver(fake: FakeDriver, case: str) -> None:
    buffer, box, kw, exc, match = RULES[case]
    with pytest.raises(exc, match=match):
        TensorMap(buffer, box, **kw)
    assert fake.encodes == []


@pytest.mark.parametrize(
    ("swizzle", "span", "ok", "too_wide"),
    [
        (TensorMapSwizzle.SWIZZLE_32B, 32, 8, 16),
        (TensorMapSwizzle.SWIZZLE_64B, 64, 16, 32),
        (TensorMapSwizzle.SWIZZLE_128B, 128, 32, 64),
        (TensorMapSwizzle.SWIZZLE_128B_ATOM_32B, 128, 32, 64),
    ],
)
def test_swizzle_span(
    fake: FakeDriver, swizzle: TensorMapSwizzle, span: int, ok: int, too_wide: int
) -> None:
    with pytest.raises(
        ValueError,
        match=rf"box\[1\] = {too_wide} elements x 4 bytes = {too_wide * 4} bytes exceeds the "
        rf"{span}-byte span of swizzle {swizzle.name}",
    ):
        TensorMap(arr((8, 256)), (8, too_wide), swizzle=swizzle)
    assert fake.encodes == []
    TensorMap(arr((8, 256)), (8, ok), swizzle=swizzle)
    assert len(fake.encodes) == 1


@pytest.mark.parametrize("typestr", ["|b1", "|i1", "<i2", "<c8", ">f4", "<V4"])
def test_unsupported_dtypes(fake: FakeDriver, typestr: str) -> None:
    with pytest.raises(TypeError, match="no tensor map data type for dtype .*pass data_type="):
        TensorMap(arr((8, 64), typestr), (8, 16))
    assert fake.encodes == []


def test_a_dlpack_tensor_on_the_host(fake: FakeDriver) -> None:
    class HostTensor:
        def __dlpack__(self, **kw: Any) -> Any:
            raise AssertionError("not asked: the device is checked first")

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)  # kDLCPU

    with pytest.raises(BufferError, match="not a CUDA device"):
        TensorMap(HostTensor(), (4,))
    assert fake.encodes == []


# -- what cuda-bindings or the driver lack ----------------------------------------------


def test_bindings_without_the_call(fake: FakeDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensormap, "_cuTensorMapEncodeTiled", None)
    with pytest.raises(cu.NotSupportedError, match="has no cuTensorMapEncodeTiled"):
        TensorMap(arr((8, 16)), (8, 4))


def test_bindings_without_an_enum_member(fake: FakeDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    # As in bindings that predate the 128B_ATOM swizzles.
    old = enum.IntEnum(
        "CUtensorMapSwizzle", [("CU_TENSOR_MAP_SWIZZLE_NONE", 0), ("CU_TENSOR_MAP_SWIZZLE_32B", 1)]
    )
    monkeypatch.setattr(drv, "CUtensorMapSwizzle", old)
    with pytest.raises(
        cu.NotSupportedError,
        match=r"no CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B \(CUtensorMapSwizzle 4\)",
    ):
        TensorMap(arr((8, 64)), (8, 4), swizzle=TensorMapSwizzle.SWIZZLE_128B_ATOM_32B)
    assert fake.encodes == []
    TensorMap(arr((8, 64)), (8, 4), swizzle=TensorMapSwizzle.SWIZZLE_32B)
    assert fake.last()["swizzle"] == 1


def test_a_driver_refusal_is_a_cuda_error(fake: FakeDriver) -> None:
    fake.status = drv.CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(
        cu.InvalidValueError, match=r"cuTensorMapEncodeTiled failed.*FLOAT32, shape \(8, 16\)"
    ):
        TensorMap(arr((8, 16)), (8, 4))


@no_driver
def test_without_a_driver() -> None:
    with pytest.raises(cu.DriverNotFoundError):
        TensorMap(arr((8, 16)), (8, 4))


# -- kernel arguments: the 128 bytes, into a 128-byte parameter only --------------------

_EXPECTED = struct.pack("<16Q", *_OPAQUE)


def test_packs_as_its_128_bytes(fake: FakeDriver) -> None:
    tm = TensorMap(arr((8, 16)), (8, 4))
    assert bytes(tm) == _EXPECTED
    assert pack_arg(128, tm) == _EXPECTED
    args = PackedArgs([8, 128, 4], [FakeBuffer(FAKE), tm, 7], "tma")
    assert args.arg_bytes(0) == struct.pack("<Q", FAKE)
    assert args.arg_bytes(1) == _EXPECTED
    assert args.arg_bytes(2) == struct.pack("<i", 7)


def test_another_parameter_size_is_refused(fake: FakeDriver) -> None:
    tm = TensorMap(arr((8, 16)), (8, 4))
    with pytest.raises(
        TypeError,
        match="kernel 'tma' argument 1: the TensorMap has 128 bytes but the parameter has 8",
    ):
        PackedArgs([8, 8], [FakeBuffer(FAKE), tm], "tma")
    with pytest.raises(
        TypeError,
        match="kernel 'k' argument 3: the TensorMap has 128 bytes but the parameter has 64",
    ):
        pack_arg(64, tm, 3, "k")


def test_the_launch_packer(fake: FakeDriver) -> None:
    # Kernel.launch packs with pack_fast (both implementations: the compiled core hands
    # arguments it does not know to it).
    tm = TensorMap(arr((8, 16)), (8, 4))
    lay = ArgLayout([8, 128, 4, 4])
    buf = bytearray(lay.total)
    for _ in range(2):  # the first learns the type, the second uses the fast packer
        buf[:] = bytes(lay.total)
        pack_fast(buf, lay.items, [FAKE, tm, 1, 2], "tma")
        assert len(buf) == lay.total
        o = lay.offsets[1]
        assert bytes(buf[:8]) == struct.pack("<Q", FAKE)
        assert bytes(buf[o : o + 128]) == _EXPECTED
        assert bytes(buf[lay.offsets[3] : lay.offsets[3] + 4]) == struct.pack("<i", 2)
    assert (TensorMap, 128) in _packing._FAST
    wrong = ArgLayout([8, 8])
    for _ in range(2):
        with pytest.raises(TypeError, match="kernel 'tma' argument 1: the TensorMap has 128 bytes"):
            pack_fast(bytearray(wrong.total), wrong.items, [FAKE, tm], "tma")


def test_a_bad_hook_is_refused() -> None:
    class Odd:
        def __cudriver_kernel_arg__(self) -> Any:
            return b"\0" * 16

    with pytest.raises(
        TypeError, match=r"argument 0: Odd.__cudriver_kernel_arg__\(\) gave a bytes"
    ):
        pack_arg(16, Odd())


# -- replace_address ---------------------------------------------------------------------


def test_replace_address(fake: FakeDriver) -> None:
    first, second = arr((32, 48)), arr((32, 48), ptr=FAKE + 4096)
    tm = TensorMap(first, (8, 16))
    args = PackedArgs([128], [tm], "tma")
    tm.replace_address(second)
    [(m, address)] = fake.replaces
    assert m is tm.tensor_map
    assert address == FAKE + 4096
    assert tm.address == FAKE + 4096
    assert tm.source is second
    assert bytes(tm)[:8] == struct.pack("<Q", FAKE + 4096)
    assert args.arg_bytes(0) == _EXPECTED  # packed before: the old bytes
    args.set(0, tm)
    assert args.arg_bytes(0)[:8] == struct.pack("<Q", FAKE + 4096)
    # A larger buffer, or another shape of the same size, does too.
    tm.replace_address(arr((64, 48), ptr=FAKE + 8192))
    tm.replace_address(arr((1536,), ptr=FAKE))
    assert len(fake.replaces) == 3


def test_replace_address_checks(fake: FakeDriver) -> None:
    tm = TensorMap(arr((32, 48)), (8, 16))
    bad: list[tuple[Any, type[Exception], str]] = [
        (arr((32, 48), ptr=FAKE + 4), ValueError, r"0x7f0000000004 is not 16-byte aligned"),
        (arr((32, 48), ptr=None), ValueError, "NULL"),
        (
            arr((32, 48), "<i4"),
            TypeError,
            r"the map holds float32 elements \(FLOAT32\); the new buffer holds int32",
        ),
        (arr((32, 48), "<f8"), TypeError, "the map holds float32"),
        (
            arr((31, 48)),
            ValueError,
            "the map spans 6144 bytes from the address but the CAI describes 5952",
        ),
        (object(), TypeError, "maps a device array"),
    ]
    for buffer, exc, match in bad:
        with pytest.raises(exc, match=match):
            tm.replace_address(buffer)
    assert fake.replaces == []
    assert tm.address == FAKE
    fake.status = drv.CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(cu.InvalidValueError, match="cuTensorMapReplaceAddress"):
        tm.replace_address(arr((32, 48), ptr=FAKE + 4096))
    assert tm.address == FAKE  # unchanged when the driver refuses


def test_replace_address_with_a_given_data_type(fake: FakeDriver) -> None:
    tm = TensorMap(arr((8, 64), "|i1"), (8, 16), data_type=TensorMapDataType.UINT8)
    tm.replace_address(arr((8, 64), "|u1", ptr=FAKE + 512))  # same size: fine
    with pytest.raises(TypeError, match="data_type UINT8 has 1-byte elements"):
        tm.replace_address(arr((8, 64), "<u2"))


def test_replace_address_without_the_call(
    fake: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    tm = TensorMap(arr((8, 16)), (8, 4))
    monkeypatch.setattr(tensormap, "_cuTensorMapReplaceAddress", None)
    with pytest.raises(cu.NotSupportedError, match="has no cuTensorMapReplaceAddress"):
        tm.replace_address(arr((8, 16)))


# -- what the map keeps ------------------------------------------------------------------


def test_the_map_keeps_its_buffer(fake: FakeDriver) -> None:
    src = arr((8, 16))
    ref = weakref.ref(src)
    tm = TensorMap(src, (8, 4))
    del src
    gc.collect()
    assert ref() is not None
    assert tm.source is ref()
    tm.replace_address(arr((8, 16)))
    gc.collect()
    assert ref() is None  # the new buffer replaced it


def test_a_cudriver_buffer_is_leased(fake: FakeDriver) -> None:
    raw = cu.DeviceBuffer.from_handle(FAKE, 4096)
    buf = raw.cast(np.float32, (32, 32))
    tm = TensorMap(buf, (8, 16))
    assert tm.source is buf
    assert tm._lease is not None and tm._lease.target is buf
    assert fake.last()["globalDim"] == [32, 32]
    assert TensorMap(raw, 64).data_type is TensorMapDataType.UINT8  # bytes without a dtype
    buf.close()
    with pytest.raises(cu.ClosedError):
        TensorMap(buf, (8, 16))


def test_repr(fake: FakeDriver) -> None:
    tm = TensorMap(arr((8, 64), "<f2"), (8, 64), swizzle=TensorMapSwizzle.SWIZZLE_128B)
    assert repr(tm) == (
        "<cudriver.TensorMap FLOAT16 shape=(8, 64) box=(8, 64) swizzle=SWIZZLE_128B "
        "at 0x7f0000000000>"
    )


# -- on a GPU: one tile through cp.async.bulk.tensor -------------------------------------

BOX_ROWS, BOX_COLS = 8, 16

TMA_KERNEL = r"""
struct alignas(64) CUtensorMap { unsigned long long opaque[16]; };

#define BOX_ROWS 8
#define BOX_COLS 16
#define TILE (BOX_ROWS * BOX_COLS)

struct alignas(128) Smem {
    float tile[TILE];             // the TMA destination: 128-byte aligned
    unsigned long long barrier;   // the mbarrier: 8-byte aligned
};

__device__ __forceinline__ unsigned int smem_u32(const void* p) {
    unsigned int r;
    asm volatile("{ .reg .u64 smem_ptr; cvta.to.shared.u64 smem_ptr, %1; "
                 "cvt.u32.u64 %0, smem_ptr; }" : "=r"(r) : "l"(p));
    return r;
}

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// One block copies the box at column x, row y of the map's matrix to out (row-major,
// BOX_ROWS x BOX_COLS). Every wait is bounded: on a timeout the block adds 1 to *status
// and writes nothing.
extern "C" __global__ void tma_tile(const __grid_constant__ CUtensorMap tmap, float* out,
                                    unsigned int* status, int x, int y) {
    __shared__ Smem s;
    const unsigned int bar = smem_u32(&s.barrier);
    const unsigned int dst = smem_u32(s.tile);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(1) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     :: "r"(bar), "r"((unsigned int)(TILE * sizeof(float))) : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
            " [%0], [%1, {%2, %3}], [%4];"
            :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(&tmap)), "r"(x), "r"(y),
               "r"(bar)
            : "memory");
    }
    unsigned int done = 0;
    const unsigned long long start = now_ns();
    for (unsigned int i = 0; i < 100000000u && !done; ++i) {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done) : "r"(bar), "r"(0u) : "memory");
        if (!done && now_ns() - start > 2000000000ull) {
            break;  // 2 s: the copy is not coming
        }
    }
    if (!done) {
        if (threadIdx.x == 0) {
            atomicAdd(status, 1u);
        }
        return;
    }
    for (int i = threadIdx.x; i < TILE; i += blockDim.x) {
        out[i] = s.tile[i];
    }
}
"""


def _tile(a: np.ndarray[Any, Any], x: int, y: int) -> np.ndarray[Any, Any]:
    """The box at column ``x``, row ``y`` of ``a``, zero outside ``a`` (TMA's fill)."""
    t = np.zeros((BOX_ROWS, BOX_COLS), a.dtype)
    part = a[y : y + BOX_ROWS, x : x + BOX_COLS]
    t[: part.shape[0], : part.shape[1]] = part
    return t


@needs_nvrtc
@pytest.mark.gpu
def test_a_kernel_loads_a_tile_through_the_map(ctx: cu.Context, stream: cu.Stream) -> None:
    if ctx.device.compute_capability < (9, 0):
        pytest.skip("TMA needs compute capability 9.0")
    kern = load_kernels(ctx, TMA_KERNEL, "tma_tile")["tma_tile"]
    rows, cols = 32, 48
    a = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    b = -a - 1
    src = cu.DeviceBuffer.from_array(a)
    other = cu.DeviceBuffer.from_array(b)
    status = cu.DeviceBuffer.from_array(np.zeros(1, np.uint32))
    tm = TensorMap(src, (BOX_ROWS, BOX_COLS))
    outs = [cu.DeviceBuffer.empty((BOX_ROWS, BOX_COLS), np.float32) for _ in range(6)]

    def check(i: int, expected: np.ndarray[Any, Any]) -> None:
        stream.synchronize()
        assert status.copy_to()[0] == 0, "the TMA copy did not complete (timed out)"
        np.testing.assert_array_equal(outs[i].copy_to(), expected)

    # Eagerly, in bounds and across the lower-right corner (zero fill).
    kern.launch(stream, 1, 128, tm, outs[0], status, 16, 8)
    check(0, a[8:16, 16:32])
    kern.launch(stream, 1, 128, tm, outs[1], status, 40, 28)
    check(1, _tile(a, 40, 28))
    # Prepared, and as a built graph's node.
    kern.prepare(1, 128, tm, outs[2], status, 0, 24).launch(stream)
    check(2, a[24:32, 0:16])
    with cu.Graph() as built:
        built.add_kernel(kern, 1, 128, tm, outs[3], status, 32, 0)
        with built.instantiate() as exe:
            exe.launch(stream)
            check(3, a[0:8, 32:48])
    # Captured into a graph.
    with stream.capture() as g:
        kern.launch(stream, 1, 128, tm, outs[4], status, 8, 16)
    with g, g.instantiate() as exe:
        exe.launch(stream)
        check(4, a[16:24, 8:24])
    # At another buffer.
    tm.replace_address(other)
    kern.launch(stream, 1, 128, tm, outs[5], status, 16, 8)
    check(5, b[8:16, 16:32])
    for buf in (src, other, status, *outs):
        buf.close()


def test_a_graph_keeps_a_lease_on_the_memory_a_map_carries() -> None:
    # What a captured or built kernel node keeps: its arguments, with a lease on each
    # handle and on the buffer a TensorMap maps, so the graph's launches order that
    # buffer's stream-ordered free after them (graph.py's _leased_memory reads it).
    from cudriver._lifetime import capture
    from cudriver._lifetime._coerce import MapsMemory
    from cudriver._lifetime._handle import Lease

    buf = cu.DeviceBuffer.from_handle(FAKE, 4096)

    class Carries(MapsMemory):
        def _mapped(self) -> Any:
            return buf

    keep: list[Any] = []
    capture.hold(keep, ((Carries(), 3, MapsMemory()),))
    leases = [o for o in keep if isinstance(o, Lease)]
    assert len(leases) == 1 and leases[0].target is buf
