"""``cuda.bindings.runtime`` with its return shape, whose failures raise.

See :mod:`cudriver.compat`. A failed call raises the :class:`~cudriver.CudaError`
subclass of the driver status of the same meaning (``cudaErrorMemoryAllocation``: an
:class:`~cudriver.OutOfMemoryError`), with the ``cudaError_t`` as its ``code``.
"""

from __future__ import annotations

from typing import Any

from cuda.bindings import runtime as _raw

from .._mirror import Mirror, runtime_error

__all__: list[str] = []

_MIRROR = Mirror(_raw, "cudriver.compat.runtime", "cuda", "compat", fail=runtime_error)


def __getattr__(name: str) -> Any:
    return _MIRROR.attr(name)


def __dir__() -> list[str]:
    return _MIRROR.names()
