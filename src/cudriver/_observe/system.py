"""The machine through NVML: driver, GPUs, their processes and topology, no CUDA context.

:func:`system_info` reads what ``nvidia-smi`` shows through ``cuda.bindings.nvml`` (the
NVIDIA Management Library's bindings, in cuda-bindings 12.9.6+ and 13.2.0+): the driver
and NVML versions; per GPU its name, UUID, memory, utilization, temperature, power,
clocks, performance state, the processes using it and its MIG mode; between GPUs their
PCIe topology, the NVLinks joining them and their peer-to-peer status. :func:`gpu_info`
reads one GPU, given as a cudriver :class:`~cudriver.Device`. ``python -m cudriver
info`` prints them (``--watch SECONDS`` refreshes them in place).

No CUDA context is made: NVML needs none, and matching each NVML GPU to its
:class:`~cudriver.Device` takes ``cuInit`` and ``cuDeviceGetUuid`` only. The match is by
UUID, so it honours ``CUDA_VISIBLE_DEVICES`` (which NVML ignores): a GPU that CUDA does
not see has ``cuda_ordinal`` None, and so has a GPU in MIG mode, whose CUDA devices are
its MIG instances.

NVML is initialised once per process, on first use (``nvmlInit_v2``, under a lock; a
forked child initialises it again), and never shut down: NVML counts its users, and
other code of the process may be one of them. Where the bindings lack NVML,
:class:`~cudriver.NotSupportedError` names the cuda-bindings version needed; a failing
NVML call raises :class:`NvmlError` with NVML's message, except the readings NVML
refuses for a GPU (``NVML_ERROR_NOT_SUPPORTED``, ``NVML_ERROR_NO_PERMISSION``, a
function the driver's NVML lacks), which read as None.
"""

from __future__ import annotations

import importlib
import math
import os
import threading
import uuid as _uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, SupportsInt

from cuda.bindings import driver as _drv

from .._context.device import Device
from .._runtime._bindings import version_string
from ..errors import CudaError, NotSupportedError

__all__ = [
    "GpuClocks",
    "GpuInfo",
    "GpuProcess",
    "NvmlError",
    "SystemInfo",
    "TopologyInfo",
    "format_system",
    "gpu_info",
    "system_info",
]

#: The first cuda-bindings releases with ``cuda.bindings.nvml`` (before them it was the
#: experimental ``cuda.bindings._nvml``, which cudriver does not use).
NVML_SINCE = "12.9.6 (CUDA 12) or 13.2.0 (CUDA 13)"

# nvmlReturn_t: the values of nvml.h, the same in every NVML.
_STATUS_NAMES: dict[int, str] = {
    1: "UNINITIALIZED",
    2: "INVALID_ARGUMENT",
    3: "NOT_SUPPORTED",
    4: "NO_PERMISSION",
    5: "ALREADY_INITIALIZED",
    6: "NOT_FOUND",
    7: "INSUFFICIENT_SIZE",
    8: "INSUFFICIENT_POWER",
    9: "DRIVER_NOT_LOADED",
    10: "TIMEOUT",
    11: "IRQ_ISSUE",
    12: "LIBRARY_NOT_FOUND",
    13: "FUNCTION_NOT_FOUND",
    14: "CORRUPTED_INFOROM",
    15: "GPU_IS_LOST",
    16: "RESET_REQUIRED",
    17: "OPERATING_SYSTEM",
    18: "LIB_RM_VERSION_MISMATCH",
    19: "IN_USE",
    20: "MEMORY",
    21: "NO_DATA",
    22: "VGPU_ECC_NOT_SUPPORTED",
    23: "INSUFFICIENT_RESOURCES",
    24: "FREQ_NOT_SUPPORTED",
    25: "ARGUMENT_VERSION_MISMATCH",
    26: "DEPRECATED",
    27: "NOT_READY",
    28: "GPU_NOT_FOUND",
    29: "INVALID_STATE",
    30: "RESET_TYPE_NOT_SUPPORTED",
    999: "UNKNOWN",
}
INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
NO_DATA = 21
ARGUMENT_VERSION_MISMATCH = 25
UNKNOWN = 999

#: What NVML may refuse for one GPU without anything being wrong: the reading is None.
REFUSED = frozenset(
    {NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND, NO_DATA, ARGUMENT_VERSION_MISMATCH}
)

# The bindings' exception classes by name (cuda.bindings.nvml.NotSupportedError, ...):
# their status when an exception carries none.
_CLASS_STATUS: dict[str, int] = {
    "".join(w.capitalize() for w in name.split("_")) + "Error": code
    for code, name in _STATUS_NAMES.items()
}
_CLASS_STATUS.update({"NvmlMemoryError": 20, "NvmlTimeoutError": 10})

# The CUresult nearest to an NVML status, for CudaError.code.
_CUDA_CODE: dict[int, str] = {
    NOT_SUPPORTED: "CUDA_ERROR_NOT_SUPPORTED",
    NO_PERMISSION: "CUDA_ERROR_NOT_PERMITTED",
    NOT_FOUND: "CUDA_ERROR_NOT_FOUND",
    DRIVER_NOT_LOADED: "CUDA_ERROR_NO_DEVICE",
    LIBRARY_NOT_FOUND: "CUDA_ERROR_NO_DEVICE",
    INVALID_ARGUMENT: "CUDA_ERROR_INVALID_VALUE",
}

