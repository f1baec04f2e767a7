"""Type stub of ``_dlpack_core.pyx``: the export's common path, capsules made in C, the registry."""

from collections.abc import Callable
from typing import Any

_report: Callable[[BaseException, str], None] | None
CODES: dict[Any, tuple[int, int, int]]
_export_slow: Callable[[Any, object, object, object, object], Any] | None
_order: Callable[[Any, int], None] | None
_device_slow: Callable[[Any], tuple[int, int]] | None

def registry_size() -> int: ...
def deleter_addresses() -> tuple[int, int]: ...
def capsule(
    address: int,
    device_type: int,
    device_id: int,
    code: int,
    bits: int,
    shape: tuple[int, ...],
    versioned: bool,
    keep: object,
) -> Any: ...
def export(
    buf: Any, stream: object, max_version: object, dl_device: object, copy: object
) -> Any: ...
def dlpack(
    self: Any,
    *,
    stream: int | None = None,
    max_version: tuple[int, int] | None = None,
    dl_device: tuple[int, int] | None = None,
    copy: bool | None = None,
) -> Any: ...
def dlpack_device(self: Any) -> tuple[int, int]: ...
