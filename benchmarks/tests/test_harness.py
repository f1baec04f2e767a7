from __future__ import annotations

import ast
import ctypes
import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import cli, harness, report
from benchmarks.cli import parse_args
from benchmarks.harness import (
    OP_NAMES,
    OPS,
    PEERS,
    Bench,
    Cell,
    Row,
    calls_for,
    measure,
)
from benchmarks.peer_cuda_core import CudaCorePeer
from benchmarks.peer_cudriver import CudriverPeer
from benchmarks.peer_cupy import CupyPeer
from benchmarks.peer_raw import RawPeer, per_call_raw
from benchmarks.report import evaluate_targets, format_table, to_json

from .conftest import gpu_unavailable_reason

no_driver = pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a driver is present")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "overhead.py"
OPS_BY_NAME = {op.name: op for op in OPS}


def make_row(name: str, **values: float | str | None) -> Row:
    """A row with the given peer values: a float, "error", or None for n/a."""
    row = Row(OPS_BY_NAME[name])
    for peer in PEERS:
        v = values.get(peer.replace(".", "_"))
        if v is None:
            row.cells[peer] = Cell(status="n/a", note=f"{peer} lacks it")
        elif v == "error":
            row.cells[peer] = Cell(status="error", note="RuntimeError: boom")
        else:
            assert isinstance(v, float)
            row.cells[peer] = Cell(value=v, samples=[v, v])
    return row


def results(row: Row) -> list[str]:
    return [t.result for t in row.targets]


# -- argument parsing ------------------------------------------------------------------------


def test_parse_defaults() -> None:
    args = parse_args([])
    assert args.quick is False
    assert args.repeats == cli.DEFAULT_REPEATS
    assert args.only == OP_NAMES
    assert args.json is None
    assert args.device == 0
    assert args.check is False


def test_parse_quick_and_repeats() -> None:
    assert parse_args(["--quick"]).repeats == cli.QUICK_REPEATS
    args = parse_args(["--quick", "--repeats", "5", "--json", "out.json", "--device", "1"])
    assert (args.quick, args.repeats, args.json, args.device) == (True, 5, "out.json", 1)


def test_parse_only() -> None:
    args = parse_args(["--only", "stream_query, event_record,"])
    assert args.only == ("stream_query", "event_record")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "nope"], "unknown operation nope"),
        (["--only", ","], "at least one"),
        (["--repeats", "0"], "positive integer"),
        (["--repeats", "x"], "positive integer"),
        (["--device", "-1"], "ordinal"),
        (["--bogus"], "unrecognized arguments"),
    ],
)
def test_parse_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_calls_for_quick() -> None:
    op = OPS_BY_NAME["stream_query"]
    assert calls_for(op, False) == op.calls
    assert calls_for(op, True) == op.calls // 10
    tiny = harness.Op("x", "x", "ns", 3, False)
    assert calls_for(tiny, True) == 1


def test_ops_are_unique_and_every_peer_answers_every_op() -> None:
    assert len(set(OP_NAMES)) == len(OPS)
    assert {op.unit for op in OPS} <= {"ns", "us"}
    for cls in (CudriverPeer, RawPeer, CudaCorePeer, CupyPeer):
        missing = [n for n in OP_NAMES if not hasattr(cls, f"op_{n}")]
        assert missing == [], f"{cls.__name__} lacks {missing}"
        assert cls.name in PEERS


