"""``cuda.bindings.driver`` with its return shape, whose failures raise.

See :mod:`cudriver.compat`. ``cuLaunchHostFunc`` is the safe one of
:mod:`cudriver.driver` (its callback lives as long as needed, Python callables
accepted), returning ``(CUDA_SUCCESS,)``; ``cuLaunchHostFunc_v2`` is refused.
"""

from __future__ import annotations

from typing import Any

from cuda.bindings import driver as _raw

from .. import driver as _checked
from .._runtime._mirror import Mirror

__all__ = ["cuLaunchHostFunc"]

_SUCCESS = (_raw.CUresult.CUDA_SUCCESS,)


def cuLaunchHostFunc(hStream: Any, fn: Any, userData: Any) -> tuple[Any, ...]:
    """``cuLaunchHostFunc``, safe to capture (``cudriver.driver.cuLaunchHostFunc``).

    Returns ``(CUDA_SUCCESS,)``; raises :class:`~cudriver.CudaError` when the driver
    refuses.
    """
    _checked.cuLaunchHostFunc(hStream, fn, userData)
    return _SUCCESS


_SPECIAL: dict[str, Any] = {
    "cuLaunchHostFunc": cuLaunchHostFunc,
    "cuLaunchHostFunc_v2": vars(_checked)["_refuse_v2"],
}

_MIRROR = Mirror(_raw, "cudriver.compat.driver", "cu", "compat", special=_SPECIAL)


def __getattr__(name: str) -> Any:
    return _MIRROR.attr(name)


def __dir__() -> list[str]:
    return _MIRROR.names()
