"""``cuda.bindings.nvrtc`` with its return shape, whose failures raise.

See :mod:`cudriver.compat`. A failed call raises :class:`~cudriver.CompileError`; when
``nvrtcCompileProgram`` fails, the program's log is in it (``err.log``).
"""

from __future__ import annotations

from typing import Any

from cuda.bindings import nvrtc as _raw

from .._runtime._mirror import Mirror, nvrtc_error

__all__: list[str] = []

_MIRROR = Mirror(_raw, "cudriver.compat.nvrtc", "nvrtc", "compat", fail=nvrtc_error, guard=False)


def __getattr__(name: str) -> Any:
    return _MIRROR.attr(name)


def __dir__() -> list[str]:
    return _MIRROR.names()
