"""The machine through NVML: ``system_info``, ``gpu_info`` and ``info --watch``.

Without a GPU the readings come from a fake ``cuda.bindings.nvml`` (the functions
cudriver calls, answering as NVML does, refusals included); on a GPU they are compared
with CUDA's view of the devices and with ``nvidia-smi``.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

import cudriver as cu
import cudriver.__main__ as cli
from cudriver.__main__ import EXIT_FAILED, EXIT_NO_DRIVER, EXIT_OK, EXIT_USAGE, main
from cudriver._observe import system

from ._support import no_driver

GiB = 2**30
MiB = 2**20
UUID0 = "GPU-11111111-2222-3333-4444-555555555555"
UUID1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
BUS0, BUS1 = "00000000:19:00.0", "00000000:1A:00.0"  # the fake GPUs' own bus ids

# An NVLink of the fake: (nvmlEnableState_t, the remote end's bus id, its
# nvmlIntNvLinkDeviceType_t); an int in its place is the status its state read raises.
Link = tuple[int, str | bytes, int]
TO_GPU0, TO_GPU1 = (1, BUS0, 0), (1, BUS1, 0)
TO_SWITCH = (1, "00000000:05:00.0", 2)  # NVML_NVLINK_DEVICE_TYPE_SWITCH
OFF = (0, BUS1, 0)  # a link NVML reports disabled


# -- a fake cuda.bindings.nvml ---------------------------------------------------------------


class FakeNvmlError(Exception):
    """Stands in for the bindings' NvmlError subclasses: the status is an attribute."""

    def __init__(self, status: int, text: str = "") -> None:
        super().__init__(text or f"NVML status {status}")
        self.status = status


class FakeNvml:
    """The NVML functions cudriver calls, for two GPUs (handles 100 and 101).

    ``refuse`` maps a function name to the status it raises (on every GPU, or only on
    the handles given in ``only``). ``nvlinks`` maps a handle to its NVLinks (a
    :data:`Link`, or the status reading that link's state raises; past the last,
    ``NVML_ERROR_INVALID_ARGUMENT``), or to None for a GPU without NVLink (its link 0:
    ``NVML_ERROR_NOT_SUPPORTED``), as the two GPUs have by default. ``calls`` counts the
    NVLink calls by function name.
    """

    def __init__(self, refuse: dict[str, int] | None = None, only: tuple[int, ...] = ()):
        self.refuse = dict(refuse or {})
        self.only = only
        self.inits = 0
        self.lock = threading.Lock()
        self.nvlinks: dict[int, list[Link | int] | None] = {100: None, 101: None}
        self.calls: dict[str, int] = {}

    def _check(self, name: str, handle: int | None = None) -> None:
        status = self.refuse.get(name)
        if status is not None and (not self.only or handle in self.only):
            raise FakeNvmlError(status, f"{name}: refused ({status})")

    def init_v2(self) -> None:
        self._check("init_v2")
        with self.lock:
            self.inits += 1

    def system_get_driver_version(self) -> str:
        return "580.82.07"

    def system_get_nvml_version(self) -> str:
        return "13.580.82.07"

    def system_get_cuda_driver_version_v2(self) -> int:
        self._check("system_get_cuda_driver_version_v2")
        return 13000

    def device_get_count_v2(self) -> int:
        return 2

    def device_get_handle_by_index_v2(self, i: int) -> int:
        return 100 + i

    def device_get_handle_by_uuid(self, text: str) -> int:
        if text == UUID0:
            return 100
        if text == UUID1:
            return 101
        raise FakeNvmlError(6, "Not Found")

    def device_get_index(self, h: int) -> int:
        return h - 100

    def device_get_uuid(self, h: int) -> str:
        return UUID0 if h == 100 else UUID1

    def device_get_name(self, h: int) -> str:
        return "NVIDIA H200"

    def device_get_pci_info_v3(self, h: int) -> Any:
        self._check("device_get_pci_info_v3", h)
        return SimpleNamespace(bus_id=f"00000000:{0x19 + h - 100:02X}:00.0")

    def device_get_memory_info_v2(self, h: int) -> Any:
        self._check("device_get_memory_info_v2", h)
        return SimpleNamespace(used=(h - 99) * GiB, total=141 * GiB, free=0, reserved=0)

    def device_get_utilization_rates(self, h: int) -> Any:
        self._check("device_get_utilization_rates", h)
        return SimpleNamespace(gpu=97, memory=40)

    def device_get_temperature_v(self, h: int, sensor: int) -> int:
        self._check("device_get_temperature_v", h)
        assert sensor == 0  # NVML_TEMPERATURE_GPU
        return 41 + h - 100

    def device_get_power_usage(self, h: int) -> int:
        self._check("device_get_power_usage", h)
        return 123_400  # milliwatts

    def device_get_power_management_limit(self, h: int) -> int:
        self._check("device_get_power_management_limit", h)
        return 700_000

    def device_get_enforced_power_limit(self, h: int) -> int:
        self._check("device_get_enforced_power_limit", h)
        return 650_000

    def device_get_clock_info(self, h: int, kind: int) -> int:
        self._check("device_get_clock_info", h)
        return {0: 1500, 1: 1510, 2: 3200}[kind]

    def device_get_max_clock_info(self, h: int, kind: int) -> int:
        self._check("device_get_max_clock_info", h)
        return {0: 1980, 1: 1990, 2: 3201}[kind]

    def device_get_performance_state(self, h: int) -> int:
        self._check("device_get_performance_state", h)
        return 0 if h == 100 else 32  # NVML_PSTATE_UNKNOWN

    def device_get_compute_running_processes_v3(self, h: int) -> list[Any]:
        self._check("device_get_compute_running_processes_v3", h)
        if h != 100:
            return []
        return [
            SimpleNamespace(pid=300, used_gpu_memory=2 * GiB),
            SimpleNamespace(pid=200, used_gpu_memory=2**64 - 1),  # NOT_AVAILABLE
        ]

    def device_get_graphics_running_processes_v3(self, h: int) -> list[Any]:
        self._check("device_get_graphics_running_processes_v3", h)
        return [SimpleNamespace(pid=300, used_gpu_memory=2 * GiB)] if h == 100 else []

    def system_get_process_name(self, pid: int) -> str:
        if pid == 300:
            return "python3"
        raise FakeNvmlError(6, "Not Found")  # the process has ended

    def device_get_mig_mode(self, h: int) -> tuple[int, int]:
        self._check("device_get_mig_mode", h)
        return (0, 0) if h == 100 else (1, 1)

    def device_get_topology_common_ancestor(self, a: int, b: int) -> int:
        self._check("device_get_topology_common_ancestor")
        return 30  # NVML_TOPOLOGY_HOSTBRIDGE

    def device_get_p2p_status(self, a: int, b: int, index: int) -> int:
        self._check("device_get_p2p_status")
        if index == 3:  # atomics
            raise FakeNvmlError(3, "Not Supported")
        return 5 if index == 2 else 0  # NVLink: NVML_P2P_STATUS_NOT_SUPPORTED

    def _link(self, name: str, h: int, link: int) -> Link:
        self._check(name, h)
        self.calls[name] = self.calls.get(name, 0) + 1
        assert 0 <= link < 18, link  # NVML_NVLINK_MAX_LINKS
        links = self.nvlinks[h]
        if links is None:
            raise FakeNvmlError(3, "Not Supported")
        if link >= len(links):
            raise FakeNvmlError(2, "Invalid Argument")
        entry = links[link]
        if isinstance(entry, int):
            raise FakeNvmlError(entry, f"{name}: refused ({entry})")
        return entry

    def device_get_nvlink_state(self, h: int, link: int) -> int:
        return self._link("device_get_nvlink_state", h, link)[0]

    def device_get_nvlink_remote_pci_info_v2(self, h: int, link: int) -> Any:
        state, bus, _ = self._link("device_get_nvlink_remote_pci_info_v2", h, link)
        assert state == 1  # asked of active links only
        return SimpleNamespace(bus_id=bus)

    def device_get_nvlink_remote_device_type(self, h: int, link: int) -> int:
        state, _, kind = self._link("device_get_nvlink_remote_device_type", h, link)
        assert state == 1
        return kind


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """The fake bindings, NVML not yet initialised, and CUDA seeing only GPU 0."""
    fake = FakeNvml()
    monkeypatch.setattr(system, "_mod", fake)
    monkeypatch.setattr(system, "_init_pid", None)
    monkeypatch.setattr(system, "_ordinals", {uuid.UUID(UUID0[4:]): 0})
    return fake


