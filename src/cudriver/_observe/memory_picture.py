"""A memory snapshot drawn as a picture: live bytes over time, by allocation site.

:func:`load_snapshot` reads and checks the JSON that
:func:`~cudriver.save_memory_snapshot` writes (format ``"cudriver.memory-snapshot"``,
version 1; gzip-compressed too). :func:`draw_memory` draws it as an SVG document: the
live bytes over time as a stacked step chart, one colour per allocation site (the sites
with the most bytes at the peak, the rest together as "other sites"), the peak and each
allocation the driver refused marked. ``python -m cudriver memory SNAPSHOT`` does both.

Only the standard library: no driver, no GPU, no plotting package. The output is the
same for the same input (the snapshot's time is printed as UTC).
"""

from __future__ import annotations

import gzip
import html
import json
import math
import os
import re
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["draw_memory", "load_snapshot", "summary_line"]

FORMAT = "cudriver.memory-snapshot"
VERSIONS = (1,)
_GZIP_MAGIC = b"\x1f\x8b"
_ACTIONS = ("alloc", "free", "oom")
# What the drawing reads from each event; "resource" and "stack" are checked when present.
_EVENT_KEYS = ("t", "action", "address", "nbytes", "device", "site")

#: Which memory to draw: None for all of it (every device and host memory, summed), a
#: device ordinal, or ``"host"`` for host (pinned) memory.
DeviceSelection = int | Literal["host"] | None

OTHER_SITES = "other sites"


# -- reading and checking --------------------------------------------------------------------


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: object) -> bool:
    return (_is_int(x) or isinstance(x, float)) and math.isfinite(x)  # type: ignore[arg-type]


def _kind(x: object) -> str:
    """The JSON name of a value's type, for messages."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "a boolean"
    if isinstance(x, (int, float)):
        return "a number"
    if isinstance(x, str):
        return "a string"
    if isinstance(x, list):
        return "an array"
    if isinstance(x, dict):
        return "an object"
    return type(x).__name__


def _check_event(ev: object, i: int) -> str | None:
    """What is wrong with event ``i``, or None."""
    if not isinstance(ev, dict):
        return f"event {i} is {_kind(ev)}, not an object"
    missing = [k for k in _EVENT_KEYS if k not in ev]
    if missing:
        return f"event {i} has no {', '.join(repr(k) for k in missing)}"
    if not _is_number(ev["t"]):
        return f"event {i}: 't' is {ev['t']!r}, not a finite number of seconds"
    if ev["action"] not in _ACTIONS:
        return f"event {i}: unknown action {ev['action']!r} (expected 'alloc', 'free' or 'oom')"
    for key in ("address", "nbytes"):
        if not _is_int(ev[key]) or ev[key] < 0:
            return f"event {i}: {key!r} is {ev[key]!r}, not an integer >= 0"
    dev = ev["device"]
    if dev is not None and (not _is_int(dev) or dev < 0):
        return f"event {i}: 'device' is {dev!r}, not a device ordinal or null (host memory)"
    if not isinstance(ev["site"], str):
        return f"event {i}: 'site' is {_kind(ev['site'])}, not a string"
    if "resource" in ev and not isinstance(ev["resource"], str):
        return f"event {i}: 'resource' is {_kind(ev['resource'])}, not a string"
    stack = ev.get("stack")
    if stack is not None and not (
        isinstance(stack, list) and all(isinstance(s, str) for s in stack)
    ):
        return f"event {i}: 'stack' is not null or an array of strings"
    return None


def _problem(obj: object) -> str | None:
    """What is wrong with a parsed snapshot, or None."""
    if not isinstance(obj, dict):
        return f"not a cudriver memory snapshot: the JSON is {_kind(obj)}, not an object"
    if "format" not in obj:
        return f"not a cudriver memory snapshot: no 'format' (expected {FORMAT!r})"
    if obj["format"] != FORMAT:
        return f"not a cudriver memory snapshot: 'format' is {obj['format']!r}, not {FORMAT!r}"
    version = obj.get("version")
    if not _is_int(version) or version not in VERSIONS:
        return (
            f"unknown snapshot version {version!r} (this cudriver reads version "
            f"{', '.join(map(str, VERSIONS))})"
        )
    if "events" not in obj:
        return "no 'events'"
    events = obj["events"]
    if not isinstance(events, list):
        return f"'events' is {_kind(events)}, not an array"
    for i, ev in enumerate(events):
        p = _check_event(ev, i)
        if p is not None:
            return p
    if "dropped" in obj and (not _is_int(obj["dropped"]) or obj["dropped"] < 0):
        return f"'dropped' is {obj['dropped']!r}, not an integer >= 0"
    if "live" in obj and not isinstance(obj["live"], list):
        return f"'live' is {_kind(obj['live'])}, not an array"
    peak = obj.get("peak", {})
    if not isinstance(peak, dict):
        return f"'peak' is {_kind(peak)}, not an object"
    for key, p in peak.items():
        if not (isinstance(p, dict) and _is_int(p.get("bytes")) and _is_number(p.get("t"))):
            return f"'peak' of {key!r} is not an object with integer 'bytes' and number 't'"
    if "created" in obj and not _is_number(obj["created"]):
        return f"'created' is {obj['created']!r}, not a number (unix time)"
    return None


def _checked(obj: object, name: str) -> dict[str, Any]:
    problem = _problem(obj)
    if problem is not None:
        raise ValueError(f"{name}: {problem}")
    assert isinstance(obj, dict)
    return obj


def load_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a memory snapshot written by :func:`~cudriver.save_memory_snapshot`.

    Parameters
    ----------
    path
        A JSON file, or a gzip-compressed one (recognised by its first bytes).

    Returns
    -------
    dict
        The snapshot, checked: ``format`` is ``"cudriver.memory-snapshot"``, ``version``
        one this cudriver reads (1), and each event has ``t``, ``action`` (``"alloc"``,
        ``"free"`` or ``"oom"``), ``address``, ``nbytes``, ``device`` and ``site`` of
        the right types. The other keys (``pid``, ``created``, ``dropped``, ``live``,
        ``peak``...) are checked where present.

    Raises
    ------
    ValueError
        Naming the file and what is wrong: not JSON, a broken gzip file, another
        format, an unknown version, an event with a missing or ill-typed key.
    OSError
        When the file cannot be read (missing, not permitted).
    """
    name = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"{name}: a broken gzip file ({exc})") from None
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{name}: not JSON ({exc})") from None
    return _checked(obj, name)


