"""Modules (loaded PTX, cubin or fatbin images), their kernels, and kernel launches.

A :class:`Module` is loaded with ``cuModuleLoadData`` into one context and unloaded
with ``cuModuleUnload``. :meth:`Module.kernel` returns a :class:`Kernel`
(``cuModuleGetFunction``), which launches with ``cuLaunchKernel``.

Argument packing is a pure function of the kernel's parameter sizes (read once per
kernel with ``cuFuncGetParamInfo``) and the Python arguments: :func:`pack_arg` encodes
one value, :class:`PackedArgs` lays all of them out in one host buffer and builds the
``void*[]`` array that ``cuLaunchKernel`` reads. Every packing failure is a
``TypeError`` that names the kernel and the argument's index, raised before any
driver call. :meth:`Kernel.prepare` packs once and returns a :class:`LaunchPlan`
whose :meth:`~LaunchPlan.launch` is the fast path.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import weakref
from collections.abc import Sequence
from enum import IntEnum
from typing import Any, NamedTuple, NoReturn

import numpy as np
from cuda.bindings import driver as _drv

from . import _capture
from ._bindings import SUCCESS
from ._handle import Handle
from .context import Context, current_or_default
from .errors import ClosedError, InvalidImageError, NotSupportedError, make_error
from .stream import Stream, StreamLike, stream_handle

__all__ = [
    "Module",
    "Kernel",
    "LaunchPlan",
    "FunctionAttribute",
    "ParamInfo",
    "PackedArgs",
    "pack_arg",
    "param_layout",
]


class FunctionAttribute(IntEnum):
    """Kernel attributes (``CUfunction_attribute`` without ``CU_FUNC_ATTRIBUTE_``).

    Read with :meth:`Kernel.attribute`, set the settable ones with
    :meth:`Kernel.set_attribute`. Members of the bindings' ``CUfunction_attribute``
    and plain ints are accepted too.
    """

    MAX_THREADS_PER_BLOCK = 0
    SHARED_SIZE_BYTES = 1
    CONST_SIZE_BYTES = 2
    LOCAL_SIZE_BYTES = 3
    NUM_REGS = 4
    PTX_VERSION = 5
    BINARY_VERSION = 6
    CACHE_MODE_CA = 7
    MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
    PREFERRED_SHARED_MEMORY_CARVEOUT = 9
    CLUSTER_SIZE_MUST_BE_SET = 10
    REQUIRED_CLUSTER_WIDTH = 11
    REQUIRED_CLUSTER_HEIGHT = 12
    REQUIRED_CLUSTER_DEPTH = 13
    NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
    CLUSTER_SCHEDULING_POLICY_PREFERENCE = 15
    DEVICE_NODE_UPDATE_SUPPORTED = 16
    SHARED_MEMORY_MODE = 17


FunctionAttribute.__module__ = "cudriver"


class ParamInfo(NamedTuple):
    """Where one kernel parameter lives in the device-side parameter buffer."""

    offset: int
    size: int


ParamInfo.__module__ = "cudriver"

_cuLaunchKernel = _drv.cuLaunchKernel
_cuFuncGetAttribute = _drv.cuFuncGetAttribute
_R = _drv.CUresult
_UINT_MAX = 0xFFFFFFFF
# cuFuncGetParamInfo answers INVALID_VALUE past the last parameter; the parameter
# buffer is at most 32 KiB, so no kernel has more parameters than this.
_MAX_PARAMS = 32768

# -- argument packing (pure; no driver calls) ----------------------------------------

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


def _pack_int(size: int, value: int, kernel: str, index: int) -> bytes:
    fmt = _INT_FMT.get(size)
    if fmt is None:
        _fail(
            kernel,
            index,
            f"cannot pack the int {value} into a {size}-byte parameter: pass a numpy "
            "scalar or ctypes value of that size",
        )
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
    fmt = _FLOAT_FMT.get(size)
    if fmt is None:
        _fail(
            kernel,
            index,
            f"cannot pack the float {value!r} into a {size}-byte parameter (a float "
            "packs into 2, 4 or 8 bytes)",
        )
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
    * a ctypes value, structure, union or array → its bytes; its size must equal
      ``size``.

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


# Fast packers for the common (type, parameter size) pairs: each writes the value in
# place. Anything else (and every error message) goes through pack_arg.
_Packer = Any
_FAST: dict[tuple[type, int], _Packer] = {}


def _fast_struct(fmt: struct.Struct) -> _Packer:
    return fmt.pack_into


def _fast_ptr(buf: bytearray, off: int, value: Any) -> None:
    _PTR.pack_into(buf, off, value.ptr)


def _fast_cai(buf: bytearray, off: int, value: Any) -> None:
    _PTR.pack_into(buf, off, value.__cuda_array_interface__["data"][0] or 0)


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


def register_pointer_type(cls: type, *, via: str = "ptr") -> None:
    """Let kernel launches pack instances of ``cls`` as device pointers quickly.

    ``via`` is ``"ptr"`` (an int attribute or property) or ``"cai"`` (the
    ``__cuda_array_interface__``). Types not registered still pack, more slowly.
    """
    _FAST[(cls, 8)] = _fast_ptr if via == "ptr" else _fast_cai


def _pack_fast(buf: bytearray, items: Any, args: Sequence[Any], kernel: str) -> None:
    """Pack ``args`` into ``buf``; the fast packers first, :func:`pack_arg` otherwise."""
    try:
        for i, s, o in items:
            v = args[i]
            _FAST[type(v), s](buf, o, v)
    except (KeyError, struct.error, TypeError, OverflowError, AttributeError):
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


def _count_error(kernel: str, n: int, given: int) -> TypeError:
    return TypeError(f"kernel {kernel!r} takes {n} argument{'s' if n != 1 else ''}, {given} given")


class _ArgLayout:
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
            raise _count_error(kernel, self.n, len(args))
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

    def __init__(
        self,
        sizes: Sequence[int],
        args: Sequence[Any],
        kernel: str = "kernel",
        *,
        _layout: _ArgLayout | None = None,
    ) -> None:
        args = tuple(args)
        layout = _layout if _layout is not None else _ArgLayout(sizes)
        if len(args) != layout.n:
            raise _count_error(kernel, layout.n, len(args))
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
        """Where each argument lies in the host buffer (see :func:`param_layout`)."""
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


def _dims(value: Any, what: str) -> tuple[int, int, int]:
    """``(x, y, z)`` from an int or a tuple of 1 to 3 ints, each in [1, 2**32 - 1]."""
    if type(value) is int and 1 <= value <= _UINT_MAX:
        return (value, 1, 1)
    if isinstance(value, (tuple, list)):
        items = list(value)
        if not 1 <= len(items) <= 3:
            raise ValueError(
                f"{what} must be an int or a tuple of 1 to 3 ints, not a "
                f"{len(items)}-tuple {tuple(items)!r}"
            )
    else:
        items = [value]
    out: list[int] = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(
                f"{what} must be an int or a tuple of 1 to 3 ints, not {value!r} "
                f"(contains a {type(v).__name__})"
            )
        iv = int(v)
        if not 1 <= iv <= _UINT_MAX:
            raise ValueError(f"every {what} dimension must be >= 1 (and < 2**32), got {value!r}")
        out.append(iv)
    while len(out) < 3:
        out.append(1)
    return (out[0], out[1], out[2])


def _shared(shared_mem: Any) -> int:
    if type(shared_mem) is int and 0 <= shared_mem <= _UINT_MAX:
        return shared_mem
    if isinstance(shared_mem, bool) or not isinstance(shared_mem, (int, np.integer)):
        raise TypeError(f"shared_mem must be an int, not {type(shared_mem).__name__}")
    v = int(shared_mem)
    if not 0 <= v <= _UINT_MAX:
        raise ValueError(f"shared_mem must be >= 0 bytes (and < 2**32), got {v}")
    return v


# -- modules --------------------------------------------------------------------------

_ELF_MAGIC = b"\x7fELF"
_FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian


def _image_kind(data: bytes) -> str:
    if data.startswith(_ELF_MAGIC):
        return "cubin"
    if data.startswith(_FATBIN_MAGIC):
        return "fatbin"
    return "PTX"


def _read_image(image: Any) -> tuple[bytes, str | None]:
    """``(bytes, path or None)`` from PTX text, an image or a path."""
    if isinstance(image, os.PathLike):
        path = os.fspath(image)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        with open(path, "rb") as f:
            return f.read(), path
    if isinstance(image, str):
        # PTX always spans lines; a one-line string is a file name.
        if "\n" in image or "\0" in image:
            return image.encode(), None
        with open(image, "rb") as f:
            return f.read(), image
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image), None
    raise TypeError(
        "Module.load takes PTX text (str or bytes), a cubin or fatbin image (bytes) or a "
        f"path (str or os.PathLike), not {type(image).__name__}"
    )


def _unload(ctx_h: Any, mod_h: Any) -> Any:
    """``cuModuleUnload`` with the module's context current (pushed if needed)."""
    if ctx_h is None:
        return _drv.cuModuleUnload(mod_h)
    r = _drv.cuCtxGetCurrent()
    if r[0] is SUCCESS and r[1] is not None and int(r[1]) == int(ctx_h):
        return _drv.cuModuleUnload(mod_h)
    p = _drv.cuCtxPushCurrent(ctx_h)
    if p[0] is not SUCCESS:
        return _drv.cuModuleUnload(mod_h)
    try:
        return _drv.cuModuleUnload(mod_h)
    finally:
        _drv.cuCtxPopCurrent()


