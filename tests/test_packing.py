"""Kernel-argument packing and launch dimensions: pure functions, tested without a GPU.

``cudriver._launch._packing`` encodes the arguments (``pack_arg``, the fast packers, ``PackedArgs``,
``param_layout``); ``cudriver._lifetime._coerce.dims`` checks grid and block sizes.
"""

from __future__ import annotations

import ctypes
import math
import struct
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as drv
from hypothesis import given
from hypothesis import strategies as st

from cudriver import FunctionAttribute
from cudriver._launch._packing import PackedArgs, pack_arg, pack_fast, param_layout
from cudriver._lifetime._coerce import dims

from ._support import CAI, FakeBuffer, Pair

# -- pack_arg: each accepted type ------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "value", "expected"),
    [
        (4, 7, struct.pack("<i", 7)),
        (4, -1, struct.pack("<i", -1)),
        (8, 7, struct.pack("<q", 7)),
        (8, -(2**63), struct.pack("<q", -(2**63))),
        (1, -5, struct.pack("<b", -5)),
        (2, 300, struct.pack("<h", 300)),
        (4, 1.5, struct.pack("<f", 1.5)),
        (8, 1.5, struct.pack("<d", 1.5)),
        (2, 0.5, struct.pack("<e", 0.5)),
        (1, True, b"\x01"),
        (4, True, struct.pack("<I", 1)),
        (8, False, bytes(8)),
    ],
)
def test_pack_python_numbers(size: int, value: Any, expected: bytes) -> None:
    assert pack_arg(size, value) == expected


def test_pack_float_rounds_to_float32_for_4_byte_params() -> None:
    assert pack_arg(4, 0.1) == np.float32(0.1).tobytes()
    assert pack_arg(8, 0.1) == np.float64(0.1).tobytes()
    assert pack_arg(4, math.inf) == np.float32(np.inf).tobytes()


def test_pack_int_subclass_and_float_subclass() -> None:
    assert pack_arg(4, FunctionAttribute.NUM_REGS) == struct.pack("<i", 4)

    class MyFloat(float):
        pass

    assert pack_arg(8, MyFloat(2.0)) == struct.pack("<d", 2.0)


@pytest.mark.parametrize(
    "value",
    [
        np.float32(2.5),
        np.float64(2.5),
        np.int32(-3),
        np.uint32(4_000_000_000),
        np.int64(-(2**40)),
        np.uint8(200),
        np.int16(-2),
        np.float16(1.0),
        np.bool_(True),
    ],
)
def test_pack_numpy_scalars_keep_their_dtype(value: np.generic) -> None:
    assert pack_arg(value.dtype.itemsize, value) == value.tobytes()


def test_pack_numpy_structured_scalar() -> None:
    dt = np.dtype([("a", "<i4"), ("b", "<f4")])
    v = np.zeros((), dtype=dt)[()]
    assert pack_arg(8, v) == bytes(8)


def test_pack_ctypes_values() -> None:
    assert pack_arg(4, ctypes.c_int32(-9)) == struct.pack("<i", -9)
    assert pack_arg(8, ctypes.c_double(3.25)) == struct.pack("<d", 3.25)
    assert pack_arg(2, ctypes.c_uint16(65535)) == b"\xff\xff"
    assert pack_arg(8, ctypes.c_void_p(0x1234)) == struct.pack("<Q", 0x1234)
    arr = (ctypes.c_float * 3)(1.0, 2.0, 3.0)
    assert pack_arg(12, arr) == struct.pack("<3f", 1.0, 2.0, 3.0)


def test_pack_ctypes_structure_by_value() -> None:
    p = Pair(5, 2.5)
    assert ctypes.sizeof(p) == 16
    data = pack_arg(16, p)
    assert struct.unpack_from("<i", data, 0) == (5,)
    assert struct.unpack_from("<d", data, 8) == (2.5,)


@pytest.mark.parametrize(
    ("value", "ptr"),
    [
        (drv.CUdeviceptr(0x7F0000001000), 0x7F0000001000),
        (FakeBuffer(0x7F0000002000), 0x7F0000002000),
        (FakeBuffer(drv.CUdeviceptr(0x10)), 0x10),  # type: ignore[arg-type]
        (CAI(0x7F0000003000), 0x7F0000003000),
        (CAI(None), 0),
        (None, 0),
    ],
)
def test_pack_device_pointers(value: Any, ptr: int) -> None:
    assert pack_arg(8, value) == struct.pack("<Q", ptr)


def test_cuda_array_interface_wins_over_ptr() -> None:
    class Both(CAI):
        ptr = 1

    assert pack_arg(8, Both(0x5000)) == struct.pack("<Q", 0x5000)


# -- pack_arg: each error message ------------------------------------------------------


def _err(size: int, value: Any, index: int = 3, kernel: str = "axpy") -> str:
    with pytest.raises(TypeError) as ei:
        pack_arg(size, value, index, kernel)
    msg = str(ei.value)
    assert msg.startswith(f"kernel {kernel!r} argument {index}: "), msg
    return msg