def test_list_needs_no_driver(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == list(OP_NAMES)


# -- timing harness --------------------------------------------------------------------------


def test_measure_median_warmup_and_gc() -> None:
    values = iter([999.0, 5.0, 1.0, 3.0])
    calls: list[int] = []
    gc_states: list[bool] = []
    syncs: list[int] = []

    def run(n: int) -> float:
        calls.append(n)
        gc_states.append(gc.isenabled())
        return next(values)

    was = gc.isenabled()
    median, samples = measure(Bench(run, lambda: syncs.append(1)), 40, 3)
    assert gc.isenabled() == was
    assert calls == [4, 40, 40, 40]  # a warm-up of a tenth, then the repeats
    assert samples == [5.0, 1.0, 3.0]
    assert median == 3.0
    assert gc_states[1:] == [False, False, False]
    assert len(syncs) == 4


def test_measure_restores_gc_when_run_raises() -> None:
    def run(n: int) -> float:
        if n == 10:
            raise RuntimeError("boom")
        return 1.0

    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="boom"):
        measure(Bench(run, lambda: None), 10, 2, warmup=0)
    assert gc.isenabled()


def test_measure_rejects_nonpositive() -> None:
    b = Bench(lambda n: 1.0, lambda: None)
    with pytest.raises(ValueError, match=">= 1"):
        measure(b, 0, 3)
    with pytest.raises(ValueError, match=">= 1"):
        measure(b, 3, 0)


def test_per_call_counts_and_checks_last_result() -> None:
    seen: list[int] = []
    checked: list[object] = []

    def f(a: int, b: int) -> tuple[int, int]:
        seen.append(a + b)
        return (0, a + b)

    run = harness.per_call(f, (1, 2), checked.append)
    ns = run(50)
    assert ns >= 0
    assert seen == [3] * 50
    assert checked == [(0, 3)]


def test_per_batch_and_latency() -> None:
    events: list[str] = []
    run = harness.per_batch(lambda: events.append("body"), lambda: events.append("sync"))
    assert run(2) >= 0
    assert events == ["body", "sync", "body", "sync"]

    stamps: list[int] = []
    lat = harness.latency(lambda: stamps.append(harness.clock()), lambda: None, stamps)
    assert lat(5) >= 0

    never = harness.latency(lambda: None, lambda: None, [])
    with pytest.raises(RuntimeError, match="did not run"):
        never(1)


def test_raw_calls_are_checked_by_cudriver() -> None:
    from cuda.bindings import driver as drv

    import cudriver as cu

    calls: list[int] = []

    def fine() -> tuple[object]:
        calls.append(1)
        return (drv.CUresult.CUDA_SUCCESS,)

    assert per_call_raw(fine, (), "cuFine")(3) >= 0
    assert calls == [1, 1, 1]

    def bad() -> tuple[object]:
        return (drv.CUresult.CUDA_ERROR_INVALID_VALUE,)

    with pytest.raises(cu.InvalidValueError, match="cuBad"):
        per_call_raw(bad, (), "cuBad")(1)


# -- targets, table and JSON -----------------------------------------------------------------


def test_compiled_targets_fastest_rival_and_c_floor() -> None:
    rows = [
        make_row("stream_query", cudriver=470.0, raw=480.0, cupy=900.0, c=400.0),
        make_row("event_record", cudriver=600.0, raw=500.0, c=300.0),
        make_row("launch_empty", cudriver=3000.0),
        make_row("write_value32", cudriver="error", raw=400.0),
        make_row("eager_100", cudriver=400.0, raw=390.0, cuda_core=380.0),
    ]
    evaluate_targets(rows)
    assert rows[0].ratio == pytest.approx(470 / 480)
    assert results(rows[0]) == ["PASS", "PASS"]
    assert "raw 480" in rows[0].targets[0].text
    assert "(1.18)" in rows[0].targets[1].text
    assert results(rows[1]) == ["MISS", "MISS"]  # behind raw, 2x the floor
    assert results(rows[2]) == ["n/a", "n/a"]
    assert results(rows[3]) == ["n/a", "n/a"]
    assert results(rows[4]) == ["MISS"]  # no floor target: not one call
    assert "cuda.core 380" in rows[4].targets[0].text


