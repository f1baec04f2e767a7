from __future__ import annotations

import subprocess
import sys

import pytest

import cudriver as cu
from cudriver.__main__ import main

from .conftest import gpu_unavailable_reason

no_driver = pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a driver is present")


@no_driver
def test_info_without_driver_exits_2() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "cudriver", "info"], capture_output=True, text=True, check=False
    )
    assert p.returncode == 2
    # What can be said without a driver: the versions and the implementation in use.
    out = p.stdout.splitlines()
    assert out[0].startswith(f"cudriver {cu.__version__} ({cu.info()['implementation']}: ")
    assert out[1] == f"cuda-bindings {cu.bindings_version()}"
    assert len(out) == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr  # one clear line, no traceback
    assert lines[0].startswith("cudriver: CUDA driver not found")
    assert "Traceback" not in p.stderr


def test_usage_error() -> None:
    with pytest.raises(SystemExit) as info:
        main(["nonsense"])
    assert info.value.code == 2


@pytest.mark.gpu
def test_info_lists_devices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "CUDA driver" in out
    assert f"({cu.info()['implementation']}: " in out.splitlines()[0]
    assert "[0]" in out
    assert "compute capability" in out
