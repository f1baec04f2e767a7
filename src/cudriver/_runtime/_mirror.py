"""The one generator of cudriver's mirrors of ``cuda.bindings`` modules.

A mirror module answers every name of a bindings module (``driver``, ``nvrtc``,
``runtime``) through :class:`Mirror`: classes, enums and constants pass through
unchanged; each function is wrapped once, on first use, and cached. Two faces:

``checked`` (``cudriver.driver``)
    The function returns its outputs (None, one value, or a tuple) and raises
    :class:`~cudriver.CudaError` on failure (:func:`~cudriver.checked`).
``compat`` (``cudriver.compat.driver``, ``.nvrtc``, ``.runtime``)
    The function returns what the bindings return, ``(status, *outs)``, so existing
    code runs unchanged; but a failure raises instead of being returned. Statuses that
    are answers rather than failures (:data:`ANSWERS`: ``NOT_READY`` from the stream
    and event queries) are returned as the bindings return them.

The failure each raises: the driver's :class:`~cudriver.CudaError` subclass for the
status, made by :func:`~cudriver.errors.make_error` (with the driver's log lines, as
everywhere); for the runtime, the subclass of the driver status of the same meaning
(:func:`runtime_error`); for NVRTC, :class:`~cudriver.CompileError`, with the
program's log when ``nvrtcCompileProgram`` failed.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ..errors import (
    GUARD,
    CompileError,
    CudaError,
    DriverNotFoundError,
    InvalidValueError,
    _is_missing_driver,
    checked,
    error_class,
    make_error,
)
from . import _freed, _gates

__all__ = [
    "Mirror",
    "ANSWERS",
    "POINTER_ARGS",
    "runtime_error",
    "nvrtc_error",
    "driver_error",
]

#: Per function name, the statuses (by name) that the compat face returns as answers.
ANSWERS: dict[str, frozenset[str]] = {
    "cuStreamQuery": frozenset({"CUDA_ERROR_NOT_READY"}),
    "cuEventQuery": frozenset({"CUDA_ERROR_NOT_READY"}),
    "cudaStreamQuery": frozenset({"cudaErrorNotReady"}),
    "cudaEventQuery": frozenset({"cudaErrorNotReady"}),
}


def _pointer_args(names: str, *params: str) -> dict[str, tuple[tuple[int, str], ...]]:
    return {n: tuple((i, p) for i, p in enumerate(params) if p) for n in names.split()}


#: Per driver function, its device-pointer arguments ``(position, name)``: those the
#: mirrors refuse when they lie in memory cudriver freed (``_freed``). Host pointers
#: and array handles are left out (``""``).
POINTER_ARGS: dict[str, tuple[tuple[int, str], ...]] = {
    **_pointer_args("cuMemcpy cuMemcpyAsync", "dst", "src"),
    **_pointer_args("cuMemcpyDtoD cuMemcpyDtoDAsync", "dstDevice", "srcDevice"),
    **_pointer_args("cuMemcpyHtoD cuMemcpyHtoDAsync", "dstDevice"),
    **_pointer_args("cuMemcpyDtoH cuMemcpyDtoHAsync", "", "srcDevice"),
    **_pointer_args("cuMemcpyPeer cuMemcpyPeerAsync", "dstDevice", "", "srcDevice"),
    **_pointer_args("cuMemcpyDtoA", "", "", "srcDevice"),
    **_pointer_args("cuMemcpyAtoD", "dstDevice"),
    **_pointer_args(
        "cuMemsetD8 cuMemsetD16 cuMemsetD32 cuMemsetD8Async cuMemsetD16Async "
        "cuMemsetD32Async cuMemsetD2D8 cuMemsetD2D16 cuMemsetD2D32 cuMemsetD2D8Async "
        "cuMemsetD2D16Async cuMemsetD2D32Async",
        "dstDevice",
    ),
    **_pointer_args(
        "cuMemPrefetchAsync cuMemPrefetchAsync_v2 cuMemAdvise cuMemAdvise_v2", "devPtr"
    ),
    **_pointer_args("cuMemFree cuMemFreeAsync", "dptr"),
    **_pointer_args(
        "cuStreamWaitValue32 cuStreamWaitValue64 cuStreamWriteValue32 cuStreamWriteValue64",
        "",
        "addr",
    ),
}


def _address_of(value: Any) -> int | None:
    """The address a pointer argument stands for, or None when it is not one."""
    if isinstance(value, (bool, float)) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def refuse_freed(name: str, role: str, value: Any) -> None:
    """Raise when ``value`` lies in device memory cudriver freed and not handed out again.

    ``InvalidValueError`` naming the call, the argument and the freed allocation; the
    driver is asked first (``cuMemGetAddressRange``) whether the address was handed
    out again, which it answers without touching the memory.
    """
    addr = _address_of(value)
    if addr is None:
        return
    found = _freed.freed_range(addr)
    if found is None:
        return
    from cuda.bindings import driver as drv

    start, end = found
    if GUARD.armed:  # not from a host function or a forked child
        GUARD.check_calls()
    r = drv.cuMemGetAddressRange(drv.CUdeviceptr(addr))
    if int(r[0]) == 0:  # handed out again: an address in use, by whoever
        _freed.forget(start)
        return
    where = "its start" if addr == start else f"offset {addr - start}"
    raise InvalidValueError(
        drv.CUresult.CUDA_ERROR_INVALID_VALUE,
        name,
        f"{role}={addr:#x} lies in device memory that cudriver freed (the allocation "
        f"at {start:#x}, {end - start} bytes; {where}); refused before the driver call, "
        "which would take it for host memory",
    )


def _refusing_freed(
    call: Callable[..., Any], name: str, pointers: tuple[tuple[int, str], ...]
) -> Callable[..., Any]:
    """``call`` refusing device pointers into memory cudriver freed (:func:`refuse_freed`)."""
    frees = name in ("cuMemFree", "cuMemFreeAsync")

    def checked_pointers(*args: Any, **kwargs: Any) -> Any:
        if _freed.any_freed():
            for i, param in pointers:
                if i < len(args):
                    refuse_freed(name, param, args[i])
                elif param in kwargs:
                    refuse_freed(name, param, kwargs[param])
        if not frees:
            return call(*args, **kwargs)
        # A free through the mirror is a free by cudriver: note the allocation's range.
        ptr = args[0] if args else kwargs.get("dptr")
        span = _allocation(ptr)
        r = call(*args, **kwargs)
        if span is not None and (not isinstance(r, tuple) or not r or int(r[0]) == 0):
            _freed.noted(*span)
        return r

    functools.update_wrapper(checked_pointers, call)
    checked_pointers.__wrapped__ = getattr(call, "__wrapped__", call)  # type: ignore[attr-defined]
    return checked_pointers


#: Driver functions after which their stream (the first argument) may wait for the
#: host (see ``_gates``).
_GATING = frozenset({"cuStreamWaitValue32", "cuStreamWaitValue64", "cuStreamBatchMemOp"})


def _gating(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call``, noting its stream among those that may wait for the host."""

    def noting(*args: Any, **kwargs: Any) -> Any:
        r = call(*args, **kwargs)
        stream = args[0] if args else kwargs.get("stream")
        if stream is not None:
            _gates.note(stream)
        return r

    functools.update_wrapper(noting, call)
    noting.__wrapped__ = getattr(call, "__wrapped__", call)  # type: ignore[attr-defined]
    return noting