# -- what the picture shows ------------------------------------------------------------------


@dataclass
class _Group:
    """One colour: a site, or the sites drawn together as "other sites"."""

    name: str
    at_peak: int
    sites: list[str]


@dataclass
class _Oom:
    t: float
    nbytes: int
    site: str
    live: int  # the bytes live (drawn) when the driver refused


@dataclass
class _Analysis:
    what: str  # "device 0", "host memory", "all devices and host memory"
    n_events: int  # the events of the memory drawn
    n_all: int  # every event of the snapshot
    n_sites: int
    groups: list[_Group]
    # The state after each distinct time: the time and the bytes of each group.
    points: list[tuple[float, tuple[int, ...]]]
    peak: int
    peak_t: float
    ooms: list[_Oom]
    t_first: float
    t_last: float
    n_allocs: int
    ignored_frees: int
    recorded_peak: int | None = None  # the counters' peak for the memory drawn, if one


def _check_device(device: object) -> DeviceSelection:
    if device is None:
        return None
    if device == "host":
        return "host"
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        return device
    raise ValueError(f"device must be None, a device ordinal (int >= 0) or 'host', not {device!r}")


def _describe(device: DeviceSelection) -> str:
    if device is None:
        return "all devices and host memory"
    if device == "host":
        return "host memory"
    return f"device {device}"


