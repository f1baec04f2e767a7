"""Memory accounting: counters, peaks, the summary, the history and its snapshot.

Without a GPU the counters are driven through ``accounting.track`` with stand-in
release states; on the GPU every kind of allocation is counted, the numbers are held
against ``cuMemGetInfo``, and a program that runs out of memory leaves a snapshot whose
picture names its sites, its peak and the refused allocation.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import types
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import cudriver as cu
from cudriver._lifetime import _handle
from cudriver._memory import accounting

MiB = 1 << 20


@pytest.fixture
def fresh() -> Iterator[None]:
    """Accounting on, numbers and history cleared; off and cleared again after."""
    cu.reset_memory_stats()
    cu.set_memory_accounting(True)
    yield
    cu.set_memory_accounting(False)
    cu.reset_memory_stats()


def _state() -> types.SimpleNamespace:
    return types.SimpleNamespace(on_release=None)


# -- without a GPU ---------------------------------------------------------------------------------
def test_accounting_is_off_by_default_and_switches() -> None:
    assert not cu.memory_accounting_enabled()
    assert accounting.ON == []
    cu.set_memory_accounting(True)
    try:
        assert cu.memory_accounting_enabled() and accounting.ON
    finally:
        cu.set_memory_accounting(False)
    assert accounting.ON == []
    with pytest.raises(TypeError, match="enabled must be a bool"):
        cu.set_memory_accounting(1)  # type: ignore[arg-type]


def test_counters_follow_allocations_and_frees(fresh: None) -> None:
    a, b, c = _state(), _state(), _state()
    accounting.track(a, 0x1000, 100, 0, "cuMemAlloc")
    accounting.track(b, 0x2000, 300, 0, "pool")
    accounting.track(c, 0x3000, 50, None, "cuMemHostAlloc")
    s = cu.memory_stats(0)
    assert s.device == 0
    assert (s.total.current_bytes, s.total.current_count, s.total.peak_bytes) == (400, 2, 400)
    assert set(s.by_resource) == {"cuMemAlloc", "pool"}
    assert s.by_resource["pool"].current_bytes == 300
    a.on_release()  # the release ran
    s = cu.memory_stats(0)
    assert (s.total.current_bytes, s.total.peak_bytes, s.total.total_count) == (300, 400, 2)
    assert s.by_resource["cuMemAlloc"].current_bytes == 0
    host = cu.memory_stats("host")
    assert host.device == "host" and host.total.current_bytes == 50
    every = cu.memory_stats()
    assert every.total.current_bytes == 350 and every.total.peak_bytes == 450
    assert set(every.by_resource) == {"cuMemAlloc [0]", "pool [0]", "cuMemHostAlloc [host]"}
    cu.reset_peak_memory_stats()
    assert cu.memory_stats(0).total.peak_bytes == 300
    cu.reset_memory_stats()
    b.on_release()  # counted before the reset: not subtracted after it
    assert cu.memory_stats(0).total.current_bytes == 0
    c.on_release()


def test_a_release_hook_already_there_still_runs(fresh: None) -> None:
    ran = []
    st = types.SimpleNamespace(on_release=lambda: ran.append(1))
    accounting.track(st, 0x1000, 8, 0, "x")
    st.on_release()
    assert ran == [1] and cu.memory_stats(0).total.current_bytes == 0


def test_the_summary_is_a_table_for_people(fresh: None) -> None:
    a = _state()
    accounting.track(a, 0x1000, 3 * MiB, 0, "cuMemAlloc")
    accounting.failed(5 * MiB, 0, "cuMemAlloc")
    text = cu.memory_summary(0)
    lines = text.splitlines()
    assert lines[0] == "cudriver memory accounting (on), device 0"
    assert "cuMemAlloc" in text and "3.00 MiB" in text
    total = lines[-1].split()
    assert total[0] == "total" and total[-1] == "1"  # one refused allocation
    assert cu.memory_stats(0).total.failures == 1
    a.on_release()


def test_the_history_keeps_sites_and_the_snapshot_is_json(fresh: None, tmp_path: Path) -> None:
    cu.record_memory_history(stacks=True, max_entries=3)
    try:
        sts = [_state() for _ in range(3)]
        for i, st in enumerate(sts):
            accounting.track(st, 0x1000 * (i + 1), 10, 0, "cuMemAlloc")
        sts[0].on_release()
        snap = cu.memory_snapshot()
        assert snap["format"] == "cudriver.memory-snapshot" and snap["version"] == 1
        assert snap["dropped"] == 1 and len(snap["events"]) == 3  # the oldest went
        ev = snap["events"][-1]
        assert ev["action"] == "free" and ev["address"] == 0x1000
        alloc = snap["events"][0]
        assert alloc["site"].startswith(__file__) and "in test_the_history" in alloc["site"]
        assert alloc["stack"][0] == alloc["site"]
        assert {x["address"] for x in snap["live"]} == {0x2000, 0x3000}
        assert snap["peak"]["0"]["bytes"] == 30
        path = tmp_path / "snap.json"
        cu.save_memory_snapshot(path)
        assert json.loads(path.read_text())["events"][0]["nbytes"] == 10
        for st in sts[1:]:
            st.on_release()
    finally:
        cu.record_memory_history(False)
    assert cu.memory_snapshot()["events"] == []
    with pytest.raises(ValueError, match="max_entries must be at least 1"):
        cu.record_memory_history(max_entries=0)


def test_stats_refuse_what_names_no_device() -> None:
    with pytest.raises(TypeError, match="device must be a Device, an ordinal, 'host' or None"):
        cu.memory_stats("gpu")
    with pytest.raises(ValueError, match="ordinal >= 0"):
        cu.memory_stats(-1)


# -- on the GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_every_kind_of_allocation_is_counted(
    ctx: cu.Context, stream: cu.Stream, fresh: None
) -> None:
    dev = ctx.device.ordinal
    pool = cu.MemoryPool()
    made = [
        cu.DeviceBuffer(MiB),  # the compiled path
        cu.DeviceBuffer(MiB, stream=stream),
        pool.allocate(MiB, stream=stream),
        cu.PinnedBuffer(MiB),
        cu.ManagedBuffer(MiB),
        cu.VirtualBuffer(8 * MiB, nbytes=2 * MiB),
        cu.CudaArray((64, 64), np.float32),
    ]
    s = cu.memory_stats(dev)
    names = set(s.by_resource)
    assert {
        "cuMemAlloc",
        "cuMemAllocAsync",
        pool.name,
        "cuMemAllocManaged",
        "cuMemCreate",
        "cuArray3DCreate",
    } <= names
    assert s.by_resource["cuMemAlloc"].current_bytes == MiB
    assert s.by_resource["cuMemCreate"].current_bytes >= 2 * MiB
    assert cu.memory_stats("host").by_resource["cuMemHostAlloc"].current_bytes == MiB
    for b in made:
        b.close()
    stream.synchronize()
    _handle.settle()
    assert cu.memory_stats().total.current_bytes == 0
    assert cu.memory_stats().total.total_count == 7
    pool.close()


@pytest.mark.gpu
@pytest.mark.device_memory
def test_accounting_agrees_with_the_driver_for_a_known_sequence(
    ctx: cu.Context, fresh: None
) -> None:
    sizes = [64 * MiB, 128 * MiB, 32 * MiB, 256 * MiB]  # multiples of the 2 MiB page
    gc.collect()
    _handle.settle()
    free0, _ = ctx.mem_info
    bufs = [cu.DeviceBuffer(n) for n in sizes]
    free1, _ = ctx.mem_info
    s = cu.memory_stats(ctx.device)
    assert s.total.current_bytes == sum(sizes) == s.by_resource["cuMemAlloc"].current_bytes
    # The driver's count agrees within a page per allocation (its own bookkeeping).
    assert abs((free0 - free1) - s.total.current_bytes) <= 2 * MiB * len(sizes)
    bufs[1].close()
    bufs[3].close()
    free2, _ = ctx.mem_info
    s = cu.memory_stats(ctx.device)
    assert s.total.current_bytes == 96 * MiB
    assert s.total.peak_bytes == sum(sizes)
    assert abs((free0 - free2) - s.total.current_bytes) <= 2 * MiB * 2
    for b in bufs:
        b.close()
    assert cu.memory_stats(ctx.device).total.current_bytes == 0


OOM_PROGRAM = """
import numpy as np
import cudriver as cu

