"""The public enums, with the driver's values (``__module__`` is ``"cudriver"``).

Each mirrors one ``cuda.bindings.driver`` enum without its prefix. Wherever cudriver
takes one of them, the bindings' own members and plain ints are accepted too. The value
types made of them live with what takes or returns them: :class:`AccessPolicyWindow`
with streams, :class:`ComputeCapability` with devices.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

__all__ = [
    "DeviceAttribute",
    "ContextFlags",
    "Limit",
    "SyncPolicy",
    "AccessProperty",
    "MemAttach",
    "CaptureMode",
    "CaptureStatus",
    "WaitCondition",
    "MemOpType",
    "FunctionAttribute",
    "GraphNodeType",
    "ConditionalType",
    "WorkqueueScope",
    "MemAccess",
    "MemAdvise",
]


class DeviceAttribute(IntEnum):
    """Device attributes (``CUdevice_attribute`` without its ``CU_DEVICE_ATTRIBUTE_`` prefix).

    Values are the driver's; members of ``cuda.bindings.driver.CUdevice_attribute``
    and plain ints are accepted wherever a ``DeviceAttribute`` is.
    """

    MAX_THREADS_PER_BLOCK = 1
    MAX_BLOCK_DIM_X = 2
    MAX_BLOCK_DIM_Y = 3
    MAX_BLOCK_DIM_Z = 4
    MAX_GRID_DIM_X = 5
    MAX_GRID_DIM_Y = 6
    MAX_GRID_DIM_Z = 7
    MAX_SHARED_MEMORY_PER_BLOCK = 8
    SHARED_MEMORY_PER_BLOCK = 8
    TOTAL_CONSTANT_MEMORY = 9
    WARP_SIZE = 10
    MAX_PITCH = 11
    MAX_REGISTERS_PER_BLOCK = 12
    REGISTERS_PER_BLOCK = 12
    CLOCK_RATE = 13
    TEXTURE_ALIGNMENT = 14
    GPU_OVERLAP = 15
    MULTIPROCESSOR_COUNT = 16
    KERNEL_EXEC_TIMEOUT = 17
    INTEGRATED = 18
    CAN_MAP_HOST_MEMORY = 19
    COMPUTE_MODE = 20
    MAXIMUM_TEXTURE1D_WIDTH = 21
    MAXIMUM_TEXTURE2D_WIDTH = 22
    MAXIMUM_TEXTURE2D_HEIGHT = 23
    MAXIMUM_TEXTURE3D_WIDTH = 24
    MAXIMUM_TEXTURE3D_HEIGHT = 25
    MAXIMUM_TEXTURE3D_DEPTH = 26
    MAXIMUM_TEXTURE2D_LAYERED_WIDTH = 27
    MAXIMUM_TEXTURE2D_ARRAY_WIDTH = 27
    MAXIMUM_TEXTURE2D_LAYERED_HEIGHT = 28
    MAXIMUM_TEXTURE2D_ARRAY_HEIGHT = 28
    MAXIMUM_TEXTURE2D_LAYERED_LAYERS = 29
    MAXIMUM_TEXTURE2D_ARRAY_NUMSLICES = 29
    SURFACE_ALIGNMENT = 30
    CONCURRENT_KERNELS = 31
    ECC_ENABLED = 32
    PCI_BUS_ID = 33
    PCI_DEVICE_ID = 34
    TCC_DRIVER = 35
    MEMORY_CLOCK_RATE = 36
    GLOBAL_MEMORY_BUS_WIDTH = 37
    L2_CACHE_SIZE = 38
    MAX_THREADS_PER_MULTIPROCESSOR = 39
    ASYNC_ENGINE_COUNT = 40
    UNIFIED_ADDRESSING = 41
    MAXIMUM_TEXTURE1D_LAYERED_WIDTH = 42
    MAXIMUM_TEXTURE1D_LAYERED_LAYERS = 43
    CAN_TEX2D_GATHER = 44
    MAXIMUM_TEXTURE2D_GATHER_WIDTH = 45
    MAXIMUM_TEXTURE2D_GATHER_HEIGHT = 46
    MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE = 47
    MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE = 48
    MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE = 49
    PCI_DOMAIN_ID = 50
    TEXTURE_PITCH_ALIGNMENT = 51
    MAXIMUM_TEXTURECUBEMAP_WIDTH = 52
    MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH = 53
    MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS = 54
    MAXIMUM_SURFACE1D_WIDTH = 55
    MAXIMUM_SURFACE2D_WIDTH = 56
    MAXIMUM_SURFACE2D_HEIGHT = 57
    MAXIMUM_SURFACE3D_WIDTH = 58
    MAXIMUM_SURFACE3D_HEIGHT = 59
    MAXIMUM_SURFACE3D_DEPTH = 60
    MAXIMUM_SURFACE1D_LAYERED_WIDTH = 61
    MAXIMUM_SURFACE1D_LAYERED_LAYERS = 62
    MAXIMUM_SURFACE2D_LAYERED_WIDTH = 63
    MAXIMUM_SURFACE2D_LAYERED_HEIGHT = 64
    MAXIMUM_SURFACE2D_LAYERED_LAYERS = 65
    MAXIMUM_SURFACECUBEMAP_WIDTH = 66
    MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH = 67
    MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS = 68
    MAXIMUM_TEXTURE1D_LINEAR_WIDTH = 69
    MAXIMUM_TEXTURE2D_LINEAR_WIDTH = 70
    MAXIMUM_TEXTURE2D_LINEAR_HEIGHT = 71
    MAXIMUM_TEXTURE2D_LINEAR_PITCH = 72
    MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH = 73
    MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT = 74
    COMPUTE_CAPABILITY_MAJOR = 75
    COMPUTE_CAPABILITY_MINOR = 76
    MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH = 77
    STREAM_PRIORITIES_SUPPORTED = 78
    GLOBAL_L1_CACHE_SUPPORTED = 79
    LOCAL_L1_CACHE_SUPPORTED = 80
    MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
    MAX_REGISTERS_PER_MULTIPROCESSOR = 82
    MANAGED_MEMORY = 83
    MULTI_GPU_BOARD = 84
    MULTI_GPU_BOARD_GROUP_ID = 85
    HOST_NATIVE_ATOMIC_SUPPORTED = 86
    SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO = 87
    PAGEABLE_MEMORY_ACCESS = 88
    CONCURRENT_MANAGED_ACCESS = 89
    COMPUTE_PREEMPTION_SUPPORTED = 90
    CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91
    CAN_USE_STREAM_MEM_OPS_V1 = 92
    CAN_USE_64_BIT_STREAM_MEM_OPS_V1 = 93
    CAN_USE_STREAM_WAIT_VALUE_NOR_V1 = 94
    COOPERATIVE_LAUNCH = 95
    COOPERATIVE_MULTI_DEVICE_LAUNCH = 96
    MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
    CAN_FLUSH_REMOTE_WRITES = 98
    HOST_REGISTER_SUPPORTED = 99
    PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES = 100
    DIRECT_MANAGED_MEM_ACCESS_FROM_HOST = 101
    VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED = 102
    VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102
    HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103
    HANDLE_TYPE_WIN32_HANDLE_SUPPORTED = 104
    HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED = 105
    MAX_BLOCKS_PER_MULTIPROCESSOR = 106
    GENERIC_COMPRESSION_SUPPORTED = 107
    MAX_PERSISTING_L2_CACHE_SIZE = 108
    MAX_ACCESS_POLICY_WINDOW_SIZE = 109
    GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110
    RESERVED_SHARED_MEMORY_PER_BLOCK = 111
    SPARSE_CUDA_ARRAY_SUPPORTED = 112
    READ_ONLY_HOST_REGISTER_SUPPORTED = 113
    TIMELINE_SEMAPHORE_INTEROP_SUPPORTED = 114
    MEMORY_POOLS_SUPPORTED = 115
    GPU_DIRECT_RDMA_SUPPORTED = 116
    GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS = 117
    GPU_DIRECT_RDMA_WRITES_ORDERING = 118
    MEMPOOL_SUPPORTED_HANDLE_TYPES = 119
    CLUSTER_LAUNCH = 120
    DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED = 121
    CAN_USE_64_BIT_STREAM_MEM_OPS = 122
    CAN_USE_STREAM_WAIT_VALUE_NOR = 123
    DMA_BUF_SUPPORTED = 124
    IPC_EVENT_SUPPORTED = 125
    MEM_SYNC_DOMAIN_COUNT = 126
    TENSOR_MAP_ACCESS_SUPPORTED = 127
    HANDLE_TYPE_FABRIC_SUPPORTED = 128
    UNIFIED_FUNCTION_POINTERS = 129
    NUMA_CONFIG = 130
    NUMA_ID = 131
    MULTICAST_SUPPORTED = 132
    MPS_ENABLED = 133
    HOST_NUMA_ID = 134
    D3D12_CIG_SUPPORTED = 135
    MEM_DECOMPRESS_ALGORITHM_MASK = 136
    MEM_DECOMPRESS_MAXIMUM_LENGTH = 137
    VULKAN_CIG_SUPPORTED = 138
    GPU_PCI_DEVICE_ID = 139
    GPU_PCI_SUBSYSTEM_ID = 140
    HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 141
    HOST_NUMA_MEMORY_POOLS_SUPPORTED = 142
    HOST_NUMA_MULTINODE_IPC_SUPPORTED = 143
    HOST_MEMORY_POOLS_SUPPORTED = 144
    HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 145
    HOST_ALLOC_DMA_BUF_SUPPORTED = 146
    ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED = 147
    ATOMIC_REDUCTION_SUPPORTED = 148
    LOCALITY_DOMAIN_COUNT = 149
    MAX_OVERSIZED_SHARED_MEMORY_PER_BLOCK = 150
    D3D12_CIG_STREAMS_SUPPORTED = 151
    DMA_BUF_MMAP_SUPPORTED = 152
    LOGICAL_ENDPOINT_UNICAST_SUPPORTED = 153
    LOGICAL_ENDPOINT_MULTICAST_SUPPORTED = 154
    LOGICAL_ENDPOINT_COUNTED_OPS_SUPPORTED = 155
    LOGICAL_ENDPOINT_UNICAST_ACCESS_ON_OWNER_DEVICE_SUPPORTED = 156
    LOCALITY_DOMAIN_MULTIPROCESSOR_COUNT = 157
    LOGICAL_ENDPOINT_SUPPORTED_HANDLE_TYPES = 158
    GPU_DIRECT_RDMA_WITH_LOCALIZED_MEMORY_SUPPORTED = 161


class ContextFlags(IntFlag):
    """Flags for :meth:`Context.create` (``CUctx_flags``)."""

    SCHED_AUTO = 0
    SCHED_SPIN = 1
    SCHED_YIELD = 2
    SCHED_BLOCKING_SYNC = 4
    MAP_HOST = 8
    LMEM_RESIZE_TO_MAX = 16


class Limit(IntEnum):
    """Context limits (``CUlimit``) for :meth:`Context.get_limit` / :meth:`Context.set_limit`."""

    STACK_SIZE = 0
    PRINTF_FIFO_SIZE = 1
    MALLOC_HEAP_SIZE = 2
    DEV_RUNTIME_SYNC_DEPTH = 3
    DEV_RUNTIME_PENDING_LAUNCH_COUNT = 4
    MAX_L2_FETCH_GRANULARITY = 5
    PERSISTING_L2_CACHE_SIZE = 6


class SyncPolicy(IntEnum):
    """How a thread waits on a stream (``CUsynchronizationPolicy``)."""

    AUTO = 1
    SPIN = 2
    YIELD = 3
    BLOCKING_SYNC = 4


class AccessProperty(IntEnum):
    """L2 access property for an access policy window (``CUaccessProperty``)."""

    NORMAL = 0
    STREAMING = 1
    PERSISTING = 2


class MemAttach(IntFlag):
    """Where managed memory is attached (``CUmemAttach_flags``).

    For :meth:`Stream.attach_memory` and ``ManagedBuffer(attach=)``.
    """

    GLOBAL = 1
    HOST = 2
    SINGLE = 4


class CaptureMode(IntEnum):
    """How strictly a capture forbids unsafe calls (``CUstreamCaptureMode``).

    GLOBAL
        While this capture is active, potentially unsafe API calls (such as
        synchronous allocations or ``cuCtxSynchronize``) are forbidden on *every*
        thread that has not opted out; the strictest mode.
    THREAD_LOCAL
        Unsafe calls are forbidden only on the thread that began the capture (and
        other threads' own thread-local or global captures). The default, and what
        a library capturing on behalf of its caller wants.
    RELAXED
        No calls are forbidden because of this capture; the user takes
        responsibility for not issuing unsafe calls.
    """

    GLOBAL = 0
    THREAD_LOCAL = 1
    RELAXED = 2


class CaptureStatus(IntEnum):
    """A stream's capture state (``CUstreamCaptureStatus``).

    NONE
        Not capturing.
    ACTIVE
        Capturing; work is recorded into a graph instead of running.
    INVALIDATED
        Capturing, but an unsupported operation broke the capture: ending it fails
        with ``CUDA_ERROR_STREAM_CAPTURE_INVALIDATED``.
    """

    NONE = 0
    ACTIVE = 1
    INVALIDATED = 2


class WaitCondition(IntEnum):
    """When a stream wait on a memory value ends (``CUstreamWaitValue_flags``).

    GEQ
        ``(int32_t)(*addr - value) >= 0``: the value reached ``value``, counting
        cyclically (wrap-around safe for counters).
    EQ
        ``*addr == value``.
    AND
        ``(*addr & value) != 0``.
    NOR
        ``~(*addr | value) != 0``; needs the device attribute
        ``CAN_USE_STREAM_WAIT_VALUE_NOR``.
    """

    GEQ = 0
    EQ = 1
    AND = 2
    NOR = 3


class MemOpType(IntEnum):
    """The kind of a :class:`MemOp` (``CUstreamBatchMemOpType``)."""

    WAIT_VALUE_32 = 1
    WRITE_VALUE_32 = 2
    FLUSH_REMOTE_WRITES = 3
    WAIT_VALUE_64 = 4
    WRITE_VALUE_64 = 5
    BARRIER = 6


class FunctionAttribute(IntEnum):
    """Kernel attributes (``CUfunction_attribute`` without ``CU_FUNC_ATTRIBUTE_``).

    Read with :meth:`Kernel.attribute`, set the settable ones with
    :meth:`Kernel.set_attribute`. Members of the bindings' ``CUfunction_attribute``
    and plain ints are accepted too.
    """

    MAX_THREADS_PER_BLOCK = 0
    SHARED_SIZE_BYTES = 1
    CONST_SIZE_BYTES = 2
    LOCAL_SIZE_BYTES = 3
    NUM_REGS = 4
    PTX_VERSION = 5
    BINARY_VERSION = 6
    CACHE_MODE_CA = 7
    MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
    PREFERRED_SHARED_MEMORY_CARVEOUT = 9
    CLUSTER_SIZE_MUST_BE_SET = 10
    REQUIRED_CLUSTER_WIDTH = 11
    REQUIRED_CLUSTER_HEIGHT = 12
    REQUIRED_CLUSTER_DEPTH = 13
    NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
    CLUSTER_SCHEDULING_POLICY_PREFERENCE = 15
    DEVICE_NODE_UPDATE_SUPPORTED = 16
    SHARED_MEMORY_MODE = 17


class GraphNodeType(IntEnum):
    """The kind of a graph node (``CUgraphNodeType`` without ``CU_GRAPH_NODE_TYPE_``)."""

    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2
    HOST = 3
    GRAPH = 4
    EMPTY = 5
    WAIT_EVENT = 6
    EVENT_RECORD = 7
    EXT_SEMAS_SIGNAL = 8
    EXT_SEMAS_WAIT = 9
    MEM_ALLOC = 10
    MEM_FREE = 11
    BATCH_MEM_OP = 12
    CONDITIONAL = 13


class ConditionalType(IntEnum):
    """The kind of a conditional node (``CUgraphConditionalNodeType``).

    IF
        Runs its first body when the condition is non-zero, its second (if it has
        one) when it is zero.
    WHILE
        Runs its body as long as the condition is non-zero, testing before each run.
    SWITCH
        Runs body ``n`` when the condition is ``n``; none when it is out of range.
    """

    IF = 0
    WHILE = 1
    SWITCH = 2


class MemAccess(IntEnum):
    """How a device may use a memory pool's memory (``CUmemAccess_flags``).

    NONE
        Not at all (the default for devices other than the pool's own).
    READ
        Read only.
    READ_WRITE
        Read and write.
    """

    NONE = 0
    READ = 1
    READ_WRITE = 3


class MemAdvise(IntEnum):
    """Advice about managed memory for :meth:`ManagedBuffer.advise` (``CUmem_advise``).

    SET_READ_MOSTLY
        Mostly read: each processor that reads the memory gets its own read-only
        copy of the pages it reads; a write drops the other copies. The location is
        ignored.
    UNSET_READ_MOSTLY
        Undo ``SET_READ_MOSTLY``: the copies collapse into one. The location is
        ignored.
    SET_PREFERRED_LOCATION
        Keep the pages at the location (a device, or the host) where possible:
        faults map them from there rather than migrate them.
    UNSET_PREFERRED_LOCATION
        Forget the preferred location. The location is ignored.
    SET_ACCESSED_BY
        Keep the memory mapped for the location (a device, or the host) wherever it
        is, so that its accesses do not fault. Does not move the data.
    UNSET_ACCESSED_BY
        Undo ``SET_ACCESSED_BY`` for the location.
    """

    SET_READ_MOSTLY = 1
    UNSET_READ_MOSTLY = 2
    SET_PREFERRED_LOCATION = 3
    UNSET_PREFERRED_LOCATION = 4
    SET_ACCESSED_BY = 5
    UNSET_ACCESSED_BY = 6


class WorkqueueScope(IntEnum):
    """Whose work queues a green context's streams use (``CUdevWorkqueueConfigScope``).

    DEVICE_CTX
        The queues every context of the device shares (the driver's default).
    GREEN_CTX_BALANCED
        Queues balanced across the green contexts made with this scope, so that their
        streams do not wait behind other contexts' work in a shared queue.
    """

    DEVICE_CTX = 0
    GREEN_CTX_BALANCED = 1


for _enum in (
    DeviceAttribute,
    ContextFlags,
    Limit,
    SyncPolicy,
    AccessProperty,
    MemAttach,
    CaptureMode,
    CaptureStatus,
    WaitCondition,
    MemOpType,
    FunctionAttribute,
    GraphNodeType,
    ConditionalType,
    WorkqueueScope,
    MemAccess,
    MemAdvise,
):
    _enum.__module__ = "cudriver"
