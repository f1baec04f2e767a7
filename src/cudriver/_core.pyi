"""Type stub of the compiled core (``_core.pyx``); see ``cudriver._impl``."""

from typing import Any

def configure() -> None: ...
def trampoline_address() -> int: ...
def eventfd_post_address() -> int: ...
def held(state: Any) -> bool: ...
def link(state: Any, dep: Any) -> None: ...
def unlink(state: Any, dep: Any) -> None: ...
def drop_deps(state: Any) -> None: ...

class HandleRoot:
    _h: Any
    _key: Any
    _owned: Any
    _owner: Any
    _finalizer: Any
    _state: Any

class StreamCore(HandleRoot): ...

class EventCore(HandleRoot):
    _recorded_on: int

class GraphExecCore(HandleRoot): ...
class KernelCore(HandleRoot): ...

class PlanCore:
    def _core_set(self, *fields: Any) -> None: ...

class BufferCore(HandleRoot):
    _nbytes: Any
    _context: Any
    _stream: Any
    _stream_int: Any
    _sync_h: Any
    _dtype: Any
    _shape: Any
    _base: Any
    _offset: Any
    _views: Any

class State:
    closing: bool
    dependants: int
    deps: Any
    func: Any
    handle: Any
    keep: Any
    kind: Any
    @property
    def leases(self) -> set[int]: ...
    on_release: Any
    @property
    def pins(self) -> list[None]: ...
    busy: int
    pid: int
    release: Any
    used_on: Any
    def __init__(
        self, handle: Any, release: Any, func: Any, kind: Any, keep: Any, on_release: Any
    ) -> None: ...

NO_BLOCK: object
