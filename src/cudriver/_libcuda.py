"""Direct ctypes access to ``libcuda`` for the few calls the bindings get wrong.

Used for ``cuLaunchHostFunc`` (the bindings free their callback wrapper after the
first call, so a captured host node would run freed memory on replay) and for
``cuGraphExecUpdate``'s result info (the bindings return None on failure).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading

from .errors import DriverNotFoundError

__all__ = ["lib"]

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    """The loaded driver library (``libcuda.so.1`` / ``nvcuda.dll``), loaded once."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
            found = ctypes.util.find_library("cuda")
            if found:
                names.append(found)
            last: OSError | None = None
            for n in names:
                try:
                    _lib = ctypes.CDLL(n)
                    break
                except OSError as exc:
                    last = exc
            if _lib is None:
                raise DriverNotFoundError(str(last))
    return _lib
