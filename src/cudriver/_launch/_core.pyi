"""Type stub of ``_core.pyx``: the compiled launches of Kernel and LaunchPlan."""

from typing import TYPE_CHECKING, Any

from .._lifetime._release import HandleRoot

if TYPE_CHECKING:
    from .._lifetime._coerce import StreamLike
    from .launch import LaunchConfig

class KernelCore(HandleRoot):
    _layout: Any
    _module: Any
    _name: Any
    _params: Any
    _sizes: Any
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
