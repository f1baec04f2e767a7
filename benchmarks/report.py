"""The project's targets, the results table and the JSON document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.harness import PEER_TITLES, PEERS, Cell, Row, Target

#: cudriver may take at most this many times the raw bindings' host time.
RATIO_TARGET = 1.10
HOST_FUNC_FRACTION = 0.5
GRAPH_SPEEDUP = 5.0


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def evaluate_targets(rows: Sequence[Row]) -> None:
    """Fill each row's ``targets`` from the values of all rows."""
    by_name = {r.op.name: r for r in rows}
    for row in rows:
        targets: list[Target] = []
        name = row.op.name
        if row.op.single_call:
            ratio = row.ratio
            text = f"cudriver/raw <= {RATIO_TARGET:.2f}"
            targets.append(
                Target(text, "n/a" if ratio is None else _verdict(ratio <= RATIO_TARGET))
            )
        if name == "launch_prepared":
            mine = row.value("cudriver")
            theirs = row.value("cuda.core")
            if theirs is None and "launch_args" in by_name:
                theirs = by_name["launch_args"].value("cuda.core")
            text = "< cuda.core launch"
            if mine is None or theirs is None:
                targets.append(Target(text, "n/a"))
            else:
                targets.append(Target(f"{text} ({theirs:,.0f})", _verdict(mine < theirs)))
        if name == "host_func_enqueue":
            mine, theirs = row.value("cudriver"), row.value("cupy")
            text = f"<= {HOST_FUNC_FRACTION:g} x CuPy"
            if mine is None or theirs is None:
                targets.append(Target(text, "n/a"))
            else:
                targets.append(Target(text, _verdict(mine <= HOST_FUNC_FRACTION * theirs)))
        if name == "graph_100":
            graph = row.value("cudriver")
            eager_row = by_name.get("eager_100")
            eager = eager_row.value("cudriver") if eager_row is not None else None
            text = f"eager/graph >= {GRAPH_SPEEDUP:g}"
            if graph is None or eager is None or graph <= 0:
                targets.append(Target(text, "n/a"))
            else:
                speedup = eager / graph
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
