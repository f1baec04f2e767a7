"""Type stub of ``_dlpack_core.pyx``: DLPack capsules made in C, and their registry."""

from collections.abc import Callable
from typing import Any

_report: Callable[[BaseException, str], None] | None

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
