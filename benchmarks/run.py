"""One benchmark run: the environment, the peers' setup, every row, the teardown."""

from __future__ import annotations

import datetime
import platform
import sys
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
from cuda.bindings import driver as drv

import cudriver as cu
from benchmarks.harness import (
    OPS_BY_NAME,
    Peer,
    Row,
    Unavailable,
    calls_for,
    error_text,
    measure_row,
)
from benchmarks.peer_c import CPeer
from benchmarks.peer_cuda_core import CudaCorePeer
from benchmarks.peer_cudriver import CudriverPeer
from benchmarks.peer_cupy import CupyPeer
from benchmarks.peer_raw import RawPeer, arch_of
from benchmarks.report import evaluate_targets


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def environment(ordinal: int) -> dict[str, Any]:
    """The machine and software the numbers were taken with (no peers)."""
    env: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cudriver": cu.__version__,
        "cudriver_implementation": cu.info()["implementation"],
        "cuda_bindings": cu.bindings_version(),
        "numpy": np.__version__,
        "device": ordinal,
    }
    try:
        major, minor = cu.driver_version()
        env["driver_cuda_version"] = f"{major}.{minor}"
        dev = cu.Device(ordinal)
        env["gpu"] = dev.name
        env["compute_capability"] = str(dev.compute_capability)
    except Exception as exc:
        env["gpu_error"] = error_text(exc)
    try:
        env["driver_api_version"] = int(cu.check(drv.cuDriverGetVersion(), "cuDriverGetVersion"))
    except Exception:
        pass
    env["driver_release"] = _driver_release()
    return env


def _driver_release() -> str | None:
    """The kernel module's version (e.g. ``"580.95.05"``), read from /proc on Linux."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            first = f.readline()
    except OSError:
        return None
    for tok in first.split():
        parts = tok.split(".")
        if len(parts) >= 2 and all(p.isdigit() for p in parts):
            return tok
    return None


def run_benchmarks(
    names: Iterable[str], *, quick: bool, repeats: int, ordinal: int = 0
) -> tuple[dict[str, Any], list[Row]]:
    """Set up every peer, measure the named operations, evaluate the targets.

    Returns the environment and the rows. Each measurement is isolated: a failure
    becomes an ``error`` cell and the run goes on.
    """
    cudriver_peer = CudriverPeer(ordinal)

    def arch() -> str:
        return arch_of(ordinal)

    peers: list[Peer] = [
        cudriver_peer,
        RawPeer(ordinal),
        CudaCorePeer(ordinal, arch),
        CupyPeer(ordinal),
        CPeer(ordinal),
    ]
    states: dict[str, str | None] = {}
    env = environment(ordinal)
    setup_warnings: dict[str, list[str]] = {}
    for p in peers:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                p.setup()
                states[p.name] = None
            except Unavailable as exc:
                states[p.name] = f"n/a: {exc}"
            except Exception as exc:
                states[p.name] = f"error: setup failed: {error_text(exc)}"
        setup_warnings[p.name] = [f"{w.category.__name__}: {w.message}" for w in caught]
    # Every peer must work in the device's primary context, current on this thread.
    if states["cudriver"] is None:
        try:
            cudriver_peer.make_current()
        except Exception as exc:
            states["cudriver"] = f"error: {error_text(exc)}"
    live = {p.name: p.context for p in peers if states[p.name] is None}
    env["peers"] = {
        p.name: {
            "version": p.version,
            "state": states[p.name] or "ok",
            "context": None if p.context is None else hex(p.context),
            "warnings": setup_warnings[p.name],
        }
        for p in peers
    }
    env["shared_primary_context"] = (
        "cudriver" in live and len(set(live.values())) == 1 and None not in live.values()
    )
    primary = live.get("cudriver")

    def make_current() -> None:
        if primary is not None:
            try:
                cudriver_peer.make_current()
            except Exception:
                pass

    rows: list[Row] = []
    try:
        for name in names:
            op = OPS_BY_NAME[name]
            n = calls_for(op, quick)
            row = Row(op)
            _progress(f"bench: {op.name} ({n} x {repeats})")
            row.cells.update(measure_row(peers, states, op, n, repeats, make_current))
            rows.append(row)
    finally:
        for p in reversed(peers):
            if states.get(p.name) is None:
                try:
                    p.close()
                except Exception:
                    pass
    evaluate_targets(rows, env["cudriver_implementation"])
    return env, rows
