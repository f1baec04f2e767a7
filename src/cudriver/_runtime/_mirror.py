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
    _is_missing_driver,
    checked,
    error_class,
    make_error,
)

__all__ = ["Mirror", "ANSWERS", "runtime_error", "nvrtc_error", "driver_error"]

#: Per function name, the statuses (by name) that the compat face returns as answers.
ANSWERS: dict[str, frozenset[str]] = {
    "cuStreamQuery": frozenset({"CUDA_ERROR_NOT_READY"}),
    "cuEventQuery": frozenset({"CUDA_ERROR_NOT_READY"}),
    "cudaStreamQuery": frozenset({"cudaErrorNotReady"}),
    "cudaEventQuery": frozenset({"cudaErrorNotReady"}),
}

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
