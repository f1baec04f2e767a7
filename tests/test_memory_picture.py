"""Drawing a memory snapshot (``cudriver._observe.memory_picture``) and its command line.

Synthetic snapshots only: no driver and no GPU are needed. What a picture shows is read
back from the SVG parsed as XML (its texts, and the elements that mark things).
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import cudriver as cu
from cudriver.__main__ import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from cudriver._observe.memory_picture import draw_memory, load_snapshot, summary_line

SVG = "{http://www.w3.org/2000/svg}"
KiB, MiB, GiB = 2**10, 2**20, 2**30
RED = "#d62728"

TRAIN = "train.py:42 in step"
ODD = "gen.py:3 in <genexpr> & \"quoted\" 'single'"  # text XML must escape
PIN = "pin.py:5 in stage"
EVAL = "eval.py:3 in run"


def event(
    t: float, action: str, address: int, nbytes: int, site: str, device: int | None = 0
) -> dict[str, Any]:
    return {
        "t": t,
        "action": action,
        "address": address,
        "nbytes": nbytes,
        "device": device,
        "resource": "cuMemAlloc" if device is not None else "cuMemHostAlloc",
        "site": site,
        "stack": [site, "main.py:1 in <module>"],
    }


def snapshot(events: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    """Two device-0 sites, host memory, a free of an unknown allocation, an oom, device 1.

    Live bytes, all memory: 1 MiB (0.1 s), 1.5 MiB (0.2 s), 1.75 MiB (0.3 s, the peak),
    0.75 MiB (0.4 s), then 0.875 MiB (0.6 s). Device 0 peaks at 1.5 MiB at 0.2 s, host
    memory at 256 KiB at 0.3 s.
    """
    if events is None:
        events = [
            event(0.1, "alloc", 0x1000, 1 * MiB, TRAIN),
            event(0.2, "alloc", 0x2000, 512 * KiB, ODD),
            event(0.3, "alloc", 0x3000, 256 * KiB, PIN, device=None),
            event(0.35, "free", 0x9000, 64 * MiB, "unknown"),  # made before the history
            event(0.4, "free", 0x1000, 1 * MiB, TRAIN),
            event(0.5, "oom", 0, 2 * GiB, TRAIN),
            event(0.6, "alloc", 0x1000, 128 * KiB, EVAL, device=1),  # same address, device 1
        ]
    snap = {
        "format": "cudriver.memory-snapshot",
        "version": 1,
        "pid": 1234,
        "created": 1764340000.0,
        "stacks": True,
        "dropped": 0,
        "events": events,
        "live": [],
        "peak": {"0": {"bytes": 3 * MiB, "t": 0.05}, "host": {"bytes": 256 * KiB, "t": 0.3}},
    }
    snap.update(extra)
    return snap


def texts(svg: str) -> list[str]:
    """Every text element's text as a reader sees it: entities resolved, tooltips not."""
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    return [
        (t.text or "") + "".join(child.tail or "" for child in t) for t in root.iter(SVG + "text")
    ]


def text_with(svg: str, part: str) -> list[str]:
    return [t for t in texts(svg) if part in t]


def peak_labels(svg: str) -> list[str]:
    return [t for t in texts(svg) if re.match(r"peak \d", t)]


# -- what the picture shows ------------------------------------------------------------------


def test_every_site_is_named_and_the_svg_is_xml() -> None:
    svg = draw_memory(snapshot())
    root = ET.fromstring(svg)  # valid XML, escapes and all
    assert root.get("width") == "1200"
    legend = texts(svg)
    for site in (TRAIN, ODD, PIN, EVAL):
        assert site in legend, site
    assert "unknown" not in legend  # the ignored free's site is no site
    # The site's characters are escaped in the document, and read back as they were.
    assert "&lt;genexpr&gt; &amp;" in svg
    assert "<genexpr>" not in svg


def test_title_says_what_is_drawn() -> None:
    svg = draw_memory(snapshot())
    title = texts(svg)[0]
    assert title == "Live memory by allocation site: all devices and host memory, 7 events"
    root = ET.fromstring(svg)
    assert root.findtext(SVG + "title") == title
    [sub] = text_with(svg, "pid 1234")
    assert "snapshot of 2025-11-28 14:26:40 UTC" in sub  # the snapshot's time, as UTC
    assert "1 free of earlier allocations ignored" in sub
    assert "1 allocation refused for lack of memory" in sub


