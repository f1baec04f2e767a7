"""cudriver.benchmark and BenchmarkResult (src/cudriver/_observe/timing.py)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import cudriver as cu
from cudriver._observe import timing

from ._support import no_driver


class Calls:
    """A callable that counts its calls (and may raise on one of them)."""

    def __init__(self, raise_on: int | None = None, exc: BaseException | None = None) -> None:
        self.n = 0
        self.raise_on = raise_on
        self.exc = exc
        self.seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.n += 1
        self.seen.append((args, kwargs))
        if self.raise_on is not None and self.n == self.raise_on:
            assert self.exc is not None
            raise self.exc


# -- argument checks: before any driver call, so these run without a GPU --------------------
# A made-up stream handle (the fake_stream fixture): a driver call with it would fail, and
# without a GPU no driver is found, so the errors seen come from the checks.

BAD_ARGS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"fn": 3}, TypeError, "fn must be callable"),
    ({"args": "ab"}, TypeError, "args must be a tuple"),
    ({"args": 1}, TypeError, "args must be a tuple"),
    ({"kwargs": [("a", 1)]}, TypeError, "kwargs must be a mapping"),
    ({"n_repeat": 0}, ValueError, "n_repeat must be >= 1"),
    ({"n_repeat": -5}, ValueError, "n_repeat must be >= 1"),
    ({"n_repeat": True}, TypeError, "n_repeat must be an int, not bool"),
    ({"n_repeat": 2.0}, TypeError, "n_repeat must be an int"),
    ({"n_repeat": "10"}, TypeError, "n_repeat must be an int"),
    ({"n_warmup": -1}, ValueError, "n_warmup must be >= 0"),
    ({"n_warmup": False}, TypeError, "n_warmup must be an int, not bool"),
    ({"n_warmup": 1.5}, TypeError, "n_warmup must be an int"),
    ({"max_duration": 0}, ValueError, "max_duration must be > 0"),
    ({"max_duration": -1.0}, ValueError, "max_duration must be > 0"),
    ({"max_duration": math.nan}, ValueError, "max_duration must be > 0"),
    ({"max_duration": -math.inf}, ValueError, "max_duration must be > 0"),
    ({"max_duration": True}, TypeError, "max_duration must be a number"),
    ({"max_duration": "1"}, TypeError, "max_duration must be a number"),
    ({"max_duration": None}, TypeError, "max_duration must be a number"),
    ({"name": 3}, TypeError, "name must be a str"),
    ({"stream": 1.5}, TypeError, r"stream: expected a stream"),
    ({"stream": "s"}, TypeError, r"stream: expected a stream"),
    ({"stream": -1}, ValueError, "does not fit in 64 bits"),
    ({"streams": []}, ValueError, "streams is empty"),
    ({"streams": "ab"}, TypeError, "streams must be a sequence"),
    ({"streams": 3}, TypeError, "streams must be a sequence"),
    ({"streams": [None]}, TypeError, r"streams\[0\] is None"),
    ({"streams": [0x1230, 2.5]}, TypeError, r"streams\[1\]: expected a stream"),
]


@pytest.mark.parametrize(("bad", "exc", "match"), BAD_ARGS)
def test_arguments_are_checked_before_the_driver(
    fake_stream: cu.Stream, bad: dict[str, Any], exc: type[Exception], match: str
) -> None:
    fn = Calls()
    kw: dict[str, Any] = {"fn": fn, "stream": fake_stream}
    if "streams" in bad:
        kw.pop("stream")
    kw.update(bad)
    f = kw.pop("fn")
    with pytest.raises(exc, match=match):
        cu.benchmark(f, **kw)
    assert fn.n == 0


def test_stream_and_streams_together_are_refused(fake_stream: cu.Stream) -> None:
    fn = Calls()
    with pytest.raises(TypeError, match="stream= or streams=, not both"):
        cu.benchmark(fn, stream=fake_stream, streams=[fake_stream])
    assert fn.n == 0


def test_a_closed_stream_is_refused() -> None:
    s = cu.Stream.from_handle(0x1230)  # borrowed: closing it makes no driver call
    s.close()
    fn = Calls()
    with pytest.raises(cu.ClosedError):
        cu.benchmark(fn, stream=s)
    with pytest.raises(cu.ClosedError):
        cu.benchmark(fn, streams=[cu.Stream.from_handle(0x1240), s])
    assert fn.n == 0


def test_the_signature_and_its_defaults() -> None:
    import inspect

    p = inspect.signature(cu.benchmark).parameters
    assert list(p) == [
        "fn",
        "args",
        "kwargs",
        "stream",
        "n_repeat",
        "n_warmup",
        "max_duration",
        "streams",
        "name",
    ]
    assert p["n_repeat"].default == 100 and p["n_warmup"].default == 10
    assert p["max_duration"].default == math.inf
    assert p["stream"].default is None and p["streams"].default is None
    for keyword_only in ("stream", "n_repeat", "n_warmup", "max_duration", "streams", "name"):
        assert p[keyword_only].kind is inspect.Parameter.KEYWORD_ONLY
    doc = cu.benchmark.__doc__ or ""
    for call in ("cuEventRecord", "cuEventSynchronize", "cuEventElapsedTime"):
        assert call in doc
    assert "synchronises after every" in doc


@no_driver
def test_valid_arguments_reach_the_driver_without_calling_fn() -> None:
    # Everything checked passes: the first driver call (the context of the legacy
    # stream) finds no driver, before any warm-up.
    fn = Calls()
    with pytest.raises(cu.DriverNotFoundError):
        cu.benchmark(fn, [1], {"a": 2}, n_repeat=np.int64(3), max_duration=1, name="x")
    assert fn.n == 0


def test_the_public_names() -> None:
    assert cu.benchmark is timing.benchmark
    assert cu.BenchmarkResult is timing.BenchmarkResult
    assert cu.benchmark.__module__ == "cudriver"
    assert cu.BenchmarkResult.__module__ == "cudriver"
    assert {"benchmark", "BenchmarkResult"} <= set(cu.__all__)


# -- BenchmarkResult from fabricated arrays ---------------------------------------------------


def made(
    cpu: Any = (10e-6, 20e-6, 30e-6), gpu: Any = ((8e-6, 9e-6, 13e-6),), name: str = "f"
) -> cu.BenchmarkResult:
    return cu.BenchmarkResult(name, np.asarray(cpu), np.asarray(gpu))


def test_the_result_prints_on_one_line_as_cupy_does() -> None:
    r = made()
    # The CuPy form: the name padded to 20, then per distribution the mean, +/- the
    # standard deviation, the minimum and the maximum, in microseconds.
    expected = (
        "f                   :"
        "    CPU:   20.000 us   +/- 8.165 (min:   10.000 / max:   30.000) us"
        "    GPU-0:   10.000 us   +/- 2.160 (min:    8.000 / max:   13.000) us"
    )
    assert str(r) == expected
    assert repr(r) == expected  # a notebook cell shows the same line
    assert "\n" not in str(r)


def test_a_single_repeat_prints_no_spread() -> None:
    r = made([15e-6], [[10e-6], [2.5e-6]], name="one")
    assert (
        str(r)
        == "one                 :    CPU:   15.000 us    GPU-0:   10.000 us    GPU-1:    2.500 us"
    )


def test_a_long_name_is_not_cut() -> None:
    r = made(name="a_rather_long_benchmark_name")
    assert str(r).startswith("a_rather_long_benchmark_name:    CPU:")


def test_summary_numbers() -> None:
    r = made([1.0, 2.0, 3.0, 10.0], [[1.0, 1.0, 1.0, 5.0], [0.5, 0.5, 0.5, 0.5]])
    s = r.summary()
    assert list(s) == ["CPU", "GPU-0", "GPU-1"] == list(r.labels)
    assert s["CPU"] == {
        "mean": 4.0,
        "std": pytest.approx(math.sqrt((9 + 4 + 1 + 36) / 4)),  # population std
        "min": 1.0,
        "max": 10.0,
        "median": 2.5,
    }
    assert s["GPU-0"]["median"] == 1.0 and s["GPU-0"]["mean"] == 2.0
    assert s["GPU-1"] == {"mean": 0.5, "std": 0.0, "min": 0.5, "max": 0.5, "median": 0.5}
    for stats in s.values():
        assert all(type(v) is float for v in stats.values())


def test_to_dict_is_plain_json() -> None:
    r = made()
    d = r.to_dict()
    assert d == {
        "name": "f",
        "cpu_times": [10e-6, 20e-6, 30e-6],
        "gpu_times": [[8e-6, 9e-6, 13e-6]],
    }
    assert json.loads(json.dumps(d)) == d
    again = cu.BenchmarkResult(**d)
    assert str(again) == str(r)


def test_the_arrays_are_float64_read_only_copies() -> None:
    cpu = np.array([1, 2, 3], dtype=np.int32)
    gpu = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    r = cu.BenchmarkResult("f", cpu, gpu)
    assert r.cpu_times.dtype == np.float64 and r.gpu_times.dtype == np.float64
    assert r.cpu_times.shape == (3,) and r.gpu_times.shape == (1, 3)
    cpu[0] = 100
    assert r.cpu_times[0] == 1.0
    with pytest.raises(ValueError, match="read-only"):
        r.cpu_times[0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        r.gpu_times[0, 0] = 5.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.name = "g"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("cpu", "gpu", "exc", "match"),
    [
        ([], np.empty((1, 0)), ValueError, "at least one repeat"),
        ([[1.0]], [[1.0]], ValueError, r"cpu_times must have the shape \(n,\)"),
        ([1.0], [1.0], ValueError, r"gpu_times must have the shape \(n_streams, n\)"),
        ([1.0, 2.0], [[1.0]], ValueError, "must agree"),
        ([1.0], np.empty((0, 1)), ValueError, "one row per timed stream"),
        (["a"], [[1.0]], TypeError, "cpu_times must be an array of seconds"),
        ([1.0], [[1.0, 2.0], [1.0]], TypeError, "gpu_times must be an array of seconds"),
    ],
)
def test_bad_result_arrays(cpu: Any, gpu: Any, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        cu.BenchmarkResult("f", cpu, gpu)


def test_the_result_name_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="name must be a str"):
        cu.BenchmarkResult(None, [1.0], [[1.0]])  # type: ignore[arg-type]


def test_results_compare_by_identity() -> None:
    # Equality of arrays has no single truth value: results are not compared by value.
    r = made()
    assert r == r and r != made()


# -- on the GPU --------------------------------------------------------------------------------

SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""

#: Cycles of one spin: about 1 ms at 2 GHz, well above launch latencies.
CYCLES = 2_000_000


@pytest.fixture
def spin(ctx: cu.Context) -> cu.Kernel:
    image = cu.compile(SPIN, arch=ctx.device.compute_capability, target="cubin")
    return cu.Module.load(image).kernel("spin")


def launcher(kernel: cu.Kernel, stream: cu.Stream, cycles: int = CYCLES) -> Callable[[], None]:
    def launch() -> None:
        kernel.launch(stream, 1, 1, np.int64(cycles))

    return launch


def agree(ours: np.ndarray, theirs: np.ndarray) -> None:
    """Two sets of device times of the same work agree.

    Other processes on the GPU (a parallel test run) time-slice with this one and only ever
    lengthen a measurement, so the shortest times are compared within 10 %, and the medians
    within a factor of two. Events that missed the work would give microseconds.
    """
    lo, hi = float(ours.min()), float(theirs.min())
    assert abs(lo - hi) <= max(0.10 * hi, 20e-6), (ours, theirs)
    assert float(np.median(ours)) <= 2 * float(np.median(theirs)) + 20e-6, (ours, theirs)
    assert float(np.median(theirs)) <= 2 * float(np.median(ours)) + 20e-6, (ours, theirs)


def interleaved(
    fn: Callable[[], None], bench_stream: cu.Stream | None, hand_stream: cu.Stream, rounds: int = 6
) -> tuple[np.ndarray, np.ndarray]:
    """Device times of ``fn`` by benchmark() and by hand, in alternating rounds of 3.

    Another process on the GPU slows whichever side runs meanwhile; alternating gives
    each side quiet rounds.
    """
    ours: list[np.ndarray] = []
    theirs: list[np.ndarray] = []
    kw: dict[str, Any] = {} if bench_stream is None else {"stream": bench_stream}
    for _ in range(rounds):
        ours.append(cu.benchmark(fn, n_repeat=3, n_warmup=1, **kw).gpu_times[0])
        theirs.append(hand_timed(fn, hand_stream, 3))
    return np.concatenate(ours), np.concatenate(theirs)


def hand_timed(fn: Callable[[], None], stream: cu.Stream, n: int) -> np.ndarray:
    """Seconds between two events around each call: benchmark's device time, by hand."""
    start, end = cu.Event(timing=True), cu.Event(timing=True)
    out = []
    for _ in range(n):
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        out.append(start.elapsed_ms(end) * 1e-3)
    start.close()
    end.close()
    return np.asarray(out)