def _allocation(ptr: Any) -> tuple[int, int] | None:
    """``(base, size)`` of the allocation that starts at ``ptr``; None otherwise."""
    addr = _address_of(ptr)
    if not addr:
        return None
    if GUARD.armed:  # not from a host function or a forked child
        GUARD.check_calls()
    from cuda.bindings import driver as drv

    r = drv.cuMemGetAddressRange(drv.CUdeviceptr(addr))
    if int(r[0]) != 0 or int(r[1]) != addr:
        return None
    return addr, int(r[2])


#: ``(bindings module, status, function name, call arguments) -> the exception``.
Fail = Callable[[ModuleType, Any, str, tuple[Any, ...]], BaseException]


def driver_error(raw: ModuleType, status: Any, name: str, args: tuple[Any, ...]) -> BaseException:
    """The :class:`~cudriver.CudaError` of a failed driver call."""
    return make_error(status, name)


def runtime_error(rt: ModuleType, status: Any, name: str, args: tuple[Any, ...] = ()) -> CudaError:
    """The :class:`~cudriver.CudaError` of a failed runtime call (``cudaError_t``).

    Its class is the one of the driver status of the same name (``cudaErrorInvalidValue``
    is an :class:`~cudriver.InvalidValueError`, ``cudaErrorMemoryAllocation`` an
    :class:`~cudriver.OutOfMemoryError`); ``code`` is the ``cudaError_t``.
    """
    from cuda.bindings import driver as drv

    code = int(status)
    err_name = getattr(status, "name", None) or f"cudaError {code}"
    desc = err_name
    try:
        r = rt.cudaGetErrorString(status)
        if int(r[0]) == 0 and r[1]:
            desc = r[1].decode()
    except Exception:  # a runtime that cannot describe: keep the name
        pass
    driver_name = _RUNTIME_TO_DRIVER.get(err_name, "")
    member = getattr(drv.CUresult, driver_name, None)
    cls = error_class(member) if member is not None else CudaError
    err = cls.__new__(cls)
    err.code, err.func, err.name, err.description = status, name, err_name, desc
    err.__dict__["api"] = "runtime"  # its code is a cudaError_t (unpickling keeps it so)
    RuntimeError.__init__(err, f"{name} failed: {err_name} ({code}): {desc}")
    return err


