"""A checked drop-in mirror of ``cuda.bindings.driver``.

Every ``cu*`` function of ``cuda.bindings.driver`` is available here under the same
name and with the same arguments, wrapped once by :func:`~cudriver.checked`: it
returns its outputs (None, one value, or a tuple) and raises
:class:`~cudriver.CudaError` instead of returning a status::

    from cudriver import driver
    driver.cuInit(0)
    ptr = driver.cuMemAlloc(1024)

Types, enums and constants pass through unchanged. cudriver objects go wherever a
raw handle goes, because they convert to the handle's integer value.

Functions treated specially
---------------------------

``cuLaunchHostFunc(hStream, fn, userData)``
    The bindings' version frees its callback wrapper after the first call, so a host
    node captured through it crashes the process on the second replay. The mirror
    calls ``cuLaunchHostFunc`` of ``libcuda`` itself: a C function pointer ``fn``
    (a ``CUhostFn``, a ctypes function or an int address) is passed to the driver as
    it is, with ``userData`` (None, an int address or a ``ctypes.c_void_p``), exactly
    as in C: keep the function alive as long as any graph holding it. A Python
    callable ``fn`` goes through cudriver's trampoline, like
    :meth:`cudriver.Stream.launch_host_func`: it is called as ``fn(userData)``, kept
    alive by cudriver, and safe to capture; its exceptions are re-raised by the next
    ``cudriver.Stream.synchronize()`` of that stream or ``Context.synchronize()``.
``cuLaunchHostFunc_v2``
    Refused with :class:`~cudriver.NotSupportedError` (same wrapper); use
    ``cuLaunchHostFunc``.

Every mirror function raises :class:`~cudriver.NotPermittedError` instead of calling
the driver inside a host function or in a forked child.
"""

from __future__ import annotations

import ctypes
from typing import Any

from cuda.bindings import driver as _raw

from ._lifetime import _hostfn
from ._lifetime._coerce import raw_stream_handle
from ._lifetime._handle import Handle
from ._runtime import _bindings, _calls, _gates
from .errors import GUARD, NotSupportedError, error_for

__all__ = ["cuLaunchHostFunc"]

# The base class of ctypes function pointers (CFUNCTYPE instances); not public in ctypes.
_CFuncPtr: Any = ctypes.CFUNCTYPE(None).__mro__[1]


def _address(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an address, not bool")
    if isinstance(value, int):
        a = value
    elif isinstance(value, ctypes.c_void_p):
        a = value.value or 0
    elif isinstance(value, _raw.CUhostFn):
        a = int(value)
    elif isinstance(value, _CFuncPtr):
        a = ctypes.cast(value, ctypes.c_void_p).value or 0
    else:
        raise TypeError(
            f"{what} must be None, an int address or a ctypes pointer, not {type(value).__name__}"
        )
    if not 0 <= a < 1 << 64:
        raise ValueError(f"{what} {a:#x} is not a 64-bit address")
    return a


def cuLaunchHostFunc(hStream: Any, fn: Any, userData: Any) -> None:
    """``cuLaunchHostFunc``, safe to capture (see the module docstring).

    Returns None; raises :class:`~cudriver.CudaError` when the driver refuses.
    """
    h = raw_stream_handle(hStream)
    if callable(fn) and not isinstance(fn, (_raw.CUhostFn, _CFuncPtr)):
        if GUARD.armed:
            GUARD.check()
        ctx = _calls.cuStreamGetCtx(h) if int(h) not in (0, 1, 2) else _calls.cuCtxGetCurrent()
        owner = hStream if isinstance(hStream, Handle) else None
        _hostfn.launch(owner, h, int(h), int(ctx), fn, (userData,), {})
        return
    fn_addr = _address(fn, "fn")
    if fn_addr == 0:
        raise ValueError("fn is a NULL function pointer")
    data = _address(userData, "userData")
    if GUARD.armed:
        GUARD.check()
    call = _bindings.launch_host_func()
    code = call(int(h), fn_addr, data)
    if code:
        raise error_for(code, call)
    _gates.note(hStream if isinstance(hStream, Handle) else h)  # it may wait for the program


def _refuse_v2(*args: Any, **kwargs: Any) -> None:
    raise NotSupportedError(
        _raw.CUresult.CUDA_ERROR_NOT_SUPPORTED,
        "cuLaunchHostFunc_v2",
        "the bindings free its callback wrapper after the first call, so a captured "
        "host node would crash on replay: use cudriver.driver.cuLaunchHostFunc or "
        "cudriver.Stream.launch_host_func",
    )


_SPECIAL: dict[str, Any] = {
    "cuLaunchHostFunc": cuLaunchHostFunc,
    "cuLaunchHostFunc_v2": _refuse_v2,
}


def __getattr__(name: str) -> Any:
    special = _SPECIAL.get(name)
    # Every other name: the package's one table of checked entry points.
    return special if special is not None else _calls.TABLE.attr(name)


def __dir__() -> list[str]:
    return sorted(set(_calls.TABLE.names()) | set(_SPECIAL))