# The C names of the bindings' functions cudriver calls, for messages.
_C_NAMES: dict[str, str] = {
    "init_v2": "nvmlInit_v2",
    "system_get_driver_version": "nvmlSystemGetDriverVersion",
    "system_get_nvml_version": "nvmlSystemGetNVMLVersion",
    "system_get_cuda_driver_version_v2": "nvmlSystemGetCudaDriverVersion_v2",
    "system_get_cuda_driver_version": "nvmlSystemGetCudaDriverVersion",
    "system_get_process_name": "nvmlSystemGetProcessName",
    "device_get_count_v2": "nvmlDeviceGetCount_v2",
    "device_get_handle_by_index_v2": "nvmlDeviceGetHandleByIndex_v2",
    "device_get_handle_by_uuid": "nvmlDeviceGetHandleByUUID",
    "device_get_index": "nvmlDeviceGetIndex",
    "device_get_name": "nvmlDeviceGetName",
    "device_get_uuid": "nvmlDeviceGetUUID",
    "device_get_pci_info_v3": "nvmlDeviceGetPciInfo_v3",
    "device_get_pci_info_ext": "nvmlDeviceGetPciInfoExt",
    "device_get_memory_info_v2": "nvmlDeviceGetMemoryInfo_v2",
    "device_get_memory_info": "nvmlDeviceGetMemoryInfo",
    "device_get_utilization_rates": "nvmlDeviceGetUtilizationRates",
    "device_get_temperature_v": "nvmlDeviceGetTemperatureV",
    "device_get_temperature": "nvmlDeviceGetTemperature",
    "device_get_power_usage": "nvmlDeviceGetPowerUsage",
    "device_get_power_management_limit": "nvmlDeviceGetPowerManagementLimit",
    "device_get_enforced_power_limit": "nvmlDeviceGetEnforcedPowerLimit",
    "device_get_clock_info": "nvmlDeviceGetClockInfo",
    "device_get_max_clock_info": "nvmlDeviceGetMaxClockInfo",
    "device_get_performance_state": "nvmlDeviceGetPerformanceState",
    "device_get_compute_running_processes_v3": "nvmlDeviceGetComputeRunningProcesses_v3",
    "device_get_graphics_running_processes_v3": "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "device_get_mig_mode": "nvmlDeviceGetMigMode",
    "device_get_topology_common_ancestor": "nvmlDeviceGetTopologyCommonAncestor",
    "device_get_p2p_status": "nvmlDeviceGetP2PStatus",
    "device_get_nvlink_state": "nvmlDeviceGetNvLinkState",
    "device_get_nvlink_remote_pci_info_v2": "nvmlDeviceGetNvLinkRemotePciInfo_v2",
    "device_get_nvlink_remote_device_type": "nvmlDeviceGetNvLinkRemoteDeviceType",
}

# nvmlClockType_t, nvmlTemperatureSensors_t, nvmlGpuP2PCapsIndex_t and the other values of
# nvml.h that cudriver passes or reads, as plain ints: the bindings' enum members were
# renamed in 13.5 (ClockType.CLOCK_SM became ClockType.SM), their values never.
_CLOCK_GRAPHICS, _CLOCK_SM, _CLOCK_MEM = 0, 1, 2
_TEMPERATURE_GPU = 0
_P2P_READ, _P2P_WRITE, _P2P_NVLINK, _P2P_ATOMICS = 0, 1, 2, 3
_P2P_OK = 0
_PSTATE_UNKNOWN = 32
_MIG_ENABLE = 1
# NVML_NVLINK_MAX_LINKS; nvmlEnableState_t's NVML_FEATURE_ENABLED (an active link);
# nvmlIntNvLinkDeviceType_t's NVML_NVLINK_DEVICE_TYPE_SWITCH (GPU 0, IBMNPU 1, UNKNOWN 0xFF).
_NVLINK_MAX_LINKS = 18
_FEATURE_ENABLED = 1
_NVLINK_DEVICE_SWITCH = 2
#: NVML_VALUE_NOT_AVAILABLE of an unsigned long long (a process's memory NVML cannot see).
_NOT_AVAILABLE = 2**64 - 1

#: nvmlGpuTopologyLevel_t: the level's name and what it means.
TOPOLOGY_LEVELS: dict[int, tuple[str, str]] = {
    0: ("INTERNAL", "on one board"),
    10: ("SINGLE", "behind one PCIe switch"),
    20: ("MULTIPLE", "behind several PCIe switches, no host bridge between"),
    30: ("HOSTBRIDGE", "behind one PCIe host bridge"),
    40: ("NODE", "on one NUMA node, across PCIe host bridges"),
    50: ("SYSTEM", "across NUMA nodes (the CPUs' interconnect)"),
}
# What ``nvidia-smi topo -m`` calls each level.
_TOPOLOGY_SHORT = {
    "INTERNAL": "BOARD",
    "SINGLE": "PIX",
    "MULTIPLE": "PXB",
    "HOSTBRIDGE": "PHB",
    "NODE": "NODE",
    "SYSTEM": "SYS",
}