def _analyse(snap: Mapping[str, Any], device: DeviceSelection, top: int) -> _Analysis:
    all_events: list[dict[str, Any]] = snap["events"]
    if device is None:
        events = list(all_events)
    else:
        want = None if device == "host" else device
        events = [e for e in all_events if e["device"] == want]
    events.sort(key=lambda e: e["t"])  # stable: already in order as recorded
    live: dict[tuple[Any, int], tuple[str, int]] = {}
    changes: list[tuple[float, str, int]] = []  # time, site, bytes added (or removed)
    ooms: list[_Oom] = []
    total = n_allocs = ignored = 0
    for e in events:
        key = (e["device"], e["address"])
        if e["action"] == "alloc":
            old = live.pop(key, None)
            if old is not None:  # its free is not in the history: it ended here
                changes.append((e["t"], old[0], -old[1]))
                total -= old[1]
            live[key] = (e["site"], e["nbytes"])
            changes.append((e["t"], e["site"], e["nbytes"]))
            total += e["nbytes"]
            n_allocs += 1
        elif e["action"] == "free":
            rec = live.pop(key, None)
            if rec is None:  # allocated before the history began, or dropped from it
                ignored += 1
                continue
            changes.append((e["t"], rec[0], -rec[1]))
            total -= rec[1]
        else:
            ooms.append(_Oom(e["t"], e["nbytes"], e["site"], total))

    # The peak: the largest total after all the changes of one time, the first such time.
    peak, peak_t, peak_i = 0, 0.0, -1
    total = 0
    for i, (t, _, delta) in enumerate(changes):
        total += delta
        if (i + 1 == len(changes) or changes[i + 1][0] != t) and total > peak:
            peak, peak_t, peak_i = total, t, i
    now: dict[str, int] = {}
    most: dict[str, int] = {}
    at_peak: dict[str, int] = {}
    for i, (_, site, delta) in enumerate(changes):
        now[site] = now.get(site, 0) + delta
        most[site] = max(most.get(site, 0), now[site])
        if i == peak_i:
            at_peak = dict(now)
    sites = sorted(most, key=lambda s: (-at_peak.get(s, 0), -most[s], s))
    if len(sites) <= top:
        groups = [_Group(s, at_peak.get(s, 0), [s]) for s in sites]
    else:
        groups = [_Group(s, at_peak.get(s, 0), [s]) for s in sites[:top]]
        rest = sites[top:]
        groups.append(_Group(OTHER_SITES, sum(at_peak.get(s, 0) for s in rest), rest))
    index = {s: gi for gi, g in enumerate(groups) for s in g.sites}

    points: list[tuple[float, tuple[int, ...]]] = []
    vec = [0] * len(groups)
    for i, (t, site, delta) in enumerate(changes):
        vec[index[site]] += delta
        if i + 1 == len(changes) or changes[i + 1][0] != t:
            points.append((t, tuple(vec)))

    times = [e["t"] for e in events]
    recorded = None
    peaks = snap.get("peak") or {}
    if device is not None:
        p = peaks.get("host" if device == "host" else str(device))
        if p is not None:
            recorded = p["bytes"]
    return _Analysis(
        what=_describe(device),
        n_events=len(events),
        n_all=len(all_events),
        n_sites=len(sites),
        groups=groups,
        points=points,
        peak=peak,
        peak_t=peak_t,
        ooms=ooms,
        t_first=min(times, default=0.0),
        t_last=max(times, default=0.0),
        n_allocs=n_allocs,
        ignored_frees=ignored,
        recorded_peak=recorded,
    )


# -- numbers as people read them -------------------------------------------------------------

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def _byte_unit(n: float) -> int:
    """The power of 1024 to show ``n`` bytes in."""
    k = 0
    while k + 1 < len(_BYTE_UNITS) and n >= 1024 ** (k + 1):
        k += 1
    return k


def _fmt_bytes(n: float) -> str:
    k = _byte_unit(n)
    if k == 0:
        return f"{int(n)} B"
    return f"{n / 1024**k:.2f} {_BYTE_UNITS[k]}"


def _sig3(v: float) -> str:
    return f"{v:.0f}" if v >= 99.95 else f"{v:.1f}" if v >= 9.995 else f"{v:.2f}"


def _fmt_time(t: float) -> str:
    if t == 0 or abs(t) >= 0.09995:
        return f"{t:.2f} s"
    if abs(t) >= 99.95e-6:
        return f"{_sig3(t * 1e3)} ms"
    return f"{_sig3(t * 1e6)} µs"