# -- the bindings lack NVML --------------------------------------------------------------------


def test_bindings_without_nvml_raise_not_supported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system, "_mod", None)
    monkeypatch.setattr(system, "_init_pid", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvml", None)  # the import fails
    for call in (cu.system_info, lambda: cu.gpu_info(0)):
        with pytest.raises(cu.NotSupportedError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith("cuda.bindings.nvml failed: CUDA_ERROR_NOT_SUPPORTED")
        assert f"cuda-bindings {cu.bindings_version()} have no cuda.bindings.nvml" in msg
        assert "12.9.6" in msg and "13.2.0" in msg
        assert isinstance(info.value, NotImplementedError)


def test_bindings_without_a_needed_function_raise_not_supported(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FakeNvml, "device_get_count_v2", None)  # getattr finds None
    with pytest.raises(cu.NotSupportedError) as info:
        cu.system_info()
    msg = str(info.value)
    assert msg.startswith("nvmlDeviceGetCount_v2 failed: CUDA_ERROR_NOT_SUPPORTED")
    assert "have no nvml.device_get_count_v2: it needs cuda-bindings 12.9.6" in msg


# -- NVML's errors -------------------------------------------------------------------------------


def test_a_failing_init_raises_nvml_error(fake_nvml: FakeNvml) -> None:
    fake_nvml.refuse["init_v2"] = 9
    with pytest.raises(cu.NvmlError) as info:
        cu.system_info()
    err = info.value
    assert str(err) == (
        "nvmlInit_v2 failed: NVML_ERROR_DRIVER_NOT_LOADED (9): init_v2: refused (9)"
    )
    assert isinstance(err, cu.CudaError)
    assert (err.func, err.nvml_status, err.name) == (
        "nvmlInit_v2",
        9,
        "NVML_ERROR_DRIVER_NOT_LOADED",
    )
    assert err.no_driver
    assert err.code == cu.driver.CUresult.CUDA_ERROR_NO_DEVICE
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is cu.NvmlError
    assert (str(again), again.nvml_status, again.func) == (str(err), 9, "nvmlInit_v2")
    # Nothing was initialised: the next call tries again.
    del fake_nvml.refuse["init_v2"]
    assert len(cu.system_info().gpus) == 2
    assert fake_nvml.inits == 1


@pytest.mark.parametrize(("status", "name"), [(15, "GPU_IS_LOST"), (999, "UNKNOWN")])
def test_other_nvml_failures_raise(fake_nvml: FakeNvml, status: int, name: str) -> None:
    fake_nvml.refuse["device_get_temperature_v"] = status
    with pytest.raises(cu.NvmlError) as info:
        cu.system_info()
    assert str(info.value).startswith(
        f"nvmlDeviceGetTemperatureV failed: NVML_ERROR_{name} ({status}): "
    )
    assert not info.value.no_driver


def test_the_status_of_the_bindings_exceptions() -> None:
    # The bindings' classes are recognised by name where an exception has no status.
    for cls_name, module, status in [
        ("NotSupportedError", "cuda.bindings.nvml", 3),
        ("NoPermissionError", "cuda.bindings.nvml", 4),
        ("GpuIsLostError", "cuda.bindings.nvml", 15),
        ("FunctionNotFoundError", "cuda.bindings._internal.utils", 13),
        ("DynamicLibNotFoundError", "cuda.pathfinder._dynamic_libs.load_dl_common", 12),
    ]:
        cls = type(cls_name, (RuntimeError,), {"__module__": module})
        assert system._status(cls("x")) == status, cls_name
    # cudriver's own NotSupportedError, or any other exception, is not NVML's.
    assert system._status(cu.NotSupportedError(3, "cuX")) is None
    assert system._status(ValueError("x")) is None


# -- reading ---------------------------------------------------------------------------------------


def test_system_info_reads_every_field(fake_nvml: FakeNvml) -> None:
    info = cu.system_info()
    assert isinstance(info, cu.SystemInfo)
    assert info.driver_version == "580.82.07"
    assert info.nvml_version == "13.580.82.07"
    assert info.cuda_driver_version == (13, 0)
    g0, g1 = info.gpus
    assert g0 == cu.GpuInfo(
        nvml_index=0,
        cuda_ordinal=0,
        name="NVIDIA H200",
        uuid=UUID0,
        pci_bus_id="00000000:19:00.0",
        memory_used=1 * GiB,
        memory_total=141 * GiB,
        utilization_gpu=97,
        utilization_memory=40,
        temperature_c=41,
        power_w=123.4,
        power_limit_w=700.0,
        clocks=cu.GpuClocks(1500, 1510, 3200, 1980, 1990, 3201),
        performance_state=0,
        # Merged by pid (compute and graphics), sorted; memory NVML cannot see is None;
        # the name of a process that has ended is None.
        processes=(cu.GpuProcess(200, None, None), cu.GpuProcess(300, 2 * GiB, "python3")),
        mig_mode=False,
    )
    # GPU 1: not visible to CUDA (CUDA_VISIBLE_DEVICES), P-state unknown, MIG on.
    assert (g1.nvml_index, g1.cuda_ordinal, g1.uuid) == (1, None, UUID1)
    assert (g1.performance_state, g1.mig_mode, g1.processes) == (None, True, ())
    assert set(info.topology) == {(0, 1), (1, 0)}
    t = info.topology[0, 1]
    assert t == cu.TopologyInfo(
        level="HOSTBRIDGE",
        p2p_read=True,
        p2p_write=True,
        p2p_nvlink=False,
        p2p_atomics=None,
        nvlinks=None,  # no NVLink: NOT_SUPPORTED on link 0
    )
    assert t.description == "behind one PCIe host bridge"
    assert info.topology[1, 0] == t
    assert fake_nvml.inits == 1
    assert cu.system_info(topology=False).topology == {}
    assert fake_nvml.inits == 1  # once per process


@pytest.mark.parametrize("status", [3, 4, 13, 21, 25])
def test_refused_readings_are_none(fake_nvml: FakeNvml, status: int) -> None:
    # NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND, NO_DATA, ARGUMENT_VERSION_MISMATCH.
    for name in [
        "device_get_pci_info_v3",
        "device_get_memory_info_v2",
        "device_get_utilization_rates",
        "device_get_temperature_v",
        "device_get_power_usage",
        "device_get_power_management_limit",
        "device_get_enforced_power_limit",
        "device_get_clock_info",
        "device_get_max_clock_info",
        "device_get_performance_state",
        "device_get_compute_running_processes_v3",
        "device_get_graphics_running_processes_v3",
        "device_get_mig_mode",
        "device_get_topology_common_ancestor",
        "device_get_p2p_status",
        "device_get_nvlink_state",
        "device_get_nvlink_remote_pci_info_v2",
        "device_get_nvlink_remote_device_type",
        "system_get_cuda_driver_version_v2",
    ]:
        fake_nvml.refuse[name] = status
    fake_nvml.only = ()
    fake_nvml.nvlinks = {100: [TO_GPU1], 101: [TO_GPU0]}
    info = cu.system_info()
    assert info.cuda_driver_version is None
    for g in info.gpus:
        assert g.name == "NVIDIA H200"
        assert g == cu.GpuInfo(g.nvml_index, g.cuda_ordinal, g.name, g.uuid)  # the rest None
    assert info.topology[0, 1] == cu.TopologyInfo(None)


def test_refusals_fall_back_to_the_next_call(fake_nvml: FakeNvml) -> None:
    fake_nvml.refuse["device_get_power_management_limit"] = 3
    assert cu.system_info().gpus[0].power_limit_w == 650.0  # the enforced limit
    fake_nvml.only = (101,)  # refused on GPU 1 only
    fake_nvml.refuse["device_get_enforced_power_limit"] = 4
    g0, g1 = cu.system_info().gpus
    assert (g0.power_limit_w, g1.power_limit_w) == (700.0, None)


def test_bindings_that_return_a_temperature_struct(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        FakeNvml, "device_get_temperature_v", lambda self, h, s: SimpleNamespace(temperature=52)
    )
    assert cu.system_info().gpus[0].temperature_c == 52


def test_nvml_initialises_once_across_threads_and_again_after_fork(
    fake_nvml: FakeNvml,
) -> None:
    threads = [threading.Thread(target=cu.system_info) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake_nvml.inits == 1
    system._init_pid = os.getpid() + 1  # as a forked child finds it
    cu.system_info()
    assert fake_nvml.inits == 2
    assert system._init_pid == os.getpid()


def test_gpu_info_finds_the_gpu_by_uuid(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    class FakeDevice:
        ordinal = 3
        uuid = uuid.UUID(UUID1[4:])

    monkeypatch.setattr(system, "Device", lambda d: FakeDevice())
    g = cu.gpu_info(3)
    assert (g.nvml_index, g.cuda_ordinal, g.uuid, g.mig_mode) == (1, 3, UUID1, True)
    FakeDevice.uuid = uuid.UUID(int=7)  # e.g. a MIG instance: NVML has no GPU of that UUID
    with pytest.raises(cu.NvmlError, match=r"^nvmlDeviceGetHandleByUUID failed: .*NOT_FOUND"):
        cu.gpu_info(3)


@no_driver
def test_without_a_driver_nvml_says_so() -> None:
    with pytest.raises(cu.NvmlError) as info:
        cu.system_info()
    assert info.value.no_driver
    assert str(info.value).startswith("nvmlInit_v2 failed: NVML_ERROR_")


# -- NVLinks ---------------------------------------------------------------------------------


def _nvlinks(info: cu.SystemInfo) -> tuple[int | None, int | None]:
    return info.topology[0, 1].nvlinks, info.topology[1, 0].nvlinks


def test_nvlinks_between_two_gpus_are_counted(fake_nvml: FakeNvml) -> None:
    fake_nvml.nvlinks = {
        100: [
            TO_GPU1,
            OFF,  # disabled: not counted
            (1, b"0000:1a:00.0", 0),  # bytes, a 4-digit domain, lower case: GPU 1 still
            (1, "00000000:99:00.0", 0),  # a GPU NVML does not list here
        ],  # then INVALID_ARGUMENT: the GPU has 4 links
        101: [(1, "0000:19:00.0", 0), TO_GPU0],
    }
    info = cu.system_info()
    assert _nvlinks(info) == (2, 2)
    assert info.topology[0, 1] == cu.TopologyInfo(
        level="HOSTBRIDGE",
        p2p_read=True,
        p2p_write=True,
        p2p_nvlink=False,
        p2p_atomics=None,
        nvlinks=2,
    )
    # Read once per GPU, not per pair: 5 + 3 states, the 3 + 2 active links' remote ends.
    assert fake_nvml.calls == {
        "device_get_nvlink_state": 8,
        "device_get_nvlink_remote_device_type": 5,
        "device_get_nvlink_remote_pci_info_v2": 5,
    }
    assert [e["nvlinks"] for e in info.to_dict()["topology"]] == [2, 2]
    lines = system.format_system(info)
    assert lines[-4:-1] == [
        "          GPU0     GPU1",
        "    GPU0  X        NV2 rw-",
        "    GPU1  NV2 rw-  X",
    ]
    fake_nvml.calls.clear()
    assert cu.system_info(topology=False).topology == {}
    assert fake_nvml.calls == {}  # no topology, no NVLink reads


def test_nvlinks_through_nvswitches(fake_nvml: FakeNvml) -> None:
    # GPU 0: all 18 links (the scan stops there), 16 to switches and 2 to GPU 1; GPU 1:
    # 2 to GPU 0, 12 to switches, one disabled. A switch joins the two by the fewer of
    # their switch links, as nvidia-smi counts: 2 + min(16, 12) both ways.
    fake_nvml.nvlinks = {
        100: [TO_SWITCH] * 16 + [TO_GPU1] * 2,
        101: [TO_GPU0] * 2 + [TO_SWITCH] * 12 + [(0, "00000000:05:00.0", 2)],
    }
    info = cu.system_info()
    assert _nvlinks(info) == (14, 14)
    assert fake_nvml.calls["device_get_nvlink_state"] == 18 + 16
    # The remote PCI info of a link to a switch is not needed.
    assert fake_nvml.calls["device_get_nvlink_remote_pci_info_v2"] == 4
    assert "    GPU0  X         NV14 rw-" in system.format_system(info)
    # Only switch links (an HGX board): every pair has as many NVLinks as each GPU.
    fake_nvml.nvlinks = {100: [TO_SWITCH] * 18, 101: [TO_SWITCH] * 18}
    assert _nvlinks(cu.system_info()) == (18, 18)


@pytest.mark.parametrize("lacking", [True, False])
def test_nvlinks_without_the_remote_device_type(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch, lacking: bool
) -> None:
    # Bindings without nvmlDeviceGetNvLinkRemoteDeviceType, or NVML refusing it: a link
    # goes where its remote bus id says; a switch's is no GPU's, so only direct links count.
    if lacking:
        monkeypatch.setattr(FakeNvml, "device_get_nvlink_remote_device_type", None)
    else:
        fake_nvml.refuse["device_get_nvlink_remote_device_type"] = 3
    fake_nvml.nvlinks = {100: [TO_SWITCH] * 6 + [TO_GPU1], 101: [TO_GPU0] + [TO_SWITCH] * 6}
    assert _nvlinks(cu.system_info()) == (1, 1)


@pytest.mark.parametrize(
    ("links", "expected", "states"),
    [
        (None, (0, None), 1),  # GPU 1 has no NVLink: NOT_SUPPORTED on link 0
        ([4], (0, None), 1),  # NO_PERMISSION on link 0: no NVLink readings
        ([2], (0, None), 1),  # INVALID_ARGUMENT on link 0: no links
        ([OFF, OFF], (0, 0), 3),  # NVLink, none active
        ([TO_GPU0, 3, TO_GPU0], (0, 1), 2),  # a refusal ends the scan
        ([TO_SWITCH, TO_GPU0, 13, TO_SWITCH], (1, 2), 3),
    ],
)
def test_nvlinks_of_a_gpu_with_few_or_none(
    fake_nvml: FakeNvml, links: list[Link | int] | None, expected: tuple[int, ...], states: int
) -> None:
    fake_nvml.nvlinks = {100: [TO_SWITCH] * 4, 101: links}
    info = cu.system_info()
    assert _nvlinks(info) == expected
    assert fake_nvml.calls["device_get_nvlink_state"] == 5 + states
    # No NVLink between them: the PCIe common ancestor, as before.
    if expected == (0, None):
        lines = system.format_system(info)
        assert lines[-3:-1] == ["    GPU0  X        PHB rw-", "    GPU1  PHB rw-  X"]


def test_nvlinks_where_the_bindings_lack_nvlink(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvml.nvlinks = {100: [TO_GPU1], 101: [TO_GPU0]}
    for name in (
        "device_get_nvlink_state",
        "device_get_nvlink_remote_pci_info_v2",
        "device_get_nvlink_remote_device_type",
    ):
        monkeypatch.setattr(FakeNvml, name, None)
    assert _nvlinks(cu.system_info()) == (None, None)


def test_nvlinks_where_nvml_refuses_the_remote_end(fake_nvml: FakeNvml) -> None:
    # An active link whose remote PCI info NVML refuses joins no GPU it could name.
    fake_nvml.nvlinks = {100: [TO_GPU1, TO_GPU1], 101: [TO_GPU0, TO_GPU0]}
    fake_nvml.refuse["device_get_nvlink_remote_pci_info_v2"] = 4
    fake_nvml.only = (101,)
    assert _nvlinks(cu.system_info()) == (2, 0)


@pytest.mark.parametrize(
    ("name", "c_name"),
    [
        ("device_get_nvlink_state", "nvmlDeviceGetNvLinkState"),
        ("device_get_nvlink_remote_device_type", "nvmlDeviceGetNvLinkRemoteDeviceType"),
        ("device_get_nvlink_remote_pci_info_v2", "nvmlDeviceGetNvLinkRemotePciInfo_v2"),
    ],
)
def test_other_nvlink_failures_raise(fake_nvml: FakeNvml, name: str, c_name: str) -> None:
    fake_nvml.nvlinks = {100: [TO_GPU1], 101: [TO_GPU0]}
    fake_nvml.refuse[name] = 15
    with pytest.raises(cu.NvmlError) as info:
        cu.system_info()
    assert str(info.value).startswith(f"{c_name} failed: NVML_ERROR_GPU_IS_LOST (15): ")
    assert info.value.func == c_name
    assert cu.system_info(topology=False).gpus  # the GPUs alone read no NVLink


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("00000000:1A:00.0", (0, 0x1A, 0, 0)),
        ("0000:1a:00.0", (0, 0x1A, 0, 0)),
        (" 0001:C1:1f.7 ", (1, 0xC1, 0x1F, 7)),
        ("1a:00.0", (0, 0x1A, 0, 0)),
        ("", None),
        (None, None),
        ("n/a", None),
        ("0000:1a:00", None),
        ("0:0:1a:00.0", None),
        ("0000:zz:00.0", None),
    ],
)
def test_bus_ids_are_compared_as_numbers(text: str | None, key: tuple[int, ...] | None) -> None:
    assert system._bus_key(text) == key


# -- as text and JSON --------------------------------------------------------------------------


def fabricated() -> cu.SystemInfo:
    """Two GPUs as a machine might have them: one busy, one not visible to CUDA."""
    t = cu.TopologyInfo(
        "NODE", p2p_read=True, p2p_write=True, p2p_nvlink=True, p2p_atomics=True, nvlinks=18
    )
    return cu.SystemInfo(
        driver_version="580.82.07",
        nvml_version="13.580.82.07",
        cuda_driver_version=(13, 0),
        gpus=(
            cu.GpuInfo(
                nvml_index=0,
                cuda_ordinal=0,
                name="NVIDIA H200",
                uuid=UUID0,
                pci_bus_id="00000000:19:00.0",
                memory_used=3 * GiB // 2,
                memory_total=141 * GiB,
                utilization_gpu=97,
                utilization_memory=40,
                temperature_c=41,
                power_w=123.4,
                power_limit_w=700.0,
                clocks=cu.GpuClocks(1500, 1510, 3200, 1980, 1990, 3201),
                performance_state=0,
                processes=(
                    cu.GpuProcess(300, 2 * GiB, "python3"),
                    cu.GpuProcess(301, 500 * MiB, None),
                    cu.GpuProcess(302, None, "ollama"),
                ),
                mig_mode=False,
            ),
            cu.GpuInfo(nvml_index=1, cuda_ordinal=None, name="NVIDIA H200", uuid=UUID1),
        ),
        topology={(0, 1): t, (1, 0): cu.TopologyInfo(None)},
    )


SYSTEM_LINES = [
    "System (NVML): driver 580.82.07, NVML 13.580.82.07, CUDA 13.0, GPUs: 2",
    f"  GPU 0 (cuda 0): NVIDIA H200, {UUID0}, PCI 00000000:19:00.0",
    "      memory 1.5 / 141.0 GiB, utilization 97% (memory 40%), 41 C, power 123 / 700 W, "
    "P0, MIG off",
    "      clocks MHz (now/max): graphics 1500/1980, SM 1510/1990, memory 3200/3201",
    "      processes: 300 python3 (2.0 GiB), 301 ? (500 MiB), 302 ollama (n/a)",
    f"  GPU 1 (not visible to CUDA): NVIDIA H200, {UUID1}, PCI n/a",
    "      memory n/a, utilization n/a% (memory n/a%), n/a C, power n/a / n/a W, Pn/a, MIG n/a",
    "      clocks MHz (now/max): graphics n/a/n/a, SM n/a/n/a, memory n/a/n/a",
    "      processes: none",
    "  topology (NVLinks, else common ancestor; P2P r=read w=write n=NVLink, -=no, ?=n/a):",
    "          GPU0      GPU1",
    "    GPU0  X         NV18 rwn",
    "    GPU1  n/a ???   X",
    "    NV# joined by # NVLinks, BOARD one board, PIX one PCIe switch, PXB several switches, "
    "PHB one host bridge, NODE one NUMA node, SYS across NUMA nodes",
]


def test_the_system_section() -> None:
    assert system.format_system(fabricated()) == SYSTEM_LINES


def test_the_topology_matrix_draws_nvlinks_before_the_pcie_level() -> None:
    def t(level: str | None, nvlinks: int | None) -> cu.TopologyInfo:
        return cu.TopologyInfo(level, True, True, bool(nvlinks), None, nvlinks=nvlinks)

    topology = {
        (0, 1): t("SYSTEM", 4),  # NVLinks win over the PCIe path, as in nvidia-smi
        (1, 0): t("SYSTEM", 4),
        (0, 2): t("SYSTEM", 0),  # NVLink, but none to GPU 2: the PCIe level
        (2, 0): t("SYSTEM", None),  # no NVLink readings: the PCIe level
        (1, 2): t("SINGLE", 12),
        (2, 1): t(None, None),
    }
    assert system._topology_lines([0, 1, 2], topology)[1:5] == [
        "          GPU0      GPU1      GPU2",
        "    GPU0  X         NV4 rwn   SYS rw-",
        "    GPU1  NV4 rwn   X         NV12 rwn",
        "    GPU2  SYS rw-   n/a rw-   X",
    ]


def test_one_gpu_has_no_topology_section() -> None:
    info = fabricated()
    one = cu.SystemInfo(info.driver_version, info.nvml_version, None, info.gpus[:1])
    lines = system.format_system(one)
    assert lines[0] == "System (NVML): driver 580.82.07, NVML 13.580.82.07, CUDA n/a, GPUs: 1"
    assert lines[1:] == SYSTEM_LINES[1:5]


def test_to_dict_is_json_ready() -> None:
    d = fabricated().to_dict()
    assert json.loads(json.dumps(d)) == d
    assert set(d) == {"driver_version", "nvml_version", "cuda_driver_version", "gpus", "topology"}
    assert d["cuda_driver_version"] == "13.0"
    g = d["gpus"][0]
    assert set(g) == {f.name for f in system.GpuInfo.__dataclass_fields__.values()}
    assert g["clocks"] == {
        "graphics": 1500,
        "sm": 1510,
        "memory": 3200,
        "graphics_max": 1980,
        "sm_max": 1990,
        "memory_max": 3201,
    }
    assert g["processes"][1] == {"pid": 301, "used_memory": 500 * MiB, "name": None}
    assert d["topology"] == [
        {
            "from": 0,
            "to": 1,
            "level": "NODE",
            "p2p_read": True,
            "p2p_write": True,
            "p2p_nvlink": True,
            "p2p_atomics": True,
            "nvlinks": 18,
        },
        {
            "from": 1,
            "to": 0,
            "level": None,
            "p2p_read": None,
            "p2p_write": None,
            "p2p_nvlink": None,
            "p2p_atomics": None,
            "nvlinks": None,
        },
    ]


def test_the_values_are_frozen_and_hashable() -> None:
    info = fabricated()
    with pytest.raises(AttributeError):
        info.gpus[0].name = "x"  # type: ignore[misc]
    assert hash(info) == hash(fabricated())
    assert info == fabricated()
    for cls in (cu.SystemInfo, cu.GpuInfo, cu.GpuClocks, cu.GpuProcess, cu.TopologyInfo):
        assert cls.__module__ == "cudriver"
    for fn in (cu.system_info, cu.gpu_info):
        assert fn.__module__ == "cudriver"
    assert cu.NvmlError.__module__ == "cudriver"


# -- the command line ------------------------------------------------------------------------


@pytest.fixture
def fake_machine(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A CUDA 13.0 driver with one device, NVML giving :func:`fabricated`; the sleeps."""
    from .test_cli import FakeDevice

    monkeypatch.setattr(cli, "driver_version", lambda: (13, 0))
    monkeypatch.setattr(cli, "init", lambda: None)
    monkeypatch.setattr(cli, "nvrtc_version", lambda: (13, 0))
    monkeypatch.setattr(cli, "Device", FakeDevice)
    monkeypatch.setattr(cli, "system_info", fabricated)
    sleeps: list[float] = []
    monkeypatch.setattr(cli, "_sleep", sleeps.append)
    return sleeps


def test_info_prints_the_system_section(
    fake_machine: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["info"]) == EXIT_OK
    captured = capsys.readouterr()
    assert captured.err == ""
    out = captured.out.splitlines()
    start = out.index(SYSTEM_LINES[0])
    assert out[start : start + len(SYSTEM_LINES)] == SYSTEM_LINES
    assert out[start - 1].startswith("      stream memory ops:")  # after the devices


def test_info_json_has_the_system(
    fake_machine: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["info", "--json"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["system"] == {**fabricated().to_dict(), "error": None}
    assert report["error"] is None


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (cu.NvmlError("nvmlInit_v2", 9, "Driver Not Loaded"), EXIT_NO_DRIVER),
        (cu.NvmlError("nvmlDeviceGetUUID", 15, "GPU is lost"), EXIT_FAILED),
        (cu.NotSupportedError(801, "cuda.bindings.nvml", "no nvml"), EXIT_FAILED),
    ],
)
def test_info_without_nvml_keeps_its_status(
    fake_machine: list[float],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: cu.CudaError,
    status: int,
) -> None:
    def fail() -> cu.SystemInfo:
        raise error

    monkeypatch.setattr(cli, "system_info", fail)
    assert main(["info", "--json"]) == EXIT_OK  # NVML does not change info's status
    report = json.loads(capsys.readouterr().out)
    assert report["system"] == {
        "driver_version": None,
        "nvml_version": None,
        "cuda_driver_version": None,
        "gpus": [],
        "topology": [],
        "error": str(error),
    }
    assert main(["info"]) == EXIT_OK
    captured = capsys.readouterr()
    assert f"\nSystem (NVML): not available: {error}\n" in captured.out
    assert captured.err == ""
    # --watch has nothing to show: it says why and exits.
    assert main(["info", "--watch", "1"]) == status
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"cudriver: {error}\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["info", "--watch", "0"],
        ["info", "--watch", "-1"],
        ["info", "--watch", "nan"],
        ["info", "--watch", "inf"],
        ["info", "--watch", "soon"],
        ["info", "--watch"],
        ["info", "--watch", "1", "--count", "0"],
        ["info", "--watch", "1", "--count", "1.5"],
        ["info", "--count", "2"],  # --count needs --watch
    ],
)
def test_watch_arguments_are_checked(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "usage: python -m cudriver info" in err
    assert "Traceback" not in err


def test_watch_arguments_are_checked_by_the_module() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "cudriver", "info", "--watch", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == EXIT_USAGE
    assert "expected a number of seconds > 0, not '0'" in p.stderr


def test_watch_prints_a_block_per_refresh(
    fake_machine: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["info", "--watch", "0.5", "--count", "2"]) == EXIT_OK
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "\x1b[" not in captured.out  # not a terminal: no escape sequences
    first, second = captured.out.split("\n\n")
    for block in (first, second):
        lines = block.splitlines()
        assert lines[0].startswith("cudriver info --watch 0.5: ")
        assert lines[0].endswith(" (Ctrl-C to stop)")
        assert lines[1:] == SYSTEM_LINES
    assert fake_machine == [0.5]  # a pause between the refreshes, none after the last


def test_watch_in_place_on_a_terminal(
    fake_machine: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["info", "--watch", "2", "--count", "3"]) == EXIT_OK
    text = out.getvalue()
    assert text.startswith("\x1b[2J\x1b[H")  # the screen cleared once, the cursor home
    assert text.count("\x1b[2J") == 1
    assert text.count("\x1b[H") == 3  # each refresh from the top
    assert text.count("\x1b[J") == 3  # what an earlier, longer block left is cleared
    block = text.split("\x1b[H")[2].split("\x1b[J")[0]
    assert [ln.removesuffix("\x1b[K") for ln in block.splitlines()][1:] == SYSTEM_LINES
    assert fake_machine == [2.0, 2.0]


def test_watch_json_prints_one_object_a_line(
    fake_machine: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["info", "--json", "--watch", "1", "--count", "2"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    for line in lines:
        obj = json.loads(line)
        assert set(obj) == {"time", "system"}
        assert obj["system"] == fabricated().to_dict()


def test_watch_until_ctrl_c(
    fake_machine: list[float],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_sleep", interrupted)
    assert main(["info", "--watch", "1"]) == EXIT_OK  # Ctrl-C is how --watch ends
    captured = capsys.readouterr()
    assert captured.out.count(SYSTEM_LINES[0]) == 1
    assert captured.err == ""

    calls: list[int] = []

    def interrupted_reading() -> cu.SystemInfo:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return fabricated()

    monkeypatch.setattr(cli, "system_info", interrupted_reading)
    monkeypatch.setattr(cli, "_sleep", lambda s: None)
    assert main(["info", "--watch", "1"]) == EXIT_OK
    assert capsys.readouterr().out.count(SYSTEM_LINES[0]) == 2


def test_watch_stops_when_nvml_fails_midway(
    fake_machine: list[float],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    readings: list[Callable[[], cu.SystemInfo]] = [fabricated]

    def lost() -> cu.SystemInfo:
        raise cu.NvmlError("nvmlDeviceGetUUID", 15, "GPU is lost")

    def reading() -> cu.SystemInfo:
        return readings.pop(0)() if readings else lost()

    monkeypatch.setattr(cli, "system_info", reading)
    assert main(["info", "--watch", "1", "--count", "5"]) == EXIT_FAILED
    captured = capsys.readouterr()
    assert captured.out.count(SYSTEM_LINES[0]) == 1
    assert captured.err.startswith("cudriver: nvmlDeviceGetUUID failed: NVML_ERROR_GPU_IS_LOST")


# -- on a GPU ------------------------------------------------------------------------------


def _by_uuid(info: cu.SystemInfo) -> dict[str, cu.GpuInfo]:
    return {g.uuid: g for g in info.gpus}


@pytest.mark.gpu
def test_every_visible_device_maps_to_one_gpu() -> None:
    info = cu.system_info()
    assert info.driver_version and info.nvml_version
    assert info.cuda_driver_version is not None
    assert info.cuda_driver_version[0] == cu.driver_version()[0]
    gpus = _by_uuid(info)
    assert len(gpus) == len(info.gpus)  # one GpuInfo per UUID
    for dev in cu.Device.all():
        [g] = [g for g in info.gpus if g.cuda_ordinal == dev.ordinal]
        assert g.uuid == f"GPU-{dev.uuid}"
        assert g.name == dev.name
        assert g.memory_total is not None
        assert abs(g.memory_total - dev.total_memory) <= 0.01 * dev.total_memory
        assert g.memory_used is not None and 0 <= g.memory_used <= g.memory_total
        assert g.pci_bus_id is not None
        assert g.pci_bus_id.lower().endswith(dev.pci_bus_id.lower().split(":", 1)[1])
        assert g.clocks.sm_max is None or g.clocks.sm_max > 0
        assert g.performance_state is None or 0 <= g.performance_state <= 15
        for p in g.processes:
            assert p.pid > 0
        mine = cu.gpu_info(dev.ordinal)
        assert (mine.nvml_index, mine.cuda_ordinal, mine.uuid) == (
            g.nvml_index,
            dev.ordinal,
            g.uuid,
        )
    ordinals = [g.cuda_ordinal for g in info.gpus if g.cuda_ordinal is not None]
    assert sorted(ordinals) == list(range(cu.Device.count()))


_SMI_FIELDS = "uuid,name,memory.total,memory.used,temperature.gpu,power.limit"


def _run_nvidia_smi(*args: str) -> str:
    """``nvidia-smi``'s output for ``args``; the test skipped where it is not installed."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        pytest.skip("nvidia-smi is not installed")
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def _nvidia_smi() -> list[list[str]]:
    out = _run_nvidia_smi(f"--query-gpu={_SMI_FIELDS}", "--format=csv,noheader,nounits")
    return [[f.strip() for f in line.split(",")] for line in out.strip().splitlines()]


def _nvidia_smi_topology() -> dict[tuple[int, int], str]:
    """``nvidia-smi topo -m``'s cell for each ordered pair of GPUs (``"NV18"``, ``"PHB"``).

    Its ``GPU<k>`` is NVML's index k. The header row names the GPUs first, then NICs and
    the affinity columns; each GPU's row has its cells in that order.
    """
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", _run_nvidia_smi("topo", "-m"))
    gpu = re.compile(r"GPU(\d+)")
    columns: list[int] = []
    cells: dict[tuple[int, int], str] = {}
    for line in text.splitlines():
        words = line.split()
        if not columns:
            if words and gpu.fullmatch(words[0]):  # the header: GPU0 GPU1 ... NIC0 CPU ...
                for w in words:
                    m = gpu.fullmatch(w)
                    if m is None:
                        break
                    columns.append(int(m.group(1)))
            continue
        m = gpu.fullmatch(words[0]) if words else None
        if m is None:
            continue
        i = int(m.group(1))
        for j, cell in zip(columns, words[1 : 1 + len(columns)], strict=True):
            if i != j:
                cells[i, j] = cell
    return cells


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


@pytest.mark.gpu
def test_system_info_agrees_with_nvidia_smi() -> None:
    # Memory in use moves while other processes (a parallel test run) allocate: read
    # ours before and after nvidia-smi, and compare once they agree with each other.
    for _ in range(20):
        before = _by_uuid(cu.system_info(topology=False))
        rows = _nvidia_smi()
        info = cu.system_info()
        gpus = _by_uuid(info)
        steady = all(
            abs((before[u].memory_used or 0) - (gpus[u].memory_used or 0)) <= 64 * MiB
            for u in gpus
            if u in before
        )
        if steady:
            break
        time.sleep(0.2)
    assert sorted(gpus) == sorted(r[0] for r in rows)
    for uuid_text, name, total, used, temp, limit in rows:
        g = gpus[uuid_text]
        assert g.name == name
        assert g.memory_total is not None and g.memory_used is not None
        assert abs(g.memory_total / MiB - float(total)) <= 0.01 * float(total)
        lo = min(before[uuid_text].memory_used or 0, g.memory_used) / MiB
        hi = max(before[uuid_text].memory_used or 0, g.memory_used) / MiB
        assert lo - 256 <= float(used) <= hi + 256, (lo, float(used), hi)
        t = _number(temp)
        if t is None:
            assert g.temperature_c is None
        else:
            assert g.temperature_c is not None and abs(g.temperature_c - t) <= 5
        w = _number(limit)
        if w is None:
            assert g.power_limit_w is None
        else:
            assert g.power_limit_w is not None and abs(g.power_limit_w - w) <= 1


@pytest.mark.gpu
def test_no_cuda_context_is_made() -> None:
    # A fresh process: system_info and gpu_info leave every primary context inactive and
    # none current (cuDevicePrimaryCtxGetState, cuCtxGetCurrent).
    code = (
        "import cudriver as cu\n"
        "from cuda.bindings import driver as d\n"
        "info = cu.system_info()\n"
        "cu.gpu_info(0)\n"
        "assert any(g.cuda_ordinal == 0 for g in info.gpus)\n"
        "for dev in cu.Device.all():\n"
        "    err, flags, active = d.cuDevicePrimaryCtxGetState(dev.handle)\n"
        "    assert err == d.CUresult.CUDA_SUCCESS and not active, (dev, err, active)\n"
        "err, ctx = d.cuCtxGetCurrent()\n"
        "assert err == d.CUresult.CUDA_SUCCESS and int(ctx) == 0\n"
        "print('ok')\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == "ok\n"


@pytest.mark.gpu
def test_cuda_visible_devices_is_honoured() -> None:
    # Only the last GPU visible to CUDA: it is ordinal 0 there, the others have None.
    info = cu.system_info()
    last = max(info.gpus, key=lambda g: g.nvml_index)
    code = (
        "import json, cudriver as cu\n"
        "print(json.dumps({g.uuid: g.cuda_ordinal for g in cu.system_info().gpus}))\n"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": last.uuid}
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout)
    assert seen == {g.uuid: (0 if g.uuid == last.uuid else None) for g in info.gpus}


@pytest.mark.gpu
def test_info_lists_every_gpu() -> None:
    uuids = sorted(g.uuid for g in cu.system_info().gpus)
    p = subprocess.run(
        [sys.executable, "-m", "cudriver", "info"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert p.returncode == EXIT_OK, p.stderr
    assert "System (NVML): driver " in p.stdout
    for u in uuids:
        assert u in p.stdout
    p = subprocess.run(
        [sys.executable, "-m", "cudriver", "info", "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert p.returncode == EXIT_OK, p.stderr
    report = json.loads(p.stdout)
    assert report["system"]["error"] is None
    assert sorted(g["uuid"] for g in report["system"]["gpus"]) == uuids
    p = subprocess.run(
        [sys.executable, "-m", "cudriver", "info", "--watch", "0.1", "--count", "2"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert p.returncode == EXIT_OK, p.stderr
    assert p.stdout.count("System (NVML): driver ") == 2


@pytest.mark.gpu
def test_topology_has_an_entry_per_pair() -> None:
    info = cu.system_info()
    n = len(info.gpus)
    if n < 2:
        pytest.skip(f"one GPU ({n}): no pairs")
    indices = [g.nvml_index for g in info.gpus]
    assert set(info.topology) == {(i, j) for i in indices for j in indices if i != j}
    names = {name for name, _ in system.TOPOLOGY_LEVELS.values()}
    for (i, j), t in info.topology.items():
        assert t.level in names
        assert info.topology[j, i].level == t.level
        for v in (t.p2p_read, t.p2p_write, t.p2p_nvlink, t.p2p_atomics):
            assert v is None or isinstance(v, bool)
    for t in info.topology.values():
        assert t.nvlinks is None or (isinstance(t.nvlinks, int) and t.nvlinks >= 0)
    text = "\n".join(system.format_system(info))
    assert "topology (NVLinks, else common ancestor;" in text
    # GPUs that NVML says reach each other over NVLink are peers for CUDA too.
    devs = {g.nvml_index: g.cuda_ordinal for g in info.gpus}
    for (i, j), t in info.topology.items():
        a, b = devs[i], devs[j]
        if a is not None and b is not None and t.p2p_nvlink:
            assert cu.Device(a).can_access_peer(cu.Device(b))


@pytest.mark.gpu
def test_nvlinks_agree_with_nvidia_smi_topo() -> None:
    # nvidia-smi topo -m's NV<n> is our nvlinks n; a PCIe cell (PHB, SYS, ...) is 0 or
    # None (no NVLink readings), pair by pair.
    info = cu.system_info()
    if len(info.gpus) < 2:
        pytest.skip(f"{len(info.gpus)} GPU: no pairs")
    smi = _nvidia_smi_topology()
    ours = {pair: t.nvlinks for pair, t in info.topology.items()}
    pairs = set(smi) & set(ours)
    assert pairs, (smi, ours)
    for pair in sorted(pairs):
        m = re.fullmatch(r"NV(\d+)", smi[pair])
        if m is not None:
            assert ours[pair] == int(m.group(1)), (pair, smi[pair], ours[pair])
        else:
            assert ours[pair] in (0, None), (pair, smi[pair], ours[pair])
    # The matrix draws what nvidia-smi does.
    lines = system._topology_lines(sorted({i for i, _ in info.topology}), info.topology)
    for (i, j), cell in smi.items():
        if cell.startswith("NV") and (i, j) in ours:
            row = next(ln for ln in lines if ln.startswith(f"    GPU{i} "))
            assert f"{cell} " in row
