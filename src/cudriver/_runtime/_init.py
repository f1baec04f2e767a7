"""Driver initialisation and version queries."""

from __future__ import annotations

from ..errors import GUARD
from . import _calls

__all__ = ["init", "driver_version", "is_initialized"]


def init() -> None:
    """Initialise the driver API (``cuInit(0)``) once per process; idempotent.

    Cheap after the first call (a flag test). Does not synchronise or allocate. Every
    cudriver call that needs the driver initialises it first, so calling this is
    needed only to surface a missing driver early.

    Raises
    ------
    DriverNotFoundError
        No NVIDIA driver library can be loaded on this machine.
    NoDeviceError
        A driver is present but sees no CUDA device.
    """
    if not GUARD.initialized:
        GUARD.initialize()


def is_initialized() -> bool:
    """Whether :func:`init` has succeeded in this process."""
    return GUARD.initialized


def driver_version() -> tuple[int, int]:
    """The CUDA version the installed driver supports, e.g. ``(13, 0)``.

    Calls ``cuDriverGetVersion`` (no initialisation needed).

    Raises
    ------
    DriverNotFoundError
        No NVIDIA driver library can be loaded.
    """
    v = int(_calls.cuDriverGetVersion())
    return v // 1000, (v % 1000) // 10