def test_int_out_of_range_is_a_type_error_naming_the_range() -> None:
    msg = _err(4, 2**31)
    assert "int32" in msg and "np.uint32" in msg
    _err(4, -(2**31) - 1)
    _err(8, 2**63)
    _err(1, 128)
    assert pack_arg(4, 2**31 - 1) == struct.pack("<i", 2**31 - 1)


def test_int_into_odd_size() -> None:
    assert "3-byte parameter" in _err(3, 1)


def test_float_errors() -> None:
    assert "float32 range" in _err(4, 1e300)
    assert "2, 4 or 8 bytes" in _err(16, 1.0)


def test_bool_into_odd_size() -> None:
    assert "bool" in _err(3, True)


def test_numpy_scalar_size_mismatch() -> None:
    msg = _err(4, np.float64(1.0))
    assert "float64" in msg and "8 bytes" in msg and "has 4" in msg
    _err(8, np.int32(1))


def test_pointer_into_non_pointer_param() -> None:
    msg = _err(4, FakeBuffer(0x1000))
    assert "device pointer" in msg and "4 bytes" in msg
    _err(4, drv.CUdeviceptr(1))
    _err(4, None)
    _err(4, CAI(0x1000))


def test_bad_pointers() -> None:
    assert "integer device address" in _err(8, FakeBuffer("x"))  # type: ignore[arg-type]
    assert "64-bit" in _err(8, FakeBuffer(-1))
    assert "'data'" in _err(8, type("Bad", (), {"__cuda_array_interface__": {}})())


def test_ctypes_size_mismatch() -> None:
    msg = _err(8, Pair(1, 2.0))
    assert "Pair" in msg and "16 bytes" in msg
    _err(8, ctypes.c_int32(1))


def test_host_array_is_refused_with_a_hint() -> None:
    msg = _err(8, np.zeros(4, np.float32))
    assert "host numpy array" in msg and "device memory" in msg


@pytest.mark.parametrize("value", ["text", [1, 2], {"a": 1}, object(), b"raw", 1j])
def test_unpackable_values(value: Any) -> None:
    msg = _err(8, value)
    assert type(value).__name__ in msg


# -- layout and PackedArgs ------------------------------------------------------------


def test_param_layout_aligns_each_parameter() -> None:
    # float a, float* x, char c, short s, double d, 16-byte struct, int n
    offsets, total = param_layout([4, 8, 1, 2, 8, 16, 4])
    assert offsets == (0, 8, 16, 18, 24, 32, 48)
    assert total == 52
    assert param_layout([]) == ((), 0)
    assert param_layout([3, 3]) == ((0, 4), 7)


@pytest.mark.parametrize("sizes", [[0], [-4], [4, 1.5], [True]])
def test_param_layout_rejects_bad_sizes(sizes: list[Any]) -> None:
    with pytest.raises(ValueError, match="positive ints"):
        param_layout(sizes)


def _read_params(p: PackedArgs) -> list[bytes]:
    """What the driver reads: ``sizes[i]`` bytes at ``((void**)address)[i]``."""
    if len(p) == 0:
        assert p.address == 0
        return []
    arr = (ctypes.c_void_p * len(p)).from_address(p.address)
    return [ctypes.string_at(arr[i], p.sizes[i]) for i in range(len(p))]


def test_packed_args_void_pointer_array() -> None:
    x, y = FakeBuffer(0x7000_0000_1000), CAI(0x7000_0000_2000)
    p = PackedArgs((4, 8, 8, 4), (2.0, x, y, 10), "axpy")
    assert _read_params(p) == [
        struct.pack("<f", 2.0),
        struct.pack("<Q", 0x7000_0000_1000),
        struct.pack("<Q", 0x7000_0000_2000),
        struct.pack("<i", 10),
    ]
    assert p.args == (2.0, x, y, 10)
    assert p.kernel == "axpy"
    assert p.offsets == (0, 8, 16, 24)
    assert p.arg_bytes(3) == struct.pack("<i", 10)
    assert "axpy" in repr(p)


def test_packed_args_without_parameters() -> None:
    p = PackedArgs((), ())
    assert p.address == 0
    assert len(p) == 0


@pytest.mark.parametrize(("n_args", "word"), [(2, "2 given"), (4, "4 given"), (0, "0 given")])
def test_wrong_argument_count(n_args: int, word: str) -> None:
    with pytest.raises(TypeError, match=rf"kernel 'axpy' takes 3 arguments, {word}"):
        PackedArgs((4, 8, 4), (1,) * n_args, "axpy")
    with pytest.raises(TypeError, match="takes 1 argument, 2 given"):
        PackedArgs((4,), (1, 2), "k")


def test_packed_args_error_names_index() -> None:
    with pytest.raises(TypeError, match=r"kernel 'axpy' argument 1: cannot pass a str"):
        PackedArgs((4, 8, 4), (1.0, "x", 3), "axpy")