@pytest.mark.gpu
def test_benchmark_agrees_with_hand_written_events(spin: cu.Kernel, stream: cu.Stream) -> None:
    fn = launcher(spin, stream)
    fn()  # the first launch loads the module: untimed, as the warm-ups are
    stream.synchronize()
    r = cu.benchmark(fn, stream=stream, n_repeat=30, n_warmup=3)
    by_hand = hand_timed(fn, stream, 30)
    ours_all, theirs_all = interleaved(fn, stream, stream)
    ours, theirs = float(np.median(r.gpu_times[0])), float(np.median(by_hand))
    print(f"\n{r}\nhand-written events: median {theirs * 1e6:.3f} us over {by_hand.size}")
    assert r.name == "launch"
    assert r.cpu_times.shape == (30,) and r.gpu_times.shape == (1, 30)
    agree(ours_all, theirs_all)
    # A spin of CYCLES clock cycles takes at least CYCLES / (5 GHz): a real measurement.
    assert ours > CYCLES / 5e9
    # Each repeat synchronises, and the host clock brackets the events: host >= device
    # (within the events' resolution, about half a microsecond, and a margin).
    assert np.all(r.cpu_times >= r.gpu_times[0] - 2e-6), (r.cpu_times, r.gpu_times)
    assert np.median(r.cpu_times) >= ours


