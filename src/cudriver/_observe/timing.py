"""A benchmark helper: a callable timed over repeats, on the device and on the host.

:func:`benchmark` calls a callable a number of times after warm-ups and measures each
call twice: on the device, as the time between two timing events recorded on a stream
around the call (``cuEventRecord``, ``cuEventElapsedTime``), and on the host, with
``time.perf_counter()`` around the call and the wait for those events
(``cuEventSynchronize``). :class:`BenchmarkResult` holds both distributions and prints
them on one line, as ``cupyx.profiler.benchmark`` does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from cuda.bindings import driver as _drv

from .._lifetime._coerce import StreamLike, int_arg
from .._work.event import Event
from .._work.stream import Stream
from ..errors import StreamCaptureError

__all__ = ["BenchmarkResult", "benchmark"]

_STATS = ("mean", "std", "min", "max", "median")


def _times(value: object, what: str, ndim: int) -> npt.NDArray[np.float64]:
    """``value`` as a new read-only float64 array of ``ndim`` dimensions."""
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be an array of seconds: {exc}") from None
    if a.ndim != ndim:
        shape = "(n,)" if ndim == 1 else "(n_streams, n)"
        raise ValueError(f"{what} must have the shape {shape}, not {a.shape}")
    a.setflags(write=False)
    return a


def _stats(t: npt.NDArray[np.float64]) -> dict[str, float]:
    return {
        "mean": float(t.mean()),
        "std": float(t.std()),
        "min": float(t.min()),
        "max": float(t.max()),
        "median": float(np.median(t)),
    }


def _line_item(label: str, t: npt.NDArray[np.float64]) -> str:
    us = t * 1e6
    s = f"    {label}:{us.mean():9.3f} us"
    if us.size > 1:
        s += f"   +/-{us.std():6.3f} (min:{us.min():9.3f} / max:{us.max():9.3f}) us"
    return s


@dataclass(frozen=True, init=False, eq=False, repr=False)
class BenchmarkResult:
    """What :func:`benchmark` measured: the host and device time of each repeat.

    Printed (``str`` and ``repr``, so also as a notebook cell's value) on one line in
    the form of ``cupyx.profiler.benchmark``'s result: the name, then the mean,
    standard deviation, minimum and maximum in microseconds, of the host (``CPU``) and
    of each timed stream (``GPU-0``, ``GPU-1``, ... in the order of the ``streams``
    given; ``GPU-i`` is the i-th stream, not device i).

    Attributes
    ----------
    name : str
        The name printed first: the callable's ``__name__`` unless one was given.
    cpu_times : numpy.ndarray
        Seconds on the host for each repeat: shape ``(n,)``, float64, read-only.
    gpu_times : numpy.ndarray
        Seconds on the device between the events around each repeat, one row per
        timed stream: shape ``(n_streams, n)``, float64, read-only.

    Made from any array-likes of seconds (copied as float64), for example the lists
    of :meth:`to_dict`.

    Raises
    ------
    TypeError
        ``name`` is not a str, or an array is not one of numbers.
    ValueError
        The arrays are not shaped ``(n,)`` and ``(n_streams, n)``, hold no repeat, or
        disagree in ``n``.
    """

    name: str
    cpu_times: npt.NDArray[np.float64]
    gpu_times: npt.NDArray[np.float64]

    def __init__(self, name: str, cpu_times: npt.ArrayLike, gpu_times: npt.ArrayLike) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        cpu = _times(cpu_times, "cpu_times", 1)
        gpu = _times(gpu_times, "gpu_times", 2)
        if cpu.size == 0:
            raise ValueError("a BenchmarkResult needs at least one repeat: cpu_times is empty")
        if gpu.shape[0] == 0:
            raise ValueError("gpu_times needs one row per timed stream, and has none")
        if gpu.shape[1] != cpu.shape[0]:
            raise ValueError(
                f"gpu_times has {gpu.shape[1]} repeats per stream and cpu_times has "
                f"{cpu.shape[0]}: they must agree"
            )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "cpu_times", cpu)
        object.__setattr__(self, "gpu_times", gpu)

    @property
    def labels(self) -> tuple[str, ...]:
        """``("CPU", "GPU-0", ...)``: the names of the distributions, in order."""
        return ("CPU", *(f"GPU-{i}" for i in range(self.gpu_times.shape[0])))

    def summary(self) -> dict[str, dict[str, float]]:
        """The statistics of each distribution, in seconds.

        Returns
        -------
        dict
            For each of :attr:`labels`, a dict of ``mean``, ``std`` (the population
            standard deviation, as numpy and CuPy compute it), ``min``, ``max`` and
            ``median``.
        """
        rows = (self.cpu_times, *self.gpu_times)
        return {label: _stats(t) for label, t in zip(self.labels, rows, strict=True)}

    def to_dict(self) -> dict[str, Any]:
        """The result as plain Python values, ready for JSON.

        ``name``, ``cpu_times`` and ``gpu_times`` as lists of seconds (a list per
        stream for ``gpu_times``): ``BenchmarkResult(**d)`` makes the result again.
        """
        return {
            "name": self.name,
            "cpu_times": self.cpu_times.tolist(),
            "gpu_times": self.gpu_times.tolist(),
        }

    def __str__(self) -> str:
        rows = (self.cpu_times, *self.gpu_times)
        items = "".join(_line_item(label, t) for label, t in zip(self.labels, rows, strict=True))
        return f"{self.name:<20s}:{items}"

    __repr__ = __str__


def _as_stream(value: StreamLike, what: str) -> Stream:
    """A :class:`Stream` for a stream-like argument; a foreign one is borrowed."""
    if isinstance(value, Stream):
        if value._h is None:
            value._raise_closed()
        return value
    if value is None:
        raise TypeError(
            f"{what} is None: pass a stream (cudriver.Stream.legacy() for the legacy one)"
        )
    try:
        return Stream.from_handle(value)
    except TypeError as exc:
        raise TypeError(f"{what}: {exc}") from None


def _stream_list(stream: StreamLike, streams: Iterable[StreamLike] | None) -> list[Stream]:
    if streams is None:
        return [Stream.legacy() if stream is None else _as_stream(stream, "stream")]
    if stream is not None:
        raise TypeError("benchmark() takes stream= or streams=, not both")
    if isinstance(streams, (str, bytes)) or not isinstance(streams, Iterable):
        raise TypeError(f"streams must be a sequence of streams, not {type(streams).__name__}")
    out = [_as_stream(s, f"streams[{i}]") for i, s in enumerate(streams)]
    if not out:
        raise ValueError("streams is empty: give at least one stream to time")
    return out


def _duration_arg(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"max_duration must be a number of seconds, not {type(value).__name__}")
    v = float(value)
    if not v > 0:  # NaN too
        raise ValueError(f"max_duration must be > 0 seconds, not {value!r}")
    return v


def benchmark(
    fn: Callable[..., Any],
    args: tuple[Any, ...] | list[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    stream: StreamLike = None,
    n_repeat: int = 100,
    n_warmup: int = 10,
    max_duration: float = math.inf,
    streams: Iterable[StreamLike] | None = None,
    name: str | None = None,
) -> BenchmarkResult:
    """Time ``fn(*args, **kwargs)`` over repeats, on the device and on the host.

    As ``cupyx.profiler.benchmark``: ``n_warmup`` calls that are not timed, then up
    to ``n_repeat`` timed calls. Before the first timed call the stream's earlier work
    and the warm-ups are waited for. Each repeat

    1. reads ``time.perf_counter()``, records a start event on each stream
       (``cuEventRecord``), calls ``fn``, records an end event on each stream;
    2. waits for the end events (``cuEventSynchronize``): it **synchronises after every
       repeat**, so repeats never overlap;
    3. reads ``time.perf_counter()`` again (the host time) and each stream's
       ``cuEventElapsedTime`` between its two events (the device time).

    The host time so brackets the device time of the repeat (it is never shorter,
    within the events' resolution of about half a microsecond). It is the whole
    repeat's wall time, not only the call's: ``cupyx.profiler.benchmark`` stops its
    CPU clock when ``fn`` returns, before waiting for the device.

    Parameters
    ----------
    fn
        The callable to time. Its device work must be enqueued on the timed stream, or
        be ordered with it: work on another stream that the events do not wait for is
        not in the device time, and may still run when the next repeat starts.
    args, kwargs
        The positional (a tuple or list) and keyword arguments of each call.
    stream
        The stream the events are recorded on (any stream-like, see
        :data:`StreamLike`). Default: the legacy default stream
        (:meth:`Stream.legacy`) of the current context (device 0's primary context if
        none is current), which is ordered with every blocking stream of that
        context, but not with streams made ``non_blocking=True``: pass such a stream
        here.
    n_repeat
        The most timed calls (an int >= 1).
    n_warmup
        The calls before timing (an int >= 0), to compile, load, allocate and warm
        caches outside the measurement.
    max_duration
        Seconds: once the host times of the repeats so far add up to more, no more
        repeats are made (at least one is). Default: no limit.
    streams
        Several streams to time at once, instead of ``stream``: each gets its own pair
        of events and its own row of :attr:`BenchmarkResult.gpu_times`, in this order.
    name
        The name the result prints; default ``fn.__name__``.

    Returns
    -------
    BenchmarkResult
        The host and device times of the repeats made, in seconds.

    Raises
    ------
    TypeError, ValueError
        An argument is of the wrong type or out of range: checked before any driver
        call.
    StreamCaptureError
        A timed stream is capturing: events can be recorded into a graph, but their
        elapsed time cannot be read; time the launches of the instantiated graph
        (:meth:`GraphExec.launch`) instead.
    ClosedError
        A timed stream is closed.

    Notes
    -----
    An exception raised by ``fn`` (in a warm-up or a repeat) propagates unchanged; the
    events are destroyed (``cuEventDestroy``) on the way out, as they are at the end.
    The events are made with timing and without blocking sync (``Event(timing=True)``,
    in each stream's context): the wait spins, for the finest host time.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, not {type(fn).__name__}")
    if isinstance(args, list):
        args = tuple(args)
    elif not isinstance(args, tuple):
        raise TypeError(f"args must be a tuple (or list) of arguments, not {type(args).__name__}")
    if kwargs is None:
        kw: dict[str, Any] = {}
    elif isinstance(kwargs, Mapping):
        kw = dict(kwargs)
    else:
        raise TypeError(f"kwargs must be a mapping or None, not {type(kwargs).__name__}")
    n_repeat = int_arg(n_repeat, "n_repeat")
    if n_repeat < 1:
        raise ValueError(f"n_repeat must be >= 1, not {n_repeat}")
    n_warmup = int_arg(n_warmup, "n_warmup")
    if n_warmup < 0:
        raise ValueError(f"n_warmup must be >= 0, not {n_warmup}")
    limit = _duration_arg(max_duration)
    if name is None:
        name = getattr(fn, "__name__", None) or type(fn).__name__
    elif not isinstance(name, str):
        raise TypeError(f"name must be a str or None, not {type(name).__name__}")
    timed = _stream_list(stream, streams)

    # The driver from here on.
    for i, s in enumerate(timed):
        if s.is_capturing:
            which = "stream" if streams is None else f"streams[{i}]"
            raise StreamCaptureError(
                _drv.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                "cudriver.benchmark",
                f"{which} is capturing: the elapsed time of events recorded in a capture "
                "cannot be read; benchmark the launch of the instantiated graph on a "
                "stream that is not capturing",
            )
    pairs: list[tuple[Stream, Event, Event]] = []
    try:
        for s in timed:
            ctx = s.context
            pairs.append((s, Event(timing=True, context=ctx), Event(timing=True, context=ctx)))
        for _ in range(n_warmup):
            fn(*args, **kw)
        for s, _, end in pairs:  # the stream's earlier work and the warm-ups, untimed
            end.record(s)
        for _, _, end in pairs:
            end.synchronize()

        cpu = np.empty(n_repeat, dtype=np.float64)
        gpu = np.empty((len(pairs), n_repeat), dtype=np.float64)
        clock = time.perf_counter
        total = 0.0
        n = 0
        while n < n_repeat:
            t0 = clock()
            for s, start, _ in pairs:
                start.record(s)
            fn(*args, **kw)
            for s, _, end in pairs:
                end.record(s)
            for _, _, end in pairs:
                end.synchronize()
            t = clock() - t0
            cpu[n] = t
            for row, (_, start, end) in enumerate(pairs):
                gpu[row, n] = start.elapsed_ms(end) * 1e-3
            n += 1
            total += t
            if total > limit:
                break
    finally:
        for _, start, end in pairs:
            start.close()
            end.close()
    return BenchmarkResult(name, cpu[:n], gpu[:, :n])