class NvmlError(CudaError):
    """An NVML call failed, e.g. ``nvmlInit_v2`` where no NVIDIA driver is loaded.

    ``str(err)`` reads ``nvmlInit_v2 failed: NVML_ERROR_DRIVER_NOT_LOADED (9): Driver
    Not Loaded``: the NVML function, the error's name and number, NVML's message.

    Attributes
    ----------
    func : str
        The NVML function that failed, e.g. ``"nvmlInit_v2"``.
    nvml_status : int
        NVML's ``nvmlReturn_t``, e.g. 9.
    name : str
        Its name, e.g. ``"NVML_ERROR_DRIVER_NOT_LOADED"``.
    description : str
        NVML's message (``nvmlErrorString``), or why the library could not be loaded.
    code : cuda.bindings.driver.CUresult
        The nearest CUDA status (``CUDA_ERROR_NO_DEVICE`` for a driver or library not
        found, ``CUDA_ERROR_UNKNOWN`` where none is near), for code that sorts every
        :class:`CudaError` by its code.
    """

    nvml_status: int

    def __init__(self, func: str, status: int, description: str) -> None:
        self.func = func
        self.nvml_status = int(status)
        self.name = "NVML_ERROR_" + _STATUS_NAMES.get(self.nvml_status, "UNKNOWN")
        self.description = description
        self.code = getattr(
            _drv.CUresult,
            _CUDA_CODE.get(self.nvml_status, "CUDA_ERROR_UNKNOWN"),
            _drv.CUresult.CUDA_ERROR_UNKNOWN,
        )
        RuntimeError.__init__(
            self, f"{func} failed: {self.name} ({self.nvml_status}): {description}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (NvmlError, (self.func, self.nvml_status, self.description))

    @property
    def no_driver(self) -> bool:
        """Whether NVML's library or the driver behind it is missing (not a failure)."""
        return self.nvml_status in (DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND)


# -- the values --------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuClocks:
    """A GPU's clocks in MHz, current and maximum; None where NVML refuses one.

    Current: ``nvmlDeviceGetClockInfo``; maximum: ``nvmlDeviceGetMaxClockInfo``, each of
    ``NVML_CLOCK_GRAPHICS``, ``NVML_CLOCK_SM`` and ``NVML_CLOCK_MEM``.
    """

    graphics: int | None = None
    sm: int | None = None
    memory: int | None = None
    graphics_max: int | None = None
    sm_max: int | None = None
    memory_max: int | None = None


@dataclass(frozen=True)
class GpuProcess:
    """A process using a GPU.

    From ``nvmlDeviceGetComputeRunningProcesses_v3`` and
    ``nvmlDeviceGetGraphicsRunningProcesses_v3``, merged by pid.

    Attributes
    ----------
    pid : int
        Its process id (of the host's PID namespace: in a container, maybe not this one's).
    used_memory : int or None
        The GPU memory it uses, in bytes; None where NVML cannot see it (in a container
        without access to the host's processes, or in MIG mode without privileges).
    name : str or None
        Its name (``nvmlSystemGetProcessName``), None where NVML cannot read it.
    """

    pid: int
    used_memory: int | None
    name: str | None = None


@dataclass(frozen=True)
class GpuInfo:
    """One GPU, as NVML sees it. A reading NVML refuses for this GPU is None.

    Attributes
    ----------
    nvml_index : int
        NVML's index of the GPU (``nvmlDeviceGetIndex``; the order of ``nvidia-smi``,
        which ``CUDA_VISIBLE_DEVICES`` does not change).
    cuda_ordinal : int or None
        The ordinal of the :class:`~cudriver.Device` with the same UUID
        (``cuDeviceGetUuid`` of each visible device: ``CUDA_VISIBLE_DEVICES`` honoured);
        None where CUDA does not see this GPU, or no CUDA driver could be used.
    name : str
        ``nvmlDeviceGetName``, e.g. ``"NVIDIA H200"``.
    uuid : str
        ``nvmlDeviceGetUUID``, ``"GPU-"`` and the UUID, as ``nvidia-smi -L`` prints it.
    pci_bus_id : str or None
        ``nvmlDeviceGetPciInfo_v3``'s bus id, e.g. ``"00000000:19:00.0"``.
    memory_used, memory_total : int or None
        Bytes (``nvmlDeviceGetMemoryInfo_v2``: used excludes what the driver reserves,
        as ``nvidia-smi``'s memory.used).
    utilization_gpu, utilization_memory : int or None
        Percent of the last sample period in which a kernel ran, and in which device
        memory was read or written (``nvmlDeviceGetUtilizationRates``).
    temperature_c : int or None
        The GPU's temperature in degrees Celsius (``nvmlDeviceGetTemperatureV``, the GPU
        sensor).
    power_w, power_limit_w : float or None
        The power drawn and the power management limit, in watts
        (``nvmlDeviceGetPowerUsage``, ``nvmlDeviceGetPowerManagementLimit``, which
        ``nvidia-smi`` calls power.limit).
    clocks : GpuClocks
        The current and maximum clocks.
    performance_state : int or None
        The performance state, 0 (P0, the fastest) to 15
        (``nvmlDeviceGetPerformanceState``); None when NVML does not know it.
    processes : tuple of GpuProcess
        The processes with a compute or graphics context on the GPU, by pid.
    mig_mode : bool or None
        Whether MIG is on (``nvmlDeviceGetMigMode``'s current mode); None on a GPU
        without MIG.
    """

    nvml_index: int
    cuda_ordinal: int | None
    name: str
    uuid: str
    pci_bus_id: str | None = None
    memory_used: int | None = None
    memory_total: int | None = None
    utilization_gpu: int | None = None
    utilization_memory: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    clocks: GpuClocks = field(default_factory=GpuClocks)
    performance_state: int | None = None
    processes: tuple[GpuProcess, ...] = ()
    mig_mode: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The GPU as a JSON-ready dict (the fields; ``clocks`` and each process a dict)."""
        return {
            "nvml_index": self.nvml_index,
            "cuda_ordinal": self.cuda_ordinal,
            "name": self.name,
            "uuid": self.uuid,
            "pci_bus_id": self.pci_bus_id,
            "memory_used": self.memory_used,
            "memory_total": self.memory_total,
            "utilization_gpu": self.utilization_gpu,
            "utilization_memory": self.utilization_memory,
            "temperature_c": self.temperature_c,
            "power_w": self.power_w,
            "power_limit_w": self.power_limit_w,
            "clocks": {
                k: getattr(self.clocks, k)
                for k in ("graphics", "sm", "memory", "graphics_max", "sm_max", "memory_max")
            },
            "performance_state": self.performance_state,
            "processes": [
                {"pid": p.pid, "used_memory": p.used_memory, "name": p.name} for p in self.processes
            ],
            "mig_mode": self.mig_mode,
        }


@dataclass(frozen=True)
class TopologyInfo:
    """How one GPU reaches another: common ancestor, NVLinks and peer-to-peer status.

    Attributes
    ----------
    level : str or None
        The closest place their paths meet (``nvmlDeviceGetTopologyCommonAncestor``):
        ``"INTERNAL"`` (one board), ``"SINGLE"`` (one PCIe switch), ``"MULTIPLE"``
        (several switches), ``"HOSTBRIDGE"`` (one host bridge), ``"NODE"`` (one NUMA
        node) or ``"SYSTEM"`` (across NUMA nodes); None where NVML refuses.
    p2p_read, p2p_write, p2p_nvlink, p2p_atomics : bool or None
        Whether the first GPU can read from, write to, reach over NVLink, and do atomics
        on the second's memory (``nvmlDeviceGetP2PStatus`` with
        ``NVML_P2P_CAPS_INDEX_READ``, ``_WRITE``, ``_NVLINK``, ``_ATOMICS``: status
        ``NVML_P2P_STATUS_OK``); None where NVML refuses.
    nvlinks : int or None
        The number of active NVLinks joining the first GPU to the second, as
        ``nvidia-smi topo -m`` counts them (its ``NV#``): the first GPU's links whose
        remote end is the second GPU (``nvmlDeviceGetNvLinkState``,
        ``nvmlDeviceGetNvLinkRemotePciInfo_v2``, matched by PCI bus id), plus, where
        both GPUs have links to NVSwitches (``nvmlDeviceGetNvLinkRemoteDeviceType``),
        the smaller of their counts of such links. 0 where the first GPU has NVLink but
        none reaches the second; None where NVML refuses the first GPU's NVLink state,
        or the bindings lack those functions.
    """

    level: str | None
    p2p_read: bool | None = None
    p2p_write: bool | None = None
    p2p_nvlink: bool | None = None
    p2p_atomics: bool | None = None
    nvlinks: int | None = None

    @property
    def description(self) -> str | None:
        """What ``level`` means, in words (``"behind one PCIe host bridge"``)."""
        for name, words in TOPOLOGY_LEVELS.values():
            if name == self.level:
                return words
        return None


@dataclass(frozen=True)
class SystemInfo:
    """The machine as NVML sees it: versions, GPUs, and how they reach each other.

    Attributes
    ----------
    driver_version : str
        The display driver's version, e.g. ``"580.82.07"`` (``nvmlSystemGetDriverVersion``).
    nvml_version : str
        NVML's version (``nvmlSystemGetNVMLVersion``).
    cuda_driver_version : tuple of int or None
        ``(major, minor)`` of the CUDA version the driver supports
        (``nvmlSystemGetCudaDriverVersion_v2``).
    gpus : tuple of GpuInfo
        Every GPU NVML sees, in NVML's order, visible to CUDA or not.
    topology : Mapping
        ``(i, j) -> TopologyInfo`` for each ordered pair of distinct NVML indices: how
        GPU ``i`` reaches GPU ``j``. Empty with fewer than two GPUs.
    """

    driver_version: str
    nvml_version: str
    cuda_driver_version: tuple[int, int] | None
    gpus: tuple[GpuInfo, ...] = ()
    topology: Mapping[tuple[int, int], TopologyInfo] = field(default_factory=dict, hash=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the fields, each GPU a dict, the topology a list of dicts.

        Each topology entry is ``{"from": i, "to": j, "level": ..., "p2p_read": ...,
        "p2p_write": ..., "p2p_nvlink": ..., "p2p_atomics": ..., "nvlinks": ...}``; the
        CUDA version is ``"13.0"``.
        """
        cuda = self.cuda_driver_version
        return {
            "driver_version": self.driver_version,
            "nvml_version": self.nvml_version,
            "cuda_driver_version": None if cuda is None else f"{cuda[0]}.{cuda[1]}",
            "gpus": [g.to_dict() for g in self.gpus],
            "topology": [
                {
                    "from": i,
                    "to": j,
                    "level": t.level,
                    "p2p_read": t.p2p_read,
                    "p2p_write": t.p2p_write,
                    "p2p_nvlink": t.p2p_nvlink,
                    "p2p_atomics": t.p2p_atomics,
                    "nvlinks": t.nvlinks,
                }
                for (i, j), t in sorted(self.topology.items())
            ],
        }


# -- the bindings and NVML's state ---------------------------------------------------------

_lock = threading.Lock()
_mod: Any = None
_init_pid: int | None = None


def _bindings() -> Any:
    """``cuda.bindings.nvml``; NotSupportedError naming the version where it is missing."""
    global _mod
    mod = _mod
    if mod is None:
        try:
            mod = importlib.import_module("cuda.bindings.nvml")
        except ImportError as exc:
            raise NotSupportedError(
                _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED,
                "cuda.bindings.nvml",
                f"the installed cuda-bindings {version_string()} have no cuda.bindings.nvml "
                f"({exc}): the system view needs cuda-bindings {NVML_SINCE} or newer",
            ) from None
        _mod = mod
    return mod


def _c_name(name: str) -> str:
    return _C_NAMES.get(name, f"nvml.{name}")


def _status(exc: BaseException) -> int | None:
    """The NVML status an exception of the bindings stands for; None if it is not one."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return int(status)
    for cls in type(exc).__mro__:
        if not cls.__module__.startswith("cuda."):  # only the bindings' and pathfinder's
            continue
        code = _CLASS_STATUS.get(cls.__name__)
        if code is not None:
            # The bindings' own FunctionNotFoundError (a RuntimeError of _internal.utils)
            # is a symbol missing from the driver's NVML, as NVML's status 13 is.
            return code
        if cls.__name__ == "DynamicLibNotFoundError":
            return LIBRARY_NOT_FOUND
        if cls.__name__ == "NvmlError":
            return UNKNOWN
    return None


def _error(name: str, exc: BaseException) -> NvmlError:
    status = _status(exc)
    return NvmlError(_c_name(name), UNKNOWN if status is None else status, str(exc))


def _function(nv: Any, name: str) -> Callable[..., Any]:
    fn = getattr(nv, name, None)
    if fn is None:
        raise NotSupportedError(
            _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED,
            _c_name(name),
            f"the installed cuda-bindings {version_string()} have no nvml.{name}: it needs "
            f"cuda-bindings {NVML_SINCE} or newer",
        )
    return fn  # type: ignore[no-any-return]


def _call(nv: Any, name: str, *args: Any) -> Any:
    """``nv.name(*args)``; an NVML failure raised as NvmlError."""
    fn = _function(nv, name)
    try:
        return fn(*args)
    except Exception as exc:
        if _status(exc) is None:
            raise
        raise _error(name, exc) from None


def _read(nv: Any, *calls: tuple[str, tuple[Any, ...]], refused: frozenset[int] = REFUSED) -> Any:
    """The first of ``calls`` (``(name, args)``) that the bindings have and NVML answers.

    None when each is missing from the bindings or refused by NVML (a status in
    ``refused``); any other NVML failure raises :class:`NvmlError`.
    """
    for name, args in calls:
        fn = getattr(nv, name, None)
        if fn is None:
            continue
        try:
            return fn(*args)
        except Exception as exc:
            status = _status(exc)
            if status is None:
                raise
            if status not in refused:
                raise _error(name, exc) from None
    return None


def _ready() -> Any:
    """The bindings, with NVML initialised in this process (once; again after a fork)."""
    global _init_pid
    nv = _bindings()
    pid = os.getpid()
    if _init_pid == pid:
        return nv
    with _lock:
        if _init_pid != pid:
            _call(nv, "init_v2")
            _init_pid = pid
    return nv


# -- reading ------------------------------------------------------------------------------


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).split(b"\0", 1)[0].decode(errors="replace")
    return str(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _uuid_key(text: str) -> _uuid.UUID | None:
    """The UUID of NVML's ``"GPU-..."`` (or ``"MIG-..."``) text."""
    body = text[4:] if text[:4].upper() in ("GPU-", "MIG-") else text
    try:
        return _uuid.UUID(body)
    except ValueError:
        return None


_ordinals: dict[_uuid.UUID, int] | None = None


def _cuda_ordinals() -> Mapping[_uuid.UUID, int]:
    """The visible CUDA devices' ordinals by UUID; empty where CUDA cannot be used.

    ``cuInit`` and ``cuDeviceGetUuid`` of each device (no context), once per process:
    which devices are visible is fixed when the driver initialises (a forked child keeps
    its parent's, where it may make no CUDA call).
    """
    global _ordinals
    found = _ordinals
    if found is None:
        try:
            found = {d.uuid: d.ordinal for d in Device.all()}
        except CudaError:  # no driver, no device, a forked child: no GPU maps
            return {}
        _ordinals = found
    return found


def _temperature(nv: Any, handle: int) -> int | None:
    value = _read(
        nv,
        ("device_get_temperature_v", (handle, _TEMPERATURE_GPU)),
        ("device_get_temperature", (handle, _TEMPERATURE_GPU)),
    )
    if value is None:
        return None
    # An nvmlTemperature_v1_t where the bindings return the struct.
    return int(getattr(value, "temperature", value))


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else int(milliwatts) / 1000.0


def _processes(nv: Any, handle: int) -> tuple[GpuProcess, ...]:
    used: dict[int, int | None] = {}
    for name in (
        "device_get_compute_running_processes_v3",
        "device_get_graphics_running_processes_v3",
    ):
        infos = _read(nv, (name, (handle,)))
        for p in () if infos is None else infos:
            pid = int(p.pid)
            mem = int(p.used_gpu_memory)
            this = None if mem == _NOT_AVAILABLE else mem
            before = used.get(pid)
            used[pid] = this if before is None else max(before, this or 0)
    out = []
    for pid in sorted(used):
        # A process that ended since the list was read has no name (NOT_FOUND).
        name = _read(nv, ("system_get_process_name", (pid,)), refused=REFUSED | {NOT_FOUND})
        out.append(GpuProcess(pid, used[pid], None if name is None else _text(name) or None))
    return tuple(out)


def _gpu(nv: Any, index: int, handle: int, ordinals: Mapping[_uuid.UUID, int]) -> GpuInfo:
    uuid = _text(_call(nv, "device_get_uuid", handle))
    name = _text(_call(nv, "device_get_name", handle))
    key = _uuid_key(uuid)
    pci = _read(nv, ("device_get_pci_info_v3", (handle,)), ("device_get_pci_info_ext", (handle,)))
    mem = _read(nv, ("device_get_memory_info_v2", (handle,)), ("device_get_memory_info", (handle,)))
    util = _read(nv, ("device_get_utilization_rates", (handle,)))
    pstate = _read(nv, ("device_get_performance_state", (handle,)))
    pstate = None if pstate is None or not 0 <= int(pstate) <= 15 else int(pstate)
    mig = _read(nv, ("device_get_mig_mode", (handle,)))
    if mig is not None:
        current = mig[0] if isinstance(mig, tuple) else getattr(mig, "current_mode", mig)
        mig = int(current) == _MIG_ENABLE

    def clock(kind: str, which: int) -> int | None:
        return _int(_read(nv, (kind, (handle, which))))

    return GpuInfo(
        nvml_index=index,
        cuda_ordinal=None if key is None else ordinals.get(key),
        name=name,
        uuid=uuid,
        pci_bus_id=None if pci is None else _text(pci.bus_id),
        memory_used=None if mem is None else int(mem.used),
        memory_total=None if mem is None else int(mem.total),
        utilization_gpu=None if util is None else int(util.gpu),
        utilization_memory=None if util is None else int(util.memory),
        temperature_c=_temperature(nv, handle),
        power_w=_watts(_read(nv, ("device_get_power_usage", (handle,)))),
        power_limit_w=_watts(
            _read(
                nv,
                ("device_get_power_management_limit", (handle,)),
                ("device_get_enforced_power_limit", (handle,)),
            )
        ),
        clocks=GpuClocks(
            graphics=clock("device_get_clock_info", _CLOCK_GRAPHICS),
            sm=clock("device_get_clock_info", _CLOCK_SM),
            memory=clock("device_get_clock_info", _CLOCK_MEM),
            graphics_max=clock("device_get_max_clock_info", _CLOCK_GRAPHICS),
            sm_max=clock("device_get_max_clock_info", _CLOCK_SM),
            memory_max=clock("device_get_max_clock_info", _CLOCK_MEM),
        ),
        performance_state=pstate,
        processes=_processes(nv, handle),
        mig_mode=mig,
    )


def _p2p(nv: Any, a: int, b: int, index: int) -> bool | None:
    status = _read(nv, ("device_get_p2p_status", (a, b, index)))
    return None if status is None else int(status) == _P2P_OK


_BusKey = tuple[int, int, int, int]


def _bus_key(text: str | None) -> _BusKey | None:
    """A PCI bus id's ``(domain, bus, device, function)``; None where it is not one.

    ``"00000000:1A:00.0"`` and ``"0000:1a:00.0"`` are one key: NVML pads the domain to 8
    or 4 digits depending on the call, and the hex digits' case varies.
    """
    if not text:
        return None
    head, _, function = text.strip().rpartition(".")
    parts = head.split(":")
    if len(parts) == 2:  # "BB:DD.F", no domain
        parts.insert(0, "0")
    if len(parts) != 3:
        return None
    try:
        domain, bus, device = (int(p, 16) for p in parts)
        return (domain, bus, device, int(function, 16))
    except ValueError:
        return None


def _nvlink_ends(nv: Any, handle: int) -> tuple[dict[_BusKey, int], int] | None:
    """Where one GPU's active NVLinks go: links per remote PCI bus id, and to NVSwitches.

    For each link, up to ``NVML_NVLINK_MAX_LINKS``, ``nvmlDeviceGetNvLinkState``; a
    refusal or ``NVML_ERROR_INVALID_ARGUMENT`` (a link past the GPU's last) ends the
    scan. An active link's remote end is an NVSwitch where
    ``nvmlDeviceGetNvLinkRemoteDeviceType`` says so, else the device of
    ``nvmlDeviceGetNvLinkRemotePciInfo_v2``'s bus id. None where the state of link 0 is
    refused (no NVLink, or no NVLink readings) or the bindings lack the call.
    """
    direct: dict[_BusKey, int] = {}
    switch = 0
    for link in range(_NVLINK_MAX_LINKS):
        state = _read(
            nv,
            ("device_get_nvlink_state", (handle, link)),
            refused=REFUSED | {INVALID_ARGUMENT},
        )
        if state is None:
            if link == 0:
                return None
            break
        if int(state) != _FEATURE_ENABLED:
            continue
        kind = _read(nv, ("device_get_nvlink_remote_device_type", (handle, link)))
        if kind is not None and int(kind) == _NVLINK_DEVICE_SWITCH:
            switch += 1
            continue
        pci = _read(nv, ("device_get_nvlink_remote_pci_info_v2", (handle, link)))
        key = None if pci is None else _bus_key(_text(pci.bus_id))
        if key is not None:
            direct[key] = direct.get(key, 0) + 1
    return direct, switch


def _nvlinks(
    nv: Any, handles: Mapping[int, int], bus_ids: Mapping[int, str | None]
) -> dict[tuple[int, int], int | None]:
    """The NVLinks joining each ordered pair of GPUs, read once per GPU.

    GPU ``i`` to GPU ``j``: ``i``'s links whose remote end has ``j``'s bus id, plus the
    smaller of the two GPUs' counts of links to NVSwitches (a switch joins every GPU
    with links to it, as ``nvidia-smi topo -m`` counts). None where ``i`` has no NVLink
    readings.
    """
    order = sorted(handles)
    ends = {i: _nvlink_ends(nv, handles[i]) for i in order}
    keys = {i: _bus_key(bus_ids.get(i)) for i in order}
    out: dict[tuple[int, int], int | None] = {}
    for i in order:
        mine = ends[i]
        for j in order:
            if i == j:
                continue
            if mine is None:
                out[i, j] = None
                continue
            direct, switch = mine
            key = keys[j]
            theirs = ends[j]
            out[i, j] = (0 if key is None else direct.get(key, 0)) + (
                0 if theirs is None else min(switch, theirs[1])
            )
    return out


def _topology(
    nv: Any, handles: Mapping[int, int], bus_ids: Mapping[int, str | None]
) -> dict[tuple[int, int], TopologyInfo]:
    out: dict[tuple[int, int], TopologyInfo] = {}
    order = sorted(handles)
    if len(order) < 2:
        return out
    nvlinks = _nvlinks(nv, handles, bus_ids)
    for i in order:
        for j in order:
            if i == j:
                continue
            if (j, i) in out:
                level = out[j, i].level  # the common ancestor is the same both ways
            else:
                raw = _read(nv, ("device_get_topology_common_ancestor", (handles[i], handles[j])))
                level = None if raw is None else TOPOLOGY_LEVELS.get(int(raw), (None, ""))[0]
            a, b = handles[i], handles[j]
            out[i, j] = TopologyInfo(
                level=level,
                p2p_read=_p2p(nv, a, b, _P2P_READ),
                p2p_write=_p2p(nv, a, b, _P2P_WRITE),
                p2p_nvlink=_p2p(nv, a, b, _P2P_NVLINK),
                p2p_atomics=_p2p(nv, a, b, _P2P_ATOMICS),
                nvlinks=nvlinks[i, j],
            )
    return out


def _cuda_version(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    v = int(value)
    return (v // 1000, (v % 1000) // 10)


def system_info(*, topology: bool = True) -> SystemInfo:
    """The machine as NVML sees it, without a CUDA context.

    Calls ``nvmlInit_v2`` once per process, then the NVML queries each field of
    :class:`SystemInfo`, :class:`GpuInfo` and :class:`TopologyInfo` names (a few dozen
    per GPU, and four ``nvmlDeviceGetP2PStatus`` per ordered pair of GPUs; with two GPUs
    or more, per GPU up to 18 ``nvmlDeviceGetNvLinkState`` and one or two more calls per
    active NVLink); and ``cuInit`` and ``cuDeviceGetUuid`` of each visible device to find
    each GPU's ``cuda_ordinal``. Nothing synchronises with the GPUs.

    Parameters
    ----------
    topology : bool
        Whether to read the topology between GPUs (default True); False leaves
        :attr:`SystemInfo.topology` empty.

    Raises
    ------
    NotSupportedError
        The installed cuda-bindings have no ``cuda.bindings.nvml`` (it needs 12.9.6 or
        13.2.0 or newer).
    NvmlError
        NVML failed: no NVIDIA driver (``NVML_ERROR_DRIVER_NOT_LOADED``, or
        ``NVML_ERROR_LIBRARY_NOT_FOUND`` where ``libnvidia-ml.so.1`` is missing), a GPU
        lost, ... Readings NVML refuses for one GPU are None instead.
    """
    nv = _ready()
    count = int(_call(nv, "device_get_count_v2"))
    handles: dict[int, int] = {}
    for i in range(count):
        try:
            handles[i] = _call(nv, "device_get_handle_by_index_v2", i)
        except NvmlError as exc:
            if exc.nvml_status != NO_PERMISSION:  # a GPU this process may not open
                raise
    ordinals = _cuda_ordinals()
    driver_version = _text(_call(nv, "system_get_driver_version"))
    nvml_version = _text(_call(nv, "system_get_nvml_version"))
    cuda_driver_version = _cuda_version(
        _read(
            nv,
            ("system_get_cuda_driver_version_v2", ()),
            ("system_get_cuda_driver_version", ()),
        )
    )
    gpus = tuple(_gpu(nv, i, h, ordinals) for i, h in handles.items())
    return SystemInfo(
        driver_version=driver_version,
        nvml_version=nvml_version,
        cuda_driver_version=cuda_driver_version,
        gpus=gpus,
        topology=(
            _topology(nv, handles, {g.nvml_index: g.pci_bus_id for g in gpus}) if topology else {}
        ),
    )


def gpu_info(device: Device | SupportsInt) -> GpuInfo:
    """One GPU as NVML sees it: the :class:`GpuInfo` of a cudriver device.

    ``cuDeviceGetUuid`` (no context), then ``nvmlDeviceGetHandleByUUID`` and the queries
    :class:`GpuInfo` names; ``cuda_ordinal`` is the device's ordinal.

    Parameters
    ----------
    device : Device or int
        A :class:`~cudriver.Device` or a device ordinal (``CUDA_VISIBLE_DEVICES``
        applies, as everywhere in cudriver).

    Raises
    ------
    NvmlError
        NVML failed, or has no GPU with the device's UUID (``NVML_ERROR_NOT_FOUND``:
        e.g. a MIG instance).
    NotSupportedError
        The installed cuda-bindings have no ``cuda.bindings.nvml``.
    """
    nv = _ready()
    dev = Device(device)
    key = dev.uuid
    handle = _call(nv, "device_get_handle_by_uuid", f"GPU-{key}")
    index = _int(_read(nv, ("device_get_index", (handle,))))
    return _gpu(nv, -1 if index is None else index, handle, {key: dev.ordinal})


# -- as text --------------------------------------------------------------------------------


def _na(value: object, fmt: Callable[[Any], str] = str) -> str:
    return "n/a" if value is None else fmt(value)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{math.ceil(n / 2**20)} MiB"


def _gpu_lines(g: GpuInfo) -> list[str]:
    cuda = "not visible to CUDA" if g.cuda_ordinal is None else f"cuda {g.cuda_ordinal}"
    memory = (
        "memory n/a"
        if g.memory_total is None
        else f"memory {_na(g.memory_used, _gib)} / {_gib(g.memory_total)} GiB"
    )
    c = g.clocks
    mig = {None: "n/a", True: "on", False: "off"}[g.mig_mode]
    lines = [
        f"  GPU {g.nvml_index} ({cuda}): {g.name}, {g.uuid}, PCI {_na(g.pci_bus_id)}",
        f"      {memory}, utilization {_na(g.utilization_gpu)}% "
        f"(memory {_na(g.utilization_memory)}%), {_na(g.temperature_c)} C, "
        f"power {_na(g.power_w, lambda w: f'{w:.0f}')} / "
        f"{_na(g.power_limit_w, lambda w: f'{w:.0f}')} W, "
        f"P{_na(g.performance_state)}, MIG {mig}",
        f"      clocks MHz (now/max): graphics {_na(c.graphics)}/{_na(c.graphics_max)}, "
        f"SM {_na(c.sm)}/{_na(c.sm_max)}, memory {_na(c.memory)}/{_na(c.memory_max)}",
    ]
    if g.processes:
        procs = ", ".join(f"{p.pid} {p.name or '?'} ({_bytes(p.used_memory)})" for p in g.processes)
        lines.append(f"      processes: {procs}")
    else:
        lines.append("      processes: none")
    return lines


def _p2p_text(t: TopologyInfo) -> str:
    def flag(v: bool | None, ch: str) -> str:
        return "?" if v is None else (ch if v else "-")

    return flag(t.p2p_read, "r") + flag(t.p2p_write, "w") + flag(t.p2p_nvlink, "n")


def _topology_lines(
    indices: Iterable[int], topology: Mapping[tuple[int, int], TopologyInfo]
) -> list[str]:
    order = list(indices)
    if len(order) < 2:
        return []
    cells: dict[tuple[int, int], str] = {}
    for i in order:
        for j in order:
            t = topology.get((i, j))
            if i == j:
                cells[i, j] = "X"
            elif t is None:
                cells[i, j] = "n/a"
            elif t.nvlinks:  # as nvidia-smi topo -m: NVLinks before the PCIe path
                cells[i, j] = f"NV{t.nvlinks} {_p2p_text(t)}"
            else:
                level = "n/a" if t.level is None else _TOPOLOGY_SHORT.get(t.level, t.level)
                cells[i, j] = f"{level} {_p2p_text(t)}"
    width = max(6, *(len(s) for s in cells.values())) + 2
    head = "".join(f"GPU{j}".ljust(width) for j in order)
    lines = [
        "  topology (NVLinks, else common ancestor; P2P r=read w=write n=NVLink, -=no, ?=n/a):",
        f"    {'':6}{head}".rstrip(),
    ]
    for i in order:
        row = "".join(cells[i, j].ljust(width) for j in order)
        lines.append(f"    {f'GPU{i}':6}{row}".rstrip())
    lines.append(
        "    NV# joined by # NVLinks, BOARD one board, PIX one PCIe switch, PXB several "
        "switches, PHB one host bridge, NODE one NUMA node, SYS across NUMA nodes"
    )
    return lines


def format_system(info: SystemInfo) -> list[str]:
    """The lines ``python -m cudriver info`` prints for a :class:`SystemInfo`.

    A heading with the versions, three or four lines per GPU (identity; memory,
    utilization, temperature, power, performance state and MIG mode; clocks;
    processes), then the topology as a matrix (as ``nvidia-smi topo -m`` draws it:
    ``NV18`` for GPUs joined by 18 NVLinks, else their PCIe common ancestor, ``PHB``,
    ``SYS``, ...).
    """
    cuda = info.cuda_driver_version
    lines = [
        f"System (NVML): driver {info.driver_version}, NVML {info.nvml_version}, "
        f"CUDA {_na(cuda, lambda v: f'{v[0]}.{v[1]}')}, GPUs: {len(info.gpus)}"
    ]
    for g in info.gpus:
        lines += _gpu_lines(g)
    lines += _topology_lines((g.nvml_index for g in info.gpus), info.topology)
    return lines
