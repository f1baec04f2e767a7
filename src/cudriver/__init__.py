"""cudriver: a thin, typed, owning layer over ``cuda.bindings.driver``.

Everything public is importable from this package; see the module of each name for
details. Importing works on a machine without a GPU; the first call that needs the
driver raises :class:`DriverNotFoundError` there.
"""

from __future__ import annotations

import inspect
from typing import Any

from . import aio, checkpoint, compat, driver, nccl
from ._context.device import ComputeCapability, Context, Device, mem_get_info
from ._context.green import GreenContext, SMResource, WorkqueueConfig
from ._graph.graph import Graph, GraphExec
from ._graph.graphnode import AllocNode, ConditionalHandle, ConditionalNode, GraphNode
from ._launch._compile_cache import clear_compile_cache, compile_cache_info
from ._launch._packing import PackedArgs, pack_arg
from ._launch.kernel import Kernel, ParamInfo
from ._launch.launch import LaunchConfig
from ._launch.library import Library, LibraryKernel
from ._launch.linker import LinkError, link
from ._launch.module import Module
from ._launch.plan import LaunchPlan
from ._launch.program import CompiledCode, NvrtcNotFoundError, compile, nvrtc_version
from ._lifetime._coerce import StreamLike, SupportsCudaStream
from ._memory._copy import SupportsCudaArrayInterface
from ._memory.accounting import (
    MemoryStats,
    MemoryUsage,
    memory_accounting_enabled,
    memory_snapshot,
    memory_stats,
    memory_summary,
    record_memory_history,
    reset_memory_stats,
    reset_peak_memory_stats,
    save_memory_snapshot,
    set_memory_accounting,
)
from ._memory.arrays import ArrayFormat, CudaArray
from ._memory.copies import copy_2d, copy_3d, copy_peer, memset_2d
from ._memory.managed import (
    HostNuma,
    ManagedBuffer,
    discard_and_prefetch_batch,
    discard_batch,
    prefetch_batch,
)
from ._memory.memory import DeviceBuffer
from ._memory.pinned import PinnedBuffer
from ._memory.pool import KEEP_ALL, ManagedMemoryPool, MemoryPool, PinnedMemoryPool
from ._memory.registered import RegisteredMemory
from ._memory.resource import (
    DeviceResource,
    ManagedResource,
    MemoryResource,
    PinnedResource,
    default_memory_resource,
    set_default_memory_resource,
)
from ._memory.strided import StridedView
from ._memory.tensormap import (
    TensorMap,
    TensorMapDataType,
    TensorMapFloatOOBFill,
    TensorMapInterleave,
    TensorMapL2Promotion,
    TensorMapSwizzle,
)
from ._memory.texture import AddressMode, FilterMode, ReadMode, SurfaceObject, TextureObject
from ._memory.vmm import VirtualBuffer, VirtualMemoryResource
from ._observe.memory_picture import draw_memory as draw_memory_snapshot
from ._observe.memory_picture import load_snapshot as load_memory_snapshot
from ._observe.nvtx import NvtxRange, nvtx_marks_enabled, nvtx_range, set_nvtx_marks
from ._observe.sync_debug import get_sync_debug_mode, set_sync_debug_mode, sync_debug
from ._observe.system import (
    GpuClocks,
    GpuInfo,
    GpuProcess,
    NvmlError,
    SystemInfo,
    TopologyInfo,
    gpu_info,
    system_info,
)
from ._observe.timing import BenchmarkResult, benchmark
from ._runtime import _bindings
from ._runtime._bindings import log_driver_messages
from ._runtime._enums import (
    AccessProperty,
    CaptureMode,
    CaptureStatus,
    ConditionalType,
    ContextFlags,
    DeviceAttribute,
    FunctionAttribute,
    GraphNodeType,
    Limit,
    MemAccess,
    MemAdvise,
    MemAttach,
    MemOpType,
    SyncPolicy,
    WaitCondition,
    WorkqueueScope,
)
from ._runtime._init import driver_version, init, is_initialized
from ._work.event import Event
from ._work.memops import MAX_BATCH_MEM_OPS, MemOp
from ._work.stream import AccessPolicyWindow, Stream
from .errors import (
    ClosedError,
    CompileError,
    CudaError,
    CudaWarning,
    DriverNotFoundError,
    GraphUpdateError,
    HostCallbackError,
    InvalidContextError,
    InvalidDeviceError,
    InvalidHandleError,
    InvalidImageError,
    InvalidValueError,
    LaunchConfigError,
    LaunchError,
    NoDeviceError,
    NotFoundError,
    NotInitializedError,
    NotPermittedError,
    NotReadyError,
    NotSupportedError,
    OutOfMemoryError,
    StreamCaptureError,
    SyncError,
    SyncWarning,
    check,
    checked,
)

__version__ = "0.1.0"


def bindings_version() -> str:
    """The installed ``cuda.bindings`` version string."""
    return _bindings.version_string()


