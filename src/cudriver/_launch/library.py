"""Libraries: code loaded once for every device and context (``cuLibraryLoadData``).

A :class:`Library` holds PTX, a cubin or a fatbin independently of any context, as
cuda.core loads code: its kernels (:class:`LibraryKernel`, a ``CUkernel``) launch on the
stream of any context of any device, green contexts included, and the driver loads the
code into the stream's context at the first launch there (or into every context at
once under ``CUDA_MODULE_LOADING=EAGER``). A :class:`~cudriver.Module` is loaded into
one context instead.

A :class:`LibraryKernel` is a :class:`~cudriver.Kernel`: it launches, prepares
(:class:`~cudriver.LaunchPlan`) and goes into graphs through the same machinery, with
the ``CUkernel`` cast to ``CUfunction`` as the driver documents for ``cuLaunchKernel``
and ``cuLaunchKernelEx``. Its attributes are asked per device (``cuKernelGetAttribute``).

The ``cuLibrary*`` and ``cuKernel*`` calls need a CUDA 12.0 driver,
``cuKernelGetParamInfo`` 12.4 (older drivers: the parameters are read from the
current context's function); where the driver lacks one, the call raises
:class:`~cudriver.NotSupportedError` naming the version.
"""

from __future__ import annotations

import ctypes
import os
import types
import weakref
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from cuda.bindings import driver as _drv

from .._context.device import Context, Device, context_arg, current_or_default, device_arg
from .._lifetime import _pins
from .._lifetime._coerce import handle_arg, int_arg
from .._lifetime._handle import Handle
from .._memory.memory import DeviceBuffer
from .._runtime._bindings import SUCCESS
from .._runtime._enums import FunctionAttribute
from .._runtime._init import driver_version
from ..errors import (
    GUARD,
    ClosedError,
    CudaError,
    InvalidImageError,
    NotFoundError,
    NotSupportedError,
    error_for,
)
from .kernel import Kernel, ParamInfo, _func_attr, read_params
from .module import (
    _BAD_IMAGE_CODES,
    _image_kind,
    _load_detail,
    _read_image,
    lowered_names_of,
    not_found_hint,
)

__all__ = ["Library", "LibraryKernel"]

_R = _drv.CUresult


def _unsupported(func: str, since: str, why: str) -> NotSupportedError:
    try:
        major, minor = driver_version()
        found = f"this driver supports CUDA {major}.{minor}"
    except Exception:  # no driver version could be read
        found = "no driver version could be read"
    return NotSupportedError(
        _R.CUDA_ERROR_NOT_SUPPORTED, func, f"{why}: needs a CUDA {since} driver; {found}"
    )


def _entry(name: str, since: str) -> Callable[..., tuple[Any, ...]]:
    """The bindings' ``name``; NotSupportedError naming the version when they lack it."""
    fn = getattr(_drv, name, None)
    if fn is None:
        raise NotSupportedError(
            _R.CUDA_ERROR_NOT_SUPPORTED,
            name,
            f"the installed cuda-bindings have no {name}: it needs cuda-bindings {since} or newer",
        )
    return fn  # type: ignore[no-any-return]


def _call(name: str, since: str, *args: Any) -> tuple[Any, ...]:
    """``name(*args)`` of the bindings; NotSupportedError where the driver lacks it."""
    fn = _entry(name, since)
    if GUARD.armed:
        GUARD.check()
    try:
        return fn(*args)
    except RuntimeError as exc:  # the bindings found no such entry point in the driver
        if type(exc).__name__ == "DynamicLibNotFoundError":
            raise
        raise _unsupported(name, since, f"the driver has no {name} ({exc})") from None


def _device_of(device: Device | int | None) -> Device:
    """``device``, or the current context's (else device 0)."""
    if device is None:
        return current_or_default().device
    return device_arg(device)


