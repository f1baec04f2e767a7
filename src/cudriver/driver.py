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
"""

from __future__ import annotations

import threading
from typing import Any

from cuda.bindings import driver as _raw

from .errors import checked

_cache: dict[str, Any] = {}
_lock = threading.Lock()


def __getattr__(name: str) -> Any:
    fn = _cache.get(name)
    if fn is not None:
        return fn
    try:
        obj = getattr(_raw, name)
    except AttributeError:
        raise AttributeError(
            f"module 'cudriver.driver' has no attribute {name!r} "
            "(cuda.bindings.driver has none either)"
        ) from None
    if name.startswith("cu") and callable(obj) and not isinstance(obj, type):
        with _lock:
            fn = _cache.get(name)
            if fn is None:
                fn = _cache[name] = checked(obj, name=name)
        return fn
    return obj


def __dir__() -> list[str]:
    return sorted(set(dir(_raw)) | {"__doc__", "__name__"})
