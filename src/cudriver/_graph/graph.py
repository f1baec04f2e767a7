"""CUDA graphs: Graph (built or captured) and GraphExec (instantiated, launched, updated).

:class:`Graph` holds every public graph method, the ``add_*`` methods that build it
node by node among them. The nodes they return, and the parameter builders they share
with :class:`GraphExec`'s per-node updates, are in ``graphnode``.

Where a node goes
-----------------
* In a graph made with ``Graph()`` (or a conditional node's body): after the nodes
  named by ``after=`` (none: a root node).
* In the graph a ``with stream.capture() as g:`` block is filling (``g`` while the
  block runs): after the work captured so far on that stream, and the stream's later
  work goes after the node (``cuStreamGetCaptureInfo``, then
  ``cuStreamUpdateCaptureDependencies``). This is how conditional nodes and child
  graphs enter a capture.

What a node keeps
-----------------
The objects a node refers to (kernel arguments, host callables and their arguments,
events, memory-op targets, host memory of copies, a child graph's own objects) are
kept by the top-level graph with the rule of a capture (:func:`capture.hold`), and so
by every :class:`GraphExec` made from it. A conditional node's bodies belong to its
graph: closing the graph closes them and their nodes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Concatenate, NoReturn, ParamSpec, TypeVar

from cuda.bindings import driver as _drv

from .. import driver as _cd
from .._context.device import Context, context_arg, current_or_default
from .._launch.kernel import Kernel
from .._launch.launch import NO_BLOCK, LaunchConfig, shape_of
from .._lifetime import _hostfn, _pins, capture
from .._lifetime._coerce import (
    DeviceMemory,
    StreamLike,
    bool_arg,
    device_address,
    handle_arg,
    nbytes_arg,
    renamed_keyword,
    stream_handle,
    uint_arg,
)
from .._lifetime._handle import Handle, Lease
from .._lifetime._hostfn import HostFuncRecord
from .._lifetime._pins import pin2, pinned, unpin2
from .._runtime import _bindings, _calls, _hooks
from .._runtime._bindings import SUCCESS
from .._runtime._enums import CaptureStatus, ConditionalType
from .._work.event import Event
from .._work.memops import MemOp, _check_ops, require
from ..errors import (
    GUARD,
    ClosedError,
    GraphUpdateError,
    StreamCaptureError,
    checked,
    error_for,
)
from ._core import GraphExecCore
from .graphnode import (
    AllocNode,
    ConditionalHandle,
    ConditionalNode,
    GraphNode,
    kernel_params,
    launch_of,
    memcpy_params,
    memset_params,
    outs,
)

__all__ = ["Graph", "GraphExec"]

_cuGraphInstantiate = checked(_bindings.graph_instantiate, name="cuGraphInstantiate")
_cuGraphAddNode = checked(_bindings.graph_add_node, name="cuGraphAddNode")
_cuGraphAddDependencies = checked(_bindings.graph_add_dependencies, name="cuGraphAddDependencies")
_cuUpdateCaptureDependencies = checked(
    _bindings.update_capture_dependencies, name="cuStreamUpdateCaptureDependencies"
)
_F = _drv.CUgraphInstantiate_flags
_SET_DEPS = int(_drv.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES)
_ASSIGN_DEFAULT = int(_drv.CU_GRAPH_COND_ASSIGN_DEFAULT)
_CUresult = _drv.CUresult

_S = TypeVar("_S", "Graph", "GraphExec")
_P = ParamSpec("_P")
_T = TypeVar("_T")


def _serialized(method: Callable[Concatenate[_S, _P], _T]) -> Callable[Concatenate[_S, _P], _T]:
    """Run the method under the object's lock (a graph: its top-level graph's).

    The driver does not synchronise graph and executable-graph objects: calls using the
    same one from several threads must be serialised by the caller. cudriver does it for
    every method but ``GraphExec.launch`` and ``upload`` (the hot paths; launching one
    executable graph from several threads at once is the user's to order).
    """

    @functools.wraps(method)
    def call(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        with self._serial():
            return method(self, *args, **kwargs)

    return call


_UPDATE_REASONS = {
    1: "the update failed for an unexpected reason",
    2: "the graph's topology changed (nodes or edges added or removed)",
    3: "the type of a node changed",
    4: "a kernel node's function changed",
    5: "node parameters changed in a way that cannot be updated",
    6: "something about a node is not supported for update",
    7: "a kernel node's function changed in an unsupported way",
    8: "a node's attributes changed in a way that cannot be updated",
}


class Graph(Handle):
    """A CUDA graph (``cuGraphCreate``; ``cuGraphDestroy`` on close).

    Made empty with ``Graph()`` and built node by node (the ``add_*`` methods), or by
    capture (:meth:`Stream.capture`, :meth:`Stream.end_capture`), or both. A graph
    keeps alive the objects that its work refers to (kernel arguments, host functions,
    host memory, events), and every :class:`GraphExec` made from it keeps them too.

    Every ``add_*`` method takes ``after=`` (a node or an iterable of nodes of the same
    graph; default none) and returns the new :class:`GraphNode`. Each allocates in the
    driver and does not synchronise.
    """

    __slots__ = (
        "_bodies",
        "_context",
        "_keep",
        "_lock",
        "_pending_capture",
        "_root",
        "_session",
        "_stream",
    )

    _kind = "Graph"

    _keep: list[Any]
    _context: Context | None
    _pending_capture: bool
    # While a capture fills this graph: the capturing stream (weakly) and its session.
    _stream: weakref.ref[Any] | None
    _session: capture.CaptureSession | None
    # A conditional node's body: the graph holding the node; and a graph's own bodies.
    _root: Graph | None
    _bodies: list[Graph]
    # Serialises the driver calls using this graph and its bodies (see _serialized).
    _lock: threading.RLock

    def __init__(self, *, context: Context | None = None) -> None:
        ctx = context_arg(context) or current_or_default()
        with ctx._scope():
            h = _cd.cuGraphCreate(0)
        self._pending_capture = False
        self._keep = []
        self._lock = threading.RLock()
        self._fill(h, [], ctx)

    def _fill(self, h: Any, keep: list[Any], context: Context | None) -> None:
        # What nodes added to the bodies during the capture keep is merged in.
        pending = getattr(self, "_keep", None)
        if pending:
            keep.extend(pending)
        self._keep = keep
        self._context = context
        self._pending_capture = False
        self._stream = None
        self._session = None
        self._root = None
        if not hasattr(self, "_bodies"):
            self._bodies = []
        self._init_handle(
            h,
            release=_drv.cuGraphDestroy,
            func="cuGraphDestroy",
            keep=(context,) if context is not None else (),
        )

    @classmethod
    def _pending(cls, stream: Any) -> Graph:
        """The graph a ``with stream.capture()`` block fills (its handle comes at the end)."""
        self = cls._bare(None)
        self._pending_capture = True
        self._stream = weakref.ref(stream)
        self._session = stream._capture
        return self

    @classmethod
    def _bare(cls, context: Context | None) -> Graph:
        self = cls.__new__(cls)
        self._h = None
        self._keep = []
        self._context = context
        self._pending_capture = False
        self._stream = None
        self._session = None
        self._root = None
        self._bodies = []
        self._lock = threading.RLock()
        return self

    @classmethod
    def _from_handle(cls, h: Any, *, keep: list[Any], context: Context | None) -> Graph:
        self = cls._bare(context)
        self._fill(h, keep, context)
        return self

    @classmethod
    def _body(cls, h: Any, parent: Graph) -> Graph:
        """A conditional node's body graph, owned by the driver through ``parent``."""
        self = cls._bare(parent._context)
        self._root = parent
        self._init_handle(h, release=None, func="cuGraphDestroy", owned=False, owner=parent)
        parent._bodies.append(self)
        return self

    @classmethod
    def from_handle(cls, handle: Any, owner: Any = None) -> Graph:
        """Wrap a foreign ``CUgraph`` (or int) without owning it."""
        h = handle_arg(handle, _drv.CUgraph, "graph handle")
        self = cls._bare(None)
        self._init_handle(h, release=None, func="cuGraphDestroy", owned=False, owner=owner)
        return self

    def close(self) -> None:
        """Destroy the graph (``cuGraphDestroy``); idempotent.

        What the graph kept alive for its work is let go; executable graphs made from
        it keep their own reference to it. Its conditional bodies, and their nodes,
        are closed with it.
        """
        for body in self._bodies:
            body.close()
        self._bodies = []
        super().close()
        self._keep = []

    @property
    def handle(self) -> Any:
        """The raw ``CUgraph``, for raw calls (also checks the graph owning a body)."""
        h = self._h
        if h is None or not self._live():
            self._raise_closed()
        return h

    def _serial(self) -> threading.RLock:
        return self._top()._lock

    def _top(self) -> Graph:
        g = self
        while g._root is not None:
            g = g._root
        return g

    def _capturing_stream(self) -> Any:
        """The stream whose capture is filling this graph, while it does; else None."""
        ref = self._stream
        if ref is None or self._session is None or self._session.closed:
            return None
        return ref()

    def _live(self) -> bool:
        """Whether the graph's nodes may be used: it is open, or a capture is filling it."""
        top = self._top()
        if top._h is None and top._capturing_stream() is None:
            return False
        return self is top or self._h is not None

    def _pin_target(self) -> Handle:
        # A body pins the graph that owns it; while a capture fills that graph, the stream.
        top = self._top()
        if top._h is None:
            stream = top._capturing_stream()
            if stream is None:
                self._raise_closed()
            return stream  # type: ignore[no-any-return]
        return top

    def _adopt(self, kept: list[Any]) -> None:
        """Keep what a capture into this graph (``capture(into=...)``) refers to."""
        self._top()._keep.extend(kept)

    def _raise_closed(self) -> NoReturn:
        if self._root is not None:
            raise ClosedError("Graph is closed: it was a conditional body of a closed graph")
        if getattr(self, "_pending_capture", False):
            if self._capturing_stream() is None:
                raise ClosedError(
                    "Graph is unusable: the capture that was filling it ended without a graph"
                )
            raise ClosedError(
                "Graph is still being captured: use it after the `with stream.capture()` "
                "block has exited"
            )
        super()._raise_closed()

    # -- building node by node -------------------------------------------------------
    def add_empty(self, *, after: GraphNode | Iterable[GraphNode] | None = None) -> GraphNode:
        """Add an empty node (``cuGraphAddEmptyNode``): a join point for dependencies."""
        with _adding(self, after) as site:
            return site.added(_calls.cuGraphAddEmptyNode(site.gh, site.deps, len(site.deps)))  # type: ignore[no-any-return]

    def add_kernel(
        self,
        kernel: Kernel,
        grid: Any,
        block: Any = NO_BLOCK,
        *args: Any,
        shared_mem: int = 0,
        config: LaunchConfig | None = None,
        after: GraphNode | Iterable[GraphNode] | None = None,
    ) -> GraphNode:
        """Add a kernel node (``cuGraphAddKernelNode``), as :meth:`Kernel.launch` would launch.

        Arguments are packed now (the driver copies them) and kept with the graph.
        The shape is given as to :meth:`Kernel.launch`: ``grid, block`` or a
        :class:`~cudriver.LaunchConfig` that carries them. A ``config`` sets its
        attributes on the node (``cuGraphKernelNodeSetAttribute``);
        ``programmatic_stream_serialization`` is refused here (capture the launch instead).

        Raises
        ------
        TypeError, ValueError
            As :meth:`Kernel.launch` does for bad dimensions or arguments.
        """
        grid, block, args, shared_mem, cfg = shape_of(grid, block, args, shared_mem, config)
        attrs = cfg.node_attributes() if cfg is not None else []
        with _adding(self, after, kernel, *args) as site:
            if attrs and site.stream_h is not None:
                raise ValueError(
                    "inside a capture, launch a configured kernel on the stream "
                    "(kernel.launch(stream, ..., config=config)) instead of adding a node"
                )
            p, packed, launch = kernel_params(kernel, grid, block, shared_mem, args)
            nh = _calls.cuGraphAddKernelNode(site.gh, site.deps, len(site.deps), p)
            del packed  # copied by the driver
            for attr_id, value in attrs:
                r = _drv.cuGraphKernelNodeSetAttribute(nh, attr_id, value)
                if r[0] is not SUCCESS:
                    _drv.cuGraphDestroyNode(nh)
                    assert cfg is not None
                    raise error_for(
                        r[0],
                        _drv.cuGraphKernelNodeSetAttribute,
                        f"kernel {kernel.name!r}: the node attribute {attr_id.name} "
                        f"(config sets {', '.join(cfg.names())})",
                    )
            # Nodes among the arguments (allocations) belong to the graph already.
            held = tuple(a for a in args if not isinstance(a, GraphNode))
            node: GraphNode = site.added(nh, kernel, held)
            node._launch = launch
            return node

    def add_memcpy(
        self,
        dst: Any,
        src: Any,
        nbytes: int | None = None,
        *,
        after: GraphNode | Iterable[GraphNode] | None = None,
    ) -> GraphNode:
        """Add a copy node (``cuGraphAddMemcpyNode``) of ``nbytes`` (default: all of ``src``).

        ``dst`` and ``src`` are device buffers, pinned buffers, numpy arrays (host
        memory, read or written at each replay, and kept alive with the graph) or
        ``__cuda_array_interface__`` objects.
        """
        p, keep = memcpy_params(dst, src, nbytes)
        with _adding(self, after, dst, src) as site:
            nh = _calls.cuGraphAddMemcpyNode(
                site.gh, site.deps, len(site.deps), p, site.ctx_handle()
            )
            return site.added(nh, *keep)  # type: ignore[no-any-return]

    def add_memset(
        self,
        dst: Any,
        value: Any,
        *,
        element_size: int | None = None,
        count: int | None = None,
        after: GraphNode | Iterable[GraphNode] | None = None,
        width: int | None = None,
    ) -> GraphNode:
        """Add a memset node (``cuGraphAddMemsetNode``): ``count`` elements set to ``value``.

        ``value`` and ``element_size`` as for :meth:`DeviceBuffer.fill`; ``count``
        defaults to the whole of ``dst`` (a device buffer or address; an int address
        needs ``count``). ``width`` is the deprecated name of ``element_size``.
        """
        if width is not None:
            element_size = renamed_keyword(
                "add_memset", "width", width, "element_size", element_size
            )
        p, keep = memset_params(dst, value, element_size, count)
        with _adding(self, after, dst) as site:
            nh = _calls.cuGraphAddMemsetNode(
                site.gh, site.deps, len(site.deps), p, site.ctx_handle()
            )
            return site.added(nh, *((keep,) if keep is not None else ()))  # type: ignore[no-any-return]

    def add_host_func(
        self,
        fn: Callable[..., Any],
        *args: Any,
        after: GraphNode | Iterable[GraphNode] | None = None,
        **kwargs: Any,
    ) -> GraphNode:
        """Add a host-function node (``cuGraphAddHostNode``) running ``fn(*args, **kwargs)``.

        The same rules as :meth:`Stream.launch_host_func`: no CUDA calls inside ``fn``;
        its exceptions are re-raised by the next ``synchronize()`` of the stream the
        executable graph was launched on. ``fn`` and its arguments are kept with the graph.
        """
        if not callable(fn):
            raise TypeError(f"fn must be callable, not {type(fn).__name__}")
        with _adding(self, after) as site:
            ctx = site.ctx_handle()
            rec, trampoline = _hostfn.graph_record(fn, args, kwargs, int(ctx))
            status, nh = _bindings.graph_add_host_node(site.gh, site.deps, trampoline, rec.key)
            if status is not SUCCESS:
                raise error_for(status, _drv.cuGraphAddHostNode)
            return site.added(nh, rec)  # type: ignore[no-any-return]

    def add_event_record(
        self, event: Event, *, after: GraphNode | Iterable[GraphNode] | None = None
    ) -> GraphNode:
        """Add a node recording ``event`` (``cuGraphAddEventRecordNode``).

        The event is an ordinary one: the host, other streams and other graphs see each
        replay's record (``event.synchronize()``, ``stream.wait(event)``,
        ``event.elapsed_ms``), so two record nodes time a part of a replay.
        """
        ev = _event(event)
        with _adding(self, after, ev) as site:
            nh = _calls.cuGraphAddEventRecordNode(site.gh, site.deps, len(site.deps), ev.handle)
            return site.added(nh, ev)  # type: ignore[no-any-return]

    def add_event_wait(
        self, event: Event, *, after: GraphNode | Iterable[GraphNode] | None = None
    ) -> GraphNode:
        """Add a node waiting for ``event``'s last record (``cuGraphAddEventWaitNode``)."""
        ev = _event(event)
        with _adding(self, after, ev) as site:
            nh = _calls.cuGraphAddEventWaitNode(site.gh, site.deps, len(site.deps), ev.handle)
            return site.added(nh, ev)  # type: ignore[no-any-return]

    def add_mem_ops(
        self, ops: Iterable[MemOp], *, after: GraphNode | Iterable[GraphNode] | None = None
    ) -> GraphNode:
        """Add a memory-operation node (``cuGraphAddBatchMemOpNode``) running ``ops`` in order.

        ``ops`` as for :meth:`Stream.batch_mem_ops`; the device's feature checks apply.
        """
        lst = _check_ops(ops)
        needs = 0
        for op in lst:
            needs |= op._needs
        with _adding(self, after) as site:
            if needs and site.ctx is not None:
                require(site.ctx.device, needs, _drv.cuGraphAddBatchMemOpNode)
            p = _drv.CUDA_BATCH_MEM_OP_NODE_PARAMS()
            p.ctx = site.ctx_handle()
            p.count = len(lst)
            p.paramArray = [op._params for op in lst]
            p.flags = 0
            nh = _calls.cuGraphAddBatchMemOpNode(site.gh, site.deps, len(site.deps), p)
            targets = tuple(op._target for op in lst if op._target is not None)
            return site.added(nh, *targets)  # type: ignore[no-any-return]

    def add_alloc(
        self, nbytes: int, *, after: GraphNode | Iterable[GraphNode] | None = None
    ) -> AllocNode:
        """Add a device-memory allocation node (``cuGraphAddMemAllocNode``).

        Returns an :class:`AllocNode` whose ``ptr`` the graph's later nodes use; free
        it with :meth:`add_free` (or instantiate with ``auto_free_on_launch=True``).
        A graph with allocation nodes has one executable graph at a time.
        """
        n = nbytes_arg(nbytes)
        with _adding(self, after) as site:
            p = _drv.CUDA_MEM_ALLOC_NODE_PARAMS()
            p.poolProps.allocType = _drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
            p.poolProps.location.type = _drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            p.poolProps.location.id = site.ctx.device.ordinal if site.ctx is not None else 0
            p.bytesize = n
            nh = _calls.cuGraphAddMemAllocNode(site.gh, site.deps, len(site.deps), p)
            node: AllocNode = site.added(nh, cls=AllocNode)
            node._ptr = int(p.dptr)
            node._nbytes = n
            return node

    def add_free(
        self, ptr: AllocNode | int, *, after: GraphNode | Iterable[GraphNode] | None = None
    ) -> GraphNode:
        """Add a node freeing a graph allocation (``cuGraphAddMemFreeNode``).

        ``ptr`` is an :class:`AllocNode` (of this graph or another) or its address.
        """
        a = ptr.ptr if isinstance(ptr, AllocNode) else device_address(ptr)[0]
        with _adding(self, after) as site:
            nh = _calls.cuGraphAddMemFreeNode(
                site.gh, site.deps, len(site.deps), _drv.CUdeviceptr(a)
            )
            return site.added(nh)  # type: ignore[no-any-return]

    def add_child_graph(
        self, graph: Graph, *, after: GraphNode | Iterable[GraphNode] | None = None
    ) -> GraphNode:
        """Add a copy of ``graph`` as one node (``cuGraphAddChildGraphNode``).

        The copy is made now: later changes to ``graph`` do not reach it, and ``graph``
        may be closed. What ``graph`` keeps alive is kept by this graph too.
        """
        if not isinstance(graph, Graph):
            raise TypeError(f"add_child_graph takes a cudriver.Graph, not {type(graph).__name__}")
        with _adding(self, after, graph) as site:
            nh = _calls.cuGraphAddChildGraphNode(site.gh, site.deps, len(site.deps), graph.handle)
            return site.added(nh, *graph._top()._keep)  # type: ignore[no-any-return]

    def add_dependency(self, before: GraphNode, node: GraphNode) -> None:
        """Make ``node`` run after ``before`` (``cuGraphAddDependencies``)."""
        deps = _deps(self, [before, node])
        with _adding(self, None) as site:
            _cuGraphAddDependencies(site.gh, [deps[0]], [deps[1]])

    def nodes(self) -> list[GraphNode]:
        """The graph's nodes (``cuGraphGetNodes``), e.g. to update a captured kernel."""
        with _adding(self, None) as site:
            n = int(outs(_calls.cuGraphGetNodes(site.gh, 0))[-1])
            found = outs(_calls.cuGraphGetNodes(site.gh, n))[0] if n else []
        return [GraphNode._new(h, self) for h in list(found)[:n]]

    # -- conditionals -----------------------------------------------------------------
    def conditional_handle(self, default: int | None = None) -> ConditionalHandle:
        """Make a conditional handle for this graph (``cuGraphConditionalHandleCreate``).

        Parameters
        ----------
        default
            When given, every launch of the executable graph starts with the condition
            set to it (``CU_GRAPH_COND_ASSIGN_DEFAULT``); otherwise a kernel must set it
            before the conditional node runs.
        """
        flags, value = 0, 0
        if default is not None:
            flags, value = _ASSIGN_DEFAULT, uint_arg(default, "default", 32)
        with _adding(self, None) as site:
            h = _calls.cuGraphConditionalHandleCreate(site.gh, site.ctx_handle(), value, flags)
        return ConditionalHandle(int(h))

    def add_conditional(
        self,
        handle: ConditionalHandle,
        kind: ConditionalType | int,
        size: int = 1,
        *,
        after: GraphNode | Iterable[GraphNode] | None = None,
    ) -> ConditionalNode:
        """Add a conditional node (``cuGraphAddNode``) with ``size`` empty bodies.

        See :meth:`add_if`, :meth:`add_while` and :meth:`add_switch`.
        """
        if not isinstance(handle, ConditionalHandle):
            raise TypeError(
                "handle must be a cudriver.ConditionalHandle (from Graph.conditional_handle), "
                f"not {type(handle).__name__}"
            )
        k = ConditionalType(int(kind))
        n = uint_arg(size, "size", 32)
        if n < 1:
            raise ValueError("a conditional node needs at least one body")
        with _adding(self, after) as site:
            p = _drv.CUgraphNodeParams()
            p.type = _drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
            p.conditional.handle = _drv.CUgraphConditionalHandle(int(handle))
            p.conditional.type = _drv.CUgraphConditionalNodeType(int(k))
            p.conditional.size = n
            p.conditional.ctx = site.ctx_handle()
            nh = _cuGraphAddNode(site.gh, site.deps, p)
            # Copied out of the struct (its fields are views into it).
            bodies = [_drv.CUgraph(int(b)) for b in list(p.conditional.phGraph_out)[:n]]
            node: ConditionalNode = site.added(nh, cls=ConditionalNode)
            node._bodies = tuple(type(self)._body(b, self) for b in bodies)
            return node

    def add_if(
        self,
        handle: ConditionalHandle,
        *,
        with_else: bool = False,
        after: GraphNode | Iterable[GraphNode] | None = None,
    ) -> ConditionalNode:
        """Add an IF node: ``bodies[0]`` runs when the condition is non-zero.

        With ``with_else``, ``bodies[1]`` runs when it is zero (needs a CUDA 12.8+ driver).
        """
        size = 2 if with_else else 1
        return self.add_conditional(handle, ConditionalType.IF, size, after=after)

    def add_while(
        self, handle: ConditionalHandle, *, after: GraphNode | Iterable[GraphNode] | None = None
    ) -> ConditionalNode:
        """Add a WHILE node: its body runs again and again while the condition is non-zero.

        The condition is tested before each run (set it with ``default=`` or a kernel
        before the node) and set by the body's kernels, typically to end the loop.
        """
        return self.add_conditional(handle, ConditionalType.WHILE, 1, after=after)

    def add_switch(
        self,
        handle: ConditionalHandle,
        cases: int,
        *,
        after: GraphNode | Iterable[GraphNode] | None = None,
    ) -> ConditionalNode:
        """Add a SWITCH node with ``cases`` bodies: body ``n`` runs when the condition is ``n``.

        Needs a CUDA 12.8+ driver. A condition of ``cases`` or more runs no body.
        """
        return self.add_conditional(handle, ConditionalType.SWITCH, cases, after=after)

    @property
    @pinned
    @_serialized
    def num_nodes(self) -> int:
        """Number of nodes (``cuGraphGetNodes``)."""
        _nodes, n = _cd.cuGraphGetNodes(self.handle, 0)
        return int(n)

    @pinned
    @_serialized
    def clone(self) -> Graph:
        """A copy of the graph (``cuGraphClone``) that keeps the same objects alive."""
        h = _cd.cuGraphClone(self.handle)
        return Graph._from_handle(h, keep=list(self._keep), context=self._context)

    @pinned
    @_serialized
    def to_dot(self, path: str | os.PathLike[str] | None = None, *, verbose: bool = False) -> str:
        """The graph in DOT format (``cuGraphDebugDotPrint``); also written to ``path``.

        Writes a temporary file when ``path`` is None.
        """
        h = self.handle
        flags = int(_drv.CUgraphDebugDot_flags.CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE) if verbose else 0
        if path is not None:
            target = os.fspath(path)
            _cd.cuGraphDebugDotPrint(h, target.encode(), flags)
            with open(target, encoding="utf-8", errors="replace") as f:
                return f.read()
        fd, tmp = tempfile.mkstemp(suffix=".dot", prefix="cudriver-graph-")
        os.close(fd)
        try:
            _cd.cuGraphDebugDotPrint(h, tmp.encode(), flags)
            with open(tmp, encoding="utf-8", errors="replace") as f:
                return f.read()
        finally:
            os.unlink(tmp)

    @pinned
    @_serialized
    def instantiate(
        self,
        *,
        auto_free_on_launch: bool = False,
        upload_stream: StreamLike = None,
        device_launch: bool = False,
        use_node_priority: bool = False,
    ) -> GraphExec:
        """Make an executable graph (``cuGraphInstantiate``/``cuGraphInstantiateWithParams``).

        Parameters
        ----------
        auto_free_on_launch
            Free memory allocated by the graph's allocation nodes when it is
            launched again without having been freed.
        upload_stream
            Upload the executable graph on this stream as part of instantiation.
        device_launch
            Allow launching the graph from the device.
        use_node_priority
            Honour per-node priorities instead of the launch stream's.

        Notes
        -----
        Allocates device resources; does not synchronise.
        """
        h = self.handle
        auto_free_on_launch = bool_arg(auto_free_on_launch, "auto_free_on_launch")
        device_launch = bool_arg(device_launch, "device_launch")
        use_node_priority = bool_arg(use_node_priority, "use_node_priority")
        flags = 0
        if auto_free_on_launch:
            flags |= int(_F.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
        if device_launch:
            flags |= int(_F.CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
        if use_node_priority:
            flags |= int(_F.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)
        if upload_stream is None:
            eh = _cuGraphInstantiate(h, flags)
        else:
            params = _drv.CUDA_GRAPH_INSTANTIATE_PARAMS()
            params.flags = flags | int(_F.CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
            params.hUploadStream = stream_handle(upload_stream)
            r = _drv.cuGraphInstantiateWithParams(h, params)
            if r[0] is not SUCCESS:
                detail = None
                res = getattr(params, "result_out", None)
                if res is not None and int(res) != 0:
                    detail = f"instantiate result {_drv.CUgraphInstantiateResult(int(res)).name}"
                raise error_for(r[0], _drv.cuGraphInstantiateWithParams, detail)
            eh = r[1]
        return GraphExec._new(eh, self)

    def _repr_extra(self) -> str:
        return "body" if self._root is not None else ""


# -- where a node goes ------------------------------------------------------------------------
class _Site:
    """The graph a node is added to, its dependencies, and the capturing stream if any."""

    __slots__ = ("ctx", "deps", "gh", "graph", "stream_h")

    def __init__(
        self, graph: Graph, gh: Any, deps: list[Any], stream_h: Any, ctx: Context | None
    ) -> None:
        self.graph = graph
        self.gh = gh
        self.deps = deps
        self.stream_h = stream_h
        self.ctx = ctx

    def ctx_handle(self) -> Any:
        """The context of the graph's work, or the current one for a foreign graph."""
        if self.ctx is not None:
            return self.ctx._live()
        return _calls.cuCtxGetCurrent()

    def added(self, nh: Any, *keep: Any, cls: type[GraphNode] = GraphNode) -> Any:
        """Wrap the new node, keep ``keep`` with the graph and, in a capture, move on."""
        if self.stream_h is not None:
            _cuUpdateCaptureDependencies(self.stream_h, [nh], _SET_DEPS)
            if keep:
                capture.keep(self.stream_h, *keep)
        elif keep:
            capture.hold(self.graph._top()._keep, keep)
        return cls._new(nh, self.graph)


def _deps(graph: Graph, after: Any) -> list[Any]:
    if after is None:
        return []
    nodes = [after] if isinstance(after, GraphNode) else list(after)
    out: list[Any] = []
    for n in nodes:
        if not isinstance(n, GraphNode):
            raise TypeError(f"after= takes GraphNode objects, not {type(n).__name__}")
        if n._graph is not graph:
            raise ValueError(
                f"{n!r} belongs to another graph: a node can only depend on nodes of its own graph"
            )
        out.append(n._h)
    return out


@contextlib.contextmanager
def _adding(graph: Graph, after: Any, *objs: Any) -> Iterator[_Site]:
    """Pin what the new node touches and say where it goes (see the module docstring).

    Holds the top-level graph's lock meanwhile: the driver does not synchronise graph
    objects (see :func:`_serialized`).
    """
    top = graph._top()
    with top._lock:
        stream = top._capturing_stream()
        # A graph a capture is filling has no handle of its own yet: pin the stream.
        target = stream if graph is top and stream is not None else graph
        states = _pins.pin_all(target, *objs)
        try:
            site = _site(graph, top, stream, after)
            ctx = site.ctx
            with ctx._scope() if ctx is not None else contextlib.nullcontext():
                yield site
        finally:
            _pins.unpin_all(states)


def _site(graph: Graph, top: Graph, stream: Any, after: Any) -> _Site:
    if stream is None:
        return _Site(graph, graph._h, _deps(graph, after), None, top._context)
    if graph is not top:  # a conditional body while the capture goes on
        _active_capture(top, stream._h)
        return _Site(graph, graph._h, _deps(graph, after), None, stream._context)
    if after is not None:
        raise ValueError(
            "after= is for graphs built node by node: inside a capture a node goes "
            "after the work captured so far on the stream"
        )
    ci = _active_capture(top, stream._h)
    return _Site(graph, ci.graph, ci.dependencies, stream._h, stream._context)


def _active_capture(top: Graph, stream_h: Any) -> _bindings.CaptureInfo:
    ci = capture.info(stream_h)
    session = top._session
    if session is None or session.closed or int(ci.status) != CaptureStatus.ACTIVE:
        raise StreamCaptureError(
            _CUresult.CUDA_ERROR_ILLEGAL_STATE,
            "cuStreamGetCaptureInfo",
            "the capture filling this graph is no longer active",
        )
    if ci.id != session.id:  # pragma: no cover - a new capture on the same stream
        raise StreamCaptureError(
            _CUresult.CUDA_ERROR_ILLEGAL_STATE,
            "cuStreamGetCaptureInfo",
            "another capture is running",
        )
    return ci


def _event(event: Any) -> Event:
    if not isinstance(event, Event):
        raise TypeError(f"expected a cudriver.Event, not {type(event).__name__}")
    return event


class GraphExec(Handle, GraphExecCore):
    """An executable graph (``cuGraphInstantiate``; ``cuGraphExecDestroy`` on close).

    Keeps alive everything the graph it was made from refers to, so replays never
    touch freed memory, also after the :class:`Graph` is closed.
    """

    # _host_records and _streams live in GraphExecCore (C fields, or slots in pure mode).
    __slots__ = ("_context", "_keeps", "_lock", "_node_keeps", "_source")

    _kind = "GraphExec"

    _keeps: list[list[Any]]
    _context: Context | None
    _host_records: list[Any]
    _streams: set[int] | None
    # The graph it was made from (its nodes are the ones per-node updates name), and
    # what each updated node's current parameters keep (also listed in _keeps).
    _source: weakref.ref[Graph]
    _node_keeps: dict[int, list[Any]]
    _lock: threading.Lock

    def __init__(self) -> None:
        raise TypeError("use Graph.instantiate()")

    @classmethod
    def _new(cls, h: Any, graph: Graph) -> GraphExec:
        self = cls.__new__(cls)
        keeps = [graph._keep]
        self._keeps = keeps
        self._context = graph._context
        self._host_records = _host_records(graph._keep)
        self._source = weakref.ref(graph)
        self._node_keeps = {}
        self._lock = threading.Lock()
        # The streams it was launched on, tracked only when it uses stream-ordered
        # memory: freeing that memory is then ordered after those launches.
        streams: set[int] = set()
        self._streams = streams if _uses_ordered_memory(keeps) else None
        self._init_handle(
            h,
            release=functools.partial(_destroy_exec, graph._serial()),
            func="cuGraphExecDestroy",
            # What it keeps goes only once it is destroyed (after the fence below).
            keep=(graph._context, keeps),
            on_release=functools.partial(_fence, keeps, streams),
        )
        return self

    def _launch_slow(self, stream: StreamLike) -> None:
        """The slow path of :meth:`GraphExec.launch` (what the compiled body leaves)."""
        if GUARD.armed:
            GUARD.check()
        # The graph and the stream stay pinned for the calls.
        pins = pin2(self, stream)
        try:
            h = self._state.handle
            sh = stream_handle(stream)
            if self._host_records:
                key = int(sh)
                for rec in self._host_records:
                    rec.stream_key = key
            if capture.ACTIVE:
                capture.keep(sh, list(self._keeps))
            if _hooks.MARKS:
                _hooks.mark("GraphExec.launch")
            r = _drv.cuGraphLaunch(h, sh)
        finally:
            unpin2(*pins)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuGraphLaunch)
        if self._streams is not None:
            self._streams.add(int(sh))

    @pinned
    def _upload_slow(self, stream: StreamLike) -> None:
        """The slow path of :meth:`GraphExec.upload` (what the compiled body leaves)."""
        _cd.cuGraphUpload(self.handle, stream_handle(stream))

    @pinned
    @_serialized
    def update(self, graph: Graph) -> None:
        """Update this executable graph in place from ``graph`` (``cuGraphExecUpdate``).

        ``graph`` must have the same topology (same nodes, edges and node types);
        kernel arguments, memory addresses and memop values may differ.

        Raises
        ------
        GraphUpdateError
            The driver refused the update; ``result`` and ``reason`` say why and
            ``node`` which node, when the driver names one. This executable graph is
            left unchanged and usable.
        """
        h = self.handle
        if not isinstance(graph, Graph):
            raise TypeError(f"update() takes a cudriver.Graph, not {type(graph).__name__}")
        with graph._serial():
            status, info = _bindings.graph_exec_update(h, graph.handle)
        if status is not SUCCESS:
            if info is None:
                raise error_for(status, _drv.cuGraphExecUpdate)
            code = int(info.result)
            try:
                rname = _drv.CUgraphExecUpdateResult(code).name
            except ValueError:
                rname = f"update result {code}"
            node = _drv.CUgraphNode(info.errorNode) if info.errorNode else None
            reason = _UPDATE_REASONS.get(code, "the driver refused the update")
            if node is not None:
                reason = f"{reason} (at node {int(node):#x})"
            raise GraphUpdateError(status, "cuGraphExecUpdate", rname, reason, node)
        # The replaced graph's objects are no longer used by later launches. Launches
        # of it still in flight are covered: host functions hold their own records
        # until they run, synchronous frees wait for the device, and stream-ordered
        # frees are ordered after the streams it was launched on (the fence).
        keeps = self._keeps
        _fence(keeps, self._streams or set())
        keeps[:] = [graph._keep]
        self._node_keeps.clear()
        self._host_records = _host_records(graph._keep)
        if self._streams is None and _uses_ordered_memory(keeps):
            self._streams = set()

    # -- per-node updates ------------------------------------------------------------
    @pinned
    @_serialized
    def set_kernel_args(
        self,
        node: GraphNode,
        *args: Any,
        grid: Any = None,
        block: Any = None,
        shared_mem: int | None = None,
    ) -> None:
        """Give a kernel node new arguments (``cuGraphExecKernelNodeSetParams``).

        Later launches of this executable graph use them; the :class:`Graph` is not
        changed. ``grid``, ``block`` and ``shared_mem`` default to the node's. The node
        is one of the graph this was made from (added with ``add_kernel``, or found
        with :meth:`Graph.nodes`); the kernel stays the same. The arguments are kept
        alive, the previous ones let go (ordered after launches in flight).
        """
        with self._node(node) as nh:
            kernel, g, b, shm = launch_of(node)
            g = g if grid is None else grid
            b = b if block is None else block
            shm = shm if shared_mem is None else shared_mem
            p, packed, _launch = kernel_params(kernel, g, b, shm, args)
            _cd.cuGraphExecKernelNodeSetParams(self.handle, nh, p)
            del packed
            self._keep_for(nh, (kernel, tuple(a for a in args if not isinstance(a, GraphNode))))

    @pinned
    @_serialized
    def set_memcpy(self, node: GraphNode, dst: Any, src: Any, nbytes: int | None = None) -> None:
        """Give a copy node new operands (``cuGraphExecMemcpyNodeSetParams``).

        As :meth:`Graph.add_memcpy`; the driver requires the same kinds of memory (and
        devices) as the node had.
        """
        p, keep = memcpy_params(dst, src, nbytes)
        with self._node(node) as nh:
            ctx = self._context._live() if self._context is not None else _drv.CUcontext(0)
            _cd.cuGraphExecMemcpyNodeSetParams(self.handle, nh, p, ctx)
            self._keep_for(nh, keep)

    @pinned
    @_serialized
    def set_memset(
        self,
        node: GraphNode,
        dst: Any,
        value: Any,
        *,
        element_size: int | None = None,
        count: int | None = None,
        width: int | None = None,
    ) -> None:
        """Give a memset node new parameters (``cuGraphExecMemsetNodeSetParams``).

        As :meth:`Graph.add_memset`; the driver requires the same element size.
        ``width`` is the deprecated name of ``element_size``.
        """
        if width is not None:
            element_size = renamed_keyword(
                "set_memset", "width", width, "element_size", element_size
            )
        p, keep = memset_params(dst, value, element_size, count)
        with self._node(node) as nh:
            ctx = self._context._live() if self._context is not None else _drv.CUcontext(0)
            _cd.cuGraphExecMemsetNodeSetParams(self.handle, nh, p, ctx)
            self._keep_for(nh, (keep,) if keep is not None else ())

    @pinned
    @_serialized
    def set_enabled(self, node: GraphNode, enabled: bool) -> None:
        """Enable or disable a node for later launches (``cuGraphNodeSetEnabled``).

        A disabled node does nothing (as an empty node) but keeps its parameters.
        Kernel, memcpy and memset nodes can be disabled (the driver's rule).
        """
        flag = bool_arg(enabled, "enabled")
        with self._node(node) as nh:
            _cd.cuGraphNodeSetEnabled(self.handle, nh, 1 if flag else 0)

    @pinned
    @_serialized
    def is_enabled(self, node: GraphNode) -> bool:
        """Whether ``node`` runs in later launches (``cuGraphNodeGetEnabled``)."""
        with self._node(node) as nh:
            return bool(_cd.cuGraphNodeGetEnabled(self.handle, nh))

    def _serial(self) -> threading.Lock:
        return self._lock

    def _node(self, node: Any) -> Any:
        """``node``'s handle, pinned, after checking it is a node of the source graph."""
        if not isinstance(node, GraphNode):
            raise TypeError(f"expected a cudriver.GraphNode, not {type(node).__name__}")
        source = self._source()
        if source is None or node._graph._top() is not source:
            raise ValueError(
                f"{node!r} is not a node of the graph this executable graph was made from"
            )
        return node._pinned()

    def _keep_for(self, nh: Any, objs: tuple[Any, ...]) -> None:
        """Keep ``objs`` for node ``nh``'s new parameters; let the previous ones go."""
        new: list[Any] = []
        capture.hold(new, objs)
        keeps = self._keeps
        old = self._node_keeps.pop(int(nh), None)
        if old is not None:
            _fence([old], self._streams or set())
            keeps[:] = [k for k in keeps if k is not old]
        keeps.append(new)
        self._node_keeps[int(nh)] = new
        if self._streams is None and _uses_ordered_memory([new]):
            self._streams = set()

    def close(self) -> None:
        """Destroy the executable graph (``cuGraphExecDestroy``); idempotent.

        Launches in flight complete (the driver frees the graph afterwards); what it
        kept alive is let go, ordered after them (see :meth:`update`).
        """
        super().close()
        self._host_records = []
        self._keeps = []
        self._node_keeps = {}

    def _repr_extra(self) -> str:
        return ""


def _destroy_exec(lock: threading.RLock, h: Any) -> Any:
    """``cuGraphExecDestroy`` under the lock of the graph the executable was made from.

    The driver does not order the destroy with calls on that graph made by other
    threads (measured with cuda-bindings 12.9: a destroy while two threads added nodes to
    the source graph and read its nodes crashed the process), so it runs under the lock
    that serialises those calls.
    """
    with lock:
        return _drv.cuGraphExecDestroy(h)


def _host_records(keep: list[Any]) -> list[HostFuncRecord]:
    return [o for o in keep if isinstance(o, HostFuncRecord)]


def _leased_memory(keeps: list[list[Any]]) -> list[DeviceMemory]:
    return [
        o.target
        for keep in keeps
        for o in keep
        if isinstance(o, Lease) and isinstance(o.target, DeviceMemory)
    ]


def _uses_ordered_memory(keeps: list[list[Any]]) -> bool:
    return any(m._producer_stream() is not None for m in _leased_memory(keeps))


def _fence(keeps: list[list[Any]], streams: set[int]) -> None:
    """Order the stream-ordered frees of what ``keeps`` holds after launches on ``streams``."""
    if streams:
        for m in _leased_memory(keeps):
            for key in streams:
                m._note_use(key)