def test_set_repacks_in_place() -> None:
    p = PackedArgs((4, 8, 4), (1.0, None, 3), "k")
    addr = p.address
    ptrs_before = list((ctypes.c_void_p * 3).from_address(addr))
    p.set(0, 5.0)
    p.set(-1, np.int32(-7))
    assert p.address == addr
    assert list((ctypes.c_void_p * 3).from_address(addr)) == ptrs_before
    assert _read_params(p) == [struct.pack("<f", 5.0), bytes(8), struct.pack("<i", -7)]
    assert p.args[0] == 5.0 and p.args[2] == np.int32(-7)
    with pytest.raises(TypeError, match="argument 2"):
        p.set(2, "no")
    assert _read_params(p)[2] == struct.pack("<i", -7)  # unchanged after a failed set
    with pytest.raises(IndexError, match="no argument 3"):
        p.set(3, 1)
    with pytest.raises(TypeError, match="index must be an int"):
        p.set(1.0, 1)  # type: ignore[arg-type]


# -- properties ------------------------------------------------------------------------


@given(st.lists(st.sampled_from([1, 2, 4, 8, 12, 16, 3, 24]), min_size=0, max_size=20))
def test_layout_is_aligned_and_disjoint(sizes: list[int]) -> None:
    offsets, total = param_layout(sizes)
    end = 0
    for s, o in zip(sizes, offsets, strict=True):
        assert o >= end
        assert o % min(8, 1 << (s - 1).bit_length()) == 0
        end = o + s
    assert total == end


@given(st.sampled_from([1, 2, 4, 8]), st.data())
def test_ints_round_trip(size: int, data: st.DataObject) -> None:
    bits = 8 * size
    v = data.draw(st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1))
    assert int.from_bytes(pack_arg(size, v), "little", signed=True) == v
    too_big = st.integers(min_value=1 << (bits - 1))
    too_small = st.integers(max_value=-(1 << (bits - 1)) - 1)
    bad = data.draw(st.one_of(too_big, too_small))
    with pytest.raises(TypeError, match=f"int{bits}"):
        pack_arg(size, bad)


@given(st.floats(allow_nan=False))
def test_floats_round_trip(v: float) -> None:
    assert struct.unpack("<d", pack_arg(8, v))[0] == v
    if abs(v) <= float(np.finfo(np.float32).max):
        assert pack_arg(4, v) == np.float32(v).tobytes()


@given(st.lists(st.tuples(st.sampled_from([4, 8]), st.integers(-1000, 1000)), max_size=12))
def test_packed_args_match_pack_arg(items: list[tuple[int, int]]) -> None:
    sizes = [s for s, _ in items]
    args = [v for _, v in items]
    p = PackedArgs(sizes, args)
    assert _read_params(p) == [pack_arg(s, v) for s, v in items]


_VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, width=32),
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1).map(np.int32),
    st.integers(0, 2**32 - 1).map(np.uint32),
    st.floats(allow_nan=False, width=32).map(np.float32),
    st.floats(allow_nan=False).map(np.float64),
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
)


@given(st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), _VALUES), min_size=1, max_size=6))
def test_fast_packing_matches_pack_arg(params: list[tuple[int, object]]) -> None:
    sizes = [s for s, _ in params]
    args = [v for _, v in params]
    offsets, total = param_layout(sizes)
    items = tuple(zip(range(len(sizes)), sizes, offsets, strict=True))
    expected = bytearray(total)
    message = None
    try:
        for i, s, o in items:
            expected[o : o + s] = pack_arg(s, args[i], i, "k")
    except TypeError as exc:
        message = str(exc)
    if message is not None:
        with pytest.raises(TypeError) as info:
            pack_fast(bytearray(total), items, args, "k")
        assert str(info.value) == message
        return
    got = bytearray(total)
    pack_fast(got, items, args, "k")
    assert got == expected


# -- grid and block ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, (5, 1, 1)),
        ((5,), (5, 1, 1)),
        ((5, 6), (5, 6, 1)),
        ([5, 6, 7], (5, 6, 7)),
        (np.int64(3), (3, 1, 1)),
        ((np.uint32(2), 3), (2, 3, 1)),
        (2**32 - 1, (2**32 - 1, 1, 1)),
    ],
)
def test_dims(value: Any, expected: tuple[int, int, int]) -> None:
    assert dims(value, "grid") == expected


@pytest.mark.parametrize("value", [0, -1, (1, 0), (1, 1, -2), 2**32, (), (1, 2, 3, 4)])
def test_dims_value_errors(value: Any) -> None:
    with pytest.raises(ValueError, match="block"):
        dims(value, "block")


@pytest.mark.parametrize("value", [1.0, "4", (1, 2.0), True, (True,), None])
def test_dims_type_errors(value: Any) -> None:
    with pytest.raises(TypeError, match="grid must be an int or a tuple of 1 to 3 ints"):
        dims(value, "grid")
