"""Graph nodes and their parameters: :class:`GraphNode` and its kinds, conditional handles.

The parameter builders here (:func:`kernel_params`, :func:`memcpy_params`,
:func:`memset_params`) validate their inputs before any driver call and are shared by
the ``Graph.add_*`` methods and the per-node updates of :class:`~cudriver.GraphExec`
(both in ``graph``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from cuda.bindings import driver as _drv

from .._launch.kernel import Kernel
from .._lifetime import _pins
from .._lifetime._coerce import device_address, dims, nbytes_arg, shared_mem, uint_arg
from .._memory._copy import fill_args, memory_side, operand
from .._runtime import _calls
from .._runtime._enums import GraphNodeType

if TYPE_CHECKING:
    from .graph import Graph

__all__ = [
    "GraphNode",
    "ConditionalNode",
    "AllocNode",
    "ConditionalHandle",
    "kernel_params",
    "memcpy_params",
    "memset_params",
    "launch_of",
    "outs",
]

_MT = _drv.CUmemorytype


class ConditionalHandle(int):
    """A graph's conditional handle (``CUgraphConditionalHandle``), an int.

    Made by :meth:`Graph.conditional_handle`; pass it to a kernel (a 64-bit
    parameter, ``cudaGraphConditionalHandle`` in CUDA C++) that sets it with
    ``cudaGraphSetConditional(handle, value)``, and to :meth:`Graph.add_if`,
    :meth:`Graph.add_while` or :meth:`Graph.add_switch`.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<cudriver.ConditionalHandle {int(self)}>"


class GraphNode:
    """A node of a :class:`~cudriver.Graph` (a ``CUgraphNode``, owned by its graph).

    Returned by the ``Graph.add_*`` methods and :meth:`Graph.nodes`. Usable while its
    graph is open (a node of a closed graph raises :class:`~cudriver.ClosedError`);
    pass it as ``after=`` to order new nodes after it, or to the per-node updates of
    a :class:`~cudriver.GraphExec` made from its graph.
    """

    __slots__ = ("__weakref__", "_graph", "_h", "_launch")

    _h: Any
    _graph: Graph
    # (kernel, grid, block, shared_mem) of a kernel node added through add_kernel.
    _launch: tuple[Kernel, tuple[int, int, int], tuple[int, int, int], int] | None

    def __init__(self) -> None:
        raise TypeError("nodes are made by the Graph.add_* methods and Graph.nodes()")

    @classmethod
    def _new(cls, h: Any, graph: Graph) -> Any:
        self = cls.__new__(cls)
        self._h = h
        self._graph = graph
        self._launch = None
        return self

    @property
    def handle(self) -> Any:
        """The ``CUgraphNode``; raises ClosedError once the graph is closed."""
        if not self._graph._live():
            self._graph._raise_closed()
        return self._h

    @property
    def graph(self) -> Graph:
        """The graph this node belongs to."""
        return self._graph

    @property
    def type(self) -> GraphNodeType | int:
        """The node's :class:`~cudriver.GraphNodeType` (``cuGraphNodeGetType``)."""
        with self._pinned() as h:
            t = int(_calls.cuGraphNodeGetType(h))
        try:
            return GraphNodeType(t)
        except ValueError:  # a node type newer than this version of cudriver
            return t

    @property
    def dependencies(self) -> list[GraphNode]:
        """The nodes this one runs after (``cuGraphNodeGetDependencies``)."""
        return self._neighbours(_calls.cuGraphNodeGetDependencies)

    @property
    def dependents(self) -> list[GraphNode]:
        """The nodes that run after this one (``cuGraphNodeGetDependentNodes``)."""
        return self._neighbours(_calls.cuGraphNodeGetDependentNodes)

    def _neighbours(self, fn: Callable[..., Any]) -> list[GraphNode]:
        with self._pinned() as h:
            n = int(outs(fn(h, 0))[-1])
            found = outs(fn(h, n))[0] if n else []
        return [GraphNode._new(x, self._graph) for x in list(found)[:n]]

    @contextlib.contextmanager
    def _pinned(self) -> Iterator[Any]:
        """The node's handle, with its graph pinned (see ``_handle.pin``) and locked."""
        with self._graph._serial():
            st = _pins.pin(self._graph) if self._graph._h is not None else None
            try:
                yield self.handle
            finally:
                if st is not None:
                    _pins.unpin(st)

    def __int__(self) -> int:
        return int(self._h)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GraphNode):
            return NotImplemented
        return int(self._h) == int(other._h)

    def __hash__(self) -> int:
        return hash(int(self._h))

    def __repr__(self) -> str:
        return f"<cudriver.{type(self).__name__} {int(self._h):#x}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError(f"a {type(self).__name__} cannot be pickled: it is a driver handle")


class ConditionalNode(GraphNode):
    """A conditional node (IF, WHILE or SWITCH) and its body graphs.

    Fill each body like any graph: with the ``add_*`` methods, or by capturing into it
    (``with other_stream.capture(into=node.body):``). Bodies may hold kernel, memcpy,
    memset, empty, child-graph and conditional nodes (the driver's rule).
    """

    __slots__ = ("_bodies",)

    _bodies: tuple[Graph, ...]

    @property
    def bodies(self) -> tuple[Graph, ...]:
        """The body graphs.

        For IF, ``(then,)`` or ``(then, else)``; for WHILE, the loop; for SWITCH, one per
        case.
        """
        return self._bodies

    @property
    def body(self) -> Graph:
        """The first body (the loop of a WHILE, the "then" of an IF)."""
        return self._bodies[0]


