"""The NCCL benchmark's targets: each judged from the table, no GPU needed."""

from __future__ import annotations

from benchmarks.nccl_allreduce import BW_NOISE, SIZES_MIB, targets


def _row(host: float, bw: float) -> dict[str, float]:
    row = {"host_us": host}
    for m in SIZES_MIB:
        row[f"{m}MiB_busbw"] = bw
    return row


def test_level_with_the_best_peer_passes_and_behind_it_misses() -> None:
    table = {
        "cudriver": _row(10.0, 100.0 * (1 - BW_NOISE / 2)),
        "nccl4py Buffer": _row(40.0, 90.0),
        "nccl4py CuPy": _row(30.0, 100.0),
    }
    res = {"cudriver DeviceBuffer": 5.0, "CuPy array": 7.0}
    verdicts = targets(table, res)
    assert len(verdicts) == 2 + len(SIZES_MIB)
    assert all(ok for _, ok, _ in verdicts), verdicts
    assert "10.0 µs against 30.0" in verdicts[0][2]

    table["cudriver"] = _row(31.0, 100.0 * (1 - 2 * BW_NOISE))
    res["cudriver DeviceBuffer"] = 7.5
    verdicts = targets(table, res)
    assert not any(ok for _, ok, _ in verdicts), verdicts


def test_without_cupy_the_resolution_target_is_left_out() -> None:
    table = {"cudriver": _row(1.0, 1.0), "nccl4py Buffer": _row(2.0, 1.0)}
    verdicts = targets(table, {"cudriver DeviceBuffer": 1.0})
    assert [w for w, _, _ in verdicts if "resolving" in w] == []
