"""Type stub of ``_hostfn.pyx``: host functions, their registry and error delivery."""

from collections.abc import Callable
from typing import Any

from ._handle import Handle

_Err = tuple[int, Any, BaseException]
PENDING: dict[int, list[_Err]]
_eager: dict[int, Any]
_TRAMPOLINE_ADDR: int

class HostFuncRecord:
    key: int
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    _stream_key: int
    ctx_key: int
    _launches: int
    @property
    def stream_key(self) -> int: ...
    @stream_key.setter
    def stream_key(self, key: int) -> None: ...

def launch(
    stream: Handle | None,
    h: Any,
    stream_key: int,
    ctx_key: int,
    fn: Callable[..., Any],
    args: Any,
    kwargs: Any,
) -> HostFuncRecord: ...
def graph_record(
    fn: Callable[..., Any], args: Any, kwargs: Any, ctx_key: int
) -> tuple[HostFuncRecord, int]: ...
def registry_size() -> int: ...
def after_sync(stream_key: int) -> None: ...
def after_event_sync(stream_key: int) -> None: ...
def after_context_sync(ctx_key: int) -> None: ...
def watch_stream(key: int) -> Callable[[], None]: ...
def _unraisable(exc: BaseException, msg: str, obj: Any) -> None: ...
def run_record(key: int) -> None: ...
def trampoline_address() -> int: ...
