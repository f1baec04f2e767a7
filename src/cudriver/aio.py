"""asyncio integration: ``await stream``, ``await event`` and their futures.

:class:`Awaitable` is a base of :class:`~cudriver.Stream` and :class:`~cudriver.Event`;
the documentation's asyncio page describes the design, its costs and its limits.
``await`` first queries the work; while it is busy it yields to the loop and queries
again, for :data:`SPIN_SECONDS`, and only then takes a future (:meth:`done_future`).

No Python runs on the driver's thread: the host function is a C function of one
argument that takes no GIL (see :mod:`cudriver._wakeup`): with the compiled core, one
that adds 1 to a Linux ``eventfd`` the event loop watches (``add_reader``); otherwise
libc's ``sem_post`` on an unnamed POSIX semaphore that a daemon waiter thread takes
(``sem_timedwait`` without the GIL) before asking the loop (``call_soon_threadsafe``,
one at a time) to check. Per event loop a :class:`Notifier` owns the channel, the waiter
thread (which with an eventfd only sweeps: it wakes every :data:`SWEEP_SECONDS`) and
the pending futures: each has an event of its own, recorded where its work ends, which
the check queries (``cuEventQuery``). A stream's future: ``cuEventRecord`` on it, then
``cuLaunchHostFunc(stream, post, channel)`` through libcuda. An event's future: an idle
private stream (per context) waits for the event (``cuStreamWaitEvent``), then the same.

A check stops once it has resolved as many futures as posts arrived (each post follows
its future's event on its stream). Queries run in ``RELAXED`` capture mode while a
capture is open (:func:`capture.relaxed`). The channel is freed once every post has
been taken (until then the notifier stays in ``_LIVE``). A closed or collected loop is
noticed within :data:`SWEEP_SECONDS`; a forked child forgets the parent's notifiers.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
import weakref
from collections.abc import Generator
from typing import Any

from cuda.bindings import driver as _drv

from ._context.device import Context
from ._lifetime import _pins, capture
from ._lifetime._coerce import StreamBase
from ._runtime import _bindings
from ._runtime._bindings import SUCCESS
from ._work import _wakeup
from .errors import GUARD, CudaError, StreamCaptureError, error_for

__all__ = ["Awaitable", "shutdown", "PRIVATE_STREAMS", "SPIN_SECONDS", "SWEEP_SECONDS"]

_R = _drv.CUresult
_NOT_READY = _R.CUDA_ERROR_NOT_READY
_NOT_CAPTURING = _drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
_DISABLE_TIMING = int(_drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
_NON_BLOCKING = int(_drv.CUstream_flags.CU_STREAM_NON_BLOCKING)
# Module-level names, looked up at each call (so that tests can stand in for the driver).

#: Private streams made per context and event loop for events' futures.
PRIVATE_STREAMS = 32
#: How often (seconds) a waiter with futures pending checks them all, and its loop.
SWEEP_SECONDS = 0.5
#: For how long (seconds) ``await`` polls the work once per pass of the loop before it
#: waits for the host function's post, as a blocking synchronize spins (0: never).
SPIN_SECONDS = 0.0005
_SPARE_EVENTS = 256  # per context and loop
_CLOSED = "the event loop is closed (or cudriver.aio.shutdown ran)"


# -- a notifier per event loop ------------------------------------------------------------
class _Item:
    """One pending future and its event. Called when the future is done."""

    __slots__ = ("event", "fut", "notifier", "order", "owner")

    def __init__(
        self, notifier: Notifier, fut: Any, event: Any, order: int | None, owner: Any
    ) -> None:
        self.notifier = notifier
        self.fut = fut
        self.event = event
        self.order = order  # the stream's handle: later items on it cannot be done first
        self.owner = owner  # the _PerContext the event returns to (None: destroyed)

    def __call__(self, fut: Any) -> None:
        # The future was cancelled, or completed by someone else.
        self.notifier._dropped(self)


class _PerContext:
    """A notifier's resources in one context: spare events and private streams.

    Holds a lease on the context, so a closed one is destroyed only after them.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.lease: Any = ctx._lease()
        self.events: list[Any] = []
        self.streams: list[Any] = []
        self.last: list[_Item | None] = []  # each private stream's last future
        self.turn = 0