# Runtime errors and the driver status of the same meaning, whose error class they get;
# the others are plain CudaError (the two enums number and name their members apart).
_RUNTIME_TO_DRIVER = {
    "cudaErrorInvalidValue": "CUDA_ERROR_INVALID_VALUE",
    "cudaErrorMemoryAllocation": "CUDA_ERROR_OUT_OF_MEMORY",
    "cudaErrorInitializationError": "CUDA_ERROR_NOT_INITIALIZED",
    "cudaErrorInvalidDevice": "CUDA_ERROR_INVALID_DEVICE",
    "cudaErrorNoDevice": "CUDA_ERROR_NO_DEVICE",
    "cudaErrorInvalidResourceHandle": "CUDA_ERROR_INVALID_HANDLE",
    "cudaErrorNotReady": "CUDA_ERROR_NOT_READY",
    "cudaErrorNotSupported": "CUDA_ERROR_NOT_SUPPORTED",
    "cudaErrorNotPermitted": "CUDA_ERROR_NOT_PERMITTED",
    "cudaErrorInvalidConfiguration": "CUDA_ERROR_INVALID_VALUE",
    "cudaErrorLaunchOutOfResources": "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    "cudaErrorIllegalAddress": "CUDA_ERROR_ILLEGAL_ADDRESS",
    "cudaErrorLaunchFailure": "CUDA_ERROR_LAUNCH_FAILED",
    "cudaErrorInvalidDeviceFunction": "CUDA_ERROR_INVALID_HANDLE",
    "cudaErrorSymbolNotFound": "CUDA_ERROR_NOT_FOUND",
    "cudaErrorStreamCaptureUnsupported": "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
    "cudaErrorStreamCaptureInvalidated": "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
    "cudaErrorNoKernelImageForDevice": "CUDA_ERROR_NO_BINARY_FOR_GPU",
}


def nvrtc_error(nvrtc: ModuleType, status: Any, name: str, args: tuple[Any, ...]) -> BaseException:
    """The :class:`~cudriver.CompileError` of a failed NVRTC call.

    For ``nvrtcCompileProgram`` the program's log (``nvrtcGetProgramLog``) is in the
    error, as :func:`cudriver.compile` gives it.
    """
    err_name = getattr(status, "name", None) or f"nvrtcResult {int(status)}"
    head = f"{name} failed: {err_name} ({int(status)})"
    log = ""
    if name == "nvrtcCompileProgram" and args:
        try:
            size = nvrtc.nvrtcGetProgramLogSize(args[0])
            if int(size[0]) == 0 and size[1] > 1:
                buf = b" " * size[1]
                if int(nvrtc.nvrtcGetProgramLog(args[0], buf)[0]) == 0:
                    log = buf.rstrip(b"\x00 ").decode(errors="replace")
        except Exception:  # no log to give: the status alone
            pass
    return CompileError(head, log)


