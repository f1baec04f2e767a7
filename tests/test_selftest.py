from __future__ import annotations

import io
import subprocess
import sys

import pytest
from cuda.bindings import driver as drv

from cudriver import _selftest as selftest
from cudriver.__main__ import main as cli_main
from cudriver._selftest import Check, Runner, format_line
from cudriver.errors import make_error

from .conftest import gpu_unavailable_reason

no_driver = pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a driver is present")

CHECK_NAMES = [
    "driver",
    "compile (NVRTC)",
    "kernel vs numpy",
    "prepared launch",
    "graph capture",
    "graph replay x3",
    "host function",
    "memory operations",
    "graph kernels",
]


def test_format_line() -> None:
    assert format_line(Check("driver", True, 1.234, "NVIDIA H200")) == (
        "PASS  driver                        1.23 ms  NVIDIA H200"
    )
    line = format_line(Check("graph replay x3", False, 12.0))
    assert line.startswith("FAIL  graph replay x3")
    assert line.endswith("12.00 ms")


def test_runner_reports_pass_fail_and_skips_dependants() -> None:
    out = io.StringIO()
    r = Runner(out=out)

    def boom() -> str:
        raise ValueError("bad value\nsecond line")

    assert r.run("first", lambda: "fine") is True
    assert r.run("second", boom, needs=["first"]) is False
    assert r.run("third", lambda: None, needs=["second"]) is False
    assert r.run("fourth", lambda: None, needs=["first"]) is True
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("PASS  first")
    assert lines[0].endswith("fine")
    assert lines[1].startswith("FAIL  second")
    assert lines[1].endswith("ValueError: bad value")
    assert lines[2].startswith("FAIL  third")
    assert lines[2].endswith("not run: second failed")
    assert lines[3].startswith("PASS  fourth")
    assert [c.passed for c in r.results] == [True, False, False, True]
    assert not r.ok
    assert r.summary() == "selftest: 2 passed, 2 failed"


def test_runner_ok_needs_a_check() -> None:
    r = Runner(out=io.StringIO())
    assert not r.ok
    r.run("only", lambda: None)
    assert r.ok
    assert r.summary() == "selftest: 1 passed, 0 failed"


class FakeStream:
    def __init__(self, ready_after: int | None) -> None:
        self.queries = 0
        self.ready_after = ready_after
        self.synced = False

    def query(self) -> bool:
        self.queries += 1
        return self.ready_after is not None and self.queries > self.ready_after

    def synchronize(self) -> None:
        self.synced = True


def test_wait_polls_then_synchronizes() -> None:
    s = FakeStream(ready_after=3)
    selftest._wait(s, timeout=5.0)
    assert s.queries == 4
    assert s.synced


def test_wait_times_out_instead_of_hanging() -> None:
    s = FakeStream(ready_after=None)
    with pytest.raises(TimeoutError, match="did not complete"):
        selftest._wait(s, timeout=0.01)
    assert not s.synced


def test_exit_statuses() -> None:
    assert (selftest.EXIT_OK, selftest.EXIT_FAILED) == (0, 1)
    assert (selftest.EXIT_USAGE, selftest.EXIT_NO_DRIVER) == (2, 3)
    help_text = selftest.build_parser().format_help()
    assert "3 no NVIDIA driver or no CUDA device" in " ".join(help_text.split())


@pytest.mark.parametrize("argv", [["--device", "-1"], ["--device", "x"], ["--nope"]])
def test_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        selftest.main(argv)
    assert info.value.code == selftest.EXIT_USAGE == 2


@pytest.mark.parametrize("argv", [["--device", "-1"], ["--nope"]])
def test_usage_errors_through_the_cli_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli_main(["selftest", *argv])
    assert info.value.code == 2


def test_zero_devices_returns_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(selftest, "init", lambda: None)
    monkeypatch.setattr(selftest.Device, "count", staticmethod(lambda: 0))
    assert selftest.main([]) == selftest.EXIT_NO_DRIVER
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "cudriver: the CUDA driver sees no device\n"


@pytest.mark.parametrize(
    ("result", "status"),
    [
        (drv.CUresult.CUDA_ERROR_NO_DEVICE, selftest.EXIT_NO_DRIVER),
        (drv.CUresult.CUDA_ERROR_UNKNOWN, selftest.EXIT_FAILED),
        (drv.CUresult.CUDA_ERROR_INVALID_DEVICE, selftest.EXIT_FAILED),
    ],
)
def test_init_errors(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    result: drv.CUresult,
    status: int,
) -> None:
    def failing_init() -> None:
        raise make_error(result, "cuInit")

    monkeypatch.setattr(selftest, "init", failing_init)
    assert selftest.main([]) == status
    assert cli_main(["selftest"]) == status
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 2
    assert all(line.startswith(f"cudriver: cuInit failed: {result.name}") for line in lines)


@no_driver
def test_main_without_driver_returns_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert selftest.main([]) == selftest.EXIT_NO_DRIVER == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("cudriver: CUDA driver not found")


@no_driver
def test_module_without_driver_exits_3() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "cudriver._selftest"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 3
    assert p.stdout == ""
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("cudriver: CUDA driver not found")


@pytest.mark.gpu
def test_selftest_passes(capsys: pytest.CaptureFixture[str]) -> None:
    status = selftest.main([])
    out = capsys.readouterr().out
    assert status == 0, out
    lines = out.strip().splitlines()
    assert lines[-1] == f"selftest: {len(CHECK_NAMES)} passed, 0 failed"
    checks = lines[:-1]
    assert [line[6:].split("  ")[0].strip() for line in checks] == CHECK_NAMES
    assert all(line.startswith("PASS  ") for line in checks), out
