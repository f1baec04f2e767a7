"""Driver initialisation and version queries."""

from __future__ import annotations

import threading

from cuda.bindings import driver as _drv

from ._bindings import SUCCESS
from .errors import DriverNotFoundError, _is_missing_driver, make_error

__all__ = ["init", "driver_version", "is_initialized"]

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
        if is_initialized():  # another thread won the race
            return
        try:
            r = _drv.cuInit(0)
        except Exception as exc:
            if _is_missing_driver(exc):
                raise DriverNotFoundError(str(exc)) from None
            raise
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuInit")
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
    try:
        r = _drv.cuDriverGetVersion()
    except Exception as exc:
        if _is_missing_driver(exc):
            raise DriverNotFoundError(str(exc)) from None
        raise
    if r[0] is not SUCCESS:
        raise make_error(r[0], "cuDriverGetVersion")
    v = int(r[1])
    return v // 1000, (v % 1000) // 10
