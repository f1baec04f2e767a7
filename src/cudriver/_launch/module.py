"""Modules: loaded PTX, cubin or fatbin images, and the kernels in them.

A :class:`Module` is loaded with ``cuModuleLoadData`` into one context and unloaded
with ``cuModuleUnload``. :meth:`Module.kernel` returns a
:class:`~cudriver.Kernel` (``cuModuleGetFunction``). Code from :func:`cudriver.compile`
brings the lowered names of its name expressions, by which :meth:`Module.kernel` and
:meth:`Module.get_global` also find C++ templates.
"""

from __future__ import annotations

import ctypes
import functools
import os
import types
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from cuda.bindings import driver as _drv

from .._context.device import Context, call_in_context, context_arg, current_or_default
from .._lifetime._coerce import bool_arg, handle_arg
from .._lifetime._handle import Handle
from .._lifetime._pins import pinned
from .._memory.memory import DeviceBuffer
from .._runtime import _bindings
from .._runtime._bindings import SUCCESS
from ..errors import GUARD, CudaError, InvalidImageError, NotSupportedError, checked, error_for
from .kernel import Kernel, ParamInfo, read_params
from .linker import link
from .program import CompiledCode

__all__ = ["Module"]

_R = _drv.CUresult
_cuFuncGetName = getattr(_drv, "cuFuncGetName", None)

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


def lowered_names_of(image: Any) -> dict[str, str]:
    """The lowered names a :class:`~cudriver.CompiledCode` carries (else none)."""
    if isinstance(image, CompiledCode):
        return dict(image.lowered_names)
    return {}


def merged_lowered_names(objects: Any) -> dict[str, str]:
    """The lowered names of every :class:`~cudriver.CompiledCode` among link inputs."""
    out: dict[str, str] = {}
    if isinstance(objects, Iterable) and not isinstance(objects, (str, bytes)):
        for obj in objects:
            data = obj[0] if isinstance(obj, tuple) and obj else obj
            out.update(lowered_names_of(data))
    return out


def not_found_hint(name: str, lowered: Mapping[str, str]) -> str:
    """What a failed lookup of ``name`` says about C++ names."""
    if lowered:
        known = ", ".join(repr(n) for n in lowered)
        return (
            f"(the name expressions compiled with it are {known}; other C++ kernels need "
            'extern "C", or compile(..., name_expressions=[...]))'
        )
    return (
        '(C++ kernels need extern "C" to keep their names, or compile(..., '
        "name_expressions=[...]) for templates)"
    )


