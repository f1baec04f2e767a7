"""``cuda.bindings.runtime`` with its return shape, whose failures raise.

See :mod:`cudriver.compat`. A failed call raises the :class:`~cudriver.CudaError`
subclass of the driver status of the same meaning (``cudaErrorMemoryAllocation``: an
:class:`~cudriver.OutOfMemoryError`), with the ``cudaError_t`` as its ``code``.

``cudaLaunchHostFunc`` goes through the driver's ``cuLaunchHostFunc``, as
``cudriver.driver.cuLaunchHostFunc`` does it: the bindings' own frees its callback
wrapper after the first call, so a host node captured through it runs freed memory on
the graph's second replay. ``cudaLaunchHostFunc_v2`` (the same wrapper) is refused.
"""

from __future__ import annotations

from typing import Any

from cuda.bindings import driver as _drv
from cuda.bindings import runtime as _raw

from .. import driver as _checked
from .._runtime._mirror import Mirror, runtime_error
from ..errors import NotSupportedError

__all__ = ["cudaLaunchHostFunc"]

_SUCCESS = (_raw.cudaError_t.cudaSuccess,)


def cudaLaunchHostFunc(stream: Any, fn: Any, userData: Any) -> tuple[Any, ...]:
    """``cudaLaunchHostFunc``, safe to capture: the driver's ``cuLaunchHostFunc``.

    ``fn`` is a ``cudaHostFn_t``, a ctypes function or an int address, called with
    ``userData`` as in C (keep both alive while any graph holds them), or a Python
    callable, called as ``fn(userData)`` through cudriver's trampoline (see
    ``cudriver.driver.cuLaunchHostFunc``). Returns ``(cudaSuccess,)``; a refusal
    raises the driver's :class:`~cudriver.CudaError`.
    """
    if isinstance(stream, _raw.cudaStream_t):
        stream = _drv.CUstream(int(stream))
    if isinstance(fn, _raw.cudaHostFn_t):
        fn = int(fn)
    _checked.cuLaunchHostFunc(stream, fn, userData)
    return _SUCCESS


def _refuse_v2(*args: Any, **kwargs: Any) -> None:
    raise NotSupportedError(
        _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED,
        "cudaLaunchHostFunc_v2",
        "the bindings free its callback wrapper after the first call, so a captured "
        "host node would crash on replay: use cudaLaunchHostFunc",
    )


_SPECIAL: dict[str, Any] = {
    "cudaLaunchHostFunc": cudaLaunchHostFunc,
    "cudaLaunchHostFunc_v2": _refuse_v2,
}

_MIRROR = Mirror(
    _raw, "cudriver.compat.runtime", "cuda", "compat", fail=runtime_error, special=_SPECIAL
)


def __getattr__(name: str) -> Any:
    return _MIRROR.attr(name)


def __dir__() -> list[str]:
    return _MIRROR.names()