def _success(raw: ModuleType) -> Any:
    """The module's success status (compared by identity first: the common case)."""
    for enum, member in (
        ("CUresult", "CUDA_SUCCESS"),
        ("nvrtcResult", "NVRTC_SUCCESS"),
        ("cudaError_t", "cudaSuccess"),
    ):
        found = getattr(getattr(raw, enum, None), member, None)
        if found is not None:
            return found
    return None


def _compat(
    raw: ModuleType, f: Callable[..., tuple[Any, ...]], name: str, fail: Fail, guard: bool
) -> Any:
    """``f`` returning its ``(status, *outs)`` tuple, raising ``fail(...)`` on failure."""
    answers = ANSWERS.get(name, frozenset())
    success = _success(raw)

    def call(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        if guard and GUARD.armed:
            GUARD.check_calls()
        try:
            r = f(*args, **kwargs)
        except Exception as exc:
            if guard and _is_missing_driver(exc):
                raise DriverNotFoundError(str(exc)) from None
            raise
        status = r[0]
        if (
            status is not success
            and int(status) != 0
            and getattr(status, "name", None) not in answers
        ):
            raise fail(raw, status, name, args)
        return r

    functools.update_wrapper(call, f)
    call.__wrapped__ = f  # type: ignore[attr-defined]
    return call


class Mirror:
    """The names of a mirror module: ``module.__getattr__ = mirror.attr``.

    Parameters
    ----------
    raw
        The bindings module mirrored.
    title
        The mirror's module name, for errors (``"cudriver.compat.driver"``).
    prefix
        What the names of the functions to wrap start with (``"cu"``, ``"nvrtc"``,
        ``"cuda"``).
    face
        ``"checked"`` or ``"compat"`` (see the module docstring).
    fail
        For ``compat``: the exception of a failed call.
    guard
        Whether calls go through the call guard (driver and runtime calls; not NVRTC's).
    special
        Names answered by cudriver's own functions instead.
    """

    def __init__(
        self,
        raw: ModuleType,
        title: str,
        prefix: str,
        face: str,
        *,
        fail: Fail = driver_error,
        guard: bool = True,
        special: dict[str, Any] | None = None,
    ) -> None:
        if face not in ("checked", "compat"):
            raise ValueError(f"face must be 'checked' or 'compat', not {face!r}")
        self.raw, self.title, self.prefix, self.face = raw, title, prefix, face
        self.fail, self.guard = fail, guard
        self.special = dict(special or {})
        self.cache: dict[str, Any] = {}
        self.lock = threading.Lock()

    def wrap(self, name: str, fn: Callable[..., tuple[Any, ...]]) -> Any:
        """The face's wrapper of the bindings function ``fn``."""
        if self.face == "checked":
            wrapped = checked(fn, name=name)
        else:
            wrapped = _compat(self.raw, fn, name, self.fail, self.guard)
        pointers = POINTER_ARGS.get(name) if self.prefix == "cu" else None
        if pointers:
            wrapped = _refusing_freed(wrapped, name, pointers)
        if self.prefix == "cu" and name in _GATING:
            wrapped = _gating(wrapped)
        if name != "cuInit" or not self.guard:
            return wrapped

        def init(*args: Any, **kwargs: Any) -> Any:
            # The program's own cuInit: once it succeeded, the call guard knows the
            # driver is initialised and stops looking closer at every call.
            r = wrapped(*args, **kwargs)
            if not GUARD.initialized:
                GUARD.initialize()
            return r

        functools.update_wrapper(init, fn)
        return init

    def attr(self, name: str) -> Any:
        """The mirror's ``name``: a wrapped function, a special one, or the bindings' object."""
        fn = self.cache.get(name)
        if fn is not None:
            return fn
        special = self.special.get(name)
        if special is not None:
            return special
        try:
            obj = getattr(self.raw, name)
        except AttributeError:
            raise AttributeError(
                f"module {self.title!r} has no attribute {name!r} "
                f"({self.raw.__name__} has none either)"
            ) from None
        if name.startswith(self.prefix) and callable(obj) and not isinstance(obj, type):
            with self.lock:
                fn = self.cache.get(name)
                if fn is None:
                    fn = self.cache[name] = self.wrap(name, obj)
            return fn
        return obj

    def names(self) -> list[str]:
        """``dir()`` of the mirror: the bindings' names and cudriver's own."""
        return sorted(set(dir(self.raw)) | set(self.special) | {"__doc__", "__name__"})
