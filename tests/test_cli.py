from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import pytest
from cuda.bindings import driver as drv

import cudriver as cu
import cudriver.__main__ as cli
from cudriver.__main__ import (
    EXIT_FAILED,
    EXIT_NO_DRIVER,
    EXIT_OK,
    EXIT_USAGE,
    build_parser,
    collect,
    main,
)
from cudriver._launch.program import NvrtcNotFoundError, _compatibility_note
from cudriver.errors import make_error

from .conftest import gpu_unavailable_reason

no_driver = pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a driver is present")

KEYS = {
    "cudriver",
    "implementation",
    "implementation_reason",
    "cuda_bindings",
    "python",
    "python_implementation",
    "platform",
    "nvrtc",
    "nvrtc_error",
    "driver",
    "devices",
    "notes",
    "error",
    "system",
}
DEVICE_KEYS = {
    "ordinal",
    "name",
    "compute_capability",
    "arch",
    "total_memory",
    "multiprocessor_count",
    "pci_bus_id",
    "uuid",
    "can_use_64_bit_stream_mem_ops",
    "can_use_stream_wait_value_nor",
}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cudriver", *args], capture_output=True, text=True, check=False
    )


def info_json(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    status = main(["info", "--json"])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert isinstance(report, dict)
    assert set(report) == KEYS
    return status, report


# -- the exit statuses ----------------------------------------------------------------------


def test_exit_statuses_are_documented() -> None:
    assert (EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_DRIVER) == (0, 1, 2, 3)
    help_text = build_parser().format_help()
    doc = cli.__doc__ or ""
    for status, what in [(0, "success"), (1, "a check failed"), (2, "usage"), (3, "no NVIDIA")]:
        assert f"  {status}  {what}" in help_text
        assert f"{status} (:data:`EXIT_" in doc
        assert what in doc


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == EXIT_OK
    assert capsys.readouterr().out == f"cudriver {cu.__version__}\n"
    p = run_cli("--version")
    assert p.returncode == 0
    assert p.stdout == f"cudriver {cu.__version__}\n"


@pytest.mark.parametrize(
    "argv", [[], ["nonsense"], ["info", "--nope"], ["info", "extra"], ["--nope", "info"]]
)
def test_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_USAGE
    assert "usage: python -m cudriver" in capsys.readouterr().err


def test_usage_error_of_the_module() -> None:
    p = run_cli("nonsense")
    assert p.returncode == EXIT_USAGE
    assert "Traceback" not in p.stderr


# -- without a driver (CI) ------------------------------------------------------------------


@no_driver
def test_info_without_driver_exits_3() -> None:
    p = run_cli("info")
    assert p.returncode == EXIT_NO_DRIVER
    # What can be said without a driver: the versions and the implementation in use.
    out = p.stdout.splitlines()
    assert out[0].startswith(f"cudriver {cu.__version__} ({cu.info()['implementation']}: ")
    assert out[1] == f"cuda-bindings {cu.bindings_version()}"
    assert out[2].startswith(f"Python {sys.version.split()[0]} (")
    assert out[3].startswith(("NVRTC 1", "NVRTC not available: "))
    assert all(line.startswith("note: ") for line in out[4:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr  # one clear line, no traceback
    assert lines[0].startswith("cudriver: CUDA driver not found")
    assert "Traceback" not in p.stderr


@no_driver
def test_info_json_without_driver_exits_3() -> None:
    p = run_cli("info", "--json")
    assert p.returncode == EXIT_NO_DRIVER
    assert p.stderr == ""
    report = json.loads(p.stdout)
    assert set(report) == KEYS
    assert report["cudriver"] == cu.__version__
    assert report["cuda_bindings"] == cu.bindings_version()
    assert report["implementation"] == cu.info()["implementation"]
    assert report["implementation_reason"] == cu.info()["implementation_reason"]
    assert report["python"] == sys.version.split()[0]
    assert report["driver"] is None
    assert report["devices"] == []
    assert report["error"].startswith("CUDA driver not found")
    # NVRTC: a version, or None with the reason.
    assert (report["nvrtc"] is None) != (report["nvrtc_error"] is None)


@no_driver
def test_selftest_command_without_driver_exits_3() -> None:
    p = run_cli("selftest")
    assert p.returncode == EXIT_NO_DRIVER
    assert p.stdout == ""
    assert p.stderr.startswith("cudriver: CUDA driver not found")


# -- simulated drivers (no GPU needed) -------------------------------------------------------


class FakeDevice:
    """Stands in for cudriver.Device in the command line's module."""

    n = 1

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self.name = f"Fake GPU {ordinal}"
        self.compute_capability = cu.ComputeCapability(9, 0)
        self.total_memory = 80 * 2**30
        self.multiprocessor_count = 132
        self.pci_bus_id = f"0000:{ordinal:02x}:00.0"
        self.uuid = uuid.UUID(int=ordinal + 1)

    @classmethod
    def count(cls) -> int:
        return cls.n

    def attribute(self, attr: Any) -> int:
        return 1 if attr == cu.DeviceAttribute.CAN_USE_64_BIT_STREAM_MEM_OPS else 0


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch) -> type[FakeDevice]:
    """A CUDA 12.8 driver with one fake device, NVRTC 12.8."""

    class Devices(FakeDevice):
        n = 1

    monkeypatch.setattr(cli, "driver_version", lambda: (12, 8))
    monkeypatch.setattr(cli, "init", lambda: None)
    monkeypatch.setattr(cli, "nvrtc_version", lambda: (12, 8))
    monkeypatch.setattr(cli, "Device", Devices)
    return Devices


def test_info_json_with_a_device(
    fake_driver: type[FakeDevice], capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = info_json(capsys)
    assert status == EXIT_OK
    assert report["driver"] == "12.8"
    assert report["nvrtc"] == "12.8"
    assert report["nvrtc_error"] is None
    assert report["error"] is None
    assert report["notes"] == []
    [dev] = report["devices"]
    assert set(dev) == DEVICE_KEYS
    assert dev == {
        "ordinal": 0,
        "name": "Fake GPU 0",
        "compute_capability": "9.0",
        "arch": "sm_90",
        "total_memory": 80 * 2**30,
        "multiprocessor_count": 132,
        "pci_bus_id": "0000:00:00.0",
        "uuid": str(uuid.UUID(int=1)),
        "can_use_64_bit_stream_mem_ops": True,
        "can_use_stream_wait_value_nor": False,
    }


def test_info_text_with_a_device(
    fake_driver: type[FakeDevice], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["info"]) == EXIT_OK
    captured = capsys.readouterr()
    assert captured.err == ""
    out = captured.out.splitlines()
    assert out[3] == "NVRTC 12.8"
    assert out[4:7] == ["CUDA driver 12.8", "devices: 1", "  [0] Fake GPU 0"]
    assert "compute capability 9.0 (sm_90)" in captured.out
    assert "memory 80.0 GiB, 132 SMs" in captured.out
    assert "stream memory ops: 64-bit True, wait NOR False" in captured.out


def test_zero_devices_exits_3(
    fake_driver: type[FakeDevice], capsys: pytest.CaptureFixture[str]
) -> None:
    fake_driver.n = 0
    status, report = info_json(capsys)
    assert status == EXIT_NO_DRIVER
    assert report["driver"] == "12.8"
    assert report["devices"] == []
    assert report["error"] == "the CUDA driver sees no device"
    assert main(["info"]) == EXIT_NO_DRIVER
    captured = capsys.readouterr()
    assert "CUDA driver 12.8" in captured.out
    assert captured.err == "cudriver: the CUDA driver sees no device\n"


def test_no_device_error_exits_3(
    fake_driver: type[FakeDevice],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def no_device() -> None:
        raise make_error(drv.CUresult.CUDA_ERROR_NO_DEVICE, "cuInit")

    monkeypatch.setattr(cli, "init", no_device)
    status, report = info_json(capsys)
    assert status == EXIT_NO_DRIVER
    assert report["driver"] == "12.8"
    assert "CUDA_ERROR_NO_DEVICE" in report["error"]
    assert main(["info"]) == EXIT_NO_DRIVER
    assert "CUDA_ERROR_NO_DEVICE" in capsys.readouterr().err


def test_cuda_error_exits_1(
    fake_driver: type[FakeDevice],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def broken(self: FakeDevice, attr: Any) -> int:
        raise make_error(drv.CUresult.CUDA_ERROR_UNKNOWN, "cuDeviceGetAttribute")

    fake_driver.n = 2
    monkeypatch.setattr(fake_driver, "attribute", broken)
    status, report = info_json(capsys)
    assert status == EXIT_FAILED
    assert report["driver"] == "12.8"
    assert report["error"].startswith("cuDeviceGetAttribute failed: CUDA_ERROR_UNKNOWN")
    assert main(["info"]) == EXIT_FAILED
    captured = capsys.readouterr()
    assert "CUDA driver 12.8" in captured.out
    assert "Traceback" not in captured.err
    assert captured.err.startswith("cudriver: cuDeviceGetAttribute failed")


def test_nvrtc_missing_is_reported(
    fake_driver: type[FakeDevice],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def missing() -> tuple[int, int]:
        raise NvrtcNotFoundError("libnvrtc.so.13: not found")

    monkeypatch.setattr(cli, "nvrtc_version", missing)
    status, report = info_json(capsys)
    assert status == EXIT_OK
    assert report["nvrtc"] is None
    assert "libnvrtc.so.13: not found" in report["nvrtc_error"]
    assert main(["info"]) == EXIT_OK
    assert "\nNVRTC not available: NVRTC (the CUDA" in capsys.readouterr().out


def test_nvrtc_newer_than_the_driver_is_a_note(
    fake_driver: type[FakeDevice],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cli, "nvrtc_version", lambda: (13, 0))
    status, report = info_json(capsys)
    assert status == EXIT_OK  # a warning, not a failure: cubins may still load
    [note] = report["notes"]
    assert note.startswith("NVRTC 13.0 is newer than the CUDA 12.8 driver")
    assert ".[cu12]" in note
    assert main(["info"]) == EXIT_OK
    assert "\nnote: NVRTC 13.0 is newer" in capsys.readouterr().out


def test_collect_is_json_ready(fake_driver: type[FakeDevice]) -> None:
    report, status = collect()
    assert status == EXIT_OK
    assert json.loads(json.dumps(report)) == report


# -- what the notes say ----------------------------------------------------------------------


def test_compatibility_note() -> None:
    # NVRTC no newer than the driver: nothing to say.
    assert _compatibility_note((12, 8), driver=(12, 8), bindings_major=12) is None
    assert _compatibility_note((12, 9), driver=(13, 0), bindings_major=13) is None
    assert _compatibility_note((12, 9), driver=(13, 0), bindings_major=12) is None
    # A newer major than the driver's: the other major's extra.
    note = _compatibility_note((13, 0), driver=(12, 9), bindings_major=12)
    assert note is not None
    assert "cannot load the PTX" in note
    assert 'pip install ".[cu12]"' in note
    assert "pip uninstall nvidia-cuda-nvrtc`" in note
    # A newer minor of the same major: a cubin, or an older NVRTC of that major.
    note = _compatibility_note((12, 9), driver=(12, 4), bindings_major=12)
    assert note is not None
    assert "target='cubin'" in note
    assert "nvidia-cuda-nvrtc-cu12==12.4.*" in note
    note = _compatibility_note((13, 2), driver=(13, 0), bindings_major=13)
    assert note is not None
    assert "nvidia-cuda-nvrtc==13.0.*" in note
    # No driver: only a newer major than the bindings' is worth a note.
    assert _compatibility_note((13, 0), driver=None, bindings_major=13) is None
    assert _compatibility_note((12, 9), driver=None, bindings_major=13) is None
    note = _compatibility_note((13, 0), driver=None, bindings_major=12)
    assert note is not None
    assert "cuda-bindings 12.x" in note
    assert ".[cu12]" in note


# -- on a GPU ------------------------------------------------------------------------------


@pytest.mark.gpu
def test_info_lists_devices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "CUDA driver" in out
    assert f"({cu.info()['implementation']}: " in out.splitlines()[0]
    assert "[0]" in out
    assert "compute capability" in out


@pytest.mark.gpu
def test_info_json_lists_the_devices(capsys: pytest.CaptureFixture[str]) -> None:
    status, report = info_json(capsys)
    assert status == EXIT_OK
    assert report["error"] is None
    major, minor = cu.driver_version()
    assert report["driver"] == f"{major}.{minor}"
    assert len(report["devices"]) == cu.Device.count() >= 1
    dev = report["devices"][0]
    assert set(dev) == DEVICE_KEYS
    d = cu.Device(0)
    assert dev["ordinal"] == 0
    assert dev["name"] == d.name
    cc = d.compute_capability
    assert dev["compute_capability"] == f"{cc.major}.{cc.minor}"
    assert dev["total_memory"] == d.total_memory > 0
    assert dev["multiprocessor_count"] == d.multiprocessor_count > 0
    assert dev["pci_bus_id"] == d.pci_bus_id
    assert dev["uuid"] == str(d.uuid)
    assert isinstance(dev["can_use_64_bit_stream_mem_ops"], bool)