# Statuses that, from cuModuleLoadData, mean the image itself is bad; the error table
# maps them to other classes for other calls.
_BAD_IMAGE_CODES = frozenset(
    int(c) for c in (_R.CUDA_ERROR_INVALID_VALUE, _R.CUDA_ERROR_INVALID_SOURCE)
)


def _load_detail(code: Any, kind: str, path: str | None) -> str:
    src = f"{kind} image" + (f" from {path!r}" if path else "")
    c = int(code)
    if c == int(_R.CUDA_ERROR_UNSUPPORTED_PTX_VERSION):
        return (
            f"{src}: the PTX was made by a newer compiler than this driver supports; "
            "compile to a cubin (target='cubin') or update the driver"
        )
    if c == int(_R.CUDA_ERROR_NO_BINARY_FOR_GPU):
        return f"{src}: it holds no code this GPU can run (built for another architecture)"
    if c == int(_R.CUDA_ERROR_INVALID_PTX):
        return f"{src}: the PTX failed to compile for this GPU"
    return src


class Module(Handle):
    """A loaded module: PTX, cubin or fatbin code in one context.

    Obtain one with :meth:`load` (unloaded with ``cuModuleUnload`` on close) or
    :meth:`from_handle` (borrowed). A module keeps its context alive; its kernels keep
    the module alive. Closing the module closes its kernels.
    """

    __slots__ = ("_context", "_kernels", "_kind_name")

    _kind = "Module"

    _context: Context | None
    _kernels: weakref.WeakValueDictionary[str, Kernel]
    _kind_name: str

    def __init__(self) -> None:
        raise TypeError("use Module.load() or Module.from_handle()")

    @classmethod
    def load(
        cls, image: str | bytes | os.PathLike[str], *, context: Context | None = None
    ) -> Module:
        """Load PTX, a cubin or a fatbin into ``context`` (``cuModuleLoadData``).

        Parameters
        ----------
        image
            PTX text (a ``str`` spanning several lines, or ``bytes``), a cubin or
            fatbin image (``bytes``), or the path of a file holding any of these (an
            ``os.PathLike``, or a one-line ``str``).
        context
            The context to load into; default: the current one (else device 0's
            primary context).

        Notes
        -----
        Synchronous; allocates device memory for the code and, for PTX, compiles it
        for the GPU (the driver JIT, with its cache).

        Raises
        ------
        InvalidImageError
            The image is empty, malformed, holds no code for this GPU, or is PTX newer
            than the driver supports.
        FileNotFoundError
            ``image`` names a file that does not exist.
        TypeError
            ``image`` is of another type.
        """
        data, path = _read_image(image)
        kind = _image_kind(data)
        if not data.strip(b"\0 \t\r\n"):
            raise InvalidImageError(
                _R.CUDA_ERROR_INVALID_IMAGE,
                "cuModuleLoadData",
                "empty image" + (f" in {path!r}" if path else ""),
            )
        ctx = context if context is not None else current_or_default()
        # A NUL-terminated copy: PTX must end with NUL; images ignore the extra byte.
        buf = ctypes.create_string_buffer(data)
        with ctx._scope():
            r = _drv.cuModuleLoadData(ctypes.addressof(buf))
        if r[0] is not SUCCESS:
            detail = _load_detail(r[0], kind, path)
            if int(r[0]) in _BAD_IMAGE_CODES:
                raise InvalidImageError(r[0], "cuModuleLoadData", detail)
            raise make_error(r[0], "cuModuleLoadData", detail)
        ctx_h = ctx.handle
        self = object.__new__(cls)
        self._context = ctx
        self._kernels = weakref.WeakValueDictionary()
        self._kind_name = kind
        self._init_handle(
            r[1],
            release=lambda h: _unload(ctx_h, h),
            func="cuModuleUnload",
            keep=(ctx,),
        )
        return self

    @classmethod
    def from_handle(
        cls, handle: Any, owner: Any = None, *, context: Context | None = None
    ) -> Module:
        """Wrap a foreign ``CUmodule`` (or int) without owning it (never unloaded)."""
        h = handle if isinstance(handle, _drv.CUmodule) else _drv.CUmodule(int(handle))
        if int(h) == 0:
            raise ValueError("cannot wrap a NULL module handle")
        self = object.__new__(cls)
        self._context = context
        self._kernels = weakref.WeakValueDictionary()
        self._kind_name = "foreign"
        self._init_handle(h, release=None, func="cuModuleUnload", owned=False, owner=owner)
        return self

    @property
    def context(self) -> Context:
        """The context the module was loaded into."""
        if self._context is None:
            self._context = current_or_default()
        return self._context

    def kernel(self, name: str) -> Kernel:
        """The kernel named ``name`` (``cuModuleGetFunction``; cached by name).

        C++ kernels have mangled names: declare them ``extern "C"`` to look them up
        by their source name.

        Raises
        ------
        NotFoundError
            The module has no kernel of that name (the message names it).
        """
        if not isinstance(name, str):
            raise TypeError(f"kernel name must be a str, not {type(name).__name__}")
        h = self._h
        if h is None:
            self._raise_closed()
        k = self._kernels.get(name)
        if k is not None and k._h is not None:
            return k
        r = _drv.cuModuleGetFunction(h, name.encode())
        if r[0] is not SUCCESS:
            raise make_error(
                r[0],
                "cuModuleGetFunction",
                f'no kernel named {name!r} in this module (C++ kernels need extern "C" '
                "to keep their names)",
            )
        k = Kernel._new(r[1], name, self)
        self._kernels[name] = k
        return k

    def get_global(self, name: str) -> tuple[int, int]:
        """Address and size of a ``__device__`` or ``__constant__`` variable.

        Returns ``(device address, size in bytes)`` (``cuModuleGetGlobal``).

        Raises
        ------
        NotFoundError
            The module has no global of that name.
        """
        if not isinstance(name, str):
            raise TypeError(f"global name must be a str, not {type(name).__name__}")
        h = self.handle
        with self.context._scope():
            r = _drv.cuModuleGetGlobal(h, name.encode())
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuModuleGetGlobal", f"no global named {name!r}")
        return int(r[1]), int(r[2])

    def close(self) -> None:
        """Close this module's kernels, then unload it (``cuModuleUnload``); idempotent.

        Launches already enqueued are unaffected. Graphs captured from its kernels
        hold a reference to the module, but an explicit close unloads it anyway:
        close it only when no graph uses it any more.
        """
        if self._h is None:
            return
        for k in list(self._kernels.values()):
            k.close()
        super().close()

    def _repr_extra(self) -> str:
        return self._kind_name


