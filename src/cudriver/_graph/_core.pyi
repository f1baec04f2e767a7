"""Type stub of ``_core.pyx``: the compiled launch and upload of GraphExec."""

from typing import TYPE_CHECKING

from .._lifetime._release import HandleRoot

if TYPE_CHECKING:
    from .._lifetime._coerce import StreamLike

class GraphExecCore(HandleRoot):
    def launch(self, stream: StreamLike) -> None: ...
    def upload(self, stream: StreamLike) -> None: ...
