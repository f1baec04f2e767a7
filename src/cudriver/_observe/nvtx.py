"""NVTX: ranges of the program's own, and marks of cudriver's operations.

Both go through NVIDIA's ``nvtx`` package, an optional dependency (``pip install nvtx``;
in a clone of cudriver, the extra ``.[nvtx]``), imported when a range is first entered
or the marks are turned on, never at ``import cudriver``. NVTX records nothing unless a
tool is attached (Nsight Systems: ``nsys profile``), and then shows the ranges on the
timeline beside the driver's calls and the device's work.

* :func:`nvtx_range` makes an :class:`NvtxRange`: ``with cudriver.nvtx_range("step"):``
  or ``@cudriver.nvtx_range()`` on a function.
* :func:`set_nvtx_marks` turns on marks of cudriver's own operations in the NVTX
  domain ``"cudriver"`` (``"cudriver"``), through the hooks of ``_runtime._hooks``: a
  range per capture (on the capturing thread, from its beginning to its end), per host
  wait (``synchronize()``, copies and fills without ``stream=``, releases that wait for
  the device) and per host function run (on the driver's thread); a mark per graph
  launch and per allocation (its size in bytes as the mark's payload). Off, the hooks'
  list is empty and each of those operations pays one test of its truth.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from .._runtime import _hooks

__all__ = ["DOMAIN", "NvtxRange", "nvtx_range", "set_nvtx_marks", "nvtx_marks_enabled"]

#: The NVTX domain of cudriver's own marks and ranges.
DOMAIN = "cudriver"

_INSTALL = (
    "NVTX ranges need the nvtx package: pip install nvtx (in a clone of cudriver, "
    "pip install '.[nvtx]')"
)

_F = TypeVar("_F", bound=Callable[..., Any])

_module: ModuleType | None = None


def _nvtx() -> ModuleType:
    """The ``nvtx`` package, or ImportError saying how to install it."""
    global _module
    if _module is None:
        try:
            _module = importlib.import_module("nvtx")
        except ImportError as exc:
            raise ImportError(f"{_INSTALL} ({exc})") from exc
    return _module


def _check(name: str, value: object, types: tuple[type, ...]) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
        what = " or ".join(t.__name__ for t in types)
        raise TypeError(f"{name} must be {what} or None, not {type(value).__name__}")


class NvtxRange:
    """An NVTX range: a context manager, and a decorator of functions.

    Made by :func:`nvtx_range`. Entering it pushes a range on the calling thread
    (``nvtxDomainRangePushEx``), leaving pops it; one object may be entered any number
    of times, nested and on several threads at once (the ranges are per thread). The
    ``nvtx`` package is imported when the range is first entered (ImportError, with
    the command that installs it, if it is missing).
    """

    __slots__ = ("_annotation", "category", "color", "domain", "message")

    def __init__(
        self,
        message: str | None = None,
        *,
        color: str | int | None = None,
        domain: str | None = None,
        category: str | int | None = None,
    ) -> None:
        _check("message", message, (str,))
        _check("color", color, (str, int))
        _check("domain", domain, (str,))
        _check("category", category, (str, int))
        self.message = message
        self.color = color
        self.domain = domain
        self.category = category
        self._annotation: Any = None

    def _open(self) -> Any:
        a = self._annotation
        if a is None:
            # Made once (two threads racing make one each: either works).
            a = self._annotation = _nvtx().annotate(
                message=self.message, color=self.color, domain=self.domain, category=self.category
            )
        return a

    def __enter__(self) -> NvtxRange:
        self._open().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._annotation.__exit__(*exc)

    def __call__(self, fn: _F) -> _F:
        """Decorate ``fn``: each call runs inside the range.

        Named after ``fn`` when the range has no message. A coroutine function's range
        covers the call that makes the coroutine, not its run.
        """
        if not callable(fn):
            raise TypeError(f"nvtx_range() decorates a callable, not {type(fn).__name__}")
        rng = self
        if self.message is None:
            name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
            rng = NvtxRange(
                name if isinstance(name, str) else repr(fn),
                color=self.color,
                domain=self.domain,
                category=self.category,
            )

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            with rng:
                return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    def __repr__(self) -> str:
        parts = [repr(self.message)]
        for k in ("color", "domain", "category"):
            v = getattr(self, k)
            if v is not None:
                parts.append(f"{k}={v!r}")
        return f"<cudriver.NvtxRange {' '.join(parts)}>"


def nvtx_range(
    message: str | None = None,
    *,
    color: str | int | None = None,
    domain: str | None = None,
    category: str | int | None = None,
) -> NvtxRange:
    """An NVTX range, as a context manager (``with``) or a decorator.

    ::

        with cudriver.nvtx_range("step", color="green"):
            ...

        @cudriver.nvtx_range()          # named after the function
        def train_step(batch): ...

    Parameters
    ----------
    message
        The range's name. None: empty in a ``with`` block; the function's qualified
        name as a decorator.
    color
        A color name the ``nvtx`` package knows (``"green"``, ``"red"``, ...; any
        matplotlib color when matplotlib is installed) or an ARGB int (``0xFF76B900``).
    domain
        The NVTX domain (None: NVTX's default domain). Nsight Systems shows each
        domain as its own row; cudriver's own marks are in ``"cudriver"``.
    category
        A category of the domain, by name or number.

    Notes
    -----
    Requires the ``nvtx`` package, imported when the range is first entered, not
    here. Without a tool attached (``nsys profile``), NVTX records nothing and a
    range costs the ``nvtx`` package's no-op calls.
    """
    return NvtxRange(message, color=color, domain=domain, category=category)


# ARGB colors of cudriver's own marks and ranges, by what they are.
_WAIT = 0xFFD62728  # red: the host waits
_CAPTURE = 0xFF2CA02C  # green
_LAUNCH = 0xFF1F77B4  # blue
_ALLOC = 0xFFFF7F0E  # orange
_HOSTFN = 0xFF9467BD  # purple


def _color(name: str, sized: bool) -> int:
    if sized:
        return _ALLOC
    if name.startswith("host function"):
        return _HOSTFN
    if name == "Stream.capture":
        return _CAPTURE
    if name == "GraphExec.launch":
        return _LAUNCH
    return _WAIT


class _Marks:
    """The NVTX observer of cudriver's operations (``_runtime._hooks.MARKS``).

    Its methods never raise (the hooks call them from releases and host functions).
    The ``nvtx`` package's domain methods with event attributes made once per name
    when it has them; its module functions otherwise (older versions).
    """

    def __init__(self, nv: ModuleType) -> None:
        self._nv = nv
        dom = nv.get_domain(DOMAIN) if hasattr(nv, "get_domain") else None
        if dom is not None and all(
            hasattr(dom, a) for a in ("push_range", "pop_range", "mark", "get_event_attributes")
        ):
            self._dom: Any = dom
        else:  # pragma: no cover - nvtx before its Domain methods
            self._dom = None
        self._attrs: dict[str, Any] = {}

    def _attributes(self, name: str) -> Any:
        a = self._attrs.get(name)
        if a is None:
            a = self._attrs[name] = self._dom.get_event_attributes(
                message=name, color=_color(name, False)
            )
        return a

    def push(self, name: str) -> None:
        try:
            if self._dom is not None:
                self._dom.push_range(self._attributes(name))
            else:  # pragma: no cover - older nvtx
                self._nv.push_range(message=name, color=_color(name, False), domain=DOMAIN)
        except Exception:  # pragma: no cover - never seen; a mark must not break a call
            pass

    def pop(self) -> None:
        try:
            if self._dom is not None:
                self._dom.pop_range()
            else:  # pragma: no cover - older nvtx
                self._nv.pop_range(domain=DOMAIN)
        except Exception:  # pragma: no cover
            pass

    def mark(self, name: str, value: int | None = None) -> None:
        try:
            dom = self._dom
            if dom is None:  # pragma: no cover - older nvtx: no payload
                self._nv.mark(message=name, color=_color(name, value is not None), domain=DOMAIN)
            elif value is None:
                dom.mark(self._attributes(name))
            else:
                dom.mark(dom.get_event_attributes(message=name, color=_ALLOC, payload=value))
        except Exception:  # pragma: no cover
            pass


_LOCK = threading.Lock()
_ACTIVE: list[_Marks] = []


def set_nvtx_marks(enabled: bool = True) -> None:
    """Mark cudriver's own operations on the NVTX timeline, in the domain ``"cudriver"``.

    On: a range per capture (from ``begin_capture``/``with stream.capture()`` to its
    end, on the capturing thread), per host wait (``Stream``/``Event``/``Context``
    ``.synchronize()``, copies and fills without ``stream=``, a ``close()`` whose free
    waits for the device: named as the sync debug mode names them, see
    :func:`set_sync_debug_mode`) and per host function run (on the driver's thread,
    named after the function); a mark per graph launch (``GraphExec.launch``) and per
    allocation (``DeviceBuffer``, ``PinnedBuffer``, ``ManagedBuffer``, ``CudaArray``,
    a ``VirtualBuffer`` chunk; the size in bytes as the payload). Off (the default),
    each of those operations pays one test of an empty list.

    Requires the ``nvtx`` package (ImportError, saying how to install it, if it is
    missing). Without a tool attached (``nsys profile``) NVTX records nothing and each
    mark costs a Python call.

    Raises
    ------
    TypeError
        ``enabled`` is not a bool.
    ImportError
        The ``nvtx`` package is not installed (only when turning marks on).
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool, not {type(enabled).__name__}")
    with _LOCK:
        if enabled:
            if not _ACTIVE:
                marks = _Marks(_nvtx())
                _ACTIVE.append(marks)
                _hooks.register_marks(marks)
        else:
            for marks in _ACTIVE:
                _hooks.unregister_marks(marks)
            _ACTIVE.clear()


def nvtx_marks_enabled() -> bool:
    """Whether :func:`set_nvtx_marks` turned the marks of cudriver's operations on."""
    return bool(_ACTIVE)
