"""asyncio integration (cudriver.aio): ``await stream``, ``await event``, ``done_future()``.

The notifier machinery (the semaphore, the waiter thread, coalesced checks, cancellation,
lifetime) is tested without a GPU: a stand-in for ``cuEventQuery``/``cuEventDestroy``
answers for made-up events, and a thread calls the channel's real host function (libc's
``sem_post``, or the core's eventfd post) through its address, as the driver's
host-function thread does. Every wait has a deadline; the scenarios that
could hang the interpreter run in a subprocess with faulthandler armed.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import inspect
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver import aio
from cudriver._work import _wakeup
from cudriver.errors import GUARD

from ._support import Mapped, load_kernels, no_driver, until

SUCCESS = drv.CUresult.CUDA_SUCCESS
NOT_READY = drv.CUresult.CUDA_ERROR_NOT_READY
ILLEGAL_ADDRESS = drv.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS


def _semaphores_reason() -> str | None:
    try:
        _wakeup.semaphores()
    except cu.NotSupportedError as exc:
        return str(exc)
    return None


needs_semaphores = pytest.mark.skipif(
    _semaphores_reason() is not None, reason=f"no POSIX semaphores: {_semaphores_reason()}"
)


def run(coro: Any, timeout: float = 30.0) -> Any:
    """``asyncio.run`` with a deadline, so a lost wake fails instead of hanging."""

    async def bounded() -> Any:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def retired(n: aio.Notifier, timeout: float = 10.0) -> bool:
    """Whether ``n``'s waiter exits (every post taken, semaphore freed) in time."""
    return until(lambda: n._thread is None and n not in aio._LIVE and n._sem is None, timeout)


# -- the API, without a GPU ----------------------------------------------------------------


def test_streams_and_events_are_awaitable(fake_stream: cu.Stream) -> None:
    assert issubclass(cu.Stream, aio.Awaitable)
    assert issubclass(cu.Event, aio.Awaitable)
    assert inspect.isawaitable(fake_stream)
    assert "cuLaunchHostFunc" in (cu.Stream.done_future.__doc__ or "")


def test_done_future_needs_a_running_loop(fake_stream: cu.Stream) -> None:
    with pytest.raises(RuntimeError, match="no running event loop"):
        fake_stream.done_future()


def test_closed_stream_and_event_are_refused(fake_stream: cu.Stream) -> None:
    fake_stream.close()
    with pytest.raises(cu.ClosedError, match="Stream is closed"):
        fake_stream.done_future()
    never_opened = cu.Event.__new__(cu.Event)

    async def main() -> None:
        with pytest.raises(cu.ClosedError, match="Stream is closed"):
            await fake_stream
        with pytest.raises(cu.ClosedError, match="Event is closed"):
            await never_opened

    run(main())


def test_loop_argument_is_checked(fake_stream: cu.Stream) -> None:
    with pytest.raises(TypeError, match="event loop"):
        fake_stream.done_future(loop="loop")  # type: ignore[arg-type]
    loop = asyncio.new_event_loop()
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        fake_stream.done_future(loop=loop)


@needs_semaphores
def test_inside_a_host_function_is_refused(fake_stream: cu.Stream) -> None:
    async def main() -> None:
        GUARD.enter_host_function()
        try:
            with pytest.raises(cu.NotPermittedError, match="inside a host function"):
                fake_stream.done_future()
        finally:
            GUARD.leave_host_function()

    run(main())


@needs_semaphores
@no_driver
def test_without_a_driver_the_driver_is_named(fake_stream: cu.Stream) -> None:
    async def main() -> None:
        with pytest.raises(cu.DriverNotFoundError):
            await fake_stream

    run(main())


@pytest.mark.parametrize(
    ("libc", "reason"),
    [
        (lambda: (_ for _ in ()).throw(OSError(38, "win32 is not a POSIX system")), "POSIX"),
        (lambda: object(), "sem_init"),
    ],
    ids=["not-posix", "no-semaphores"],
)
def test_platforms_without_semaphores_are_refused(
    monkeypatch: pytest.MonkeyPatch,
    fake_stream: cu.Stream,
    libc: Callable[[], Any],
    reason: str,
) -> None:
    monkeypatch.setattr(_wakeup, "_API", None)
    monkeypatch.setattr(_wakeup, "_API_ERROR", None)
    monkeypatch.setattr(_wakeup, "_open_libc", libc)

    async def main() -> None:
        for _ in range(2):  # the answer is remembered
            with pytest.raises(cu.NotSupportedError, match="POSIX semaphores") as info:
                fake_stream.done_future()
            assert reason in str(info.value)
            assert isinstance(info.value, NotImplementedError)

    run(main())


