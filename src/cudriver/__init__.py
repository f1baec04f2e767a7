"""cudriver: a thin, typed, owning layer over ``cuda.bindings.driver``.

Everything public is importable from this package; see the module of each name for
details. Importing works on a machine without a GPU; the first call that needs the
driver raises :class:`DriverNotFoundError` there.
"""

from __future__ import annotations

from . import driver
from ._memops import MAX_BATCH_MEM_OPS, MemOp, MemOpType, WaitCondition
from ._runtime import driver_version, init, is_initialized
from .context import Context, ContextFlags, Limit
from .device import ComputeCapability, Device, DeviceAttribute
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
    LaunchError,
    NoDeviceError,
    NotFoundError,
    NotInitializedError,
    NotPermittedError,
    NotReadyError,
    NotSupportedError,
    OutOfMemoryError,
    StreamCaptureError,
    check,
    checked,
)
from .event import Event
from .graph import CaptureMode, CaptureStatus, Graph, GraphExec
from .memory import DeviceBuffer, PinnedBuffer, SupportsCudaArrayInterface
from .module import FunctionAttribute, Kernel, LaunchPlan, Module, ParamInfo
from .program import NvrtcNotFoundError, compile, nvrtc_version
from .stream import (
    AccessPolicyWindow,
    AccessProperty,
    MemAttach,
    Stream,
    StreamLike,
    SupportsCudaStream,
    SyncPolicy,
)

__version__ = "0.1.0"


def bindings_version() -> str:
    """The installed ``cuda.bindings`` version string."""
    from ._bindings import version_string

    return version_string()


__all__ = [
    "__version__",
    "bindings_version",
    "driver",
    "driver_version",
    "init",
    "is_initialized",
    "Context",
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
    "DeviceBuffer",
    "PinnedBuffer",
    "SupportsCudaArrayInterface",
    "Module",
    "Kernel",
    "LaunchPlan",
    "FunctionAttribute",
    "ParamInfo",
    "compile",
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