def test_await_target_and_pure_targets() -> None:
    near = make_row("await_busy", cudriver=120.0, raw=110.0)
    far = make_row("await_busy", cudriver=170.0, raw=110.0)
    evaluate_targets([near, far])
    assert (results(near), results(far)) == (["PASS"], ["MISS"])
    rows = [
        make_row("stream_query", cudriver=700.0, raw=480.0, cupy=300.0, c=100.0),
        make_row("event_record", cudriver=800.0, raw=500.0),
        make_row("await_busy", cudriver=170.0, raw=110.0),
    ]
    evaluate_targets(rows, "pure-python")
    assert [results(r) for r in rows] == [["PASS"], ["MISS"], ["MISS"]]


def test_prepared_launch_target_uses_cuda_core_plain_launch() -> None:
    plain = make_row("launch_args", cudriver=5000.0, raw=5000.0, cuda_core=6000.0)
    fast = make_row("launch_prepared", cudriver=3900.0, raw=3800.0)
    evaluate_targets([plain, fast])
    assert results(fast) == ["MISS", "n/a", "PASS"]  # behind raw, no floor, ahead of cuda.core
    assert "6,000" in fast.targets[2].text

    slow = make_row("launch_prepared", cudriver=6700.0, raw=6000.0)
    evaluate_targets([plain, slow])
    assert results(slow) == ["MISS", "n/a", "MISS"]

    alone = make_row("launch_prepared", cudriver=3900.0, raw=3800.0)
    evaluate_targets([alone])
    assert results(alone) == ["MISS", "n/a", "n/a"]


def test_host_function_target() -> None:
    good = make_row("host_func_enqueue", cudriver=1000.0, raw=900.0, cupy=2000.0)
    bad = make_row("host_func_enqueue", cudriver=1500.0, raw=900.0, cupy=2000.0)
    missing = make_row("host_func_enqueue", cudriver=1500.0, raw=900.0)
    evaluate_targets([good])
    evaluate_targets([bad])
    evaluate_targets([missing])
    assert [results(r)[-1] for r in (good, bad, missing)] == ["PASS", "MISS", "n/a"]


def test_graph_speedup_target() -> None:
    eager = make_row("eager_100", cudriver=400.0, raw=380.0)
    graph = make_row("graph_100", cudriver=50.0, raw=49.0)
    evaluate_targets([eager, graph])
    assert results(graph) == ["MISS", "PASS"]  # behind raw; 8x eager
    assert "(8.0)" in graph.targets[1].text
    assert results(eager) == ["MISS"]

    slow = make_row("graph_100", cudriver=100.0, raw=99.0)
    evaluate_targets([eager, slow])
    assert results(slow)[-1] == "MISS"

    lonely = make_row("graph_100", cudriver=50.0, raw=49.0)
    evaluate_targets([lonely])
    assert results(lonely)[-1] == "n/a"


def sample_rows() -> list[Row]:
    rows = [
        make_row("stream_query", cudriver=512.0, raw=480.0, cupy=1234.0, c=400.0),
        make_row("eager_100", cudriver=380.25, raw=370.0, cuda_core=400.0, cupy=900.0),
        make_row("graph_100", cudriver=51.0, raw=50.0, cuda_core=55.0, cupy=60.0),
        make_row("write_value32", cudriver="error", raw=400.0),
    ]
    evaluate_targets(rows)
    return rows


def test_format_table() -> None:
    text = format_table(sample_rows())
    lines = text.splitlines()
    header = lines[0]
    for title in ("operation", "unit", "cudriver", "raw", "cuda.core", "CuPy", "cudriver/raw"):
        assert title in header
    query = next(line for line in lines if line.startswith("stream query (idle)"))
    assert "512" in query
    assert "1,234" in query
    assert "n/a" in query  # cuda.core
    assert "1.07" in query
    assert "<= fastest rival (raw 480) MISS" in query
    assert "cudriver/C <= 1.5 (1.28) PASS" in query
    eager = next(line for line in lines if line.startswith("100 kernels, eager"))
    assert "µs" in eager
    assert "380.2" in eager or "380.3" in eager
    graph = next(line for line in lines if line.startswith("100 kernels, one graph"))
    assert "eager/graph >= 5 (7.5) PASS" in graph
    wv = next(line for line in lines if line.startswith("write_value32"))
    assert "error" in wv
    assert "write_value32 [cudriver] error: RuntimeError: boom" in text
    assert "stream_query [cuda.core] n/a: cuda.core lacks it" in text