class Module(Handle):
    """A loaded module: PTX, cubin or fatbin code in one context.

    Obtain one with :meth:`load` (unloaded with ``cuModuleUnload`` on close) or
    :meth:`from_handle` (borrowed). A module keeps its context alive; its kernels keep
    the module alive. Closing the module closes its kernels.
    """

    __slots__ = ("_context", "_eager", "_functions", "_kernels", "_kind_name", "_lowered")

    _kind = "Module"

    _context: Context | None
    _eager: bool
    _functions: dict[str, tuple[Any, tuple[ParamInfo, ...] | None]]
    _kernels: weakref.WeakValueDictionary[str, Kernel]
    _kind_name: str
    _lowered: dict[str, str]

    def __init__(self) -> None:
        raise TypeError("use Module.load() or Module.from_handle()")

    @classmethod
    def load(
        cls,
        image: str | bytes | os.PathLike[str],
        *,
        context: Context | None = None,
        eager: bool = True,
    ) -> Module:
        """Load PTX, a cubin or a fatbin into ``context`` (``cuModuleLoadData``).

        Parameters
        ----------
        image
            PTX text (a ``str`` spanning several lines, or ``bytes``), a cubin or
            fatbin image (``bytes``), or the path of a file holding any of these (an
            ``os.PathLike``, or a one-line ``str``). A
            :class:`~cudriver.CompiledCode` from :func:`cudriver.compile` brings its
            lowered names: :meth:`kernel` then finds ``"axpy<float>"``.
        context
            The context to load into; default: the current one (else device 0's
            primary context).
        eager
            Load the code of every function of the module now (the default;
            ``cuModuleGetFunctionCount``, ``cuModuleEnumerateFunctions`` and one
            ``cuFuncLoad`` each), as ``CUDA_MODULE_LOADING=EAGER`` would, whatever
            that variable says. After an eager load, :meth:`kernel` and launches never
            load code, so they never wait for the device.

            ``eager=False`` keeps CUDA's lazy loading: the load is quicker, and each
            kernel's code is loaded when :meth:`kernel` first returns it
            (``cuFuncLoad``). That load waits for the device to be idle, so **a kernel
            obtained while a stream waits for a value that only later work writes
            deadlocks**: after ``b.wait_value32(flag, 1)``,
            ``module.kernel("add1")`` never returns if ``flag`` is written by work
            enqueued after it. With ``eager=False``, get every kernel before
            enqueuing such waits. Drivers or bindings without
            ``cuModuleEnumerateFunctions`` (before CUDA 12.4) load eagerly unless
            ``CUDA_MODULE_LOADING=LAZY`` is set, and ``eager=True`` then relies on it.

        Notes
        -----
        Synchronous; allocates device memory for the code and, for PTX, compiles it
        for the GPU (the driver JIT, with its cache). Loading code waits for the device
        to be idle: a module loaded while a stream waits for a value that only later
        work writes deadlocks, whichever ``eager`` says. The kernels page of the
        documentation gives the measured cost of ``eager`` for a module of 100
        kernels.

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
        eager = bool_arg(eager, "eager")
        lowered = lowered_names_of(image)
        data, path = _read_image(image)
        kind = _image_kind(data)
        if not data.strip(b"\0 \t\r\n"):
            raise InvalidImageError(
                _R.CUDA_ERROR_INVALID_IMAGE,
                "cuModuleLoadData",
                "empty image" + (f" in {path!r}" if path else ""),
            )
        ctx = context_arg(context) or current_or_default()
        # A NUL-terminated copy: PTX must end with NUL; images ignore the extra byte.
        buf = ctypes.create_string_buffer(data)
        with ctx._scope():
            r = _drv.cuModuleLoadData(ctypes.addressof(buf))
        if r[0] is not SUCCESS:
            detail = _load_detail(r[0], kind, path)
            if int(r[0]) in _BAD_IMAGE_CODES:
                raise InvalidImageError(r[0], _drv.cuModuleLoadData.__name__, detail)
            raise error_for(r[0], _drv.cuModuleLoadData, detail)
        ctx_h = ctx.handle
        self = cls.__new__(cls)
        self._context = ctx
        self._kernels = weakref.WeakValueDictionary()
        self._functions = {}
        self._kind_name = kind
        self._eager = False
        self._lowered = lowered
        self._init_handle(
            r[1],
            release=functools.partial(call_in_context, ctx_h, _drv.cuModuleUnload),
            func="cuModuleUnload",
            keep=(ctx,),
        )
        if eager:
            try:
                with ctx._scope():
                    self._eager = self._load_all()
            except BaseException:
                self.close()
                raise
        return self

    @classmethod
    def link(
        cls,
        objects: Any,
        *,
        context: Context | None = None,
        eager: bool = True,
        **options: Any,
    ) -> Module:
        """Link ``objects`` (:func:`cudriver.link`) and load the cubin into ``context``.

        ``options`` are :func:`cudriver.link`'s (``arch`` defaults to ``context``'s
        device). Synchronous, as :meth:`load`. The lowered names of the
        :class:`~cudriver.CompiledCode` inputs are kept, as :meth:`load` keeps them.
        """
        ctx = context_arg(context) or current_or_default()
        if isinstance(objects, Iterable) and not isinstance(objects, (str, bytes, os.PathLike)):
            objects = list(objects)  # read twice: by link() and for the lowered names
        linked = link(objects, context=ctx, **options)
        code = CompiledCode._make(linked, "cubin", merged_lowered_names(objects))
        return cls.load(code, context=ctx, eager=eager)

    def _load_all(self) -> bool:
        """Load every function's code; False where the driver or bindings cannot.

        Without ``cuModuleEnumerateFunctions`` (bindings or driver before 12.4) the
        driver loads eagerly by default, and :meth:`kernel` still loads what it
        returns, as for ``eager=False``.
        """
        count = _bindings.module_get_function_count
        enumerate_ = _bindings.module_enumerate_functions
        if count is None or enumerate_ is None or _bindings.func_load is None:
            return False
        try:
            n = int(checked(count)(self._h))
        except NotSupportedError:
            return False
        if n:
            load = checked(_bindings.func_load)
            for fn in checked(enumerate_)(n, self._h):
                load(fn)
                self._record(fn)
        return True

    def _record(self, fn: Any) -> None:
        """Note ``fn`` by name with its parameters, so :meth:`kernel` needs no driver call.

        ``cuModuleGetFunction`` waits for the device under ``CUDA_MODULE_LOADING=LAZY``
        even for a loaded module (measured: it deadlocked behind another stream's
        ``wait_value32``). Without ``cuFuncGetName`` the name is not recorded and
        :meth:`kernel` asks the driver.
        """
        r = _cuFuncGetName(fn) if _cuFuncGetName is not None else None
        if r is None or r[0] is not SUCCESS:
            return
        name = r[1].decode(errors="replace") if isinstance(r[1], bytes) else str(r[1])
        try:
            params: tuple[ParamInfo, ...] | None = read_params(fn)
        except CudaError:  # read again at the first launch, which says why
            params = None
        self._functions[name] = (fn, params)

    @classmethod
    def from_handle(
        cls, handle: Any, owner: Any = None, *, context: Context | None = None
    ) -> Module:
        """Wrap a foreign ``CUmodule`` (or int) without owning it (never unloaded)."""
        h = handle_arg(handle, _drv.CUmodule, "module handle")
        self = cls.__new__(cls)
        self._context = context
        self._kernels = weakref.WeakValueDictionary()
        self._functions = {}
        self._kind_name = "foreign"
        self._eager = False
        self._lowered = {}
        self._init_handle(h, release=None, func="cuModuleUnload", owned=False, owner=owner)
        return self

    @property
    def lowered_names(self) -> Mapping[str, str]:
        """Name expression -> lowered name, from the :class:`~cudriver.CompiledCode` loaded.

        Empty for code given as plain bytes, text or a path.
        """
        return types.MappingProxyType(self._lowered)

    @property
    def context(self) -> Context:
        """The context the module was loaded into."""
        if self._context is None:
            self._context = current_or_default()
        return self._context

    @pinned
    def kernel(self, name: str) -> Kernel:
        """The kernel named ``name`` (``cuModuleGetFunction``; cached by name).

        After an eager load (:meth:`load`'s default) this makes no driver call: the
        load recorded every function by name (``cuFuncGetName``) with its parameters
        (``cuFuncGetParamInfo``), so it cannot wait for the device, whatever
        ``CUDA_MODULE_LOADING`` says. C++ kernels have mangled names: declare them
        ``extern "C"`` to look them up by their source name, or compile them with
        ``name_expressions=["axpy<float>"]`` (:func:`cudriver.compile`) and look them
        up by that expression (or by the lowered name); the kernel's :attr:`~Kernel.name`
        is the name asked for first.

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
        symbol = self._lowered.get(name, name)
        k = self._kernels.get(symbol)
        if k is not None and k._h is not None:
            return k
        recorded = self._functions.get(symbol)
        if recorded is not None:  # an eager load found it: no driver call
            k = Kernel._new(recorded[0], name, self)
            if recorded[1] is not None:
                k._set_params(recorded[1])
            self._kernels[symbol] = k
            return k
        if GUARD.armed:
            GUARD.check()
        r = _drv.cuModuleGetFunction(h, symbol.encode())
        if r[0] is not SUCCESS:
            raise error_for(
                r[0],
                _drv.cuModuleGetFunction,
                f"no kernel named {name!r} in this module {not_found_hint(name, self._lowered)}",
            )
        k = Kernel._new(r[1], name, self)
        if not self._eager:
            k._load()
        self._kernels[symbol] = k
        return k

    @pinned
    def get_global(self, name: str) -> DeviceBuffer:
        """A ``__device__`` or ``__constant__`` variable, as a borrowed DeviceBuffer.

        Calls ``cuModuleGetGlobal``; allocates nothing. The buffer has the variable's
        address (``.ptr``) and size (``.nbytes``) and is usable wherever a
        :class:`~cudriver.DeviceBuffer` is (``copy_from``/``copy_to``, kernel
        arguments, the CUDA Array Interface); it never frees the memory, and it keeps
        this module loaded while it lives (a lease, as graphs and prepared launches
        hold). Read it as bytes, or give it a dtype with :meth:`DeviceBuffer.cast`.
        ``name`` may be a name expression compiled with the code (its lowered name is
        looked up).

        Raises
        ------
        NotFoundError
            The module has no global of that name.
        """
        if not isinstance(name, str):
            raise TypeError(f"global name must be a str, not {type(name).__name__}")
        h = self.handle
        symbol = self._lowered.get(name, name)
        with self.context._scope():
            r = _drv.cuModuleGetGlobal(h, symbol.encode())
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuModuleGetGlobal, f"no global named {name!r}")
        return DeviceBuffer.from_handle(r[1], int(r[2]), self._lease(), context=self.context)

    def close(self) -> None:
        """Close this module's kernels, then unload it (``cuModuleUnload``); idempotent.

        The module and its kernels are unusable at once. Launches already enqueued are
        unaffected, and the unload waits for what still holds the module: graphs and
        executable graphs made with its kernels, prepared launches
        (:class:`~cudriver.LaunchPlan`) and buffers from :meth:`get_global` hold
        leases on it, and it is unloaded when the last of them is gone.
        """
        if self._h is None:
            return
        for k in list(self._kernels.values()):
            k.close()
        self._functions = {}
        super().close()

    def _repr_extra(self) -> str:
        return self._kind_name