class AllocNode(GraphNode):
    """A memory-allocation node; its memory is valid between it and its free node.

    ``ptr`` is fixed when the node is made and is the same in every replay: pass the
    node (or ``ptr``) to the kernels that use the memory, and free it with
    :meth:`Graph.add_free` (or instantiate with ``auto_free_on_launch=True``).
    """

    __slots__ = ("_nbytes", "_ptr")

    _ptr: int
    _nbytes: int

    @property
    def ptr(self) -> int:
        """The device address of the allocation."""
        return self._ptr

    @property
    def nbytes(self) -> int:
        """The allocation's size in bytes."""
        return self._nbytes


def outs(r: Any) -> tuple[Any, ...]:
    """A checked call's outputs as a tuple (one output comes bare)."""
    return r if isinstance(r, tuple) else (r,)


def kernel_params(
    kernel: Kernel, grid: Any, block: Any, shmem: Any, args: tuple[Any, ...]
) -> tuple[Any, Any, tuple[Any, ...]]:
    """``(CUDA_KERNEL_NODE_PARAMS, the packed arguments, the launch)``; validates all.

    The packed arguments must live until the driver call has copied them.
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a cudriver.Kernel, not {type(kernel).__name__}")
    g = dims(grid, "grid")
    b = dims(block, "block")
    s = shared_mem(shmem)
    packed = kernel.pack(*args)
    p = _drv.CUDA_KERNEL_NODE_PARAMS()
    p.func = kernel._function()  # a LibraryKernel's: the current context's CUfunction
    p.gridDimX, p.gridDimY, p.gridDimZ = g
    p.blockDimX, p.blockDimY, p.blockDimZ = b
    p.sharedMemBytes = s
    p.kernelParams = packed.address
    return p, packed, (kernel, g, b, s)


def memcpy_params(dst: Any, src: Any, nbytes: Any) -> tuple[Any, tuple[Any, ...]]:
    """``(CUDA_MEMCPY3D, objects to keep)`` for a 1-D copy of ``nbytes`` from ``src`` to ``dst``.

    Operands as for :meth:`DeviceBuffer.copy_from`; without ``nbytes`` both must have
    the same size.
    """
    d_dev, d_addr, d_n, d_keep, _ = operand(dst, writable=True, role="dst")
    s_dev, s_addr, s_n, s_keep, _ = operand(src, writable=False, role="src")
    if nbytes is None:
        if d_n != s_n:
            raise ValueError(
                f"src has {s_n} bytes and dst {d_n}: pass nbytes= to copy a part of them"
            )
        n = s_n
    else:
        n = nbytes_arg(nbytes)
        if n > s_n or n > d_n:
            raise ValueError(f"nbytes={n} is more than src ({s_n}) or dst ({d_n}) holds")
    if n == 0:
        raise ValueError("a memcpy node must copy at least one byte")
    p = _drv.CUDA_MEMCPY3D()
    memory_side(p, "src", s_dev, s_addr, s_keep)
    memory_side(p, "dst", d_dev, d_addr, d_keep)
    p.WidthInBytes = n
    p.Height = 1
    p.Depth = 1
    return p, (d_keep, s_keep)


def memset_params(dst: Any, value: Any, element_size: Any, count: Any) -> tuple[Any, Any]:
    """``(CUDA_MEMSET_NODE_PARAMS, object to keep)``: ``count`` elements of ``element_size``."""
    w, v = fill_args(value, element_size)
    addr, size, obj = device_address(dst)
    if count is None:
        if size is None:
            raise ValueError("count= is needed for a destination of unknown size")
        if size % w:
            raise ValueError(f"{size} bytes is not a whole number of {w}-byte elements")
        n = size // w
    else:
        n = uint_arg(count, "count")
        if size is not None and n * w > size:
            raise ValueError(f"count={n} elements of {w} bytes do not fit in {size} bytes")
    if n == 0:
        raise ValueError("a memset node must set at least one element")
    if addr % w:
        raise ValueError(f"address {addr:#x} is not aligned to the {w}-byte element size")
    p = _drv.CUDA_MEMSET_NODE_PARAMS()
    p.dst = addr
    p.pitch = 0
    p.value = v
    p.elementSize = w
    p.width = n
    p.height = 1
    return p, obj


def launch_of(node: GraphNode) -> tuple[Kernel, Any, Any, int]:
    """The kernel and dimensions of a kernel node (recorded, else read from the driver)."""
    if node._launch is not None:
        return node._launch
    with node._pinned() as h:
        p = _calls.cuGraphKernelNodeGetParams(h)
    # A field of a bindings struct is a view into the struct: copy the value out.
    func = int(p.func) if p.func is not None else 0
    if func == 0:
        raise ValueError(f"{node!r} is not a kernel node of a CUfunction")
    kernel = Kernel.from_handle(_drv.CUfunction(func), owner=node._graph)
    grid = (int(p.gridDimX), int(p.gridDimY), int(p.gridDimZ))
    block = (int(p.blockDimX), int(p.blockDimY), int(p.blockDimZ))
    return kernel, grid, block, int(p.sharedMemBytes)