# -- the notifier, with a stand-in driver ---------------------------------------------------


class FakeDriver:
    """Answers ``cuEventQuery`` for made-up events; plays the driver's thread's posts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.status: dict[int, Any] = {}
        self.destroyed: list[int] = []
        self.queries = 0
        self.checks = 0

        def cuEventQuery(ev: int) -> tuple[Any]:
            self.queries += 1
            return (self.status[ev],)

        def cuEventDestroy(ev: int) -> tuple[Any]:
            self.destroyed.append(ev)
            return (SUCCESS,)

        monkeypatch.setattr(aio._drv, "cuEventQuery", cuEventQuery)
        monkeypatch.setattr(aio._drv, "cuEventDestroy", cuEventDestroy)
        monkeypatch.setattr(aio, "SWEEP_SECONDS", 0.05)
        check = aio.Notifier.check

        def counted(n: aio.Notifier) -> None:
            self.checks += 1
            check(n)

        monkeypatch.setattr(aio.Notifier, "check", counted)
        # The channel's host function (sem_post, or the core's eventfd post) called
        # through its address, as the driver calls a host function.
        api = _wakeup.channel()
        self.post_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(api.post_address)

    def watch(self, n: aio.Notifier, loop: Any, ev: int, order: int | None = None) -> Any:
        self.status[ev] = NOT_READY
        fut = loop.create_future()
        n.watch(fut, ev, order, None)
        return fut

    def complete(self, n: aio.Notifier, ev: int, status: Any = SUCCESS) -> None:
        """The GPU reaches the event, then the host function behind it runs."""
        self.status[ev] = status
        self.post(n)

    def post(self, n: aio.Notifier) -> None:
        assert n._sem is not None
        self.post_fn(n._sem)


async def all_posts_taken(n: aio.Notifier, timeout: float = 5.0) -> None:
    """Wait until the waiter (or the loop) has taken every post expected.

    A sweep can resolve a future whose event is done before its post is taken; the
    credit is then one short until that post arrives.
    """
    deadline = time.monotonic() + timeout
    while n._consumed < n._expected:
        assert time.monotonic() < deadline, f"{n._consumed} of {n._expected} posts taken"
        await asyncio.sleep(0.001)


@pytest.fixture(params=["semaphore", "eventfd"])
def fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    """A stand-in driver, with each channel a notifier can use."""
    if _semaphores_reason() is not None:
        pytest.skip(f"no POSIX semaphores: {_semaphores_reason()}")
    if request.param == "eventfd":
        fds = _wakeup.eventfds()
        if fds is None:
            pytest.skip("eventfd channel: needs Linux and the compiled core")
        monkeypatch.setattr(_wakeup, "channel", lambda: fds)
    else:
        monkeypatch.setattr(_wakeup, "channel", _wakeup.semaphores)
    return FakeDriver(monkeypatch)


def test_thousands_of_futures_resolve_in_any_order(fake: FakeDriver) -> None:
    count = 3000
    rng = np.random.default_rng(0)

    async def main() -> aio.Notifier:
        loop = asyncio.get_running_loop()
        n = aio.notifier_for(loop)
        # 100 "streams": items on one stream may still be completed out of order here
        futs = [fake.watch(n, loop, i, order=i % 100) for i in range(count)]
        order = rng.permutation(count).tolist()
        gpu = threading.Thread(target=lambda: [fake.complete(n, i) for i in order])
        gpu.start()
        await asyncio.gather(*futs)
        gpu.join(10)
        await all_posts_taken(n)
        assert (n._expected, n._consumed, n._credit, len(n._pending)) == (count, count, 0, 0)
        return n

    n = run(main())
    assert sorted(fake.destroyed) == list(range(count))
    assert fake.checks < count  # wakes were coalesced
    assert retired(n)


def test_wakes_are_coalesced_while_the_loop_is_busy(fake: FakeDriver) -> None:
    count = 2000

    async def main() -> None:
        loop = asyncio.get_running_loop()
        n = aio.notifier_for(loop)
        futs = [fake.watch(n, loop, i) for i in range(count)]
        for i in range(count):
            fake.complete(n, i)
        time.sleep(0.3)  # the loop is busy: the waiter schedules one check meanwhile
        await asyncio.gather(*futs)

    run(main())
    assert fake.checks <= 3
    assert fake.queries <= count + 10


def test_a_check_stops_once_the_posts_are_accounted_for(
    fake: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No periodic sweep (which queries every pending one) during the test: a slow
    # machine would otherwise count one.
    monkeypatch.setattr(aio, "SWEEP_SECONDS", 60.0)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        n = aio.notifier_for(loop)
        futs = [fake.watch(n, loop, i) for i in range(1000)]
        for i in range(100):  # one at a time, each awaited
            fake.complete(n, i)
            await futs[i]
        assert fake.queries < 500  # not the 1000 pending ones at every wake
        for i in range(100, 1000):
            fake.complete(n, i)
        await asyncio.gather(*futs)

    run(main())


def test_query_errors_become_the_futures_exceptions(fake: FakeDriver) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        n = aio.notifier_for(loop)
        ok, bad = fake.watch(n, loop, 1), fake.watch(n, loop, 2)
        fake.complete(n, 2, ILLEGAL_ADDRESS)
        fake.complete(n, 1)
        assert await ok is None
        with pytest.raises(cu.LaunchError, match="cuEventQuery.*CUDA_ERROR_ILLEGAL_ADDRESS"):
            await bad

    run(main())
    assert sorted(fake.destroyed) == [1, 2]


def test_an_error_without_a_post_is_found_by_the_sweep(fake: FakeDriver) -> None:
    # A fault can stop a stream before its sem_post runs: the periodic sweep still
    # reaches the future.
    async def main() -> aio.Notifier:
        loop = asyncio.get_running_loop()
        n = aio.notifier_for(loop)
        fut = fake.watch(n, loop, 7)
        fake.status[7] = ILLEGAL_ADDRESS  # no post
        with pytest.raises(cu.LaunchError):
            await asyncio.wait_for(fut, 5)
        fake.post(n)  # the post comes after all: it only counts
        return n

    n = run(main())
    assert retired(n)


def test_cancelled_futures_leave_at_once_and_their_posts_are_harmless(fake: FakeDriver) -> None:
    async def main() -> aio.Notifier:
        loop = asyncio.get_running_loop()
        n = aio.notifier_for(loop)
        gone, kept = fake.watch(n, loop, 1), fake.watch(n, loop, 2)
        gone.cancel()
        await asyncio.sleep(0)  # the done callback runs
        assert len(n._pending) == 1
        assert fake.destroyed == [1]
        fake.complete(n, 1)  # its host function runs later
        await asyncio.sleep(0.1)
        assert not kept.done()
        fake.complete(n, 2)
        await kept
        await all_posts_taken(n)
        assert n._credit == 0
        return n

    n = run(main())
    assert retired(n)


class Scripted(aio.Awaitable):
    """An awaitable whose ``_done_now`` answers from a script (then keeps answering
    the last entry), and whose future is already done."""

    def __init__(self, *answers: bool | None) -> None:
        self.answers = list(answers)
        self.asked = 0
        self.futures = 0

    def _done_now(self) -> bool | None:
        self.asked += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def done_future(self, *, loop: asyncio.AbstractEventLoop | None = None) -> Any:
        self.futures += 1
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


@pytest.mark.parametrize(
    ("answers", "spin", "asked", "futures"),
    [
        ((True,), 30.0, 1, 0),  # done: no pass of the loop, no future
        ((False, False, True), 30.0, 3, 0),  # polled until done
        ((False, None), 30.0, 2, 1),  # unsure: the future decides at once
        ((False,), 0.0, 1, 1),  # no polling
        ((None,), 30.0, 1, 1),
    ],
    ids=["done", "polled", "unsure", "no-spin", "unsafe"],
)
def test_await_polls_then_takes_the_future(
    monkeypatch: pytest.MonkeyPatch,
    answers: tuple[bool | None, ...],
    spin: float,
    asked: int,
    futures: int,
) -> None:
    monkeypatch.setattr(aio, "SPIN_SECONDS", spin)
    obj = Scripted(*answers)

    async def main() -> None:
        await obj

    run(main())
    assert (obj.asked, obj.futures) == (asked, futures)


def test_await_polls_for_the_spin_only_and_lets_other_tasks_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(aio, "SPIN_SECONDS", 0.05)
    obj = Scripted(False)  # never done

    async def main() -> int:
        ticks = 0
        stop = False

        async def other() -> None:
            nonlocal ticks
            while not stop:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        t0 = time.monotonic()
        await obj
        assert 0.05 <= time.monotonic() - t0 < 5  # gave up polling after the spin
        stop = True
        await task
        return ticks

    assert run(main()) > 10  # the other task ran between the polls
    assert obj.futures == 1
    assert obj.asked > 10


def test_a_task_cancelled_while_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aio, "SPIN_SECONDS", 30.0)
    obj = Scripted(False)

    async def main() -> None:
        task = asyncio.create_task(_await(obj))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    assert obj.futures == 0


async def _await(obj: Any) -> None:
    await obj


def test_a_failed_enqueue_is_undone(fake: FakeDriver) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        n = aio.notifier_for(loop)
        fut = loop.create_future()
        fake.status[1] = NOT_READY
        item = n.watch(fut, 1, None, None)
        n.unwatch(item)  # the launch failed: no post will come
        assert (n._expected, n._credit, len(n._pending)) == (0, 0, 0)
        assert fake.destroyed == [1]
        # the same after a sweep resolved it before the launch failed
        fut2 = loop.create_future()
        fake.status[2] = SUCCESS
        item2 = n.watch(fut2, 2, None, None)
        n._sweep = True
        n.check()
        assert fut2.done()
        assert n._credit == -1
        n.unwatch(item2)
        assert (n._expected, n._credit, len(n._pending)) == (0, 0, 0)

    run(main())


def test_a_closed_loop_drops_its_futures_and_the_waiter_exits_once_drained(
    fake: FakeDriver,
) -> None:
    loop = asyncio.new_event_loop()
    n = aio.notifier_for(loop)
    fut = fake.watch(n, loop, 1)
    loop.close()
    assert until(lambda: n._closing, 5)  # noticed by the waiter
    assert until(lambda: fake.destroyed == [1], 5)
    assert not fut.done()  # dropped: a closed loop runs nothing
    time.sleep(0.2)
    assert n._thread is not None  # a post is still outstanding: the semaphore stays
    assert n in aio._LIVE
    fake.post(n)
    assert retired(n)


def test_shutdown_cancels_and_the_waiter_exits(fake: FakeDriver) -> None:
    async def main() -> tuple[aio.Notifier, list[Any]]:
        loop = asyncio.get_running_loop()
        n = aio.notifier_for(loop)
        futs = [fake.watch(n, loop, i) for i in range(3)]
        aio.shutdown()
        assert all(f.cancelled() for f in futs)
        assert aio.notifier_for(loop) is not n  # a new one for later futures
        aio.shutdown()
        return n, futs

    n, _futs = run(main())
    assert sorted(fake.destroyed) == [0, 1, 2]
    time.sleep(0.2)
    assert n._thread is not None  # three sem_posts still to come
    for _ in range(3):
        fake.post(n)
    assert retired(n)


def test_a_watched_descriptor_closes_after_its_last_post(fake: FakeDriver) -> None:
    """Shut down from another thread while the loop runs: the loop keeps taking the
    posts, and the channel is freed only after the last one (on the loop's thread)."""

    async def main() -> tuple[aio.Notifier, int]:
        loop = asyncio.get_running_loop()
        n = aio.notifier_for(loop)
        fut = fake.watch(n, loop, 7)
        fake.watch(n, loop, 8)
        fake.complete(n, 7)
        await fut
        sem = n._sem
        assert sem is not None
        t = threading.Thread(target=aio.shutdown, args=(loop,))
        t.start()
        t.join(10)
        await asyncio.sleep(0.2)
        assert n._sem == sem  # one post still to come: the channel stays
        fake.post(n)  # the cancelled future's post
        deadline = time.monotonic() + 10
        while n._sem is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the loop's own callback frees a watched descriptor
        return n, sem

    n, sem = run(main())
    assert retired(n)
    if n._api.loop_reads:
        with pytest.raises(OSError):
            os.fstat(sem)


def test_each_loop_has_its_own_notifier(fake: FakeDriver) -> None:
    seen: dict[int, Any] = {}
    errors: list[BaseException] = []

    def thread(k: int) -> None:
        async def main() -> None:
            loop = asyncio.get_running_loop()
            n = aio.notifier_for(loop)
            assert aio.notifier_for(loop) is n
            seen[k] = n
            fut = fake.watch(n, loop, 100 + k)
            fake.complete(n, 100 + k)
            await fut

        try:
            run(main())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=thread, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    assert errors == []
    assert seen[0] is not seen[1]
    assert all(retired(n) for n in seen.values())


def test_a_collected_loop_leaves_the_registry(fake: FakeDriver) -> None:
    loop = asyncio.new_event_loop()
    n = aio.notifier_for(loop)
    ref = weakref.ref(loop)
    loop.close()
    del loop
    gc.collect()
    assert ref() is None
    assert n not in aio._BY_LOOP.values()


def test_a_forked_child_forgets_the_parents_notifiers(fake: FakeDriver) -> None:
    loop = asyncio.new_event_loop()
    try:
        n = aio.notifier_for(loop)
        fut = fake.watch(n, loop, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded fork"
            pid = os.fork()
        if pid == 0:  # the child: report through the exit status only
            ok = not aio._LIVE and not aio._BY_LOOP and n._closing and not n._pending
            ok = ok and aio.notifier_for(loop) is not n and n._sem is None
            os._exit(0 if ok else 1)
        deadline = time.monotonic() + 30
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        if done[0] == 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child did not exit")
        assert os.waitstatus_to_exitcode(done[1]) == 0
        assert n in aio._LIVE and not fut.done()  # the parent's is untouched
    finally:
        loop.close()
    fake.complete(n, 1)
    assert retired(n)


# -- on a GPU ---------------------------------------------------------------------------------

SOURCE = r"""
extern "C" __global__ void spin_set(unsigned* p, unsigned i, unsigned v, long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
    p[i] = v;
}
"""
SLOW = 100_000_000  # clock cycles: about 50 ms


@pytest.fixture(scope="module")
def spin_set(primary: cu.Context) -> cu.Kernel:
    return load_kernels(primary, SOURCE, "spin_set")["spin_set"]


def zeros(n: int) -> cu.DeviceBuffer:
    return cu.DeviceBuffer.from_array(np.zeros(n, np.uint32))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "spin", [0.0, aio.SPIN_SECONDS, 30.0], ids=["no-poll", "poll", "long-poll"]
)
def test_await_a_stream_after_a_slow_kernel(
    ctx: cu.Context,
    stream: cu.Stream,
    spin_set: cu.Kernel,
    spin: float,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The loop's polling (while the spin lasts) leaves other tasks running.
    monkeypatch.setattr(aio, "SPIN_SECONDS", spin)
    buf = zeros(1)

    async def main() -> int:
        ticks = 0
        stop = asyncio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            while not stop.is_set():
                await asyncio.sleep(0.001)
                ticks += 1

        beat = asyncio.create_task(heartbeat())
        spin_set.launch(stream, 1, 1, buf, np.uint32(0), np.uint32(7), SLOW)
        await stream
        assert buf.copy_to()[0] == 7  # the kernel had completed
        stop.set()
        await beat
        return ticks

    assert run(main()) > 0  # the loop ran while the GPU worked
    buf.close()


@pytest.mark.gpu
def test_a_thousand_streams_awaited_together(ctx: cu.Context, spin_set: cu.Kernel) -> None:
    count = 1000
    buf = zeros(count)
    streams = [cu.Stream(non_blocking=True, context=ctx) for _ in range(count)]
    try:

        async def main() -> None:
            for i, s in enumerate(streams):
                spin_set.launch(s, 1, 1, buf, np.uint32(i), np.uint32(i + 1), 1_000_000)
            # Futures asked for explicitly: an await of a stream already done would be
            # answered by a query, without one.
            await asyncio.gather(*(s.done_future() for s in streams))
            n = aio.notifier_for(asyncio.get_running_loop())
            assert not n._pending
            # their events are kept for later futures, up to a limit
            assert len(n._contexts[ctx._key].events) == aio._SPARE_EVENTS
            await asyncio.gather(*streams[:10])
            assert len(n._contexts[ctx._key].events) == aio._SPARE_EVENTS

        run(main(), timeout=120)
        assert (buf.copy_to() == np.arange(1, count + 1, dtype=np.uint32)).all()
    finally:
        for s in streams:
            s.synchronize()
            s.close()
        buf.close()


@pytest.mark.gpu
def test_await_an_event(ctx: cu.Context, stream: cu.Stream, spin_set: cu.Kernel) -> None:
    buf = zeros(2)

    async def main() -> None:
        spin_set.launch(stream, 1, 1, buf, np.uint32(0), np.uint32(5), SLOW)
        ev = stream.record()
        spin_set.launch(stream, 1, 1, buf, np.uint32(1), np.uint32(6), SLOW)
        fut = ev.done_future()
        ev.close()  # the wait took the record: closing the event changes nothing
        await fut
        assert buf.copy_to()[0] == 5
        done = stream.record()
        await done
        assert buf.copy_to()[1] == 6
        again = done.done_future()  # complete already: a future already done
        assert again.done() and again.result() is None

    run(main())
    buf.close()


@pytest.mark.gpu
def test_events_do_not_wait_behind_each_other(ctx: cu.Context, mapped: Mapped) -> None:
    # Each event's future waits on an idle private stream of its own: the third event
    # completing first resolves its future first. Words 0-3 of the mapped memory gate
    # the streams.
    streams = [cu.Stream(non_blocking=True, context=ctx) for _ in range(3)]
    try:

        async def main() -> None:
            events = []
            for k, s in enumerate(streams):
                s.wait_value32(mapped.device_ptr + 4 * k, 1)
                events.append(s.record())
            futs = [ev.done_future() for ev in events]
            mapped.u32[2] = 1  # the last one first
            await asyncio.wait_for(futs[2], 10)
            assert not futs[0].done() and not futs[1].done()
            mapped.u32[0:2] = 1
            await asyncio.wait_for(asyncio.gather(*futs), 10)
            n = aio.notifier_for(asyncio.get_running_loop())
            assert len(n._contexts[ctx._key].streams) == 3
            for k in range(1, 21):  # one after another: the idle ones are reused
                streams[0].wait_value32(mapped.device_ptr + 12, k)
                fut = streams[0].record().done_future()
                assert not fut.done()
                mapped.u32[3] = k
                await asyncio.wait_for(fut, 10)
            assert len(n._contexts[ctx._key].streams) == 3

        run(main())
    finally:
        mapped.u32[0:4] = 1000
        for s in streams:
            s.synchronize()
            s.close()


@pytest.mark.gpu
def test_cancel_a_future_on_a_blocked_stream(ctx: cu.Context, mapped: Mapped) -> None:
    s = cu.Stream(non_blocking=True, context=ctx)
    try:

        async def main() -> None:
            s.wait_value32(mapped.device_ptr, 1)
            fut = s.done_future()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(fut, 0.2)  # times out and cancels it
            assert fut.cancelled()
            n = aio.notifier_for(asyncio.get_running_loop())
            assert not n._pending
            later = s.done_future()
            mapped.open()  # the cancelled one's sem_post runs too: harmless
            await asyncio.wait_for(later, 10)
            assert n._credit == 0 or until(lambda: n._credit == 0, 5)

        run(main())
    finally:
        mapped.open()
        s.synchronize()
        s.close()


@pytest.mark.gpu
@pytest.mark.parametrize("release", ["host", "write_value32"])
def test_await_a_stream_blocked_by_wait_value32(
    ctx: cu.Context, mapped: Mapped, release: str
) -> None:
    s = cu.Stream(non_blocking=True, context=ctx)
    other = cu.Stream(non_blocking=True, context=ctx)
    try:

        async def main() -> None:
            s.wait_value32(mapped.device_ptr, 1)
            fut = s.done_future()
            done, _ = await asyncio.wait({fut}, timeout=0.2)
            assert not done  # still blocked
            if release == "host":
                mapped.open()
            else:
                other.write_value32(mapped.device_ptr, 1)
            await asyncio.wait_for(fut, 10)

        run(main())
    finally:
        mapped.open()
        for x in (s, other):
            x.synchronize()
            x.close()


@pytest.mark.gpu
def test_closing_the_stream_after_asking_is_harmless(ctx: cu.Context, spin_set: cu.Kernel) -> None:
    buf = zeros(1)

    async def main() -> None:
        s = cu.Stream(non_blocking=True, context=ctx)
        spin_set.launch(s, 1, 1, buf, np.uint32(0), np.uint32(3), SLOW)
        fut = s.done_future()
        s.close()  # the driver finishes the work, and the host function runs
        await fut
        assert buf.copy_to()[0] == 3

    run(main())
    buf.close()


@pytest.mark.gpu
@pytest.mark.parametrize("spin", [0.0, 30.0], ids=["no-poll", "poll"])
def test_closing_the_stream_while_awaiting_it(
    ctx: cu.Context, spin_set: cu.Kernel, spin: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Polling, the await finds the stream closed and says so (as an await begun after
    # the close does); without polling its future was taken first and resolves. The
    # work runs to its end either way.
    monkeypatch.setattr(aio, "SPIN_SECONDS", spin)
    buf = zeros(1)

    async def main() -> None:
        s = cu.Stream(non_blocking=True, context=ctx)
        spin_set.launch(s, 1, 1, buf, np.uint32(0), np.uint32(5), SLOW)

        async def waiter() -> None:
            await s

        task = asyncio.create_task(waiter())
        await asyncio.sleep(0.005)  # the waiter is polling (or holds its future)
        s.close()
        if spin:
            with pytest.raises(cu.ClosedError, match="Stream is closed"):
                await task
        else:
            await task
        ctx.synchronize()
        assert buf.copy_to()[0] == 5

    run(main())
    buf.close()


@pytest.mark.gpu
def test_two_loops_in_two_threads(ctx: cu.Context, spin_set: cu.Kernel) -> None:
    buf = zeros(2)
    streams = [cu.Stream(non_blocking=True, context=ctx) for _ in range(2)]
    notifiers: dict[int, Any] = {}
    errors: list[BaseException] = []

    def thread(k: int) -> None:
        async def main() -> None:
            notifiers[k] = aio.notifier_for(asyncio.get_running_loop())
            spin_set.launch(streams[k], 1, 1, buf, np.uint32(k), np.uint32(k + 10), SLOW)
            await streams[k]
            ev = streams[k].record()
            await ev

        try:
            ctx.set_current()
            run(main())
        except BaseException as exc:
            errors.append(exc)

    try:
        threads = [threading.Thread(target=thread, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
            assert not t.is_alive()
        assert errors == []
        assert notifiers[0] is not notifiers[1]
        assert buf.copy_to().tolist() == [10, 11]
    finally:
        for s in streams:
            s.synchronize()
            s.close()
        buf.close()


@pytest.mark.gpu
def test_awaiting_finished_work_returns_at_once(ctx: cu.Context, stream: cu.Stream) -> None:
    ev = stream.record()
    stream.synchronize()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for _ in range(1000):
            await stream
            await ev
        # Answered by a query each: no future, so no notifier (nor its thread) was made.
        assert loop not in aio._BY_LOOP

    run(main())
    ev.close()


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["GLOBAL", "THREAD_LOCAL", "RELAXED"])
def test_awaiting_beside_a_capture_leaves_it_intact(
    ctx: cu.Context, stream: cu.Stream, mode: str
) -> None:
    other = cu.Stream()

    async def main() -> None:
        stream.begin_capture(cu.CaptureMode[mode])
        try:
            await other  # idle, but no query while a capture is open
        finally:
            g = stream.end_capture()
        g.close()

    run(main())
    other.close()


@pytest.mark.gpu
def test_a_capturing_stream_is_refused(ctx: cu.Context, stream: cu.Stream) -> None:
    async def main() -> None:
        stream.begin_capture()
        try:
            with pytest.raises(cu.StreamCaptureError, match="captured into the graph"):
                stream.done_future()
            with pytest.raises(cu.StreamCaptureError, match="captured into the graph"):
                await stream
        finally:
            g = stream.end_capture()  # the capture is intact
        assert g.num_nodes == 0
        g.close()
        await stream  # and the stream usable

    run(main())


@pytest.mark.gpu
def test_an_event_recorded_in_a_capture_is_refused(ctx: cu.Context, stream: cu.Stream) -> None:
    ev = cu.Event(timing=False)

    async def main() -> None:
        stream.begin_capture()
        try:
            ev.record(stream)
            with pytest.raises(cu.StreamCaptureError, match="capturing stream"):
                await ev
        finally:
            # Its query invalidated the capture, as any query of a captured event does.
            with pytest.raises(cu.StreamCaptureError, match="INVALIDATED"):
                stream.end_capture()
        await stream

    run(main())
    ev.close()


# -- on a GPU, in a process of its own --------------------------------------------------------

PRELUDE = """
import asyncio, faulthandler, sys, time, warnings
faulthandler.dump_traceback_later({deadline}, exit=True)
warnings.simplefilter("error")
import numpy as np
import cudriver as cu
from cudriver import aio

ctx = cu.Device(0).primary_context()
ctx.set_current()
"""
TIMEOUT = 90


def run_isolated(body: str) -> None:
    """Run ``body`` in a fresh interpreter with a deadline; it must print OK last."""
    script = PRELUDE.format(deadline=TIMEOUT - 10) + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", script],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit status {proc.returncode}:\n{out[-6000:]}"
    assert proc.stdout.rstrip().endswith("OK"), out[-6000:]


@pytest.mark.gpu
def test_a_loop_closed_with_a_future_pending() -> None:
    run_isolated(
        """
        gate = cu.PinnedBuffer(4, mapped=True)
        gate.array(np.uint32)[0] = 0
        s = cu.Stream(non_blocking=True)
        s.wait_value32(gate, 1)

        async def ask():
            return s.done_future()

        loop = asyncio.new_event_loop()
        fut = loop.run_until_complete(ask())
        loop.close()  # with the future pending
        assert not fut.done() and len(aio._LIVE) == 1
        time.sleep(2 * aio.SWEEP_SECONDS)
        assert len(aio._LIVE) == 1  # its sem_post is still to come: the semaphore stays
        gate.array(np.uint32)[0] = 1
        deadline = time.monotonic() + 30
        while aio._LIVE and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not aio._LIVE  # drained: the waiter exited and freed the semaphore
        assert not fut.done()  # dropped, never resolved
        s.synchronize()
        s.close()
        print("OK")
        """
    )


@pytest.mark.gpu
def test_exit_with_a_future_pending_on_a_blocked_stream() -> None:
    run_isolated(
        """
        gate = cu.PinnedBuffer(4, mapped=True)
        gate.array(np.uint32)[0] = 0
        s = cu.Stream(non_blocking=True)
        s.wait_value32(gate, 1)  # never satisfied

        async def main():
            fut = s.done_future()
            await asyncio.sleep(0.05)
            assert not fut.done()

        asyncio.run(main())
        print("OK")
        """
    )


@pytest.mark.gpu
def test_a_fault_in_a_kernel_reaches_the_future() -> None:
    run_isolated(
        """
        src = 'extern "C" __global__ void boom(unsigned* p) { p[0] = 1; asm("trap;"); }'
        boom = cu.Module.load(cu.compile(src, arch=cu.Device(0), target="cubin")).kernel("boom")
        buf = cu.DeviceBuffer(4)
        s = cu.Stream(non_blocking=True)

        async def main():
            boom.launch(s, 1, 1, buf)
            try:
                await asyncio.wait_for(s.done_future(), 30)
            except cu.LaunchError:  # from the query, or from an enqueue after the fault
                return
            raise AssertionError("no error")

        asyncio.run(main())
        print("OK")
        """
    )