class LibraryKernel(Kernel):
    """A kernel of a :class:`Library` (a ``CUkernel``): launches on any context's stream.

    Obtain one with :meth:`Library.kernel`. It is a :class:`~cudriver.Kernel`:
    :meth:`~Kernel.launch`, :meth:`~Kernel.prepare`, the occupancy queries and graph
    kernel nodes work as for a module's kernel. A launch on a stream of any context
    (another device's, a green context's) runs the kernel there; the driver loads its
    code into that context at the first launch. Attributes are per device
    (``device=``, default: the current context's device). The kernel keeps its
    library loaded and is closed when the library is closed.

    :attr:`handle` is the ``CUkernel``; :meth:`function` gives a context's
    ``CUfunction``.
    """

    __slots__ = ("_kern",)

    _kind = "LibraryKernel"

    _kern: Any

    def __init__(self) -> None:
        raise TypeError("use Library.kernel(name) or LibraryKernel.from_handle()")

    @classmethod
    def _of(cls, kern: Any, name: str, library: Library | None, owner: Any = None) -> LibraryKernel:
        # Launches pass _h: the CUkernel cast to CUfunction, as the driver documents.
        self = cls._new(_drv.CUfunction(int(kern)), name, library, owner)
        assert isinstance(self, LibraryKernel)
        self._kern = kern
        return self

    @classmethod
    def from_handle(
        cls, handle: Any, owner: Any = None, *, name: str | None = None
    ) -> LibraryKernel:
        """Wrap a foreign ``CUkernel`` (or int); ``owner`` is kept alive with it.

        ``name`` defaults to the driver's (``cuKernelGetName``, CUDA 12.3).
        """
        h = handle_arg(handle, _drv.CUkernel, "kernel handle")
        if name is None:
            r = _call("cuKernelGetName", "12.3", h)
            if r[0] is not SUCCESS:
                raise error_for(r[0], _drv.cuKernelGetName)
            name = r[1].decode() if isinstance(r[1], bytes) else str(r[1])
        return cls._of(h, name, None, owner)

    # -- identity ------------------------------------------------------------------
    @property
    def handle(self) -> Any:
        """The raw ``CUkernel``."""
        if self._h is None:
            self._raise_closed()
        return self._kern

    @property
    def library(self) -> Library | None:
        """The library the kernel belongs to (None for :meth:`from_handle` kernels)."""
        lib = self._module
        return lib if isinstance(lib, Library) else None

    @property
    def module(self) -> None:
        """None: a library kernel belongs to a :class:`Library`, not a module."""
        return None

    def _home_context(self) -> Context | None:
        return None  # any context: the current one is asked

    def _raise_closed(self) -> NoReturn:
        lib = self._module
        why = " (its Library was closed)" if lib is not None and lib._h is None else ""
        raise ClosedError(f"LibraryKernel {self._name!r} is closed{why}")

    def __repr__(self) -> str:
        if self._h is None:
            return f"<cudriver.LibraryKernel {self._name!r} closed>"
        return f"<cudriver.LibraryKernel {self._name!r} {self._key:#x}>"

    # -- per context -----------------------------------------------------------------
    @_pins.pinned
    def function(self, context: Context | None = None) -> Any:
        """The kernel's ``CUfunction`` in ``context`` (default: the current one).

        Calls ``cuKernelGetFunction`` with the context current, which loads the code
        into that context if it is not there yet: that load allocates device memory
        and waits for the device to be idle. For raw calls that take a
        ``CUfunction``; it is valid while the library is loaded and the context lives.
        """
        ctx = context_arg(context) or current_or_default()
        with ctx._scope():
            r = _call("cuKernelGetFunction", "12.0", self._kern)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuKernelGetFunction, f"kernel {self._name!r}")
        return r[1]

    def _function(self) -> Any:
        """The current context's ``CUfunction``: what occupancy queries and graph nodes take."""
        return self.function()

    # -- parameters ----------------------------------------------------------------
    @_pins.pinned
    def _load_params(self) -> tuple[ParamInfo, ...]:
        """``cuKernelGetParamInfo`` (CUDA 12.4); before it, the current context's function's."""
        self._closed_check()
        fn = getattr(_drv, "cuKernelGetParamInfo", None)
        params: tuple[ParamInfo, ...] | None = None
        if fn is not None:
            try:
                params = read_params(self._kern, fn)
            except CudaError as exc:  # a driver before 12.4 may refuse it: ask the function
                if not isinstance(exc, (NotSupportedError, NotFoundError)):
                    raise
            except RuntimeError as exc:  # the bindings found no such entry point
                if type(exc).__name__ == "DynamicLibNotFoundError":
                    raise
        if params is None:
            params = read_params(self.function())
        return self._set_params(params)

    # -- attributes, per device --------------------------------------------------------
    @_pins.pinned
    def attribute(self, attr: FunctionAttribute | int, device: Device | int | None = None) -> int:
        """Read a kernel attribute for ``device`` (``cuKernelGetAttribute``).

        ``device`` defaults to the current context's device (else device 0). Makes
        no allocation and does not synchronise.
        """
        a = _func_attr(attr)
        dev = _device_of(device)
        r = _call("cuKernelGetAttribute", "12.0", a, self._kern, dev.handle)
        if r[0] is not SUCCESS:
            raise error_for(
                r[0], _drv.cuKernelGetAttribute, f"attribute {a.name} on device {dev.ordinal}"
            )
        return int(r[1])

    @_pins.pinned
    def set_attribute(
        self, attr: FunctionAttribute | int, value: int, device: Device | int | None = None
    ) -> None:
        """Set a kernel attribute for ``device`` (``cuKernelSetAttribute``).

        ``device`` defaults to the current context's device (else device 0); the
        setting applies to the kernel in every context of that device. Settable:
        ``MAX_DYNAMIC_SHARED_SIZE_BYTES``, ``PREFERRED_SHARED_MEMORY_CARVEOUT`` and the
        cluster attributes.
        """
        v = int_arg(value, "attribute value")
        if not -(1 << 31) <= v < 1 << 31:
            raise ValueError(f"attribute value {v} does not fit a C int")
        a = _func_attr(attr)
        dev = _device_of(device)
        r = _call("cuKernelSetAttribute", "12.0", a, v, self._kern, dev.handle)
        if r[0] is not SUCCESS:
            raise error_for(
                r[0], _drv.cuKernelSetAttribute, f"{a.name} = {v} on device {dev.ordinal}"
            )

    @_pins.pinned
    def set_cache_config(self, config: Any, device: Device | int | None = None) -> None:
        """Prefer more shared memory or more L1 cache on ``device`` (``cuKernelSetCacheConfig``).

        ``config`` is a ``CUfunc_cache`` value of the bindings (or its int), e.g.
        ``CU_FUNC_CACHE_PREFER_SHARED``; ``device`` defaults to the current context's.
        """
        if isinstance(config, bool) or not isinstance(config, int):
            raise TypeError(f"config must be a CUfunc_cache value, not {config!r}")
        try:
            c = _drv.CUfunc_cache(int(config))
        except ValueError:
            raise ValueError(f"unknown CUfunc_cache value {int(config)}") from None
        dev = _device_of(device)
        r = _call("cuKernelSetCacheConfig", "12.0", self._kern, c, dev.handle)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuKernelSetCacheConfig, f"{c.name} on device {dev.ordinal}")


