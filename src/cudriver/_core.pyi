"""Type stub of the compiled core (``_core.pyx``)."""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cudriver._context.device import Context
    from cudriver._launch.launch import LaunchConfig
    from cudriver._lifetime._coerce import StreamLike
    from cudriver._memory.pool import MemoryPool
    from cudriver._runtime._enums import WaitCondition
    from cudriver._work.event import Event

IMPLEMENTATION: str
REASON: str

def configure() -> None: ...
def run_record(key: int) -> None: ...
def trampoline_address() -> int: ...
def eventfd_post_address() -> int: ...
def held(state: Any) -> bool: ...
def link(state: Any, dep: Any) -> None: ...
def unlink(state: Any, dep: Any) -> None: ...
def drop_deps(state: Any) -> None: ...
def release(state: Any) -> None: ...
def release_state(state: Any, *, collected: bool = False) -> None: ...

class GuardCore:
    armed: bool
    initialized: bool
    forked: bool
    running: int
    captures: Any
    restrictive: Any
    open: Any

class HandleRoot:
    _h: Any
    _key: Any
    _owned: Any
    _owner: Any
    _finalizer: Any
    _state: Any

class StreamCore(HandleRoot):
    def synchronize(self) -> None: ...
    def query(self) -> bool: ...
    def wait(self, other: Event | StreamLike) -> None: ...
    def record(self, event: Event | None = None) -> Event: ...
    def __cuda_stream__(self) -> tuple[int, int]: ...
    def launch_host_func(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None: ...
    def write_value32(self, addr: Any, value: int, *, no_memory_barrier: bool = False) -> None: ...
    def wait_value32(
        self, addr: Any, value: int, cond: WaitCondition | int = ..., *, flush: bool = False
    ) -> None: ...
    def write_value64(self, addr: Any, value: int, *, no_memory_barrier: bool = False) -> None: ...
    def wait_value64(
        self, addr: Any, value: int, cond: WaitCondition | int = ..., *, flush: bool = False
    ) -> None: ...

class EventCore(HandleRoot):
    _recorded_on: int
    def record(self, stream: StreamLike) -> Event: ...
    def query(self) -> bool: ...
    def synchronize(self) -> None: ...

class GraphExecCore(HandleRoot):
    def launch(self, stream: StreamLike) -> None: ...
    def upload(self, stream: StreamLike) -> None: ...

class KernelCore(HandleRoot):
    def launch(
        self,
        stream: StreamLike,
        grid: Any,
        block: Any = ...,
        *args: Any,
        shared_mem: int = 0,
        config: LaunchConfig | None = None,
    ) -> None: ...

class PlanCore:
    def _core_set(self, *fields: Any) -> None: ...
    def launch(self, stream: StreamLike) -> None: ...

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
    def __init__(
        self,
        nbytes: int,
        *,
        stream: StreamLike = None,
        context: Context | None = None,
        pool: MemoryPool | None = None,
    ) -> None: ...
    def close(self) -> None: ...

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