# -- kernels --------------------------------------------------------------------------


def _func_attr(attr: Any) -> Any:
    if isinstance(attr, bool) or not isinstance(attr, int):
        raise TypeError(f"attribute must be a cudriver.FunctionAttribute, not {attr!r}")
    try:
        return _drv.CUfunction_attribute(int(attr))
    except ValueError:
        raise NotSupportedError(
            _R.CUDA_ERROR_NOT_SUPPORTED,
            "cuFuncGetAttribute",
            f"function attribute {int(attr)} is unknown to the installed cuda-bindings",
        ) from None


class Kernel(Handle):
    """A kernel of a :class:`Module` (a ``CUfunction``); never freed by itself.

    Obtain one with :meth:`Module.kernel`. A kernel keeps its module alive and is
    closed when the module is closed. Its parameter layout is read once, on first
    use (``cuFuncGetParamInfo``), and drives argument packing.
    """

    __slots__ = ("_layout", "_module", "_name", "_params", "_sizes")

    _kind = "Kernel"

    _module: Module | None
    _name: str
    _params: tuple[ParamInfo, ...] | None
    _sizes: tuple[int, ...] | None
    _layout: _ArgLayout | None

    def __init__(self) -> None:
        raise TypeError("use Module.kernel(name) or Kernel.from_handle()")

    @classmethod
    def _new(cls, h: Any, name: str, module: Module | None, owner: Any = None) -> Kernel:
        self = object.__new__(cls)
        self._module = module
        self._name = name
        self._params = None
        self._sizes = None
        self._layout = None
        self._init_handle(
            h,
            release=None,
            func="cuModuleUnload",
            owned=False,
            owner=owner if owner is not None else module,
        )
        return self

    @classmethod
    def from_handle(cls, handle: Any, owner: Any = None, *, name: str | None = None) -> Kernel:
        """Wrap a foreign ``CUfunction`` (or int); ``owner`` is kept alive with it.

        ``name`` defaults to the driver's (``cuFuncGetName``).
        """
        h = handle if isinstance(handle, _drv.CUfunction) else _drv.CUfunction(int(handle))
        if int(h) == 0:
            raise ValueError("cannot wrap a NULL function handle")
        if name is None:
            r = _drv.cuFuncGetName(h)
            if r[0] is not SUCCESS:
                raise make_error(r[0], "cuFuncGetName")
            raw = r[1]
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
        return cls._new(h, name, None, owner)

    def _raise_closed(self) -> NoReturn:
        mod = self._module
        why = " (its Module was closed)" if mod is not None and mod._h is None else ""
        raise ClosedError(f"Kernel {self._name!r} is closed{why}")

    # -- identity ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The kernel's name."""
        return self._name

    @property
    def module(self) -> Module | None:
        """The module the kernel belongs to (None for :meth:`from_handle` kernels)."""
        return self._module

    def __repr__(self) -> str:
        if self._h is None:
            return f"<cudriver.Kernel {self._name!r} closed>"
        return f"<cudriver.Kernel {self._name!r} {self._key:#x}>"

    # -- parameters --------------------------------------------------------------------
    @property
    def param_info(self) -> tuple[ParamInfo, ...]:
        """``(offset, size)`` of each parameter in the device-side layout.

        Read once with ``cuFuncGetParamInfo`` (CUDA 12.4+ drivers) and cached.
        """
        p = self._params
        if p is None:
            p = self._load_params()
        return p

    @property
    def num_params(self) -> int:
        """The number of parameters the kernel takes."""
        return len(self.param_info)

    @property
    def param_sizes(self) -> tuple[int, ...]:
        """The size in bytes of each parameter."""
        s = self._sizes
        if s is None:
            self._load_params()
            s = self._sizes
            assert s is not None
        return s

    def _load_params(self) -> tuple[ParamInfo, ...]:
        h = self._closed_check()
        fn = getattr(_drv, "cuFuncGetParamInfo", None)
        if fn is None:
            raise NotSupportedError(
                _R.CUDA_ERROR_NOT_SUPPORTED,
                "cuFuncGetParamInfo",
                "kernel argument packing needs cuda-bindings 12.4 or newer",
            )
        infos: list[ParamInfo] = []
        for i in range(_MAX_PARAMS):
            r = fn(h, i)
            if r[0] is not SUCCESS:
                if r[0] is _R.CUDA_ERROR_INVALID_VALUE:
                    break
                raise make_error(
                    r[0],
                    "cuFuncGetParamInfo",
                    "kernel argument packing needs a CUDA 12.4 or newer driver",
                )
            infos.append(ParamInfo(int(r[1]), int(r[2])))
        params = tuple(infos)
        sizes = tuple(p.size for p in params)
        self._layout = _ArgLayout(sizes)
        self._sizes = sizes
        self._params = params
        return params

    def _arg_layout(self) -> _ArgLayout:
        lay = self._layout
        if lay is None:
            self._load_params()
            lay = self._layout
            assert lay is not None
        return lay

    # -- attributes --------------------------------------------------------------------
    def attribute(self, attr: FunctionAttribute | int) -> int:
        """Read a kernel attribute (``cuFuncGetAttribute``)."""
        a = _func_attr(attr)
        r = _cuFuncGetAttribute(a, self.handle)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuFuncGetAttribute", f"attribute {a.name}")
        return int(r[1])

    def set_attribute(self, attr: FunctionAttribute | int, value: int) -> None:
        """Set a kernel attribute (``cuFuncSetAttribute``).

        Settable: ``MAX_DYNAMIC_SHARED_SIZE_BYTES``,
        ``PREFERRED_SHARED_MEMORY_CARVEOUT`` and the cluster attributes.
        """
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"attribute value must be an int, not {type(value).__name__}")
        a = _func_attr(attr)
        r = _drv.cuFuncSetAttribute(self.handle, a, int(value))
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuFuncSetAttribute", f"{a.name} = {int(value)}")

    @property
    def max_threads_per_block(self) -> int:
        """The most threads a block of this kernel may have."""
        return self.attribute(FunctionAttribute.MAX_THREADS_PER_BLOCK)

    @property
    def num_registers(self) -> int:
        """Registers used by each thread."""
        return self.attribute(FunctionAttribute.NUM_REGS)

    @property
    def shared_size_bytes(self) -> int:
        """Statically allocated shared memory per block, in bytes."""
        return self.attribute(FunctionAttribute.SHARED_SIZE_BYTES)

    @property
    def const_size_bytes(self) -> int:
        """Constant memory the kernel uses, in bytes."""
        return self.attribute(FunctionAttribute.CONST_SIZE_BYTES)

    @property
    def local_size_bytes(self) -> int:
        """Local memory per thread, in bytes."""
        return self.attribute(FunctionAttribute.LOCAL_SIZE_BYTES)

    @property
    def ptx_version(self) -> int:
        """The PTX virtual architecture the kernel was compiled for (e.g. 90)."""
        return self.attribute(FunctionAttribute.PTX_VERSION)

    @property
    def binary_version(self) -> int:
        """The binary architecture the kernel was compiled for (e.g. 90)."""
        return self.attribute(FunctionAttribute.BINARY_VERSION)

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        """The most dynamic shared memory a launch may request, in bytes.

        Setting it (``cuFuncSetAttribute``) opts in to more than the default 48 KiB.
        """
        return self.attribute(FunctionAttribute.MAX_DYNAMIC_SHARED_SIZE_BYTES)

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value: int) -> None:
        self.set_attribute(FunctionAttribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, value)

    # -- launching ---------------------------------------------------------------------
    def pack(self, *args: Any) -> PackedArgs:
        """Pack ``args`` for this kernel (no driver call once the layout is known)."""
        lay = self._arg_layout()
        return PackedArgs(lay.sizes, args, self._name, _layout=lay)

    def launch(
        self, stream: StreamLike, grid: Any, block: Any, *args: Any, shared_mem: int = 0
    ) -> None:
        """Launch the kernel on ``stream`` (``cuLaunchKernel``); does not block.

        Parameters
        ----------
        stream
            A :class:`~cudriver.Stream`, any stream-like object, or None (the legacy
            default stream).
        grid, block
            An int or a tuple of 1 to 3 ints, each >= 1.
        *args
            One value per kernel parameter, packed by the rules of :func:`pack_arg`.
        shared_mem
            Dynamic shared memory per block, in bytes.

        Notes
        -----
        Packs the arguments on every call (into a reused host buffer: the driver
        copies them at launch); use :meth:`prepare` to pack once and launch many
        times. While the stream is capturing, the
        arguments are kept alive with the captured graph.

        Raises
        ------
        TypeError
            Wrong argument count, or an argument that cannot be packed (the message
            names the argument's index and the kernel); raised before launching.
        ValueError
            A bad grid, block or ``shared_mem``.
        ClosedError
            The kernel, its module or the stream is closed.
        """
        h = self._h
        if h is None:
            self._raise_closed()
        # Inline fast paths for int grid/block and no shared memory; _dims and
        # _shared validate everything else.
        if type(grid) is int and 0 < grid <= _UINT_MAX:
            gx, gy, gz = grid, 1, 1
        else:
            gx, gy, gz = _dims(grid, "grid")
        if type(block) is int and 0 < block <= _UINT_MAX:
            bx, by, bz = block, 1, 1
        else:
            bx, by, bz = _dims(block, "block")
        shmem = shared_mem if shared_mem == 0 and type(shared_mem) is int else _shared(shared_mem)
        lay = self._layout
        if lay is None:
            lay = self._arg_layout()
        if len(args) != lay.n:
            raise _count_error(self._name, lay.n, len(args))
        if type(stream) is Stream:
            sh = stream._h
            if sh is None:
                stream._raise_closed()
        else:
            sh = stream_handle(stream)
        if not args:
            if _capture.ACTIVE:
                _capture.keep(sh, self)
            r = _cuLaunchKernel(h, gx, gy, gz, bx, by, bz, shmem, sh, 0, 0)
            if r[0] is not SUCCESS:
                raise self._launch_error(r[0], (gx, gy, gz), (bx, by, bz), shmem)
            return
        pool = lay.pool
        try:
            scratch = pool.pop()
        except IndexError:
            scratch = lay.storage()
        try:
            _pack_fast(scratch[0], lay.items, args, self._name)
            if _capture.ACTIVE:
                _capture.keep(sh, self, args)
            r = _cuLaunchKernel(h, gx, gy, gz, bx, by, bz, shmem, sh, scratch[3], 0)
        finally:
            pool.append(scratch)
        if r[0] is not SUCCESS:
            raise self._launch_error(r[0], (gx, gy, gz), (bx, by, bz), shmem)

    def prepare(self, grid: Any, block: Any, *args: Any, shared_mem: int = 0) -> LaunchPlan:
        """Pack the arguments once; :meth:`LaunchPlan.launch` then reuses them.

        Validates and packs like :meth:`launch` (same errors), without launching.
        The plan keeps the kernel and the arguments alive.
        """
        if self._h is None:
            self._raise_closed()
        return LaunchPlan._new(
            self, _dims(grid, "grid"), _dims(block, "block"), _shared(shared_mem), args
        )

    def _launch_error(
        self, code: Any, grid: tuple[int, ...], block: tuple[int, ...], shmem: int
    ) -> Exception:
        """The exception for a failed launch, with what we can tell about why."""
        detail = f"kernel {self._name!r}, grid {grid}, block {block}, shared_mem {shmem}"
        c = int(code)
        if c == int(_R.CUDA_ERROR_INVALID_VALUE) or c == int(_R.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES):
            threads = block[0] * block[1] * block[2]
            try:
                most = self.max_threads_per_block
                dyn = self.max_dynamic_shared_size_bytes
            except Exception:  # a sticky error: keep the launch's own message
                most = dyn = -1
            if 0 <= most < threads:
                detail += (
                    f": the block has {threads} threads, more than the kernel's "
                    f"max_threads_per_block ({most})"
                )
            elif 0 <= dyn < shmem:
                detail += (
                    f": shared_mem exceeds the kernel's max_dynamic_shared_size_bytes "
                    f"({dyn}); raise it first"
                )
        elif c == int(_R.CUDA_ERROR_INVALID_CONTEXT) or c == int(_R.CUDA_ERROR_INVALID_HANDLE):
            detail += (
                ": the kernel's context must be current and the stream must belong to it "
                "(use `with module.context:`)"
            )
        return make_error(code, "cuLaunchKernel", detail)