def test_peak_is_labelled_and_marked() -> None:
    svg = draw_memory(snapshot())
    assert peak_labels(svg) == ["peak 1.75 MiB at 0.30 s"]
    # Each site's bytes at the peak, and its share, in the legend.
    legend = texts(svg)
    assert "1.00 MiB (57%)" in legend
    assert "512.00 KiB (29%)" in legend
    assert "256.00 KiB (14%)" in legend
    assert "0 B (0%)" in legend  # eval.py allocated after the peak
    root = ET.fromstring(svg)
    dashed = [e for e in root.iter(SVG + "line") if e.get("stroke-dasharray") == "5,3"]
    assert len(dashed) == 1  # the peak's line


def test_the_peak_holds_at_microseconds_and_hours() -> None:
    fast = snapshot([event(50e-6, "alloc", 1, 3 * GiB // 2, TRAIN)])
    assert peak_labels(draw_memory(fast)) == ["peak 1.50 GiB at 50.0 µs"]
    slow = snapshot([event(0.5, "alloc", 1, 10, TRAIN), event(4000.0, "alloc", 2, 5, TRAIN)])
    assert peak_labels(draw_memory(slow)) == ["peak 15 B at 4000.00 s"]


def test_out_of_memory_is_marked() -> None:
    svg = draw_memory(snapshot())
    assert text_with(svg, "out of memory") == [f"out of memory: 2.00 GiB requested at {TRAIN}"]
    root = ET.fromstring(svg)
    red = [e for e in root.iter() if e.get("stroke") == RED]
    assert len(red) == 3  # its line, its cross, its label's box
    [label] = [e for e in root.iter(SVG + "text") if e.get("fill") == RED]
    assert "2.00 GiB" in "".join(label.itertext())
    no_oom = snapshot([e for e in snapshot()["events"] if e["action"] != "oom"])
    svg = draw_memory(no_oom)
    assert not text_with(svg, "out of memory")
    assert not [e for e in ET.fromstring(svg).iter() if e.get("stroke") == RED]


def test_many_refused_allocations_are_all_marked() -> None:
    events = [event(0.1, "alloc", 1, MiB, TRAIN)]
    events += [
        event(0.2 + i / 100, "oom", 0, (i + 1) * GiB, f"site{i}.py:1 in f") for i in range(9)
    ]
    svg = draw_memory(snapshot(events))
    assert len(text_with(svg, "out of memory: ")) == 6  # labelled: the first six
    assert text_with(svg, "and 3 more refused allocations")
    crosses = [e for e in ET.fromstring(svg).iter(SVG + "path") if e.get("stroke") == RED]
    assert len(crosses) == 9


def test_device_filters() -> None:
    snap = snapshot()
    d0 = draw_memory(snap, device=0)
    assert peak_labels(d0) == ["peak 1.50 MiB at 0.20 s"]
    assert texts(d0)[0].startswith("Live memory by allocation site: device 0, 5 events (of 7)")
    assert TRAIN in texts(d0)
    assert PIN not in texts(d0)
    assert EVAL not in texts(d0)
    assert text_with(d0, "out of memory")
    # The counters' own peak for device 0 is higher (allocations before the history).
    assert text_with(d0, "peak with allocations made before the history: 3.00 MiB")

    host = draw_memory(snap, device="host")
    assert peak_labels(host) == ["peak 256.00 KiB at 0.30 s"]
    assert PIN in texts(host)
    assert TRAIN not in texts(host)
    assert not text_with(host, "out of memory")

    d1 = draw_memory(snap, device=1)  # its allocation has device 0's freed address
    assert peak_labels(d1) == ["peak 128.00 KiB at 0.60 s"]
    assert [s for s in (TRAIN, ODD, PIN, EVAL) if s in texts(d1)] == [EVAL]


def test_top_groups_the_rest_as_other_sites() -> None:
    svg = draw_memory(snapshot(), top=1)
    legend = texts(svg)
    assert TRAIN in legend  # the most bytes at the peak
    for site in (ODD, PIN, EVAL):
        assert site not in legend
    assert "other sites (3 sites)" in legend
    assert "768.00 KiB (43%)" in legend
    everything = draw_memory(snapshot(), top=4)
    assert not text_with(everything, "other sites")
    assert "other sites (4 sites)" in texts(draw_memory(snapshot(), top=0))


def test_one_band_per_drawn_group() -> None:
    def bands(svg: str) -> list[str]:
        paths = ET.fromstring(svg).iter(SVG + "path")
        return sorted(p.findtext(SVG + "title") or "" for p in paths if p.get("stroke") == "none")

    assert bands(draw_memory(snapshot())) == sorted([TRAIN, ODD, PIN, EVAL])
    assert bands(draw_memory(snapshot(), top=2)) == sorted([TRAIN, ODD, "other sites"])


def test_no_events_says_so() -> None:
    svg = draw_memory(snapshot([]))
    assert "no allocations recorded" in texts(svg)
    assert not peak_labels(svg)
    assert texts(svg)[0].endswith(", 0 events")
    # Events, but none of the device asked for.
    svg = draw_memory(snapshot(), device=7)
    assert "no allocations recorded on device 7" in texts(svg)
    # Only frees of allocations made before the history: nothing to draw either.
    svg = draw_memory(snapshot([event(0.1, "free", 1, MiB, TRAIN)]))
    assert "no allocations recorded" in texts(svg)


def test_frees_of_unknown_allocations_change_nothing() -> None:
    snap = snapshot()
    without = snapshot([e for e in snap["events"] if e["site"] != "unknown"])

    def bands(svg: str) -> list[tuple[str | None, str | None]]:
        paths = ET.fromstring(svg).iter(SVG + "path")
        return [(p.findtext(SVG + "title"), p.get("d")) for p in paths]

    a, b = draw_memory(snap), draw_memory(without)
    assert bands(a) == bands(b)
    assert peak_labels(a) == peak_labels(b) == ["peak 1.75 MiB at 0.30 s"]
    assert text_with(a, "1 free of earlier allocations ignored")
    assert not text_with(b, "ignored")


def test_an_address_reused_without_a_free_counts_once() -> None:
    # The free between them was lost (say, dropped from a full history).
    snap = snapshot([event(0.1, "alloc", 1, MiB, TRAIN), event(0.2, "alloc", 1, MiB, ODD)])
    svg = draw_memory(snap)
    assert peak_labels(svg) == ["peak 1.00 MiB at 0.10 s"]


def test_a_long_history_stays_small_and_keeps_its_peak() -> None:
    events = []
    for i in range(20_000):
        if i % 2 == 0:
            events.append(event(i * 1e-4, "alloc", i, MiB + i, f"s{i % 13}.py:1 in f"))
        else:
            events.append(event(i * 1e-4, "free", i - 1, MiB + i - 1, "x"))
    events.insert(15_001, event(1.50005, "alloc", 10**9, 5 * GiB, "big.py:1 in spike"))
    events.insert(15_002, event(1.50006, "free", 10**9, 5 * GiB, "big.py:1 in spike"))
    svg = draw_memory(snapshot(events))
    assert len(svg) < 300_000
    ET.fromstring(svg)
    assert peak_labels(svg)[0].startswith("peak 5.00 GiB at 1.50 s")
    assert "big.py:1 in spike" in texts(svg)


def test_output_is_deterministic_and_written(tmp_path: Path) -> None:
    snap = snapshot()
    out = tmp_path / "m.svg"
    svg = draw_memory(snap, out)
    assert out.read_text(encoding="utf-8") == svg
    assert draw_memory(copy.deepcopy(snap)) == svg
    path = tmp_path / "m.json"
    path.write_text(json.dumps(snap))
    assert draw_memory(path) == svg
    assert draw_memory(str(path)) == svg


def test_size_and_characters_xml_cannot_hold() -> None:
    bad = "odd\x00\x07site\udc80.py:1 in f"
    svg = draw_memory(snapshot([event(0.1, "alloc", 1, MiB, bad)]), width=800, height=400)
    root = ET.fromstring(svg)
    assert (root.get("width"), root.get("height")) == ("800", "400")
    assert "odd\ufffd\ufffdsite\ufffd.py:1 in f" in texts(svg)
    svg.encode("utf-8")
    # The picture grows for a long legend rather than clipping it.
    many = [event(0.1 + i, "alloc", i, MiB, f"s{i}.py:1 in f") for i in range(30)]
    root = ET.fromstring(draw_memory(snapshot(many), top=30))
    assert int(root.get("height", "0")) > 600


def test_long_site_names_are_shortened_from_the_start() -> None:
    long = "/" + "/".join(["directory"] * 20) + "/train.py:42 in step"
    svg = draw_memory(snapshot([event(0.1, "alloc", 1, MiB, long)]))
    [shown] = [t for t in texts(svg) if t.endswith("train.py:42 in step")]
    assert shown.startswith("…")
    assert len(shown) < len(long)
    # The whole name stays in a tooltip.
    titles = [e.text for e in ET.fromstring(svg).iter(SVG + "title")]
    assert long in titles


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"device": "gpu"}, "device must be None, a device ordinal"),
        ({"device": -1}, "device must be None"),
        ({"device": True}, "device must be None"),
        ({"top": -1}, "top must be an integer >= 0"),
        ({"width": 100}, "width must be an integer >= 400"),
        ({"height": 10.5}, "height must be an integer >= 300"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        draw_memory(snapshot(), **kwargs)


def test_a_bad_dict_is_refused() -> None:
    snap = snapshot()
    del snap["events"][2]["nbytes"]
    with pytest.raises(ValueError, match=r"^snapshot: event 2 has no 'nbytes'$"):
        draw_memory(snap)


def test_summary_line() -> None:
    assert summary_line(snapshot()) == (
        "peak 1.75 MiB at 0.30 s (all devices and host memory), 4 allocation sites, "
        "1 out-of-memory event"
    )
    assert summary_line(snapshot(), device="host") == (
        "peak 256.00 KiB at 0.30 s (host memory), 1 allocation site, 0 out-of-memory events"
    )
    assert summary_line(snapshot([])) == (
        "no allocations recorded (all devices and host memory), 0 allocation sites, "
        "0 out-of-memory events"
    )


# -- reading a snapshot ----------------------------------------------------------------------


def test_load_json_and_gzip(tmp_path: Path) -> None:
    snap = snapshot()
    plain = tmp_path / "s.json"
    plain.write_text(json.dumps(snap))
    assert load_snapshot(plain) == snap
    packed = tmp_path / "s.json.gz"
    packed.write_bytes(gzip.compress(json.dumps(snap).encode()))
    assert load_snapshot(packed) == snap
    assert load_snapshot(str(packed)) == snap


def _broken(snap: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    snap = copy.deepcopy(snap)
    obj = snap
    for key in path[:-1]:
        obj = obj[key]
    if value is KeyError:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value
    return snap


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not JSON (Expecting value"),
        (b"{'format': 1}", "not JSON ("),
        (b"\xff\xfe\x00garbage", "not JSON ("),
        (b"[1, 2]", "not a cudriver memory snapshot: the JSON is an array, not an object"),
        (b'{"version": 1, "events": []}', "not a cudriver memory snapshot: no 'format'"),
        (
            b'{"format": "torch.memory", "version": 1, "events": []}',
            "'format' is 'torch.memory', not 'cudriver.memory-snapshot'",
        ),
        (
            json.dumps(_broken(snapshot(), ["version"], 2)).encode(),
            "unknown snapshot version 2 (this cudriver reads version 1)",
        ),
        (
            json.dumps(_broken(snapshot(), ["version"], "1")).encode(),
            "unknown snapshot version '1'",
        ),
        (json.dumps(_broken(snapshot(), ["events"], KeyError)).encode(), "no 'events'"),
        (json.dumps(_broken(snapshot(), ["events"], {})).encode(), "'events' is an object"),
        (
            json.dumps(_broken(snapshot(), ["events", 3, "nbytes"], KeyError)).encode(),
            "event 3 has no 'nbytes'",
        ),
        (
            json.dumps(_broken(snapshot(), ["events", 0, "action"], "realloc")).encode(),
            "event 0: unknown action 'realloc'",
        ),
        (
            json.dumps(_broken(snapshot(), ["events", 1, "nbytes"], -5)).encode(),
            "event 1: 'nbytes' is -5, not an integer >= 0",
        ),
        (
            json.dumps(_broken(snapshot(), ["events", 1, "device"], "cuda:0")).encode(),
            "event 1: 'device' is 'cuda:0'",
        ),
        (
            json.dumps(_broken(snapshot(), ["events", 1, "t"], None)).encode(),
            "event 1: 't' is None, not a finite number",
        ),
        (
            b'{"format": "cudriver.memory-snapshot", "version": 1, "events": [7]}',
            "event 0 is a number",
        ),
        (
            json.dumps(_broken(snapshot(), ["peak", "0"], {"bytes": "many"})).encode(),
            "'peak' of '0' is not an object",
        ),
        (b"\x1f\x8bnot really gzip", "a broken gzip file"),
        (gzip.compress(b"{"), "not JSON ("),
    ],
)
def test_load_errors_name_the_file_and_the_fault(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "snap.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="^") as info:
        load_snapshot(path)
    text = str(info.value)
    assert text.startswith(f"{path}: "), text
    assert message in text, text


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_snapshot(tmp_path / "missing.json")


def test_public_names() -> None:
    assert cu.load_memory_snapshot is load_snapshot
    assert cu.draw_memory_snapshot is draw_memory
    for name in ("load_memory_snapshot", "draw_memory_snapshot"):
        f = getattr(cu, name)
        assert name in cu.__all__
        assert (f.__module__, f.__name__, f.__qualname__) == ("cudriver", name, name)


# -- the command line ------------------------------------------------------------------------


def test_cli_draws_and_summarises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(snapshot()))
    assert main(["memory", str(path)]) == EXIT_OK
    out = tmp_path / "run.svg"
    assert out.is_file()
    assert out.read_text(encoding="utf-8") == draw_memory(snapshot())
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out.splitlines() == [
        str(out),
        "peak 1.75 MiB at 0.30 s (all devices and host memory), 4 allocation sites, "
        "1 out-of-memory event",
    ]


def test_cli_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.json.gz"
    path.write_bytes(gzip.compress(json.dumps(snapshot()).encode()))
    assert main(["memory", str(path)]) == EXIT_OK
    assert (tmp_path / "run.svg").is_file()  # .json.gz -> .svg
    out = tmp_path / "pic.svg"
    assert main(["memory", str(path), "-o", str(out), "--device", "0", "--top", "1"]) == EXIT_OK
    svg = out.read_text(encoding="utf-8")
    assert peak_labels(svg) == ["peak 1.50 MiB at 0.20 s"]
    assert "other sites (1 site)" in texts(svg)
    assert main(["memory", str(path), "-o", str(out), "--device", "host"]) == EXIT_OK
    assert peak_labels(out.read_text(encoding="utf-8")) == ["peak 256.00 KiB at 0.30 s"]
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == [
        str(out),
        "peak 256.00 KiB at 0.30 s (host memory), 1 allocation site, 0 out-of-memory events",
    ]
    no_suffix = tmp_path / "snapshot"
    no_suffix.write_text(json.dumps(snapshot([])))
    assert main(["memory", str(no_suffix)]) == EXIT_OK
    assert "no allocations recorded" in texts((tmp_path / "snapshot.svg").read_text())


def test_cli_bad_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.json"
    path.write_text("not json")
    assert main(["memory", str(path)]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"cudriver: {path}: not JSON (")
    assert len(captured.err.splitlines()) == 1
    assert not (tmp_path / "run.svg").exists()

    path.write_text(json.dumps(snapshot(version=9)))
    assert main(["memory", str(path)]) == EXIT_USAGE
    assert "unknown snapshot version 9" in capsys.readouterr().err

    assert main(["memory", str(tmp_path / "missing.json")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("cudriver: cannot read the snapshot: ")
    assert "missing.json" in err


def test_cli_unwritable_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(snapshot()))
    out = tmp_path / "no" / "such" / "dir.svg"
    assert main(["memory", str(path), "-o", str(out)]) == EXIT_FAILED
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("cudriver: cannot write the picture: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["memory"],
        ["memory", "x.json", "--device", "gpu0"],
        ["memory", "x.json", "--device", "-1"],
        ["memory", "x.json", "--top", "many"],
        ["memory", "x.json", "--top", "-2"],
        ["memory", "x.json", "extra"],
    ],
)
def test_cli_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_USAGE
    assert "usage: python -m cudriver" in capsys.readouterr().err


def test_cli_needs_no_driver(tmp_path: Path) -> None:
    # A process of its own: the command must not initialise CUDA (nor need to).
    path = tmp_path / "run.json"
    path.write_text(json.dumps(snapshot()))
    code = (
        "import sys, cudriver as cu, cudriver.__main__ as m\n"
        "rc = m.main(['memory', sys.argv[1]])\n"
        "assert not cu.is_initialized(), 'the memory command initialised CUDA'\n"
        "sys.exit(rc)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=False
    )
    assert p.returncode == EXIT_OK, p.stderr
    assert p.stdout.splitlines()[0] == str(tmp_path / "run.svg")
    p = subprocess.run(
        [sys.executable, "-m", "cudriver", "memory", str(path), "-o", str(tmp_path / "o.svg")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == EXIT_OK, p.stderr
    assert (tmp_path / "o.svg").is_file()


def test_cli_help_lists_the_command() -> None:
    import cudriver.__main__ as cli

    assert "memory SNAPSHOT [-o OUT.svg] [--device N|host] [--top K]" in (cli.__doc__ or "")
    p = subprocess.run(
        [sys.executable, "-m", "cudriver", "--help"], capture_output=True, text=True, check=False
    )
    assert "memory" in p.stdout
    assert "a memory snapshot that cannot be read" in p.stdout
