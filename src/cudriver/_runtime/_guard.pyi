"""Type stub of ``_guard.pyx``: the call guard's C fields."""

from typing import Any

class GuardCore:
    armed: bool
    initialized: bool
    forked: bool
    running: int
    captures: Any
    restrictive: Any
    open: Any

def in_host_function() -> bool: ...