class Notifier:
    """The channel, waiter thread and pending futures of one event loop.

    Counts: ``_expected`` posts will arrive (host functions enqueued, Python wakes),
    ``_consumed`` were taken; ``_credit`` is posts taken minus futures removed, so a
    positive credit means at least that many pending futures are done. With a channel
    the loop reads (an eventfd), ``_reader`` says that the loop watches it: the waiter
    then only sweeps, and takes the posts itself again once the loop is gone.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)
        self._lock = threading.Lock()
        self._pending: dict[_Item, None] = {}
        self._contexts: dict[int, _PerContext] = {}
        self._expected = self._consumed = self._credit = 0
        self._scheduled = self._sweep = self._closing = self._reader = False
        self._api = _wakeup.channel()
        self._sem: int | None = None  # the channel's handle (semaphore address, descriptor)
        self._tick = threading.Event()  # wakes a waiter that only sweeps
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    # -- enqueueing (any thread) ---------------------------------------------------------
    def watch(self, fut: Any, event: Any, order: int | None, owner: Any) -> _Item:
        """Add ``fut`` (done when ``event`` is) to the pending set; one post is expected.

        Starts the waiter (and makes the semaphore) on first use.
        """
        item = _Item(self, fut, event, order, owner)
        fut.add_done_callback(item)
        start = None
        try:
            with self._lock:
                if self._closing:
                    raise RuntimeError(_CLOSED)
                if self._sem is None:
                    self._sem = self._api.new()
                self._pending[item] = None
                self._expected += 1
                if self._thread is None:
                    start = self._thread = threading.Thread(
                        target=self._run, name="cudriver-aio-waiter", daemon=True
                    )
                    if self._api.loop_reads:  # the loop watches the eventfd
                        self._loop_call(self._add_reader)
        except BaseException:
            fut.remove_done_callback(item)
            raise
        if start is not None:
            with _registry_lock:
                _LIVE.add(self)
            try:
                start.start()
            except BaseException:  # no thread: undo (the caller keeps the event)
                with self._lock:
                    self._thread = None
                    self._expected -= 1
                    del self._pending[item]
                fut.remove_done_callback(item)
                raise
        return item

    def unwatch(self, item: _Item) -> None:
        """Undo :meth:`watch` when the host function could not be enqueued."""
        with self._lock:
            self._expected -= 1
            mine = item in self._pending
            if mine:
                del self._pending[item]
            else:
                self._credit += 1  # removed already: it counted a post that never comes
        item.fut.remove_done_callback(item)
        if mine:
            self._finish(item)

    def enqueue(self, loop: Any, ctx: Context, stream_h: Any, order: int | None) -> _Item:
        """Record an event on ``stream_h``, then ``sem_post`` there; the future's item."""
        api = self._api
        call = _bindings.launch_host_func()
        res, ev = self._event(ctx)
        try:
            r = _drv.cuEventRecord(ev, stream_h)
            if r[0] is not SUCCESS:
                raise error_for(r[0], _drv.cuEventRecord)
            item = self.watch(loop.create_future(), ev, order, res)
        except BaseException:
            _wakeup.release(_drv.cuEventDestroy, ev, "event")
            raise
        code = call(int(stream_h), api.post_address, self._sem or 0)
        if code:
            self.unwatch(item)
            raise error_for(code, call)
        return item

    def _context(self, ctx: Context) -> _PerContext:
        # Caller holds _lock.
        if self._closing:
            raise RuntimeError(_CLOSED)
        res = self._contexts.get(ctx._key)
        if res is None:
            res = self._contexts[ctx._key] = _PerContext(ctx)
        return res

    def _event(self, ctx: Context) -> tuple[_PerContext, Any]:
        """A spare event of ``ctx``'s, or a new one (``cuEventCreate``, no timing)."""
        with self._lock:
            res = self._context(ctx)
            if res.events:
                return res, res.events.pop()
        return res, _wakeup.create(ctx, _drv.cuEventCreate, _DISABLE_TIMING)

    def private_stream(self, ctx: Context) -> tuple[_PerContext, int]:
        """An idle private stream of ``ctx`` (made while fewer than the limit).

        Idle: its last future resolved, or all its work done (``cuStreamQuery``).
        """
        with self._lock:
            res = self._context(ctx)
            for i, last in enumerate(res.last):
                if last is None or (last.event is None and not last.fut.cancelled()):
                    return res, i
                if (
                    capture.relaxed(functools.partial(_drv.cuStreamQuery, res.streams[i]))[0]
                    is SUCCESS
                ):
                    return res, i
            if len(res.streams) >= PRIVATE_STREAMS:
                res.turn = (res.turn + 1) % len(res.streams)
                return res, res.turn
        h = _wakeup.create(ctx, _drv.cuStreamCreate, _NON_BLOCKING)
        with self._lock:
            if not self._closing:
                res.streams.append(h)
                res.last.append(None)
                return res, len(res.streams) - 1
        _wakeup.release(_drv.cuStreamDestroy, h, "private stream")
        raise RuntimeError(_CLOSED)

    def _finish(self, item: _Item) -> None:
        """Return a removed item's event to its context's spares (or destroy it)."""
        ev, item.event = item.event, None
        res = item.owner
        if ev is None:
            return
        with self._lock:
            if res is not None and not self._closing and len(res.events) < _SPARE_EVENTS:
                res.events.append(ev)  # re-recording it later is fine, even if pending
                return
        _wakeup.release(_drv.cuEventDestroy, ev, "event")

    # -- the loop's side ------------------------------------------------------------------
    def _dropped(self, item: _Item) -> None:
        """A pending future was cancelled (or completed elsewhere): forget it."""
        with self._lock:
            if item not in self._pending:
                return
            del self._pending[item]
            self._credit -= 1  # its post will still come
        self._finish(item)

    def check(self) -> None:
        """Resolve the pending futures whose events are done (runs on the loop's thread)."""
        capture.relaxed(self._check)

    def _check(self) -> None:
        with self._lock:
            self._scheduled = False
            sweep, self._sweep = self._sweep, False
            pending = self._pending
            credit = self._credit
            if not pending or (credit <= 0 and not sweep):
                return
            done: list[tuple[_Item, Any]] = []
            stalled: list[_Item] = []
            skipped: list[_Item] = []
            blocked: set[int] = set()
            for item in pending:
                if item.order is not None and item.order in blocked:
                    skipped.append(item)
                    continue
                s = _drv.cuEventQuery(item.event)[0]
                if s is _NOT_READY:
                    stalled.append(item)
                    if item.order is not None:
                        blocked.add(item.order)
                    continue
                done.append((item, s))
                if not sweep and len(done) >= credit:
                    break
            if len(done) < credit:
                # A stream handle reused (or the same per-thread handle) can put a done
                # item behind a pending one: look at those too, so no post is lost.
                for item in skipped:
                    s = _drv.cuEventQuery(item.event)[0]
                    if s is not _NOT_READY:
                        done.append((item, s))
                        if not sweep and len(done) >= credit:
                            break
            for item, _s in done:
                del pending[item]
            for item in stalled:
                del pending[item]
                pending[item] = None  # to the back: the next check starts elsewhere
            self._credit -= len(done)
        for item, s in done:
            fut = item.fut
            fut.remove_done_callback(item)
            if not fut.done():
                if s is SUCCESS:
                    fut.set_result(None)
                else:
                    fut.set_exception(error_for(s, _drv.cuEventQuery))
            self._finish(item)

    def _fail(self, items: list[_Item], err: BaseException) -> None:
        for item in items:  # the waiter failed: so do the pending futures (loop's thread)
            item.fut.remove_done_callback(item)
            if not item.fut.done():
                item.fut.set_exception(err)
            self._finish(item)

    # -- the waiter thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._wait()
        except BaseException as exc:
            with self._lock:
                items = self._close_locked()
            err = RuntimeError(f"the cudriver.aio waiter thread failed: {exc!r}")
            loop = self._loop()
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(self._fail, items, err)
            raise

    def _wait(self) -> None:
        api = self._api
        sem = self._sem
        assert sem is not None
        seen = 0  # posts taken as of the last pass (by the loop, when it reads)
        while True:
            if self._reader:  # the loop takes the posts: sweep only
                n = 0
                waited = not self._tick.wait(SWEEP_SECONDS)
                self._tick.clear()
            else:
                t0 = time.monotonic()
                n = api.take(sem, SWEEP_SECONDS)
                # A wake whose post the loop's reader took first is not a quiet period
                # (half the period: a timed wait may end a little early).
                waited = n == 0 and time.monotonic() - t0 >= SWEEP_SECONDS / 2
            dropped: list[_Item] = []
            with self._lock:
                self._consumed += n
                self._credit += n
                loop = self._loop()
                if not self._closing and (loop is None or loop.is_closed()):
                    dropped = self._close_locked()
                    self._reader = False  # its selector is gone: the waiter takes the posts
                schedule = False
                quiet, seen = waited and self._consumed == seen, self._consumed
                if not self._closing and self._pending:
                    if quiet:  # no post for a whole period: check every pending future
                        self._sweep = True
                    if not self._scheduled:
                        schedule = self._scheduled = True
                retire = self._closing and self._consumed >= self._expected
            if schedule:
                try:
                    loop.call_soon_threadsafe(self.check)  # type: ignore[union-attr]
                except RuntimeError:  # closed meanwhile
                    with self._lock:
                        dropped = self._close_locked()
                        self._reader = False
                        retire = self._consumed >= self._expected
            del loop  # the waiter must not keep the loop alive
            for item in dropped:
                self._finish(item)
            if retire:
                self._retire()
                return

    # -- an eventfd the loop reads ----------------------------------------------------------
    def _loop_call(self, fn: Any) -> None:
        # Caller holds _lock. A closed loop is noticed by the waiter's next sweep.
        loop = self._loop()
        if loop is not None:
            try:
                loop.call_soon_threadsafe(fn)
            except RuntimeError:
                pass

    def _add_reader(self) -> None:
        """Have the loop watch the eventfd (runs on the loop's thread)."""
        loop = self._loop()
        with self._lock:
            if self._closing or self._sem is None or loop is None or loop.is_closed():
                return
            loop.add_reader(self._sem, self._readable)
            self._reader = True

    def _readable(self) -> None:
        """Posts arrived: take them and check at once (the loop's thread)."""
        sem = self._sem
        n = self._api.take(sem, 0) if sem is not None else 0
        if not n:
            return
        with self._lock:
            self._consumed += n
            self._credit += n
            retire = self._closing and self._consumed >= self._expected
        if retire:
            self._tick.set()
        else:
            self.check()

    def _drop_reader(self, loop: Any) -> None:
        """Stop the loop watching the eventfd, on its thread or once it is closed.

        From another thread a live loop keeps reading (its selector is not shared
        safely), and the waiter retires when the loop has taken the last post.
        """
        alive = loop is not None and not loop.is_closed()
        if alive and not _wakeup.on_loop_thread(loop):
            return
        with self._lock:
            reader, self._reader = self._reader, False
        if reader and alive:
            try:
                loop.remove_reader(self._sem)
            except Exception:  # the loop is closing: its selector goes with it
                pass
        self._tick.set()  # the waiter takes the posts from now on

    # -- closing --------------------------------------------------------------------------
    def _close_locked(self) -> list[_Item]:
        self._closing = True
        items = list(self._pending)
        self._pending.clear()
        return items

    def close(self, *, cancel: bool) -> None:
        """Stop: drop (or cancel) the pending futures; the waiter exits once drained."""
        with self._lock:
            if self._closing:
                return
            items = self._close_locked()
            wake = self._thread is not None
            if wake:
                self._expected += 1
        if wake:
            if self._api.loop_reads:
                self._drop_reader(self._loop())
            self._api.post(self._sem)  # type: ignore[arg-type]
        for item in items:
            item.fut.remove_done_callback(item)
            if cancel and not item.fut.done():
                item.fut.cancel()
            self._finish(item)

    def _retire(self) -> None:
        """Every post was taken: free the semaphore and the private streams."""
        with _registry_lock:
            _LIVE.discard(self)
            loop = self._loop()
            if loop is not None and _BY_LOOP.get(loop) is self:
                del _BY_LOOP[loop]
            del loop
        with self._lock:
            sem, self._sem = self._sem, None
            reader, self._reader = self._reader, False
            kept = list(self._contexts.values())
            self._contexts.clear()
            self._thread = None
        if os.getpid() != self._pid or GUARD.forked:
            return
        if sem is not None:
            loop = self._loop()
            if reader and loop is not None and not loop.is_closed():
                # Still watched by a live loop: the descriptor is closed there, after it
                # is unregistered (a closed number could be reused under the watch).
                try:
                    loop.call_soon_threadsafe(self._close_watched, loop, sem)
                    sem = None
                except RuntimeError:
                    pass
            del loop
            if sem is not None:
                self._api.free(sem)
        for res in kept:  # no future is left: every event and stream is idle
            for ev in res.events:
                _wakeup.release(_drv.cuEventDestroy, ev, "event")
            for h in res.streams:
                _wakeup.release(_drv.cuStreamDestroy, h, "private stream")
            res.lease = None

    def _abandon(self) -> None:
        """In a forked child: forget everything, touch nothing of the parent's."""
        self._lock = threading.Lock()
        self._closing = True
        self._pending.clear()
        self._contexts.clear()
        self._thread = None
        self._sem = None
        self._reader = False

    def _close_watched(self, loop: Any, fd: int) -> None:
        try:
            loop.remove_reader(fd)
        finally:
            self._api.free(fd)


