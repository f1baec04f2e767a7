"""The one table of checked driver entry points: each function wrapped once, on first use.

``_calls.cuStreamGetPriority(h)`` is ``cuStreamGetPriority`` of ``cuda.bindings.driver``
wrapped by :func:`~cudriver.checked` (it returns the outputs and raises the
:class:`~cudriver.CudaError` of a failure): the checked face of :class:`Mirror`, whose
cache makes each wrapper once, shared with :mod:`cudriver.driver`. The raw entry points
are the bindings' own functions, called as ``_drv.cuStreamQuery(h)``: hot paths test
their status by identity (``r[0] is not SUCCESS``) and build the error with
``error_for``. No module binds an entry point of its own.
"""

from __future__ import annotations

from typing import Any

from cuda.bindings import driver as _drv

from ._mirror import Mirror

__all__ = ["TABLE"]

#: The checked entry points (also the functions :mod:`cudriver.driver` serves).
TABLE = Mirror(_drv, "cudriver.driver", "cu", "checked")


def __getattr__(name: str) -> Any:
    return TABLE.attr(name)