cu.record_memory_history(stacks=True)
dev = cu.Device(0)
keep = []

def weights(n):
    return cu.DeviceBuffer(n)

def activations(n):
    return cu.DeviceBuffer(n)

chunk = 1 << 30
for i in range(4):
    keep.append(activations(1 << 26))
try:
    while True:
        keep.append(weights(chunk))
except cu.OutOfMemoryError:
    pass
keep[-1].close()
cu.save_memory_snapshot(SNAP)
print("OK", len(keep))
"""


@pytest.mark.gpu
@pytest.mark.device_memory
def test_a_program_that_runs_out_of_memory_leaves_a_picture(tmp_path: Path) -> None:
    snap = tmp_path / "oom.json"
    script = f"SNAP = {str(snap)!r}\n" + textwrap.dedent(OOM_PROGRAM)
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(snap.read_text())
    actions = [e["action"] for e in data["events"]]
    assert actions.count("oom") == 1 and actions[-1] == "free"
    sites = {e["site"].rsplit(" in ", 1)[-1] for e in data["events"]}
    assert {"weights", "activations"} <= sites
    picture = tmp_path / "oom.svg"
    out = subprocess.run(
        [sys.executable, "-m", "cudriver", "memory", str(snap), "-o", str(picture)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    svg = picture.read_text()
    ET.fromstring(svg)
    assert "in weights" in svg and "in activations" in svg
    assert "peak" in svg and "out of memory" in svg
