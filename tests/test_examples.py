"""The scripts in examples/: each one runs, and each one is tested, compiles and is documented.

Every example runs in a subprocess with this interpreter, the tested cudriver (the
installed package, or ``src`` built in place) first on ``PYTHONPATH`` and the rest of
the environment kept. A script
reports success with the last line ``NAME: OK`` and exit status 0.
"""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from ._support import nccl_ranks_unavailable_reason, needs_nvrtc, package_root, run_ranks

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"
TIMEOUT_S = 120


def example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.py"))


def run_example(name: str) -> None:
    """Run ``examples/NAME.py``; fail with its output unless it ends in ``NAME: OK``."""
    env = dict(os.environ)
    paths = [package_root()]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    cmd = [sys.executable, str(EXAMPLES / f"{name}.py")]
    try:
        r = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        pytest.fail(
            f"examples/{name}.py ran past {TIMEOUT_S} s\n--- stdout\n{out}\n--- stderr\n{err}"
        )
    output = f"--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
    assert r.returncode == 0, f"examples/{name}.py exited with status {r.returncode}\n{output}"
    lines = r.stdout.strip().splitlines()
    assert lines, f"examples/{name}.py printed nothing\n{output}"
    assert lines[-1] == f"{name}: OK", output


@pytest.mark.gpu
@needs_nvrtc
def test_vector_add() -> None:
    run_example("vector_add")


@pytest.mark.gpu
@needs_nvrtc
def test_capture_replay() -> None:
    run_example("capture_replay")


@pytest.mark.gpu
@needs_nvrtc
def test_pipeline_wait_write() -> None:
    run_example("pipeline_wait_write")


@pytest.mark.gpu
@needs_nvrtc
def test_host_callbacks() -> None:
    run_example("host_callbacks")


@pytest.mark.gpu
@needs_nvrtc
def test_interop_torch_cupy() -> None:
    run_example("interop_torch_cupy")


@pytest.mark.gpu
@needs_nvrtc
def test_asyncio_streams() -> None:
    run_example("asyncio_streams")


@pytest.mark.gpu
@needs_nvrtc
def test_sleep_wake() -> None:
    run_example("sleep_wake")


@pytest.mark.gpu
@needs_nvrtc
def test_green_contexts() -> None:
    run_example("green_contexts")


@pytest.mark.gpu
def test_nccl_allreduce() -> None:
    """Two ranks that bootstrap over TCP on localhost, exactly as two machines would."""
    reason = nccl_ranks_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    script = str(EXAMPLES / "nccl_allreduce.py")
    results = run_ranks([sys.executable, script], 2, timeout=90)
    for rank, (status, out, err) in enumerate(results):
        report = f"rank {rank} exited with {status}\n--- stdout\n{out}\n--- stderr\n{err}"
        assert status == 0, report
        assert f"rank {rank}/2: all-reduce of 64 MiB float32 equals numpy" in out, report
        assert f"rank {rank}/2: captured all-reduce replayed 10 times" in out, report
        assert out.strip().splitlines()[-1] == "nccl_allreduce: OK", report


def test_examples_exist() -> None:
    assert example_names(), "no scripts in examples/"


@pytest.mark.parametrize("name", example_names())
def test_example_is_tested_compiles_and_is_documented(name: str, tmp_path: Path) -> None:
    test = globals().get(f"test_{name}")
    assert callable(test), f"examples/{name}.py has no test_{name} in tests/test_examples.py"
    marks = getattr(test, "pytestmark", [])
    assert any(m.name == "gpu" for m in marks), f"test_{name} lacks the gpu marker"
    path = EXAMPLES / f"{name}.py"
    py_compile.compile(str(path), cfile=str(tmp_path / f"{name}.pyc"), doraise=True)
    ref = f"examples/{name}.py"
    guides = [p for p in sorted(DOCS.glob("*.md")) if ref in p.read_text(encoding="utf-8")]
    assert guides, f"no guide in docs/ mentions {ref}"
    listing = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    assert f"({name}.py)" in listing, f"examples/README.md does not link {name}.py"
