"""Type stub of ``_core.pyx``: DeviceBuffer's compiled constructor and close, its frees."""

from typing import TYPE_CHECKING, Any

from .._lifetime._release import FastRelease, HandleRoot, Lease

if TYPE_CHECKING:
    from .._context.device import Context
    from .._lifetime._coerce import StreamLike
    from .pool import MemoryPool

class MemFree(FastRelease):
    def __call__(self, handle: Any) -> tuple[Any, ...]: ...

class MemFreeAsync(FastRelease):
    @property
    def waits_for_device(self) -> bool: ...
    def __call__(self, handle: Any) -> Any: ...

def mem_free(ctx_h: Any, ptr: Any, size: int) -> MemFree: ...
def mem_free_async(
    ctx_h: Any, stream: Any, used_on: set[int], ptr: Any, size: int
) -> MemFreeAsync: ...

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
    def _lease(self) -> Lease: ...
    def __init__(
        self,
        nbytes: int,
        *,
        stream: StreamLike = None,
        context: Context | None = None,
        pool: MemoryPool | None = None,
        resource: Any = None,
    ) -> None: ...
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...
    def close(self) -> None: ...
