"""Type stub of the compiled core (``_core.pyx``); see ``cudriver._impl``."""

from typing import Any

def configure() -> None: ...
def trampoline_address() -> int: ...

class HandleRoot:
    _h: Any
    _key: Any
    _owned: Any
    _owner: Any
    _finalizer: Any
    _state: Any

class StreamCore(HandleRoot): ...
class EventCore(HandleRoot): ...
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
    closing: Any
    dependants: Any
    deps: Any
    func: Any
    handle: Any
    keep: Any
    kind: Any
    leases: Any
    on_release: Any
    pins: list[None]
    busy: int
    pid: Any
    release: Any
    used_on: Any
    def __init__(
        self, handle: Any, release: Any, func: Any, kind: Any, keep: Any, on_release: Any
    ) -> None: ...