@pytest.mark.gpu
def test_warmups_are_not_timed_and_arguments_pass_through(
    spin: cu.Kernel, stream: cu.Stream
) -> None:
    calls = Calls()

    def fn(*args: Any, **kwargs: Any) -> None:
        calls(*args, **kwargs)
        spin.launch(stream, 1, 1, np.int64(10_000))

    r = cu.benchmark(fn, (1, "a"), {"k": 2}, stream=stream, n_repeat=7, n_warmup=4)
    assert calls.n == 11
    assert r.cpu_times.shape == (7,) and r.gpu_times.shape == (1, 7)
    assert calls.seen == [((1, "a"), {"k": 2})] * 11
    r = cu.benchmark(fn, stream=stream, n_repeat=2, n_warmup=0)
    assert calls.n == 13 and r.cpu_times.size == 2


@pytest.mark.gpu
def test_max_duration_stops_early(spin: cu.Kernel, stream: cu.Stream) -> None:
    fn = launcher(spin, stream)  # about 1 ms a repeat
    r = cu.benchmark(fn, stream=stream, n_repeat=10_000, n_warmup=1, max_duration=0.02)
    n = r.cpu_times.size
    assert 1 <= n < 10_000
    # It stops at the repeat whose host time takes the total over the limit.
    assert r.cpu_times.sum() > 0.02
    assert r.cpu_times[:-1].sum() <= 0.02
    # A limit shorter than any repeat: exactly one.
    one = cu.benchmark(fn, stream=stream, n_repeat=50, max_duration=1e-9)
    assert one.cpu_times.size == 1 and one.gpu_times.shape == (1, 1)


