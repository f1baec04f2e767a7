"""Driver initialisation and version queries."""

from __future__ import annotations

import threading

from cuda.bindings import driver as _drv

from .errors import checked

__all__ = ["init", "driver_version", "is_initialized"]

_cuInit = checked(_drv.cuInit)
_cuDriverGetVersion = checked(_drv.cuDriverGetVersion)

_lock = threading.Lock()
_initialized = False


def init() -> None:
    """Initialise the driver API (``cuInit(0)``) once per process; idempotent.

    Cheap after the first call (a flag test). Does not synchronise or allocate.

    Raises
    ------
    DriverNotFoundError
        No NVIDIA driver library can be loaded on this machine.
    NoDeviceError
        A driver is present but sees no CUDA device.
    """
    global _initialized
    if _initialized:
        return
    with _lock:
        if not _initialized:  # another thread may have won the race
            _cuInit(0)
            _initialized = True


def is_initialized() -> bool:
    """Whether :func:`init` has succeeded in this process."""
    return _initialized


def driver_version() -> tuple[int, int]:
    """The CUDA version the installed driver supports, e.g. ``(13, 0)``.

    Calls ``cuDriverGetVersion`` (no initialisation needed).

    Raises
    ------
    DriverNotFoundError
        No NVIDIA driver library can be loaded.
    """
    v = int(_cuDriverGetVersion())
    return v // 1000, (v % 1000) // 10
