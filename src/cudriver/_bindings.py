"""The one place that knows which ``cuda.bindings`` version is installed.

Other modules ask this module instead of testing versions themselves. Differences
handled here (read from the 12.9 and 13.x wheels):

* ``cuCtxCreate(params_or_None, flags, dev)`` in 13.x vs ``cuCtxCreate(flags, dev)``
  in 12.x;
* ``cuStreamGetCaptureInfo`` returns 7 values in 13.x (with edge data), 6 in 12.x;
* in 13.x the outputs of a failed call are ``None``; in 12.x default objects.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import cuda.bindings
from cuda.bindings import driver as drv

__all__ = [
    "VERSION",
    "MAJOR",
    "version_string",
    "has",
    "ctx_create",
    "capture_info",
    "graph_instantiate",
    "CaptureInfo",
    "SUCCESS",
]

SUCCESS = drv.CUresult.CUDA_SUCCESS


def _parse(v: str) -> tuple[int, ...]:
    parts: list[int] = []
    for p in v.split("."):
        digits = ""
        for ch in p:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or (0,)


def version_string() -> str:
    """The installed ``cuda.bindings`` version, e.g. ``"13.3.1"``."""
    return str(getattr(cuda.bindings, "__version__", "0"))


VERSION: tuple[int, ...] = _parse(version_string())
MAJOR: int = VERSION[0]


def has(name: str) -> bool:
    """Whether the installed bindings expose ``cuda.bindings.driver.<name>``."""
    return hasattr(drv, name)


def ctx_create(flags: int, dev: Any) -> tuple[Any, ...]:
    """Call ``cuCtxCreate`` with the signature of the installed bindings.

    Returns the raw ``(CUresult, CUcontext)`` tuple.
    """
    if MAJOR >= 13:
        return drv.cuCtxCreate(None, flags, dev)  # type: ignore[no-any-return]
    return drv.cuCtxCreate(flags, dev)  # type: ignore[no-any-return]


def graph_instantiate(graph: Any, flags: int) -> tuple[Any, ...]:
    """Instantiate ``graph`` with ``flags``; returns ``(CUresult, CUgraphExec)``.

    13.x names the call ``cuGraphInstantiate(graph, flags)``; some 12.x bindings also
    expose it as ``cuGraphInstantiateWithFlags``.
    """
    fn = getattr(drv, "cuGraphInstantiateWithFlags", None)
    if fn is None:
        fn = drv.cuGraphInstantiate
    return fn(graph, flags)  # type: ignore[no-any-return]


class CaptureInfo(NamedTuple):
    """The version-independent part of ``cuStreamGetCaptureInfo``'s result."""

    status: Any
    id: int
    graph: Any
    num_dependencies: int


def capture_info(stream: Any) -> tuple[Any, CaptureInfo | None]:
    """Call ``cuStreamGetCaptureInfo`` and normalise its result.

    Returns ``(CUresult, CaptureInfo or None)``: ``None`` when the call failed.
    """
    r = drv.cuStreamGetCaptureInfo(stream)
    if r[0] is not SUCCESS:
        return r[0], None
    # 13.x: (res, status, id, graph, deps, edges, n); 12.x: (res, status, id, graph, deps, n)
    status, cid, graph = r[1], r[2], r[3]
    n = r[-1]
    return r[0], CaptureInfo(status, int(cid), graph, int(n) if n is not None else 0)