# -- the registries ------------------------------------------------------------------------
_registry_lock = threading.Lock()
#: Each loop's notifier (weakly keyed: a collected loop's entry goes).
_BY_LOOP: weakref.WeakKeyDictionary[Any, Notifier] = weakref.WeakKeyDictionary()
#: Notifiers whose waiter runs, kept until every post enqueued has been taken.
_LIVE: set[Notifier] = set()


def notifier_for(loop: asyncio.AbstractEventLoop) -> Notifier:
    """``loop``'s notifier (a new one if it has none, or its last one is closing)."""
    with _registry_lock:
        n = _BY_LOOP.get(loop)
        if n is None or n._closing:
            n = _BY_LOOP[loop] = Notifier(loop)
        return n


def _after_fork_in_child() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()  # the parent's may have been held at the fork
    for n in [*_LIVE, *_BY_LOOP.values()]:
        n._abandon()
    _LIVE.clear()
    _BY_LOOP.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def shutdown(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Stop watching ``loop``'s futures now (default: the running loop).

    Pending futures are cancelled (call this from the loop's thread, or after the loop
    closed: then they are only dropped); their events are destroyed. The waiter thread
    is woken and exits once every ``sem_post`` enqueued has run. Does not block; later
    futures get a new notifier. (A closed loop is noticed within :data:`SWEEP_SECONDS`.)
    """
    if loop is None:
        loop = asyncio.get_running_loop()
    with _registry_lock:
        n = _BY_LOOP.pop(loop, None)
    if n is not None:
        n.close(cancel=not loop.is_closed())


# -- the futures ----------------------------------------------------------------------------
def _loop_arg(loop: Any) -> Any:
    if loop is None:
        return asyncio.get_running_loop()  # RuntimeError: no running event loop
    if not isinstance(loop, asyncio.AbstractEventLoop):
        raise TypeError(f"loop must be an asyncio event loop, not {type(loop).__name__}")
    if loop.is_closed():
        raise RuntimeError("the event loop is closed")
    return loop


def _begin(obj: Any, loop: Any) -> tuple[Any, Any]:
    """The checks made before any driver call; ``(loop, pin)``: unpin when done."""
    if getattr(obj, "_h", None) is None:  # closed (or never opened)
        obj._raise_closed()
    loop = _loop_arg(loop)
    _wakeup.channel()
    if GUARD.armed:
        GUARD.check()
    return loop, _pins.pin(obj)


def _stream_future(stream: Any, loop: Any) -> Any:
    loop, st = _begin(stream, loop)
    try:
        h = stream._h
        r = _drv.cuStreamIsCapturing(h)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuStreamIsCapturing)
        if r[1] is not _NOT_CAPTURING:
            raise StreamCaptureError(
                _R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                "cuLaunchHostFunc",
                "a capturing stream cannot be awaited: the host function that signals "
                "completion would be captured into the graph; await the stream after "
                "the capture ends (or the stream a GraphExec is launched on)",
            )
        key = stream._key  # the default streams' handles are not one stream each
        return notifier_for(loop).enqueue(loop, stream.context, h, key if key > 2 else None).fut
    finally:
        _pins.unpin(st)


def _event_future(event: Any, loop: Any) -> Any:
    loop, st = _begin(event, loop)
    try:
        h = event._h
        s = capture.relaxed(functools.partial(_drv.cuEventQuery, h))[0]
        if s is SUCCESS:
            fut = loop.create_future()
            fut.set_result(None)
            return fut
        if s is not _NOT_READY:
            captured = s in (_R.CUDA_ERROR_CAPTURED_EVENT, _R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
            why = "the event was last recorded in a capturing stream" if captured else None
            raise error_for(s, _drv.cuEventQuery, why)
        ctx = event.context
        n = notifier_for(loop)
        res, i = n.private_stream(ctx)
        ps = res.streams[i]
        r = _drv.cuStreamWaitEvent(ps, h, 0)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuStreamWaitEvent)
        item = res.last[i] = n.enqueue(loop, ctx, ps, int(ps))
        return item.fut
    finally:
        _pins.unpin(st)


class Awaitable:
    """The asyncio side of :class:`~cudriver.Stream` and :class:`~cudriver.Event`: ``await``."""

    __slots__ = ()

    def done_future(self, *, loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Future[None]:
        """A future that resolves (to None) when the GPU gets here.

        For a stream: once all the work enqueued on it so far has completed. For an
        event: once the work its last record captured (at the time of this call) has
        completed; an event already complete gives a future already done.

        No driver call synchronises: a stream's ``cuStreamIsCapturing``,
        ``cuEventRecord``, ``cuLaunchHostFunc`` (of a C function that posts the loop's
        channel, an eventfd or a semaphore: no Python on the driver's thread); an
        event's ``cuEventQuery``, then on an idle private stream ``cuStreamWaitEvent``,
        ``cuEventRecord``, ``cuLaunchHostFunc`` (``cuEventCreate`` with no spare
        event). Resolving: a ``cuEventQuery``.

        Parameters
        ----------
        loop
            The event loop the future belongs to; default: the running loop. From
            another thread, pass the loop; the future must still be awaited (or
            cancelled) on the loop's own thread.

        Returns
        -------
        asyncio.Future
            Resolves to None; set to the :class:`~cudriver.CudaError` that
            ``cuEventQuery`` returned if the work failed (e.g. a
            :class:`~cudriver.LaunchError`). Cancelling it stops the watch; the GPU
            work is unaffected.

        Raises
        ------
        ClosedError
            The stream or event is closed.
        RuntimeError
            No running event loop (and no ``loop``), or the loop is closed.
        StreamCaptureError
            The stream is capturing (the host function would be captured into the
            graph), or the event was last recorded in a capturing stream.
        NotPermittedError
            Called inside a host function, or in a forked child.
        NotSupportedError
            The C library has no unnamed POSIX semaphores (not Linux).
        """
        if isinstance(self, StreamBase):
            return _stream_future(self, loop)  # type: ignore[no-any-return]
        return _event_future(self, loop)  # type: ignore[no-any-return]

    def _done_now(self) -> bool | None:
        """Whether the awaited work is done: True, False (busy) or None (unsure).

        None when unsure or unsafe: the future's path decides, and raises what it must.
        """
        s: Any = self  # a Stream or an Event
        stream = isinstance(s, StreamBase)
        if GUARD.armed or GUARD.open or s._h is None or (stream and s._key <= 2):
            return None
        try:
            st = _pins.pin(s)
        except CudaError:  # closed meanwhile
            return None
        try:
            if not stream:
                r = _drv.cuEventQuery(st.handle)[0]
            else:
                c = _drv.cuStreamIsCapturing(st.handle)
                if c[0] is not SUCCESS or c[1] is not _NOT_CAPTURING:
                    return None
                r = _drv.cuStreamQuery(st.handle)[0]
        finally:
            _pins.unpin(st)
        return True if r is SUCCESS else False if r is _NOT_READY else None

    def __await__(self) -> Generator[Any, None, None]:
        """``await obj``: at once when the work is done, else after polling it.

        For :data:`SPIN_SECONDS`, one query per pass of the loop (other tasks run
        between them), as a blocking synchronize spins; then :meth:`done_future`.
        """
        done = self._done_now()
        if done:
            return iter(())  # type: ignore[return-value]
        if done is None or SPIN_SECONDS <= 0:
            return self.done_future().__await__()
        return self._spin()

    def _spin(self) -> Generator[Any, None, None]:
        deadline = time.monotonic() + SPIN_SECONDS
        while time.monotonic() < deadline:
            yield None  # a bare yield: the task runs again on the loop's next pass
            done = self._done_now()
            if done:
                return
            if done is None:
                break
        yield from self.done_future().__await__()
