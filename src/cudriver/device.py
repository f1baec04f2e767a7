"""Devices and their attributes."""

from __future__ import annotations

import operator
import threading
import uuid as _uuid
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, SupportsInt

from cuda.bindings import driver as _drv

from ._bindings import SUCCESS
from ._runtime import init
from .errors import InvalidDeviceError, NotSupportedError, make_error

if TYPE_CHECKING:
    from .context import Context

__all__ = ["Device", "DeviceAttribute", "ComputeCapability"]


class ComputeCapability(NamedTuple):
    """A device's compute capability, e.g. ``ComputeCapability(9, 0)``."""

    major: int
    minor: int

    @property
    def arch(self) -> str:
        """The architecture name NVRTC and ptxas take, e.g. ``"sm_90"``."""
        return f"sm_{self.major}{self.minor}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


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


DeviceAttribute.__module__ = "cudriver"
ComputeCapability.__module__ = "cudriver"


def _attr_value(attr: Any) -> Any:
    try:
        return _drv.CUdevice_attribute(int(attr))
    except ValueError:
        raise NotSupportedError(
            _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED,
            "cuDeviceGetAttribute",
            f"device attribute {int(attr)} is unknown to the installed cuda-bindings; "
            "a newer cuda-bindings is needed",
        ) from None


class Device:
    """A CUDA device; one object per ordinal (``Device(0) is Device(0)``).

    Parameters
    ----------
    ordinal
        The device's index, ``0 <= ordinal < Device.count()``.

    Raises
    ------
    InvalidDeviceError
        ``ordinal`` is out of range (a ``ValueError`` too).
    DriverNotFoundError
        No NVIDIA driver is installed.
    """

    __slots__ = ("__weakref__", "_attrs", "_h", "_name", "_ordinal")

    _cache: ClassVar[dict[int, Device]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    _ordinal: int
    _h: Any
    _name: str | None
    _attrs: dict[int, int]

    def __new__(cls, ordinal: SupportsInt = 0) -> Device:  # noqa: D102
        if isinstance(ordinal, Device):
            return ordinal
        if isinstance(ordinal, _drv.CUdevice):
            ordinal = int(ordinal)
        elif isinstance(ordinal, bool) or not hasattr(type(ordinal), "__index__"):
            raise TypeError(f"device ordinal must be an int, not {type(ordinal).__name__}")
        else:
            ordinal = operator.index(ordinal)  # type: ignore[arg-type]
        assert isinstance(ordinal, int)
        dev = cls._cache.get(ordinal)
        if dev is not None:
            return dev
        init()
        n = cls.count()
        if not 0 <= ordinal < n:
            raise InvalidDeviceError(
                _drv.CUresult.CUDA_ERROR_INVALID_DEVICE,
                "cuDeviceGet",
                f"device ordinal {ordinal} is out of range: {n} device(s) present",
            )
        with cls._lock:
            dev = cls._cache.get(ordinal)
            if dev is None:
                r = _drv.cuDeviceGet(ordinal)
                if r[0] is not SUCCESS:
                    raise make_error(r[0], "cuDeviceGet")
                dev = object.__new__(cls)
                dev._ordinal = ordinal
                dev._h = r[1]
                dev._name = None
                dev._attrs = {}
                cls._cache[ordinal] = dev
        return dev

    @staticmethod
    def count() -> int:
        """Number of CUDA devices (``cuDeviceGetCount``; initialises the driver)."""
        init()
        r = _drv.cuDeviceGetCount()
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuDeviceGetCount")
        return int(r[1])

    @classmethod
    def all(cls) -> list[Device]:
        """Every device, in ordinal order."""
        return [cls(i) for i in range(cls.count())]

    @property
    def ordinal(self) -> int:
        """The device's index."""
        return self._ordinal

    @property
    def handle(self) -> Any:
        """The raw ``CUdevice``."""
        return self._h

    def __int__(self) -> int:
        return self._ordinal

    @property
    def name(self) -> str:
        """The device's name (``cuDeviceGetName``; cached)."""
        if self._name is None:
            r = _drv.cuDeviceGetName(256, self._h)
            if r[0] is not SUCCESS:
                raise make_error(r[0], "cuDeviceGetName")
            self._name = bytes(r[1]).split(b"\0", 1)[0].decode(errors="replace")
        return self._name

    @property
    def uuid(self) -> _uuid.UUID:
        """The device's UUID (``cuDeviceGetUuid``)."""
        r = _drv.cuDeviceGetUuid(self._h)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuDeviceGetUuid")
        raw = r[1].bytes
        if isinstance(raw, str):  # older bindings return a str of the bytes
            raw = raw.encode("latin-1")
        return _uuid.UUID(bytes=bytes(raw)[:16])

    @property
    def pci_bus_id(self) -> str:
        """The PCI bus id, ``"0000:18:00.0"`` (``cuDeviceGetPCIBusId``)."""
        r = _drv.cuDeviceGetPCIBusId(64, self._h)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuDeviceGetPCIBusId")
        return bytes(r[1]).split(b"\0", 1)[0].decode()

    @property
    def compute_capability(self) -> ComputeCapability:
        """``(major, minor)``, e.g. ``ComputeCapability(major=9, minor=0)``."""
        return ComputeCapability(
            self.attribute(DeviceAttribute.COMPUTE_CAPABILITY_MAJOR),
            self.attribute(DeviceAttribute.COMPUTE_CAPABILITY_MINOR),
        )

    @property
    def arch(self) -> str:
        """``"sm_XY"`` for this device's compute capability."""
        return self.compute_capability.arch

    @property
    def total_memory(self) -> int:
        """Total device memory in bytes (``cuDeviceTotalMem``)."""
        r = _drv.cuDeviceTotalMem(self._h)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuDeviceTotalMem")
        return int(r[1])

    @property
    def multiprocessor_count(self) -> int:
        """Number of streaming multiprocessors."""
        return self.attribute(DeviceAttribute.MULTIPROCESSOR_COUNT)

    def attribute(self, attr: DeviceAttribute | int) -> int:
        """Read one device attribute (``cuDeviceGetAttribute``; cached per device).

        Parameters
        ----------
        attr
            A :class:`DeviceAttribute`, a ``CUdevice_attribute`` member or its int value.
        """
        key = int(attr)
        v = self._attrs.get(key)
        if v is None:
            r = _drv.cuDeviceGetAttribute(_attr_value(key), self._h)
            if r[0] is not SUCCESS:
                raise make_error(r[0], "cuDeviceGetAttribute")
            v = self._attrs[key] = int(r[1])
        return v

    def primary_context(self) -> Context:
        """Retain this device's primary context (``cuDevicePrimaryCtxRetain``).

        The returned :class:`Context` releases its retain on ``close()`` or collection
        (``cuDevicePrimaryCtxRelease``). It is not made current.
        """
        from .context import Context

        return Context._retain_primary(self)

    def can_access_peer(self, other: Device | int) -> bool:
        """Whether this device can map ``other``'s memory (``cuDeviceCanAccessPeer``)."""
        peer = Device(other) if not isinstance(other, Device) else other
        if peer is self:
            return False
        r = _drv.cuDeviceCanAccessPeer(self._h, peer._h)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuDeviceCanAccessPeer")
        return bool(r[1])

    def __repr__(self) -> str:
        name = f" {self._name!r}" if self._name is not None else ""
        return f"<cudriver.Device {self._ordinal}{name}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Device, (self._ordinal,))