def test_format_table_empty() -> None:
    assert format_table([]).splitlines()[0].startswith("operation")


def test_to_json_round_trip() -> None:
    env = {"date": "2025-01-01T00:00:00+00:00", "gpu": "Fake GPU", "python": "3.12.0"}
    settings = {"quick": True, "repeats": 3}
    doc = json.loads(json.dumps(to_json(env, sample_rows(), settings)))
    assert doc["schema"] == 1
    assert doc["environment"]["gpu"] == "Fake GPU"
    assert doc["settings"] == settings
    names = [r["name"] for r in doc["rows"]]
    assert names == ["stream_query", "eager_100", "graph_100", "write_value32"]
    q = doc["rows"][0]
    assert q["unit"] == "ns"
    assert q["results"]["cudriver"] == {
        "status": "ok",
        "value": 512.0,
        "samples": [512.0, 512.0],
        "note": "",
    }
    assert q["results"]["cuda.core"]["status"] == "n/a"
    assert q["results"]["cuda.core"]["value"] is None
    assert q["ratio_cudriver_raw"] == pytest.approx(1.067, abs=1e-3)
    assert q["targets"] == [
        {"text": "<= fastest rival (raw 480)", "result": "MISS"},
        {"text": "cudriver/C <= 1.5 (1.28)", "result": "PASS"},
    ]
    wv = doc["rows"][3]
    assert wv["results"]["cudriver"]["status"] == "error"
    assert wv["results"]["cudriver"]["value"] is None
    assert wv["ratio_cudriver_raw"] is None


def test_failed_flags_misses_and_cudriver_errors() -> None:
    rows = sample_rows()
    assert report.failed(rows)  # write_value32 errored for cudriver
    ok = [make_row("stream_query", cudriver=500.0, raw=500.0)]
    evaluate_targets(ok)
    assert not report.failed(ok)


def test_error_text_is_one_line() -> None:
    assert harness.error_text(ValueError("first\nsecond")) == "ValueError: first"
    assert harness.error_text(KeyError()) == "KeyError"


# -- without a driver ------------------------------------------------------------------------


@no_driver
def test_main_without_driver_returns_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--quick"]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("cudriver: CUDA driver not found")


@no_driver
def test_script_without_driver_exits_3() -> None:
    p = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 3, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [p.stderr.strip()]
    assert p.stderr.startswith("cudriver: CUDA driver not found")


