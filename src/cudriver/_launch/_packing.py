"""Kernel-argument packing: pure functions of parameter sizes and Python values.

Argument packing is a pure function of the kernel's parameter sizes (read once per
kernel with ``cuFuncGetParamInfo``) and the Python arguments: :func:`pack_arg` encodes
one value, :class:`PackedArgs` lays all of them out in one host buffer and builds the
``void*[]`` array that ``cuLaunchKernel`` reads. Every packing failure is a
``TypeError`` that names the kernel and the argument's index, raised before any
driver call. Nothing here calls the driver, so all of it is tested without a GPU.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np
from cuda.bindings import driver as _drv

from .._lifetime._coerce import DeviceMemory
from .._memory.strided import StridedView

__all__ = [
    "ArgLayout",
    "PackedArgs",
    "count_error",
    "pack_arg",
    "pack_fast",
    "param_layout",
    "register_pointer_type",
]

_INT_FMT = {n: struct.Struct("<" + c) for n, c in ((1, "b"), (2, "h"), (4, "i"), (8, "q"))}
_UINT_FMT = {n: struct.Struct("<" + c) for n, c in ((1, "B"), (2, "H"), (4, "I"), (8, "Q"))}
_FLOAT_FMT = {n: struct.Struct("<" + c) for n, c in ((2, "e"), (4, "f"), (8, "d"))}
_FLOAT_NAME = {2: "float16", 4: "float32", 8: "float64"}
_PTR = _UINT_FMT[8]
# The common base of every ctypes value type (simple types, structures, unions,
# arrays, pointers); not exported by name from ctypes.
_CDATA: type = ctypes.c_int.__mro__[-2]


def _fail(kernel: str, index: int, problem: str) -> NoReturn:
    raise TypeError(f"kernel {kernel!r} argument {index}: {problem}")


def _pack_pointer(size: int, ptr: Any, what: str, kernel: str, index: int) -> bytes:
    if size != 8:
        _fail(
            kernel,
            index,
            f"{what} is a device pointer (8 bytes) but the parameter has {size} bytes",
        )
    try:
        p = int(ptr)
    except (TypeError, ValueError):
        _fail(kernel, index, f"{what} did not give an integer device address: {ptr!r}")
    if not 0 <= p <= 0xFFFFFFFFFFFFFFFF:
        _fail(kernel, index, f"device address {p:#x} of {what} is not a 64-bit address")
    return _PTR.pack(p)


def _format(
    table: dict[int, struct.Struct], size: int, what: str, value: Any, kernel: str, index: int
) -> struct.Struct:
    """The ``struct`` format for a Python ``what`` ("int", "float") of ``size`` bytes."""
    fmt = table.get(size)
    if fmt is None:
        hint = (
            ": pass a numpy scalar or ctypes value of that size"
            if what == "int"
            else " (a float packs into 2, 4 or 8 bytes)"
        )
        _fail(kernel, index, f"cannot pack the {what} {value!r} into a {size}-byte parameter{hint}")
    return fmt


def _pack_int(size: int, value: int, kernel: str, index: int) -> bytes:
    fmt = _format(_INT_FMT, size, "int", value, kernel, index)
    bits = 8 * size
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= value <= hi:
        _fail(
            kernel,
            index,
            f"the int {value} does not fit the {size}-byte parameter (int{bits} range "
            f"[{lo}, {hi}]); for an unsigned parameter pass np.uint{bits}(...)",
        )
    return fmt.pack(value)


def _pack_float(size: int, value: float, kernel: str, index: int) -> bytes:
    fmt = _format(_FLOAT_FMT, size, "float", value, kernel, index)
    try:
        return fmt.pack(value)
    except OverflowError:
        _fail(
            kernel,
            index,
            f"the float {value!r} is out of {_FLOAT_NAME[size]} range for the "
            f"{size}-byte parameter",
        )


def pack_arg(size: int, value: Any, index: int = 0, kernel: str = "kernel") -> bytes:
    """Encode one kernel argument for a parameter of ``size`` bytes.

    Pure: makes no driver call. The rules, in order:

    * Python ``float`` → float32 for a 4-byte parameter, float64 for 8 bytes (float16
      for 2);
    * Python ``int`` → a signed integer of the parameter's size, range checked;
    * ``bool`` → 0 or 1 in the parameter's size (1, 2, 4 or 8 bytes);
    * a numpy scalar (``np.generic``) → its own bytes; its itemsize must equal
      ``size``;
    * ``CUdeviceptr``, ``None`` (NULL), an object with ``__cuda_array_interface__``
      or a ``ptr`` attribute (e.g. a ``DeviceBuffer``) → an 8-byte device address;
    * a device :class:`~cudriver.StridedView` → its ``ptr`` (element ``[0, ..., 0]``;
      pass its shape and strides as further arguments); a host one is refused;
    * a ctypes value, structure, union or array → its bytes; its size must equal
      ``size``;
    * an object whose type defines ``__cudriver_kernel_arg__()`` (e.g. a
      :class:`~cudriver.TensorMap`) → the bytes of the ctypes value that method returns;
      their size must equal ``size``.

    Parameters
    ----------
    size
        The parameter's size in bytes (from ``cuFuncGetParamInfo``).
    value
        The Python argument.
    index, kernel
        Used in error messages only.

    Returns
    -------
    bytes
        Exactly ``size`` bytes.

    Raises
    ------
    TypeError
        The value cannot be packed into this parameter; the message names the kernel,
        the argument's index and the problem.
    """
    t = type(value)
    if t is float:
        return _pack_float(size, value, kernel, index)
    if t is int:
        return _pack_int(size, value, kernel, index)
    if t is bool:
        fmt = _UINT_FMT.get(size)
        if fmt is None:
            _fail(kernel, index, f"cannot pack a bool into a {size}-byte parameter")
        return fmt.pack(1 if value else 0)
    if isinstance(value, np.generic):
        itemsize = value.dtype.itemsize
        if itemsize != size:
            _fail(
                kernel,
                index,
                f"the numpy {value.dtype} scalar has {itemsize} bytes but the parameter "
                f"has {size}; pass a scalar of the parameter's type",
            )
        return value.tobytes()
    if isinstance(value, _drv.CUdeviceptr):
        return _pack_pointer(size, int(value), "the CUdeviceptr", kernel, index)
    if value is None:
        return _pack_pointer(size, 0, "None (a NULL pointer)", kernel, index)
    if isinstance(value, np.ndarray):
        _fail(
            kernel,
            index,
            f"a host numpy array (shape {value.shape}) cannot be passed to a kernel: copy "
            "it to device memory and pass that, or pass a numpy scalar",
        )
    if isinstance(value, StridedView):
        if not value.is_device:
            _fail(
                kernel,
                index,
                f"a StridedView of host memory ({type(value.obj).__name__}, shape "
                f"{value.shape}) cannot be passed to a kernel: copy it to device memory and "
                "pass that",
            )
        return _pack_pointer(size, value.ptr, "the StridedView", kernel, index)
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        try:
            ptr = cai["data"][0]
        except (TypeError, KeyError, IndexError):
            _fail(kernel, index, f"{t.__name__}.__cuda_array_interface__ has no 'data' entry")
        return _pack_pointer(
            size, 0 if ptr is None else ptr, f"the {t.__name__} device array", kernel, index
        )
    if isinstance(value, _CDATA):
        cval: Any = value
        n = ctypes.sizeof(cval)
        if n != size:
            _fail(
                kernel,
                index,
                f"the ctypes {t.__name__} has {n} bytes but the parameter has {size}",
            )
        return ctypes.string_at(ctypes.addressof(cval), n)
    hook = getattr(t, "__cudriver_kernel_arg__", None)
    if hook is not None:
        return _pack_hooked(size, hook(value), t.__name__, kernel, index)
    if hasattr(value, "ptr"):
        return _pack_pointer(size, value.ptr, f"the {t.__name__}'s ptr", kernel, index)
    if isinstance(value, int):  # int subclasses (IntEnum members, ...)
        if isinstance(value, bool):  # pragma: no cover - bool cannot be subclassed
            return pack_arg(size, bool(value), index, kernel)
        return _pack_int(size, int(value), kernel, index)
    if isinstance(value, float):
        return _pack_float(size, float(value), kernel, index)
    _fail(
        kernel,
        index,
        f"cannot pass a {t.__name__} ({value!r:.60}) to a {size}-byte parameter; pass a "
        "device buffer or pointer, a Python or numpy number, or a ctypes value",
    )


def _pack_hooked(size: int, cval: Any, what: str, kernel: str, index: int) -> bytes:
    """The bytes of a ``__cudriver_kernel_arg__()`` result, checked against ``size``."""
    if not isinstance(cval, _CDATA):
        _fail(
            kernel,
            index,
            f"{what}.__cudriver_kernel_arg__() gave a {type(cval).__name__}, not a ctypes value",
        )
    c: Any = cval
    n = ctypes.sizeof(c)
    if n != size:
        _fail(kernel, index, f"the {what} has {n} bytes but the parameter has {size}")
    return ctypes.string_at(ctypes.addressof(c), n)


# Fast packers for the common (type, parameter size) pairs: each writes the value in
# place. Anything else (and every error message) goes through pack_arg.
_Packer = Any
_FAST: dict[tuple[type, int], _Packer] = {}


def _fast_struct(fmt: struct.Struct) -> _Packer:
    return fmt.pack_into


def _fast_device_memory(buf: bytearray, off: int, value: DeviceMemory) -> None:
    if value._h is None:
        value._raise_closed()
    _PTR.pack_into(buf, off, value._key)


def _fast_ptr(buf: bytearray, off: int, value: Any) -> None:
    _PTR.pack_into(buf, off, value.ptr)


def _fast_view(buf: bytearray, off: int, value: StridedView) -> None:
    if not value.is_device:
        raise TypeError("a host StridedView")  # pack_fast redoes it with pack_arg, which says why
    _PTR.pack_into(buf, off, value.ptr)


def _fast_cai(buf: bytearray, off: int, value: Any) -> None:
    _PTR.pack_into(buf, off, value.__cuda_array_interface__["data"][0] or 0)


def _fast_hooked(size: int) -> _Packer:
    """A packer for a ``__cudriver_kernel_arg__`` type into ``size`` bytes."""

    def pack(buf: bytearray, off: int, value: Any) -> None:
        cval = value.__cudriver_kernel_arg__()
        if ctypes.sizeof(cval) != size:
            raise TypeError(size)  # pack_fast redoes it with pack_arg, which says why
        buf[off : off + size] = ctypes.string_at(ctypes.addressof(cval), size)

    return pack


for _size, _fmt in _INT_FMT.items():
    _FAST[(int, _size)] = _fast_struct(_fmt)
    _FAST[(bool, _size)] = _fast_struct(_fmt)
for _size, _fmt in _FLOAT_FMT.items():
    if _size != 2:
        _FAST[(float, _size)] = _fast_struct(_fmt)
for _np_t, _code in (
    (np.int8, "b"),
    (np.uint8, "B"),
    (np.int16, "h"),
    (np.uint16, "H"),
    (np.int32, "i"),
    (np.uint32, "I"),
    (np.int64, "q"),
    (np.uint64, "Q"),
    (np.float32, "f"),
    (np.float64, "d"),
):
    _FAST[(_np_t, np.dtype(_np_t).itemsize)] = _fast_struct(struct.Struct("<" + _code))
_FAST[(StridedView, 8)] = _fast_view


def register_pointer_type(cls: type, *, via: str = "ptr") -> None:
    """Let kernel launches pack instances of ``cls`` as device pointers quickly.

    ``via`` is ``"ptr"`` (an int attribute or property) or ``"cai"`` (the
    ``__cuda_array_interface__``). Types not registered still pack, more slowly.
    """
    _FAST[(cls, 8)] = _fast_ptr if via == "ptr" else _fast_cai


def _learn(args: Sequence[Any], items: Any) -> bool:
    """Add fast packers for the new types in ``args``; True if any was new.

    DeviceMemory subclasses (8-byte pointers) and types with ``__cudriver_kernel_arg__``.
    """
    new = False
    for i, s, _o in items:
        t = type(args[i])
        if (t, s) in _FAST:
            continue
        if s == 8 and issubclass(t, DeviceMemory):
            _FAST[(t, 8)] = _fast_device_memory
            new = True
        elif hasattr(t, "__cudriver_kernel_arg__"):
            _FAST[(t, s)] = _fast_hooked(s)
            new = True
    return new


def pack_fast(buf: bytearray, items: Any, args: Sequence[Any], kernel: str) -> None:
    """Pack ``args`` into ``buf``; the fast packers first, :func:`pack_arg` otherwise.

    ``items`` is a layout's ``(index, size, offset)`` triples.
    """
    try:
        for i, s, o in items:
            v = args[i]
            _FAST[type(v), s](buf, o, v)
    except KeyError:
        if _learn(args, items):
            pack_fast(buf, items, args, kernel)
            return
        for i, s, o in items:
            buf[o : o + s] = pack_arg(s, args[i], i, kernel)
    except (struct.error, TypeError, OverflowError, AttributeError):
        # An unusual type or a value out of range: redo it the careful way, which
        # packs what the fast packers cannot and raises the precise error otherwise.
        for i, s, o in items:
            buf[o : o + s] = pack_arg(s, args[i], i, kernel)


def _align_of(size: int) -> int:
    if size >= 8:
        return 8
    a = 1
    while a < size:
        a <<= 1
    return a


def param_layout(sizes: Sequence[int]) -> tuple[tuple[int, ...], int]:
    """Host-side offsets for parameters of ``sizes`` bytes, and the total size.

    Each parameter is aligned to its size rounded up to a power of two, at most 8
    bytes. Only the bytes matter to the driver (it copies ``size`` bytes from each
    pointer), but aligned storage keeps every value readable in place.
    """
    offsets: list[int] = []
    pos = 0
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int) or s <= 0:
            raise ValueError(f"parameter sizes must be positive ints, not {s!r}")
        a = _align_of(s)
        pos = (pos + a - 1) // a * a
        offsets.append(pos)
        pos += s
    return tuple(offsets), pos


def count_error(kernel: str, n: int, given: int) -> TypeError:
    return TypeError(f"kernel {kernel!r} takes {n} argument{'s' if n != 1 else ''}, {given} given")


class ArgLayout:
    """A kernel's parameter sizes and host offsets, computed once.

    Also holds the ctypes types and a pool of reusable buffers for
    :meth:`Kernel.launch`.
    """

    __slots__ = ("buf_type", "items", "n", "offsets", "pool", "ptr_type", "sizes", "total")

    def __init__(self, sizes: Sequence[int]) -> None:
        self.sizes: tuple[int, ...] = tuple(sizes)
        self.offsets, total = param_layout(self.sizes)
        self.n = len(self.sizes)
        self.total = max(total, 8)
        self.items = tuple(zip(range(self.n), self.sizes, self.offsets, strict=True))
        self.buf_type: Any = ctypes.c_char * self.total
        self.ptr_type: Any = ctypes.c_void_p * self.n if self.n else None
        # Buffers free for a launch to pack into; one per concurrently launching thread.
        self.pool: list[tuple[bytearray, Any, Any, int]] = []

    def storage(self) -> tuple[bytearray, Any, Any, int]:
        """``(bytearray, its ctypes view, the void*[] array, that array's address)``."""
        buf = bytearray(self.total)
        array = self.buf_type.from_buffer(buf)  # shares the bytearray's memory
        if not self.n:
            return buf, array, None, 0
        base = ctypes.addressof(array)
        ptrs = self.ptr_type(*[base + o for o in self.offsets])
        return buf, array, ptrs, ctypes.addressof(ptrs)

    def fill(self, buf: bytearray, args: Sequence[Any], kernel: str) -> None:
        if len(args) != self.n:
            raise count_error(kernel, self.n, len(args))
        for i, s, o in self.items:
            buf[o : o + s] = pack_arg(s, args[i], i, kernel)


class PackedArgs:
    """Kernel arguments packed into one host buffer, with the ``void*[]`` array.

    Pure: makes no driver call. ``address`` is the int address of the ``void*[]``
    array (0 for a kernel without parameters), the form ``cuLaunchKernel``'s
    ``kernelParams`` reads fastest. The buffer is owned by this object; the driver
    copies the values at each launch, so the buffer may change between launches.

    Parameters
    ----------
    sizes
        The kernel's parameter sizes in bytes.
    args
        One Python value per parameter; see :func:`pack_arg` for the rules.
    kernel
        The kernel's name, for error messages.

    Raises
    ------
    TypeError
        The number of arguments differs from the number of parameters, or an
        argument cannot be packed.
    """

    __slots__ = ("_array", "_buf", "_layout", "_ptrs", "address", "args", "kernel")

    address: int
    args: tuple[Any, ...]
    kernel: str

    def __init__(self, sizes: Sequence[int], args: Sequence[Any], kernel: str = "kernel") -> None:
        self._pack(ArgLayout(sizes), tuple(args), kernel)

    @classmethod
    def _with_layout(cls, layout: ArgLayout, args: Sequence[Any], kernel: str) -> PackedArgs:
        """Pack into a layout computed before (a kernel computes its layout once)."""
        self = cls.__new__(cls)
        self._pack(layout, tuple(args), kernel)
        return self

    def _pack(self, layout: ArgLayout, args: tuple[Any, ...], kernel: str) -> None:
        if len(args) != layout.n:
            raise count_error(kernel, layout.n, len(args))
        buf, array, ptrs, address = layout.storage()
        layout.fill(buf, args, kernel)
        self._layout = layout
        self._buf = buf
        self._array = array
        self._ptrs = ptrs
        self.address = address
        self.args = args
        self.kernel = kernel

    @property
    def sizes(self) -> tuple[int, ...]:
        """The parameter sizes in bytes."""
        return self._layout.sizes

    @property
    def offsets(self) -> tuple[int, ...]:
        """Where each argument lies in the host buffer (each aligned to its size, up to 8)."""
        return self._layout.offsets

    def set(self, index: int, value: Any) -> None:
        """Re-pack argument ``index`` in place (the addresses stay the same)."""
        n = len(self.sizes)
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"argument index must be an int, not {type(index).__name__}")
        if not -n <= index < n:
            raise IndexError(
                f"kernel {self.kernel!r} has {n} parameter{'s' if n != 1 else ''}; "
                f"no argument {index}"
            )
        if index < 0:
            index += n
        s, o = self.sizes[index], self.offsets[index]
        data = pack_arg(s, value, index, self.kernel)
        self._buf[o : o + s] = data
        self.args = (*self.args[:index], value, *self.args[index + 1 :])

    def arg_bytes(self, index: int) -> bytes:
        """The packed bytes of argument ``index``."""
        s, o = self.sizes[index], self.offsets[index]
        return bytes(self._buf[o : o + s])

    def __len__(self) -> int:
        return len(self.sizes)

    def __repr__(self) -> str:
        return f"<cudriver.PackedArgs kernel={self.kernel!r} sizes={self.sizes}>"