def info() -> dict[str, Any]:
    """What is installed, without calling the driver.

    Returns
    -------
    dict
        ``version`` (cudriver's), ``bindings`` (cuda.bindings'), ``implementation``
        (always ``"compiled"``: the compiled core is part of every install) and
        ``implementation_reason`` (``"compiled core loaded"``).
    """
    return {
        "version": __version__,
        "bindings": _bindings.version_string(),
        "implementation": "compiled",
        "implementation_reason": "compiled core loaded",
    }


__all__ = [
    "__version__",
    "bindings_version",
    "info",
    "driver",
    "aio",
    "nccl",
    "checkpoint",
    "compat",
    "driver_version",
    "init",
    "is_initialized",
    "Context",
    "GreenContext",
    "SMResource",
    "WorkqueueConfig",
    "WorkqueueScope",
    "ContextFlags",
    "Limit",
    "ComputeCapability",
    "Device",
    "DeviceAttribute",
    "Event",
    "Stream",
    "StreamLike",
    "SupportsCudaStream",
    "SyncPolicy",
    "AccessPolicyWindow",
    "AccessProperty",
    "MemAttach",
    "CaptureMode",
    "CaptureStatus",
    "Graph",
    "GraphExec",
    "GraphNode",
    "GraphNodeType",
    "ConditionalNode",
    "ConditionalHandle",
    "ConditionalType",
    "AllocNode",
    "DeviceBuffer",
    "PinnedBuffer",
    "RegisteredMemory",
    "ManagedBuffer",
    "HostNuma",
    "prefetch_batch",
    "discard_batch",
    "discard_and_prefetch_batch",
    "VirtualBuffer",
    "StridedView",
    "MemAdvise",
    "MemoryPool",
    "PinnedMemoryPool",
    "ManagedMemoryPool",
    "MemoryResource",
    "DeviceResource",
    "PinnedResource",
    "ManagedResource",
    "VirtualMemoryResource",
    "set_default_memory_resource",
    "default_memory_resource",
    "MemoryStats",
    "MemoryUsage",
    "set_memory_accounting",
    "memory_accounting_enabled",
    "record_memory_history",
    "memory_stats",
    "reset_peak_memory_stats",
    "reset_memory_stats",
    "memory_summary",
    "memory_snapshot",
    "save_memory_snapshot",
    "load_memory_snapshot",
    "draw_memory_snapshot",
    "nvtx_range",
    "NvtxRange",
    "set_nvtx_marks",
    "nvtx_marks_enabled",
    "set_sync_debug_mode",
    "get_sync_debug_mode",
    "sync_debug",
    "SyncWarning",
    "SyncError",
    "system_info",
    "gpu_info",
    "SystemInfo",
    "GpuInfo",
    "GpuClocks",
    "GpuProcess",
    "TopologyInfo",
    "NvmlError",
    "benchmark",
    "BenchmarkResult",
    "KEEP_ALL",
    "MemAccess",
    "mem_get_info",
    "copy_2d",
    "copy_3d",
    "memset_2d",
    "copy_peer",
    "SupportsCudaArrayInterface",
    "Module",
    "Kernel",
    "Library",
    "LibraryKernel",
    "LaunchPlan",
    "LaunchConfig",
    "FunctionAttribute",
    "ParamInfo",
    "PackedArgs",
    "pack_arg",
    "TensorMap",
    "TensorMapDataType",
    "TensorMapSwizzle",
    "TensorMapInterleave",
    "TensorMapL2Promotion",
    "TensorMapFloatOOBFill",
    "CudaArray",
    "ArrayFormat",
    "TextureObject",
    "SurfaceObject",
    "AddressMode",
    "FilterMode",
    "ReadMode",
    "compile",
    "CompiledCode",
    "link",
    "LinkError",
    "compile_cache_info",
    "log_driver_messages",
    "clear_compile_cache",
    "nvrtc_version",
    "NvrtcNotFoundError",
    "WaitCondition",
    "MemOp",
    "MemOpType",
    "MAX_BATCH_MEM_OPS",
    "ClosedError",
    "CompileError",
    "CudaError",
    "CudaWarning",
    "DriverNotFoundError",
    "GraphUpdateError",
    "HostCallbackError",
    "InvalidContextError",
    "InvalidDeviceError",
    "InvalidHandleError",
    "InvalidImageError",
    "InvalidValueError",
    "LaunchError",
    "LaunchConfigError",
    "NoDeviceError",
    "NotFoundError",
    "NotInitializedError",
    "NotPermittedError",
    "NotReadyError",
    "NotSupportedError",
    "OutOfMemoryError",
    "StreamCaptureError",
    "check",
    "checked",
]


def _publish() -> None:
    """Give every public class and function the public module name ``cudriver``.

    Reprs, tracebacks, pickles and the API reference then show ``cudriver.Stream``,
    not the private module a name is defined in.
    """
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, type) or inspect.isfunction(obj):
            obj.__module__ = __name__


_publish()