def test_script_lists_operations() -> None:
    p = subprocess.run(
        [sys.executable, str(SCRIPT), "--list"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert [line.split()[0] for line in p.stdout.splitlines()] == list(OP_NAMES)


@pytest.mark.parametrize("arg", ["--list", "--help"])
def test_script_runs_without_the_package_installed(arg: str) -> None:
    # -S: no site-packages, so neither cudriver nor its dependencies can be found; the
    # script falls back to src/, and --list and --help need no more.
    p = subprocess.run(
        [sys.executable, "-S", str(SCRIPT), arg],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO / "benchmarks",
    )
    assert p.returncode == 0, p.stderr
    if arg == "--list":
        assert [line.split()[0] for line in p.stdout.splitlines()] == list(OP_NAMES)
    else:
        assert p.stdout.startswith("usage: python benchmarks/overhead.py")


def test_only_the_public_api_of_cudriver() -> None:
    """The benchmark imports ``cudriver`` itself, never one of its modules."""
    for path in sorted((REPO / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                mod = node.module or ""
                assert mod != "cudriver", (path, mod)
                assert not mod.startswith("cudriver."), (path, mod)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("cudriver."), (path, alias.name)


# -- on a GPU --------------------------------------------------------------------------------


@pytest.mark.gpu
def test_quick_run_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert cli.main(["--quick", "--repeats", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cudriver/raw" in text
    doc = json.loads(out.read_text())
    assert doc["environment"]["gpu"]
    assert doc["environment"]["shared_primary_context"] is True
    assert [r["name"] for r in doc["rows"]] == list(OP_NAMES)
    for r in doc["rows"]:
        for peer in ("cudriver", "raw"):
            cell = r["results"][peer]
            assert cell["status"] == "ok", f"{r['name']} [{peer}]: {cell['note']}"
            assert cell["value"] > 0
        for peer in ("cuda.core", "cupy"):
            assert r["results"][peer]["status"] in ("ok", "n/a"), (
                f"{r['name']} [{peer}]: {r['results'][peer]['note']}"
            )


@pytest.mark.gpu
def test_only_selected_operations(tmp_path: Path) -> None:
    out = tmp_path / "only.json"
    argv = ["--quick", "--repeats", "2", "--only", "stream_query,graph_100", "--json", str(out)]
    assert cli.main(argv) == 0
    doc = json.loads(out.read_text())
    assert [r["name"] for r in doc["rows"]] == ["stream_query", "graph_100"]
    assert doc["settings"]["repeats"] == 2
    graph = doc["rows"][1]
    assert graph["targets"][-1] == {"text": "eager/graph >= 5", "result": "n/a"}


# -- the C floor -----------------------------------------------------------------------------


def test_the_c_floor_helper_compiles_with_every_timing_function(tmp_path: Path) -> None:
    from benchmarks import peer_c

    if peer_c.compiler() is None:
        pytest.skip("no C compiler on this machine")
    dll = peer_c.build(str(tmp_path))
    for name in peer_c.SIGNATURES:
        assert getattr(dll, name).restype is ctypes.c_double
    # A timed call that fails returns minus its status, which the bench raises.
    fail = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda _a: 3)
    addr = ctypes.cast(fail, ctypes.c_void_p).value
    assert dll.t_p(addr, None, 5) == -3.0
    ok = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda _a: 0)
    assert dll.t_p(ctypes.cast(ok, ctypes.c_void_p).value, None, 100) > 0


def test_the_c_floor_without_a_compiler_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import peer_c

    monkeypatch.setattr(peer_c, "compiler", lambda: None)
    with pytest.raises(harness.Unavailable, match="no C compiler"):
        peer_c.build(str(tmp_path))
    assert peer_c.CPeer.name in PEERS


# -- the call breakdown's prototype -------------------------------------------------------------


def test_the_breakdown_prototype_builds_and_calls_its_entry_points(tmp_path: Path) -> None:
    import importlib.util

    from benchmarks import call_breakdown, peer_c

    if peer_c.compiler() is None or importlib.util.find_spec("Cython") is None:
        pytest.skip("needs a C compiler and Cython")
    proto = call_breakdown.build_prototype(str(tmp_path))
    assert proto is not None
    seen: list[tuple[int, ...]] = []

    def note(*args: int) -> int:
        seen.append(args)
        return 0

    one = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(note)
    two = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(note)
    bad = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(lambda a, b: 400)

    def addr(f: Any) -> int:
        return int(ctypes.cast(f, ctypes.c_void_p).value or 0)

    proto.load(addr(two), addr(one), addr(one), addr(bad), 0)
    proto.record_held(5, 7)
    proto.record_released(6, 8)
    assert proto.query_held(9, 0) is True
    proto.sync_released(10, 0)
    assert seen == [(5, 7), (6, 8), (9,), (10,)]
    with pytest.raises(RuntimeError, match="cuGraphLaunch failed"):
        proto.graph_held(1, 2)
    assert proto.nothing(1, 2) is None
    assert proto.gil_cycle(1000) > 0
