"""The sync debug mode: say when a cudriver call makes the host wait for the device.

As ``torch.cuda.set_sync_debug_mode`` does: off by default; ``"warn"`` issues a
:class:`~cudriver.SyncWarning` naming the call, ``"error"`` raises
:class:`~cudriver.SyncError` before the wait. The calls that wait report themselves
through ``_runtime._hooks`` (see :func:`set_sync_debug_mode` for the list); while the
mode is off the hooks' lists are empty and each of those calls pays one test of a
list's truth (in C on the compiled paths).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from types import FrameType
from typing import Literal

from .._runtime import _hooks
from ..errors import SyncError, SyncWarning

__all__ = ["SyncDebugMode", "set_sync_debug_mode", "get_sync_debug_mode", "sync_debug"]

#: The modes, by name.
SyncDebugMode = Literal["off", "warn", "error"]

_NAMES: dict[object, SyncDebugMode] = {
    None: "off",
    "off": "off",
    "default": "off",
    0: "off",
    "warn": "warn",
    1: "warn",
    "error": "error",
    2: "error",
}
# The mode now (process-wide); changed under _LOCK.
_MODE: list[SyncDebugMode] = ["off"]
_LOCK = threading.Lock()
# Frames of cudriver's own files are skipped: the warning points at the caller's line.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _parse(mode: object) -> SyncDebugMode:
    if isinstance(mode, bool) or not isinstance(mode, (str, int, type(None))):
        raise TypeError(
            'sync debug mode must be None, "off", "warn", "error" (or 0, 1, 2), '
            f"not {type(mode).__name__}"
        )
    try:
        return _NAMES[mode]
    except KeyError:
        raise ValueError(
            f'sync debug mode must be None, "off", "warn", "error" (or 0, 1, 2), not {mode!r}'
        ) from None


def set_sync_debug_mode(mode: SyncDebugMode | Literal["default", 0, 1, 2] | None) -> None:
    """Warn or raise when a cudriver call makes the host wait for the device.

    Parameters
    ----------
    mode
        ``None``, ``"off"`` (or ``"default"``, ``0``): nothing (the default).
        ``"warn"`` (``1``): a :class:`~cudriver.SyncWarning` naming the call, pointing
        at the line of the program that made it. ``"error"`` (``2``): raise
        :class:`~cudriver.SyncError` naming the call, before it waits (nothing was
        done: a copy without ``stream=`` has not been enqueued).

    Notes
    -----
    The calls that wait, as the message names them:

    * ``Stream.synchronize``, ``Event.synchronize``, ``Context.synchronize`` (and
      ``Device.synchronize``, which is its primary context's);
    * copies and fills made without ``stream=``, which complete before returning:
      ``DeviceBuffer.copy_to``/``copy_from``/``fill`` (and ``ManagedBuffer``'s,
      ``PinnedBuffer``'s), ``StridedView.copy_to``/``copy_from``,
      ``CudaArray.copy_to``/``copy_from``, ``copy_2d``, ``copy_3d``, ``memset_2d``,
      ``copy_peer``, ``VirtualBuffer.offload``/``restore``;
    * a release that waits for the whole device (``cuMemFree``, ``cuMemFreeHost``, a
      module's unload, a pool's destroy, ...: the device-wide waits of the
      architecture page) run on the program's thread: ``DeviceBuffer.close()`` of a
      buffer allocated without a stream, for example. A release never raises: in
      ``"error"`` mode it warns. The same releases run by cudriver's releasing thread
      (objects dropped without ``close()``) hold no thread of the program up and are
      not reported.

    Not reported: waits the driver makes inside other calls (a first launch under
    lazy module loading, an allocation that finds the pool empty) and raw driver
    calls (``cudriver.driver``). A wait made within another (the releases a
    ``synchronize()`` runs) is reported once, as the outer call.

    The mode is the process's: every thread reports under it, each warning or error
    on the thread that waits. Python's warning filters apply: by default a warning is
    shown once per line of the program; ``warnings.simplefilter("always",
    cudriver.SyncWarning)`` shows every one.

    Raises
    ------
    ValueError, TypeError
        ``mode`` is none of the above.
    """
    new = _parse(mode)
    with _LOCK:
        _MODE[0] = new
        if new == "off":
            _hooks.unregister_sync(_observe)
        else:
            _hooks.register_sync(_observe)


def get_sync_debug_mode() -> SyncDebugMode:
    """The sync debug mode: ``"off"``, ``"warn"`` or ``"error"``."""
    return _MODE[0]


@contextlib.contextmanager
def sync_debug(
    mode: SyncDebugMode | Literal["default", 0, 1, 2] | None = "warn",
) -> Iterator[None]:
    """:func:`set_sync_debug_mode` for a ``with`` block; the previous mode comes back.

    The mode is the process's (not the block's thread's): a block on one thread sets it
    for every thread while it lasts, and restores what was set when it began.
    """
    _parse(mode)
    before = get_sync_debug_mode()
    set_sync_debug_mode(mode)
    try:
        yield
    finally:
        set_sync_debug_mode(before)


def _stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside cudriver, from our caller's."""
    f: FrameType | None = sys._getframe(2)  # our caller's caller: _observe's caller
    level = 2
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f = f.f_back
        level += 1
    return level


def _observe(call: str, can_raise: bool) -> None:
    """The sync observer (``_runtime._hooks.SYNC``): before the host waits in ``call``."""
    mode = _MODE[0]
    if mode == "off":
        return
    if mode == "error" and can_raise:
        raise SyncError(
            f"{call} would make the host wait for the device "
            '(cudriver.set_sync_debug_mode("error")); nothing waited'
        )
    msg = f"{call} makes the host wait for the device"
    if not can_raise:
        try:
            warnings.warn(msg, SyncWarning, stacklevel=_stacklevel())
        except Exception:  # warnings made errors: a release must not raise
            try:
                sys.stderr.write(f"cudriver: SyncWarning: {msg}\n")
            except Exception:  # pragma: no cover - stderr gone at shutdown
                pass
        return
    warnings.warn(msg, SyncWarning, stacklevel=_stacklevel())
