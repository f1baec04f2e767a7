"""The project's targets, the results table and the JSON document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.harness import PEER_TITLES, PEERS, Cell, Row, Target

#: Compiled: a one-call row may take at most this many times the C floor.
FLOOR_TARGET = 1.5
#: Pure Python: any row may take at most this many times the raw bindings.
PURE_TARGET = 1.5
#: Compiled: ``await`` of a busy stream against launch + blocking synchronize.
AWAIT_TARGET = 1.2
HOST_FUNC_FRACTION = 0.5
GRAPH_SPEEDUP = 5.0
#: The peers cudriver is measured against (the C floor is not one: nothing can beat it).
RIVALS = ("raw", "cuda.core", "cupy")
#: Rows whose raw column is not the same work (no asyncio): their own target applies,
#: or none (the executor row shows what asyncio's thread pool costs, not cudriver).
_AWAIT_BUSY = ("await_busy",)
_NO_TARGET = ("await_busy_executor",)


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _fastest_rival(row: Row) -> tuple[str, float] | None:
    values = [(p, v) for p in RIVALS if (v := row.value(p)) is not None]
    return min(values, key=lambda pv: pv[1]) if values else None


def evaluate_targets(rows: Sequence[Row], implementation: str = "compiled") -> None:
    """Fill each row's ``targets`` from the values of all rows.

    Compiled (``implementation="compiled"``): every row at or below the fastest rival
    (raw, cuda.core, CuPy) in the same run; every one-call row within
    :data:`FLOOR_TARGET` of the C floor; ``await`` of a busy stream within
    :data:`AWAIT_TARGET` of launch + blocking synchronize. Pure Python: every row within
    :data:`PURE_TARGET` of the raw bindings. Both: the prepared launch ahead of
    cuda.core's plain launch, host functions at most half CuPy's, graphs 5x eager.
    """
    by_name = {r.op.name: r for r in rows}
    compiled = implementation == "compiled"
    for row in rows:
        targets: list[Target] = []
        name = row.op.name
        mine = row.value("cudriver")
        if name in _NO_TARGET:
            row.targets = targets
            continue
        if not compiled:
            ratio = row.ratio
            text = f"cudriver/raw <= {PURE_TARGET:.2f}"
            targets.append(Target(text, "n/a" if ratio is None else _verdict(ratio <= PURE_TARGET)))
        elif name in _AWAIT_BUSY:
            ratio = row.ratio
            text = f"<= {AWAIT_TARGET:g} x blocking sync"
            targets.append(
                Target(text, "n/a" if ratio is None else _verdict(ratio <= AWAIT_TARGET))
            )
        else:
            best = _fastest_rival(row)
            if best is None or mine is None:
                targets.append(Target("<= fastest rival", "n/a"))
            else:
                who, theirs = best
                text = f"<= fastest rival ({PEER_TITLES[who]} {theirs:,.0f})"
                targets.append(Target(text, _verdict(mine <= theirs)))
            floor = row.value("c")
            if row.op.single_call:
                text = f"cudriver/C <= {FLOOR_TARGET:g}"
                if mine is None or floor is None or floor <= 0:
                    targets.append(Target(text, "n/a"))
                else:
                    r = mine / floor
                    targets.append(Target(f"{text} ({r:.2f})", _verdict(r <= FLOOR_TARGET)))
        if name == "launch_prepared":
            theirs = row.value("cuda.core")
            if theirs is None and "launch_args" in by_name:
                theirs = by_name["launch_args"].value("cuda.core")
            text = "< cuda.core launch"
            if mine is None or theirs is None:
                targets.append(Target(text, "n/a"))
            else:
                targets.append(Target(f"{text} ({theirs:,.0f})", _verdict(mine < theirs)))
        if name == "host_func_enqueue":
            theirs = row.value("cupy")
            text = f"<= {HOST_FUNC_FRACTION:g} x CuPy"
            if mine is None or theirs is None:
                targets.append(Target(text, "n/a"))
            else:
                targets.append(Target(text, _verdict(mine <= HOST_FUNC_FRACTION * theirs)))
        if name == "graph_100":
            eager_row = by_name.get("eager_100")
            eager = eager_row.value("cudriver") if eager_row is not None else None
            text = f"eager/graph >= {GRAPH_SPEEDUP:g}"
            if mine is None or eager is None or mine <= 0:
                targets.append(Target(text, "n/a"))
            else:
                speedup = eager / mine
                targets.append(
                    Target(f"{text} ({speedup:.1f})", _verdict(speedup >= GRAPH_SPEEDUP))
                )
        row.targets = targets


def failed(rows: Sequence[Row]) -> bool:
    """Whether a target was missed or a cudriver measurement failed (for ``--check``)."""
    for r in rows:
        if any(t.result == "MISS" for t in r.targets):
            return True
        c = r.cells.get("cudriver")
        if c is not None and c.status == "error":
            return True
    return False


def _fmt_value(cell: Cell | None, unit: str) -> str:
    if cell is None or cell.status == "n/a":
        return "n/a"
    if cell.status != "ok" or cell.value is None:
        return "error"
    return f"{cell.value:,.1f}" if unit == "us" else f"{cell.value:,.0f}"


def format_table(rows: Sequence[Row]) -> str:
    """The results as a plain-text table, followed by the notes and errors."""
    headers = [
        "operation",
        "unit",
        *(PEER_TITLES[p] for p in PEERS),
        "cudriver/raw",
        "target",
    ]
    body: list[list[str]] = []
    for r in rows:
        ratio = r.ratio
        target = "; ".join(f"{t.text} {t.result}" for t in r.targets) or "-"
        body.append(
            [
                r.op.label,
                "µs" if r.op.unit == "us" else r.op.unit,
                *(_fmt_value(r.cells.get(p), r.op.unit) for p in PEERS),
                "n/a" if ratio is None else f"{ratio:.2f}",
                target,
            ]
        )
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(headers)
    ]
    left = {0, len(headers) - 1}

    def line(cols: Sequence[str]) -> str:
        out = []
        for i, c in enumerate(cols):
            out.append(c.ljust(widths[i]) if i in left else c.rjust(widths[i]))
        return "  ".join(out).rstrip()

    lines = [line(headers), line(["-" * w for w in widths])]
    lines.extend(line(b) for b in body)
    notes: list[str] = []
    for r in rows:
        for p in PEERS:
            c = r.cells.get(p)
            if c is not None and c.note:
                tag = "error" if c.status == "error" else ("n/a" if c.status == "n/a" else "note")
                notes.append(f"  {r.op.name} [{PEER_TITLES[p]}] {tag}: {c.note}")
    if notes:
        lines.append("")
        lines.append("notes:")
        lines.extend(notes)
    return "\n".join(lines)


def _json_number(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def to_json(env: dict[str, Any], rows: Sequence[Row], settings: dict[str, Any]) -> dict[str, Any]:
    """A JSON-ready dictionary with the environment, the settings and every row."""
    out_rows: list[dict[str, Any]] = []
    for r in rows:
        cells: dict[str, Any] = {}
        for p in PEERS:
            c = r.cells.get(p, Cell(status="n/a", note="not measured"))
            cells[p] = {
                "status": c.status,
                "value": _json_number(c.value) if c.status == "ok" else None,
                "samples": [_json_number(s) for s in c.samples],
                "note": c.note,
            }
        out_rows.append(
            {
                "name": r.op.name,
                "label": r.op.label,
                "unit": r.op.unit,
                "single_call": r.op.single_call,
                "results": cells,
                "ratio_cudriver_raw": _json_number(r.ratio),
                "targets": [{"text": t.text, "result": t.result} for t in r.targets],
            }
        )
    return {"schema": 1, "environment": env, "settings": settings, "rows": out_rows}