class Library(Handle):
    """Code loaded once for every context and device (``cuLibraryLoadData``).

    Obtain one with :meth:`load` (unloaded with ``cuLibraryUnload`` on close) or
    :meth:`from_handle` (borrowed). Its kernels (:meth:`kernel`) launch on the stream
    of any context: the driver loads the code into a context when it is first needed
    there. The library belongs to no context; its kernels keep it loaded, and closing
    it closes them.
    """

    __slots__ = ("_kernels", "_kind_name", "_lowered")

    _kind = "Library"

    _kernels: weakref.WeakValueDictionary[str, LibraryKernel]
    _kind_name: str
    _lowered: dict[str, str]

    def __init__(self) -> None:
        raise TypeError("use Library.load() or Library.from_handle()")

    @classmethod
    def load(cls, image: str | bytes | os.PathLike[str]) -> Library:
        """Load PTX, a cubin or a fatbin for every device (``cuLibraryLoadData``).

        Parameters
        ----------
        image
            PTX text (a ``str`` spanning several lines, or ``bytes``), a cubin or
            fatbin image (``bytes``), or the path of a file holding any of these (an
            ``os.PathLike``, or a one-line ``str``: loaded with
            ``cuLibraryLoadFromFile``). A :class:`~cudriver.CompiledCode` from
            :func:`cudriver.compile` brings its lowered names: :meth:`kernel` then
            finds ``"axpy<float>"``.

        Notes
        -----
        Synchronous. Under CUDA's lazy loading (the default) this loads into no
        context: each context gets the code (device memory; for PTX, the driver's JIT)
        when a kernel first launches there or :meth:`LibraryKernel.function` asks for
        it, and that load waits for the device to be idle. Under
        ``CUDA_MODULE_LOADING=EAGER`` the code goes into every context now (and into
        contexts made later). Needs a CUDA 12.0 driver.

        Raises
        ------
        InvalidImageError
            The image is empty, malformed, holds no code for a GPU of this machine, or
            is PTX newer than the driver supports.
        FileNotFoundError
            ``image`` names a file that does not exist.
        NotSupportedError
            The driver is older than CUDA 12.0.
        """
        lowered = lowered_names_of(image)
        path: str | None = None
        if isinstance(image, os.PathLike) or (
            isinstance(image, str) and "\n" not in image and "\0" not in image
        ):
            path = os.fsdecode(os.fspath(image))
            with open(path, "rb") as f:  # FileNotFoundError as Module.load raises it
                head = f.read(4096)
            kind = _image_kind(head)
            if not head.strip(b"\0 \t\r\n"):
                raise InvalidImageError(
                    _R.CUDA_ERROR_INVALID_IMAGE, "cuLibraryLoadFromFile", f"empty image in {path!r}"
                )
            keep: tuple[Any, ...] = ()
            func = "cuLibraryLoadFromFile"
            args: tuple[Any, ...] = (os.fsencode(path),)
        else:
            data, _ = _read_image(image)
            kind = _image_kind(data)
            if not data.strip(b"\0 \t\r\n"):
                raise InvalidImageError(
                    _R.CUDA_ERROR_INVALID_IMAGE, "cuLibraryLoadData", "empty image"
                )
            # A NUL-terminated copy (PTX must end with NUL), kept while the library lives.
            buf = ctypes.create_string_buffer(data)
            keep = (buf,)
            func = "cuLibraryLoadData"
            args = (ctypes.addressof(buf),)
        r = _call(func, "12.0", *args, None, None, 0, None, None, 0)
        if r[0] is not SUCCESS:
            detail = _load_detail(r[0], kind, path)
            fn = getattr(_drv, func)
            if int(r[0]) in _BAD_IMAGE_CODES:
                raise InvalidImageError(r[0], func, detail)
            raise error_for(r[0], fn, detail)
        self = cls.__new__(cls)
        self._kernels = weakref.WeakValueDictionary()
        self._kind_name = kind
        self._lowered = lowered
        self._init_handle(r[1], release=_drv.cuLibraryUnload, func="cuLibraryUnload", keep=keep)
        return self

    @classmethod
    def from_handle(cls, handle: Any, owner: Any = None) -> Library:
        """Wrap a foreign ``CUlibrary`` (or int) without owning it (never unloaded)."""
        h = handle_arg(handle, _drv.CUlibrary, "library handle")
        self = cls.__new__(cls)
        self._kernels = weakref.WeakValueDictionary()
        self._kind_name = "foreign"
        self._lowered = {}
        self._init_handle(h, release=None, func="cuLibraryUnload", owned=False, owner=owner)
        return self

    @property
    def lowered_names(self) -> Mapping[str, str]:
        """Name expression -> lowered name, from the :class:`~cudriver.CompiledCode` loaded."""
        return types.MappingProxyType(self._lowered)

    @_pins.pinned
    def kernel(self, name: str) -> LibraryKernel:
        """The kernel named ``name`` (``cuLibraryGetKernel``; cached by name).

        ``name`` is an ``extern "C"`` kernel's name, a name expression compiled with
        the code (``"axpy<float>"``), or a lowered (mangled) name. Loads nothing into
        any context and does not synchronise.

        Raises
        ------
        NotFoundError
            The library has no kernel of that name (the message names it).
        """
        if not isinstance(name, str):
            raise TypeError(f"kernel name must be a str, not {type(name).__name__}")
        h = self._closed_check()
        symbol = self._lowered.get(name, name)
        k = self._kernels.get(symbol)
        if k is not None and k._h is not None:
            return k
        r = _call("cuLibraryGetKernel", "12.0", h, symbol.encode())
        if r[0] is not SUCCESS:
            raise error_for(
                r[0],
                _drv.cuLibraryGetKernel,
                f"no kernel named {name!r} in this library {not_found_hint(name, self._lowered)}",
            )
        k = LibraryKernel._of(r[1], name, self)
        self._kernels[symbol] = k
        return k

    def _variable(self, func: str, name: str, context: Context | None) -> DeviceBuffer:
        if not isinstance(name, str):
            raise TypeError(f"global name must be a str, not {type(name).__name__}")
        h = self._closed_check()
        ctx = context_arg(context) or current_or_default()
        symbol = self._lowered.get(name, name)
        with ctx._scope():
            r = _call(func, "12.0", h, symbol.encode())
        if r[0] is not SUCCESS:
            raise error_for(r[0], getattr(_drv, func), f"no global named {name!r}")
        return DeviceBuffer.from_handle(r[1], int(r[2]), self._lease(), context=ctx)

    @_pins.pinned
    def get_global(self, name: str, *, context: Context | None = None) -> DeviceBuffer:
        """A ``__device__`` or ``__constant__`` variable in ``context``, as a borrowed buffer.

        Calls ``cuLibraryGetGlobal`` with ``context`` current (default: the current
        context, else device 0's primary): each context has its own copy of the
        variable, made when the library's code is loaded there (which this call may
        do: device memory, and a wait for the device to be idle). The buffer never
        frees the memory and keeps the library loaded while it lives. ``name`` may
        be a name expression compiled with the code.

        Raises
        ------
        NotFoundError
            The library has no global of that name.
        """
        return self._variable("cuLibraryGetGlobal", name, context)

    @_pins.pinned
    def get_managed(self, name: str) -> DeviceBuffer:
        """A ``__managed__`` variable, as a borrowed buffer (``cuLibraryGetManaged``).

        One copy for every device, reachable from the host at the same address
        (``.ptr``). The buffer never frees the memory and keeps the library loaded
        while it lives. Allocates nothing and does not synchronise.

        Raises
        ------
        NotFoundError
            The library has no managed variable of that name.
        """
        return self._variable("cuLibraryGetManaged", name, None)

    def close(self) -> None:
        """Close this library's kernels, then unload it (``cuLibraryUnload``); idempotent.

        The library and its kernels are unusable at once. Launches already enqueued
        are unaffected, and the unload waits for what still holds the library
        (graphs and prepared launches of its kernels, buffers from
        :meth:`get_global`). The unload waits for the device to be idle.
        """
        if self._h is None:
            return
        for k in list(self._kernels.values()):
            k.close()
        super().close()

    def _repr_extra(self) -> str:
        return self._kind_name
