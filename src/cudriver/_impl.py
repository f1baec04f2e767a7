"""Which implementation of the hot paths runs: the compiled core or pure Python.

The compiled core (``cudriver._core``, built from ``_core.pyx`` when a C compiler
was available at install time) gives the hot classes C fields for their handles and
C bodies for their hot methods; the Python classes stay the public ones and subclass
its bases. Without it, or with ``CUDRIVER_PURE_PYTHON=1`` in the environment when
cudriver is first imported, the same classes run their pure-Python methods.

How a class takes the compiled methods
--------------------------------------
Each hot class is written once, in Python, with every method in its body (the pure
implementation, and the documentation). It derives from a core base
(:data:`HandleRoot`, ``StreamCore``...): in compiled mode an extension type, in pure
mode an empty class. :func:`adopt` then replaces the named methods with the core
base's compiled ones, keeping each pure method as ``_py_<name>``: the compiled method
handles the common case in C and calls ``_py_<name>`` for everything else (unusual
argument types, a closed object, an open capture, the call guard armed), so errors
and edge cases behave exactly as in pure mode.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

__all__ = [
    "COMPILED",
    "IMPLEMENTATION",
    "REASON",
    "core",
    "HandleRoot",
    "StreamCore",
    "EventCore",
    "GraphExecCore",
    "KernelCore",
    "PlanCore",
    "BufferCore",
    "GuardCore",
    "base",
    "adopt",
]

_ENV = "CUDRIVER_PURE_PYTHON"

core: Any = None
REASON: str
if os.environ.get(_ENV, "").strip() not in ("", "0"):
    REASON = f"{_ENV} is set"
else:
    try:
        from . import _core as core
    except ImportError as exc:  # not built (no compiler at install time)
        REASON = f"the compiled core is not available ({exc})"
    else:
        REASON = "compiled core loaded"

#: True when the compiled core is in use.
COMPILED: bool = core is not None
#: ``"compiled"`` or ``"pure-python"``.
IMPLEMENTATION: str = "compiled" if COMPILED else "pure-python"


class _PureHandleRoot:
    """The pure-Python root of every handle class: the fields the core keeps in C."""

    __slots__ = ("__weakref__", "_finalizer", "_h", "_key", "_owned", "_owner", "_state")


class _PureBufferCore(_PureHandleRoot):
    """The pure-Python stand-in for ``BufferCore``: the device buffer's fields."""

    __slots__ = (
        "_base",
        "_context",
        "_dtype",
        "_nbytes",
        "_offset",
        "_shape",
        "_stream",
        "_stream_int",
        "_sync_h",
        "_views",
    )


class _PureGraphExecCore(_PureHandleRoot):
    """The pure-Python stand-in for ``GraphExecCore``: the fields its launch reads."""

    __slots__ = ("_host_records", "_streams")


class _PureEventCore(_PureHandleRoot):
    """The pure-Python stand-in for ``EventCore``: the stream of the event's last record."""

    __slots__ = ("_recorded_on",)


class _PureGuardCore:
    """The pure-Python stand-in for ``GuardCore``: the call guard's fields."""

    __slots__ = ("armed", "captures", "forked", "initialized", "open", "restrictive", "running")


class _PureBase:
    """The pure-Python stand-in for a core base: no fields, no methods."""

    __slots__ = ()


class _PurePlanCore:
    """The pure-Python stand-in for ``PlanCore``: the plan's own slots serve."""

    __slots__ = ()

    def _core_set(self, *fields: Any) -> None:
        """Copy what a launch needs into C fields (nothing to do in pure mode)."""


def base(name: str) -> type:
    """The core base class ``name`` (compiled), or an empty stand-in (pure)."""
    if core is None:
        pure = {
            "PlanCore": _PurePlanCore,
            "BufferCore": _PureBufferCore,
            "GraphExecCore": _PureGraphExecCore,
            "EventCore": _PureEventCore,
            "GuardCore": _PureGuardCore,
        }
        return pure.get(name, _PureBase)
    cls: type = getattr(core, name)
    return cls


if TYPE_CHECKING:
    HandleRoot = _PureHandleRoot
    StreamCore = _PureBase
    EventCore = _PureEventCore
    GraphExecCore = _PureGraphExecCore
    KernelCore = _PureBase
    PlanCore = _PurePlanCore
    BufferCore = _PureBufferCore
    GuardCore = _PureGuardCore
else:
    HandleRoot = core.HandleRoot if COMPILED else _PureHandleRoot
    StreamCore = base("StreamCore")
    EventCore = base("EventCore")
    GraphExecCore = base("GraphExecCore")
    KernelCore = base("KernelCore")
    PlanCore = base("PlanCore")
    BufferCore = base("BufferCore")
    GuardCore = base("GuardCore")


def adopt(cls: type, *names: str) -> None:
    """Give ``cls`` its core base's compiled ``names`` (compiled mode; no-op otherwise).

    The pure method stays reachable as ``_py_<name>`` (the compiled one's fallback)
    and lends its docstring to the compiled one.
    """
    if core is None:
        return
    for name in names:
        pure = cls.__dict__[name]
        compiled = None
        for b in cls.__mro__[1:]:
            if name in b.__dict__ and b.__module__ == core.__name__:
                compiled = b.__dict__[name]
                break
        if compiled is None:
            raise RuntimeError(f"the compiled core has no {cls.__name__}.{name}")
        setattr(cls, f"_py_{name}", pure)
        try:
            compiled.__doc__ = pure.__doc__
        except (AttributeError, TypeError):  # pragma: no cover - a Cython without binding
            pass
        delattr(cls, name)
        if getattr(cls, name) is not compiled.__get__(None, cls):
            # A base earlier in the method order defines it too (Handle.close): put the
            # compiled method in the class itself.
            setattr(cls, name, compiled)