def _nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5 or 5 times a power of ten that is at least ``raw``."""
    exp = math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= m * 10.0**exp * (1 + 1e-9):
            return m * 10.0**exp
    return 10.0 ** (exp + 1)  # pragma: no cover - raw/10**exp < 10


def _decimals(step: float) -> int:
    for d in range(7):
        if abs(round(step * 10**d) - step * 10**d) < 1e-6:
            return d
    return 6


def _ticks(lo: float, hi: float, step: float) -> list[float]:
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    return [i * step for i in range(first, last + 1)]


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


# -- SVG -------------------------------------------------------------------------------------

# Not red: red marks the allocations the driver refused.
_PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#9c755f",
    "#a0cbe8",
    "#8cd17d",
    "#d4a6c8",
    "#ffbe7d",
    "#86bcb6",
)
_OTHER_COLOUR = "#c9c9c9"
_RED = "#d62728"
_INK = "#222222"
_GREY = "#666666"
_FONT = '"DejaVu Sans", "Helvetica Neue", Helvetica, Arial, sans-serif'
# Character widths in ems, DejaVu Sans's rounded up (Helvetica and Arial are narrower):
# an SVG cannot measure its text, so boxes and shortened names are sized from these.
_WIDTHS = {
    **dict.fromkeys("ijl.,:;'|! ", 0.33),
    **dict.fromkeys('ftr()[]{}/\\-"', 0.42),
    **dict.fromkeys("0123456789", 0.64),
    **dict.fromkeys("ABCDEFGHIJKLNOPQRSTUVXYZ_", 0.72),
    **dict.fromkeys("mw", 0.98),
    **dict.fromkeys("MW%@<>=+~&", 0.9),
}
_OTHER_W = 0.63  # other lower-case letters, and characters not above
_MAX_OOM_LABELS = 6
# Characters XML 1.0 does not allow (and lone surrogates, which UTF-8 cannot write).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _colour(i: int) -> str:
    if i < len(_PALETTE):
        return _PALETTE[i]
    # Further sites: hues spread by the golden angle, keeping clear of red.
    hue = (40 + (i - len(_PALETTE)) * 137.508) % 300 + 30
    light = 0.55 if i % 2 else 0.70
    return _hsl(hue, 0.45, light)


def _hsl(h: float, s: float, li: float) -> str:
    c = (1 - abs(2 * li - 1)) * s
    x = c * (1 - abs((h / 60) % 2 - 1))
    m = li - c / 2
    r, g, b = [
        (c, x, 0.0),
        (x, c, 0.0),
        (0.0, c, x),
        (0.0, x, c),
        (x, 0.0, c),
        (c, 0.0, x),
    ][int(h // 60) % 6]
    return "#{:02x}{:02x}{:02x}".format(*(round((v + m) * 255) for v in (r, g, b)))


def _esc(s: str) -> str:
    """Text as XML character data (in an element, never in an attribute).

    Quotes need no escaping there, and ImageMagick's renderer drops a ``&quot;`` that
    ends a text; characters XML cannot hold become U+FFFD.
    """
    return html.escape(_NOT_XML.sub("\ufffd", s), quote=False)


def _text_w(s: str, size: float, *, bold: bool = False) -> float:
    """The width of ``s`` in pixels, about (a little more than most fonts draw)."""
    w = sum(_WIDTHS.get(c, _OTHER_W) for c in s) * size
    return w * 1.08 if bold else w


def _fit(s: str, width: float, size: float) -> str:
    """``s`` shortened to ``width`` pixels, keeping its end (a site's file and line)."""
    if _text_w(s, size) <= width:
        return s
    cut = 1
    while cut < len(s) and _text_w("…" + s[cut:], size) > width:
        cut += 1
    return "…" + s[cut:]


def _n(v: float) -> str:
    """A coordinate, rounded so that the same input gives the same text."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


class _Svg:
    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self.parts: list[str] = []

    def add(self, s: str) -> None:
        self.parts.append(s)

    def text(
        self,
        x: float,
        y: float,
        s: str,
        *,
        size: float = 12,
        anchor: str = "start",
        fill: str = _INK,
        weight: str | None = None,
        title: str | None = None,
        extra: str = "",
    ) -> None:
        # The family on each text too: ImageMagick's own renderer reads only that, and
        # only one name (browsers take the style sheet's list over it).
        attrs = f'x="{_n(x)}" y="{_n(y)}" font-family="DejaVu Sans" font-size="{size:g}" '
        attrs += f'fill="{fill}"'
        if anchor != "start":
            attrs += f' text-anchor="{anchor}"'
        if weight:
            attrs += f' font-weight="{weight}"'
        inner = _esc(s)
        if title is not None and title != s:
            inner = f"<title>{_esc(title)}</title>{inner}"
        self.add(f"<text {attrs}{extra}>{inner}</text>")

    def label(
        self, x: float, y: float, s: str, *, anchor: str, fill: str, size: float = 11.5
    ) -> None:
        """Text on a white box, readable over the chart."""
        w = _text_w(s, size) + 10
        left = x - 5 if anchor == "start" else x - w + 5
        self.add(
            f'<rect x="{_n(left)}" y="{_n(y - size)}" width="{_n(w)}" height="{_n(size + 5)}" '
            f'rx="3" fill="#ffffff" fill-opacity="0.9" stroke="{fill}" stroke-width="0.6"/>'
        )
        # Centred in its box: what the font draws narrower than guessed is shared out.
        self.text(left + w / 2, y, s, size=size, anchor="middle", fill=fill)

    def document(self, title: str) -> str:
        head = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" '
            f'height="{self.height}" viewBox="0 0 {self.width} {self.height}" '
            f'stroke="none">\n'
            f"<title>{_esc(title)}</title>\n"
            f"<style>text {{ font-family: {_FONT}; }}</style>\n"
            f'<rect width="{self.width}" height="{self.height}" fill="#ffffff"/>\n'
        )
        return head + "\n".join(self.parts) + "\n</svg>\n"


def _downsample(
    points: list[tuple[float, tuple[int, ...]]], x: Any, columns: int
) -> list[tuple[float, tuple[int, ...]]]:
    """At most one point per pixel column: the one with the most bytes (and the last).

    A stacked chart of every event of a long history would be megabytes of SVG; the
    upper envelope is what a pixel can show, and it keeps the peak.
    """
    if len(points) <= 2 * columns:
        return points
    out: list[tuple[float, tuple[int, ...]]] = []
    col_of_last = None
    best = -1
    for p in points:
        col = int(x(p[0]))
        s = sum(p[1])
        if col != col_of_last:
            out.append(p)
            col_of_last, best = col, s
        elif s > best:
            out[-1] = p
            best = s
    if out[-1] is not points[-1]:
        out.append(points[-1])
    return out


def _lines(items: list[str], width: float, size: float) -> list[str]:
    """``items`` joined by " · " into lines no wider than ``width``."""
    lines: list[str] = []
    for item in items:
        if lines and _text_w(lines[-1] + " · " + item, size) <= width:
            lines[-1] += " · " + item
        else:
            lines.append(item)
    return lines


def _render(a: _Analysis, snap: Mapping[str, Any], width: int, height: int) -> str:
    what = f"{a.what}, {_plural(a.n_events, 'event')}"
    if a.n_events != a.n_all:
        what += f" (of {a.n_all:,})"
    title = f"Live memory by allocation site: {what}"
    sub: list[str] = []
    if "pid" in snap:
        sub.append(f"pid {snap['pid']}")
    if "created" in snap:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(snap["created"]))
        sub.append(f"snapshot of {when}")
    dropped = snap.get("dropped", 0)
    if dropped:
        sub.append(f"{_plural(dropped, 'older event')} dropped (the history was full)")
    if a.ignored_frees:
        sub.append(f"{_plural(a.ignored_frees, 'free')} of earlier allocations ignored")
    if a.ooms:
        sub.append(_plural(len(a.ooms), "allocation") + " refused for lack of memory")
    if a.recorded_peak is not None and a.recorded_peak > a.peak:
        older = _fmt_bytes(a.recorded_peak)
        sub.append(f"peak with allocations made before the history: {older}")
    sub_lines = _lines(sub, width - 48, 12)

    legend_w = max(220, min(360, int(width * 0.28)))
    x0, y0 = 84.0, 92.0 + 17 * max(0, len(sub_lines) - 1)
    x1 = float(width - legend_w - 36)
    legend_x = x1 + 36
    # Grow downwards if the legend needs it: a row for the heading, two per group.
    row = 36
    need = y0 + 28 + row * len(a.groups) + 40
    height = max(height, math.ceil(need))
    y1 = float(height - 58)
    svg = _Svg(width, height)

    if _text_w(title, 17, bold=True) > width - 48:
        title = what
    svg.text(24, 30, title, size=17, weight="bold")
    for i, line in enumerate(sub_lines):
        svg.text(24, 52 + 17 * i, line, size=12, fill=_GREY)

    if a.n_allocs == 0 and not a.ooms:
        svg.add(
            f'<rect x="{_n(x0)}" y="{_n(y0)}" width="{_n(x1 - x0)}" height="{_n(y1 - y0)}" '
            f'fill="#fafafa" stroke="#cccccc"/>'
        )
        msg = "no allocations recorded"
        if a.n_all and a.n_events == 0:
            msg += f" on {a.what}"
        svg.text((x0 + x1) / 2, (y0 + y1) / 2, msg, size=16, anchor="middle", fill=_GREY)
        return svg.document(title)

    # The time range: the events', with a little room on either side.
    span = a.t_last - a.t_first
    pad = span * 0.02 if span > 0 else max(abs(a.t_last) * 0.05, 1e-3)
    t_lo = max(0.0, a.t_first - pad) if a.t_first >= 0 else a.t_first - pad
    t_hi = a.t_last + pad

    def x(t: float) -> float:
        return x0 + (t - t_lo) / (t_hi - t_lo) * (x1 - x0)

    # Room at the top for the labels of refused allocations, so that none hides the peak.
    n_labels = min(len(a.ooms), _MAX_OOM_LABELS) + (len(a.ooms) > _MAX_OOM_LABELS)
    yd = y0 + (20 * n_labels + 12 if n_labels else 0)
    # The byte range: the peak and some room above it, in round steps of one unit.
    unit = _byte_unit(max(a.peak * 1.08, 1024))
    scale = 1024.0**unit
    b_step = _nice_step(max(a.peak * 1.08, 1024) / scale / 5)
    if unit == 0:
        b_step = max(1.0, round(b_step))
    b_top = math.ceil(max(a.peak * 1.08, 1024) / scale / b_step - 1e-9) * b_step * scale

    def y(b: float) -> float:
        return y1 - min(b, b_top) / b_top * (y1 - yd)

    # Grid and byte ticks.
    d = _decimals(b_step)
    for v in _ticks(0, b_top / scale, b_step):
        yy = y(v * scale)
        svg.add(
            f'<line x1="{_n(x0)}" y1="{_n(yy)}" x2="{_n(x1)}" y2="{_n(yy)}" '
            f'stroke="#e6e6e6" stroke-width="1"/>'
        )
        lab = "0" if v == 0 else f"{v:.{d}f} {_BYTE_UNITS[unit]}"
        svg.text(x0 - 8, yy + 4, lab, size=11, anchor="end", fill=_GREY)
    # Time ticks.
    t_unit, t_name = (1.0, "s") if t_hi >= 1 else (1e-3, "ms") if t_hi >= 1e-3 else (1e-6, "µs")
    n_ticks = max(2, int((x1 - x0) / 90))
    t_step = _nice_step((t_hi - t_lo) / t_unit / n_ticks)
    d = _decimals(t_step)
    for v in _ticks(t_lo / t_unit, t_hi / t_unit, t_step):
        xx = x(v * t_unit)
        svg.add(
            f'<line x1="{_n(xx)}" y1="{_n(y1)}" x2="{_n(xx)}" y2="{_n(y1 + 5)}" '
            f'stroke="{_GREY}" stroke-width="1"/>'
        )
        svg.text(xx, y1 + 19, f"{v:.{d}f} {t_name}", size=11, anchor="middle", fill=_GREY)
    svg.text((x0 + x1) / 2, y1 + 42, "time since the history began", size=12, anchor="middle")
    svg.text(
        0,
        0,
        "live bytes",
        size=12,
        anchor="middle",
        extra=f' transform="translate({_n(x0 - 68)},{_n((y0 + y1) / 2)}) rotate(-90)"',
    )

    # The bands: each group's bytes stacked on those before it, as steps.
    pts = _downsample(a.points, x, int(x1 - x0))
    if pts and pts[0][0] > t_lo:
        pts = [(t_lo, (0,) * len(a.groups)), *pts]
    xs = [x(t) for t, _ in pts] + [x1]
    below = [0] * len(pts)
    for gi, g in enumerate(a.groups):
        above = [b + p[1][gi] for b, p in zip(below, pts, strict=True)]
        if any(p[1][gi] for p in pts):
            path = [f"M{_n(xs[0])},{_n(y(above[0]))}"]
            for i in range(len(pts)):
                if i:
                    path.append(f"V{_n(y(above[i]))}")
                path.append(f"H{_n(xs[i + 1])}")
            path.append(f"V{_n(y(below[-1]))}")
            for i in range(len(pts) - 1, -1, -1):
                path.append(f"H{_n(xs[i])}")
                if i:
                    path.append(f"V{_n(y(below[i - 1]))}")
            colour = _OTHER_COLOUR if g.name == OTHER_SITES else _colour(gi)
            svg.add(
                f'<path d="{"".join(path)}Z" fill="{colour}" stroke="none">'
                f"<title>{_esc(g.name)}</title></path>"
            )
        below = above
    # The total's outline, over the bands.
    outline = [f"M{_n(xs[0])},{_n(y(below[0]))}"]
    for i in range(len(pts)):
        if i:
            outline.append(f"V{_n(y(below[i]))}")
        outline.append(f"H{_n(xs[i + 1])}")
    svg.add(
        f'<path d="{"".join(outline)}" fill="none" stroke="{_INK}" stroke-width="1" '
        f'stroke-opacity="0.7"/>'
    )
    # Axes.
    svg.add(
        f'<path d="M{_n(x0)},{_n(y0)}V{_n(y1)}H{_n(x1)}" fill="none" stroke="{_INK}" '
        f'stroke-width="1"/>'
    )

    # The peak.
    if a.peak > 0:
        px, py = x(a.peak_t), y(a.peak)
        svg.add(
            f'<line x1="{_n(px)}" y1="{_n(y0 - 4)}" x2="{_n(px)}" y2="{_n(y1)}" '
            f'stroke="{_INK}" stroke-width="1.2" stroke-dasharray="5,3"/>'
        )
        svg.add(
            f'<circle cx="{_n(px)}" cy="{_n(py)}" r="4" fill="{_INK}" stroke="#ffffff" '
            f'stroke-width="1.5"/>'
        )
        text = f"peak {_fmt_bytes(a.peak)} at {_fmt_time(a.peak_t)}"
        right = px + 6 + _text_w(text, 12.5, bold=True) <= x1
        svg.text(
            px + 6 if right else px - 6,
            y0 - 8,
            text,
            size=12.5,
            weight="bold",
            anchor="start" if right else "end",
        )

    # The allocations the driver refused.
    for i, o in enumerate(a.ooms):
        ox, oy = x(o.t), y(o.live)
        svg.add(
            f'<line x1="{_n(ox)}" y1="{_n(y0)}" x2="{_n(ox)}" y2="{_n(y1)}" '
            f'stroke="{_RED}" stroke-width="1.2" stroke-dasharray="2,2"/>'
        )
        svg.add(
            f'<path d="M{_n(ox - 6)},{_n(oy - 6)}L{_n(ox + 6)},{_n(oy + 6)}'
            f'M{_n(ox - 6)},{_n(oy + 6)}L{_n(ox + 6)},{_n(oy - 6)}" stroke="{_RED}" '
            f'stroke-width="2.5" stroke-linecap="round"><title>'
            f"{_esc(f'out of memory: {_fmt_bytes(o.nbytes)} requested at {o.site}')}"
            f"</title></path>"
        )
        if i < _MAX_OOM_LABELS:
            # On the side with room for it, else on the roomier side, the site shortened.
            head = f"out of memory: {_fmt_bytes(o.nbytes)} requested at "
            room_right, room_left = x1 - ox - 16, ox - x0 - 16
            fits = _text_w(head + o.site, 11.5) <= room_right
            right = fits or room_right >= room_left
            room = max(room_right, room_left, 200.0) - _text_w(head, 11.5)
            text = head + _fit(o.site, room, 11.5)
            svg.label(
                ox + 8 if right else ox - 8,
                y0 + 20 + 20 * i,
                text,
                anchor="start" if right else "end",
                fill=_RED,
            )
    if len(a.ooms) > _MAX_OOM_LABELS:
        more = len(a.ooms) - _MAX_OOM_LABELS
        svg.label(
            x0 + 8,
            y0 + 20 + 20 * _MAX_OOM_LABELS,
            f"and {_plural(more, 'more refused allocation')} (red crosses)",
            anchor="start",
            fill=_RED,
        )

    # The legend: the groups in order, the largest at the peak first (and lowest).
    svg.text(legend_x, y0 - 8, "Allocation sites, bytes at the peak", size=12.5, weight="bold")
    room = width - legend_x - 22 - 16
    for gi, g in enumerate(a.groups):
        ly = y0 + 14 + row * gi
        colour = _OTHER_COLOUR if g.name == OTHER_SITES else _colour(gi)
        svg.add(
            f'<rect x="{_n(legend_x)}" y="{_n(ly - 1)}" width="14" height="14" rx="2" '
            f'fill="{colour}"/>'
        )
        name = g.name
        if g.name == OTHER_SITES:
            name = f"{OTHER_SITES} ({_plural(len(g.sites), 'site')})"
        svg.text(legend_x + 22, ly + 11, _fit(name, room, 12), size=12, title=name)
        share = f" ({g.at_peak / a.peak:.0%})" if a.peak else ""
        svg.text(legend_x + 22, ly + 27, _fmt_bytes(g.at_peak) + share, size=11, fill=_GREY)
    return svg.document(title)


def _snapshot(snapshot: Mapping[str, Any] | str | os.PathLike[str]) -> Mapping[str, Any]:
    if isinstance(snapshot, Mapping):
        return _checked(dict(snapshot), "snapshot")
    return load_snapshot(snapshot)


def draw_memory(
    snapshot: Mapping[str, Any] | str | os.PathLike[str],
    path: str | os.PathLike[str] | None = None,
    *,
    device: DeviceSelection = None,
    width: int = 1200,
    height: int = 600,
    top: int = 8,
) -> str:
    """Draw a memory snapshot as an SVG picture: live bytes over time, by site.

    A stacked step chart of the bytes live over the history, one colour per
    allocation site (where the allocation was made: the first frame outside
    cudriver); a legend with each site's bytes at the peak; the peak marked
    (``"peak 1.50 GiB at 0.42 s"``); each allocation the driver refused marked with
    a red cross and ``"out of memory: 2.00 GiB requested at SITE"``. A free whose
    allocation is not in the history (made before it began, or dropped from it) is
    not drawn. No driver call; only the standard library.

    Parameters
    ----------
    snapshot
        A snapshot (:func:`~cudriver.memory_snapshot`'s dict) or the path of one
        (:func:`~cudriver.save_memory_snapshot`'s file, read by
        :func:`~cudriver.load_memory_snapshot`).
    path
        Where to write the SVG (UTF-8), if anywhere.
    device
        None: all memory, every device's and host memory summed; a device ordinal:
        that device's memory only; ``"host"``: host (pinned) memory only.
    width, height
        The picture's size in pixels; the height grows when the legend needs it.
    top
        How many sites get a colour of their own (those with the most bytes at the
        peak); the others are drawn together as "other sites".

    Returns
    -------
    str
        The SVG document. A snapshot without allocations gives a picture saying
        "no allocations recorded".

    Raises
    ------
    ValueError
        An invalid snapshot (see :func:`~cudriver.load_memory_snapshot`), device, size
        or ``top``.
    """
    sel = _check_device(device)
    for name, v, least in (("width", width, 400), ("height", height, 300), ("top", top, 0)):
        if not _is_int(v) or v < least:
            raise ValueError(f"{name} must be an integer >= {least}, not {v!r}")
    snap = _snapshot(snapshot)
    svg = _render(_analyse(snap, sel, top), snap, width, height)
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(svg)
    return svg


def summary_line(
    snapshot: Mapping[str, Any] | str | os.PathLike[str], *, device: DeviceSelection = None
) -> str:
    """One line on a snapshot: the peak, the number of sites, the refused allocations.

    E.g. ``"peak 1.50 GiB at 0.42 s (all devices and host memory), 3 allocation sites,
    1 out-of-memory event"``; what ``python -m cudriver memory`` prints.
    """
    snap = _snapshot(snapshot)
    a = _analyse(snap, _check_device(device), 0)
    if a.n_allocs:
        head = f"peak {_fmt_bytes(a.peak)} at {_fmt_time(a.peak_t)} ({a.what})"
    else:
        head = f"no allocations recorded ({a.what})"
    return (
        f"{head}, {_plural(a.n_sites, 'allocation site')}, "
        f"{_plural(len(a.ooms), 'out-of-memory event')}"
    )


# Their public names (``cudriver.draw_memory_snapshot``...), which reprs, pickles and the
# API reference show.
draw_memory.__name__ = draw_memory.__qualname__ = "draw_memory_snapshot"
load_snapshot.__name__ = load_snapshot.__qualname__ = "load_memory_snapshot"
