"""Graphs built node by node: :class:`GraphBuilder`, the ``Graph.add_*`` methods.

``Graph`` inherits them; the nodes they return and the parameter builders they share
with :class:`~cudriver.GraphExec`'s per-node updates are in ``graphnode``.

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
by every :class:`~cudriver.GraphExec` made from it. A conditional node's bodies
belong to its graph: closing the graph closes them and their nodes.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from cuda.bindings import driver as _drv

from .._launch.kernel import Kernel
from .._launch.launch import NO_BLOCK, LaunchConfig, shape_of
from .._lifetime import _hostfn, _pins, capture
from .._lifetime._coerce import device_address, nbytes_arg, renamed_keyword, uint_arg
from .._runtime import _bindings, _calls
from .._runtime._bindings import SUCCESS
from .._runtime._enums import CaptureStatus, ConditionalType
from .._work.event import Event
from .._work.memops import MemOp, _check_ops, require
from ..errors import StreamCaptureError, checked, error_for
from .graphnode import (
    AllocNode,
    ConditionalHandle,
    ConditionalNode,
    GraphNode,
    kernel_params,
    memcpy_params,
    memset_params,
    outs,
)

if TYPE_CHECKING:
    from .._context.device import Context
    from .graph import Graph

__all__ = ["GraphBuilder"]

_cuGraphAddNode = checked(_bindings.graph_add_node, name="cuGraphAddNode")
_cuGraphAddDependencies = checked(_bindings.graph_add_dependencies, name="cuGraphAddDependencies")
_cuUpdateCaptureDependencies = checked(
    _bindings.update_capture_dependencies, name="cuStreamUpdateCaptureDependencies"
)
_SET_DEPS = int(_drv.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES)
_ASSIGN_DEFAULT = int(_drv.CU_GRAPH_COND_ASSIGN_DEFAULT)
_R = _drv.CUresult


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
            return self.ctx.handle
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
    objects (see ``graph._serialized``).
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
            _R.CUDA_ERROR_ILLEGAL_STATE,
            "cuStreamGetCaptureInfo",
            "the capture filling this graph is no longer active",
        )
    if ci.id != session.id:  # pragma: no cover - a new capture on the same stream
        raise StreamCaptureError(
            _R.CUDA_ERROR_ILLEGAL_STATE, "cuStreamGetCaptureInfo", "another capture is running"
        )
    return ci


# -- the node methods of Graph ------------------------------------------------------------
class GraphBuilder:
    """The methods that add nodes to a :class:`~cudriver.Graph` (``Graph`` inherits them).

    Every ``add_*`` method takes ``after=`` (a node or an iterable of nodes of the same
    graph; default none) and returns the new :class:`GraphNode`. Each allocates in the
    driver and does not synchronise.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        _h: Any
        _keep: list[Any]
        _context: Context | None
        _session: capture.CaptureSession | None
        _stream: weakref.ref[Any] | None

        def _top(self) -> Graph: ...
        def _serial(self) -> Any: ...
        def _live(self) -> bool: ...
        def _raise_closed(self) -> NoReturn: ...
        def _capturing_stream(self) -> Any: ...
        @classmethod
        def _body(cls, h: Any, parent: Graph) -> Graph: ...

    def _self(self) -> Graph:
        return self  # type: ignore[return-value]

    def add_empty(self, *, after: GraphNode | Iterable[GraphNode] | None = None) -> GraphNode:
        """Add an empty node (``cuGraphAddEmptyNode``): a join point for dependencies."""
        with _adding(self._self(), after) as site:
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
        g = self._self()
        with _adding(g, after, kernel, *args) as site:
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
        with _adding(self._self(), after, dst, src) as site:
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
        with _adding(self._self(), after, dst) as site:
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
        with _adding(self._self(), after) as site:
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
        with _adding(self._self(), after, ev) as site:
            nh = _calls.cuGraphAddEventRecordNode(site.gh, site.deps, len(site.deps), ev.handle)
            return site.added(nh, ev)  # type: ignore[no-any-return]

    def add_event_wait(
        self, event: Event, *, after: GraphNode | Iterable[GraphNode] | None = None
    ) -> GraphNode:
        """Add a node waiting for ``event``'s last record (``cuGraphAddEventWaitNode``)."""
        ev = _event(event)
        with _adding(self._self(), after, ev) as site:
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
        with _adding(self._self(), after) as site:
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
        with _adding(self._self(), after) as site:
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
        with _adding(self._self(), after) as site:
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
        if not isinstance(graph, GraphBuilder):
            raise TypeError(f"add_child_graph takes a cudriver.Graph, not {type(graph).__name__}")
        child: Graph = graph
        with _adding(self._self(), after, child) as site:
            nh = _calls.cuGraphAddChildGraphNode(site.gh, site.deps, len(site.deps), child.handle)
            return site.added(nh, *child._top()._keep)  # type: ignore[no-any-return]

    def add_dependency(self, before: GraphNode, node: GraphNode) -> None:
        """Make ``node`` run after ``before`` (``cuGraphAddDependencies``)."""
        g = self._self()
        deps = _deps(g, [before, node])
        with _adding(g, None) as site:
            _cuGraphAddDependencies(site.gh, [deps[0]], [deps[1]])

    def nodes(self) -> list[GraphNode]:
        """The graph's nodes (``cuGraphGetNodes``), e.g. to update a captured kernel."""
        g = self._self()
        with _adding(g, None) as site:
            n = int(outs(_calls.cuGraphGetNodes(site.gh, 0))[-1])
            found = outs(_calls.cuGraphGetNodes(site.gh, n))[0] if n else []
        return [GraphNode._new(h, g) for h in list(found)[:n]]

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
        g = self._self()
        with _adding(g, None) as site:
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
        g = self._self()
        with _adding(g, after) as site:
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
            node._bodies = tuple(type(g)._body(b, g) for b in bodies)
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


def _event(event: Any) -> Event:
    if not isinstance(event, Event):
        raise TypeError(f"expected a cudriver.Event, not {type(event).__name__}")
    return event