@pytest.mark.gpu
def test_two_streams_give_two_rows(spin: cu.Kernel, ctx: cu.Context) -> None:
    a, b = cu.Stream(), cu.Stream()
    try:

        def fn() -> None:
            spin.launch(a, 1, 1, np.int64(CYCLES))
            spin.launch(b, 1, 1, np.int64(CYCLES // 10))

        r = cu.benchmark(fn, streams=[a, int(b.handle)], n_repeat=10, n_warmup=2)
        assert r.gpu_times.shape == (2, 10)
        assert r.labels == ("CPU", "GPU-0", "GPU-1")
        assert "GPU-1:" in str(r)
        long, short = np.median(r.gpu_times, axis=1)
        assert long > 3 * short, (long, short)
        assert np.all(r.cpu_times >= r.gpu_times.max(axis=0) - 2e-6)
    finally:
        a.synchronize()
        b.synchronize()
        a.close()
        b.close()


@pytest.mark.gpu
def test_the_default_stream_is_the_legacy_stream(spin: cu.Kernel, ctx: cu.Context) -> None:
    # Work on a blocking stream is ordered with the legacy stream's events.
    blocking = cu.Stream(non_blocking=False)
    try:
        fn = launcher(spin, blocking)
        ours, theirs = interleaved(fn, None, blocking)
        agree(ours, theirs)
        assert float(ours.min()) > CYCLES / 5e9
    finally:
        blocking.synchronize()
        blocking.close()


class Boom(Exception):
    pass


@pytest.fixture
def events_made(monkeypatch: pytest.MonkeyPatch) -> list[cu.Event]:
    """The events benchmark() makes, to check that it closes them."""
    made: list[cu.Event] = []
    real = cu.Event

    def make(**kw: Any) -> cu.Event:
        ev = real(**kw)
        made.append(ev)
        return ev

    monkeypatch.setattr(timing, "Event", make)
    return made


@pytest.mark.gpu
@pytest.mark.parametrize("raise_on", [2, 6], ids=["in-a-warmup", "in-a-repeat"])
def test_an_exception_in_fn_propagates_unchanged(
    spin: cu.Kernel, stream: cu.Stream, events_made: list[cu.Event], raise_on: int
) -> None:
    exc = Boom("from fn")
    calls = Calls(raise_on=raise_on, exc=exc)

    def fn() -> None:
        spin.launch(stream, 1, 1, np.int64(10_000))
        calls()

    with pytest.raises(Boom) as info:
        cu.benchmark(fn, stream=stream, n_repeat=10, n_warmup=3)
    assert info.value is exc
    assert calls.n == raise_on
    assert len(events_made) == 2 and all(ev.closed for ev in events_made)
    stream.synchronize()  # the stream is still usable


@pytest.mark.gpu
def test_events_are_closed_after_a_run(
    spin: cu.Kernel, stream: cu.Stream, events_made: list[cu.Event]
) -> None:
    cu.benchmark(launcher(spin, stream, 1000), stream=stream, n_repeat=3, n_warmup=0)
    assert len(events_made) == 2 and all(ev.closed for ev in events_made)


@pytest.mark.gpu
def test_a_capturing_stream_is_refused(spin: cu.Kernel, stream: cu.Stream) -> None:
    calls = Calls()
    with stream.capture() as g:
        spin.launch(stream, 1, 1, np.int64(1))
        with pytest.raises(cu.StreamCaptureError, match="is capturing"):
            cu.benchmark(calls, stream=stream)
        with pytest.raises(cu.StreamCaptureError, match=r"streams\[0\] is capturing"):
            cu.benchmark(calls, streams=[stream])
    assert calls.n == 0
    g.close()