class LaunchPlan:
    """A kernel launch with its arguments packed once (from :meth:`Kernel.prepare`).

    :meth:`launch` is the fast path: one closed check, the stream's handle, and
    ``cuLaunchKernel`` with the pre-built ``void*[]`` array. :meth:`set_arg` re-packs
    one argument in place, for later launches (launches already enqueued or
    captured keep the values they had).
    """

    __slots__ = (
        "__weakref__",
        "_args",
        "_bx",
        "_by",
        "_bz",
        "_call",
        "_gx",
        "_gy",
        "_gz",
        "_kernel",
        "_packed",
        "_params",
        "_shmem",
    )

    _kernel: Kernel
    _gx: int
    _gy: int
    _gz: int
    _bx: int
    _by: int
    _bz: int
    _shmem: int
    _packed: PackedArgs
    _params: int
    _args: tuple[Any, ...]
    _call: Any

    def __init__(self) -> None:
        raise TypeError("use Kernel.prepare(grid, block, *args)")

    @classmethod
    def _new(
        cls,
        kernel: Kernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shmem: int,
        args: tuple[Any, ...],
    ) -> LaunchPlan:
        packed = kernel.pack(*args)
        self = object.__new__(cls)
        self._kernel = kernel
        self._gx, self._gy, self._gz = grid
        self._bx, self._by, self._bz = block
        self._shmem = shmem
        self._packed = packed
        self._params = packed.address
        self._args = packed.args
        # The constant leading arguments bound once: a launch passes only the stream.
        self._call = functools.partial(_cuLaunchKernel, kernel._h, *grid, *block, shmem)
        return self

    def launch(self, stream: StreamLike) -> None:
        """Launch on ``stream`` (``cuLaunchKernel``) with the packed arguments.

        Does not block or allocate. While the stream is capturing, the kernel and the
        current arguments are kept alive with the captured graph.

        Raises
        ------
        ClosedError
            The kernel, its module or the stream is closed.
        """
        if self._kernel._h is None:
            self._kernel._raise_closed()
        if type(stream) is Stream:
            sh = stream._h
            if sh is None:
                stream._raise_closed()
        else:
            sh = stream_handle(stream)
        if _capture.ACTIVE:
            _capture.keep(sh, self._kernel, self._args)
        r = self._call(sh, self._params, 0)
        if r[0] is not SUCCESS:
            raise self._kernel._launch_error(r[0], self.grid, self.block, self._shmem)

    def set_arg(self, index: int, value: Any) -> None:
        """Re-pack argument ``index`` (same rules and errors as packing at prepare)."""
        self._packed.set(index, value)
        self._args = self._packed.args

    @property
    def kernel(self) -> Kernel:
        """The kernel this plan launches."""
        return self._kernel

    @property
    def grid(self) -> tuple[int, int, int]:
        """The grid, as ``(x, y, z)``."""
        return (self._gx, self._gy, self._gz)

    @property
    def block(self) -> tuple[int, int, int]:
        """The block, as ``(x, y, z)``."""
        return (self._bx, self._by, self._bz)

    @property
    def shared_mem(self) -> int:
        """Dynamic shared memory per block, in bytes."""
        return self._shmem

    @property
    def args(self) -> tuple[Any, ...]:
        """The arguments as last packed."""
        return self._args

    @property
    def packed(self) -> PackedArgs:
        """The packed arguments (``packed.address`` is the ``kernelParams`` value)."""
        return self._packed

    def __repr__(self) -> str:
        return (
            f"<cudriver.LaunchPlan {self._kernel._name!r} grid={self.grid} "
            f"block={self.block} shared_mem={self._shmem}>"
        )


def _register_builtin_pointer_types() -> None:
    from . import _memops
    from .memory import DeviceBuffer

    register_pointer_type(DeviceBuffer)
    _memops._DEVICE_BUFFER = DeviceBuffer


_register_builtin_pointer_types()
