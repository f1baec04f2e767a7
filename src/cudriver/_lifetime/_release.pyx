# cython: language_level=3, binding=True, boundscheck=False, wraparound=False
# cython: cdivision=True, auto_pickle=False, annotation_typing=False
"""Release states, the root of every handle class, pins, and when releases may run.

An owning object keeps its driver handle in ``_h`` and a :class:`State` that is
released exactly once: on ``close()``, at the end of a ``with`` block, or when the
object is collected (the deallocator of :class:`HandleRoot` queues the release).

When a release runs
-------------------
* **Leases.** Objects that can still touch a handle after its owner is closed (a
  ``LaunchPlan``'s packed arguments, a ``MemOp``, a capture's keep list and so every
  ``Graph``/``GraphExec`` made from it) hold a lease (``_handle.Lease``). While a
  lease is alive, ``close()`` only makes the object unusable; the release runs when the
  last lease goes.
* **Pins.** A call that hands a handle to the driver without the GIL (a launch, a
  record, a wait) pins the handle's state for the call: a ``close()`` on another thread
  meanwhile only marks it closing, and the release runs when the last pin goes. The
  driver never sees a handle destroyed while another thread is inside a call on it.
* **Deferred.** A release triggered by garbage collection may run anywhere: inside a
  cudriver lock, on the driver's host-function thread, during a capture. So it is
  never run there: it goes to a queue. So do explicit releases on the host-function
  thread, on a thread capturing through cudriver (in a mode other than ``RELAXED``),
  and while a ``GLOBAL``-mode capture is open anywhere. :func:`drain` runs the
  queue on an ordinary thread: constructors, ``synchronize()``, ``close()`` and capture
  ends call it, and so does the releasing thread (a daemon thread, woken by
  :func:`wake` whenever a release is queued), so what a collected object kept goes
  without waiting for a later cudriver call, and a release that waits for the device
  never holds up the thread that dropped the object. At interpreter exit the queue is
  left to the driver, which reclaims everything when the process ends: a synchronous
  free waits for the device, and a device still waiting (say in ``wait_value32`` for
  a value no one will write) would hang the exit.
* **Never** in a forked child (the creating pid is recorded) or during interpreter
  shutdown. A failing release becomes a :class:`~cudriver.CudaWarning`.

Objects the state keeps alive (``keep``) are dropped only after the handle is
released, so dependants are always destroyed before what they depend on (a Stream
before its Context, a GraphExec before its Graph).
"""

cimport cython
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM

from cudriver._runtime._entry cimport (
    GUARD, SUCCESS, code, ensure_loaded, p_exchange_capture_mode,
)
from cudriver._runtime._guard cimport in_hostfn

import atexit
import collections
import os
import sys
import threading
import warnings

from cuda.bindings import driver as _drv

from cudriver._runtime import _hooks
from cudriver._runtime._gates import IDLE_WAITERS as _IDLE_WAITERS_PY, WAITING as _WAITING_PY
from cudriver._runtime._gates import busy as _gates_busy
from cudriver.errors import GUARD as _GUARD_PY, CudaWarning, capturing_on_this_thread, make_error

cdef dict _WAITING = _WAITING_PY
cdef frozenset _IDLE_WAITERS = _IDLE_WAITERS_PY

cdef object _SUCCESS_CODE = _drv.CUresult.CUDA_SUCCESS
# Non-empty while an observer is on (``_runtime._hooks``): a release that waits for the
# whole device, run on a thread of the program, is reported. One C truth test when off.
cdef list _HOOKS_ON = _hooks.ON


cdef extern from *:
    """
    /* sys.is_finalizing() without the call (public as Py_IsFinalizing since 3.13). */
    #if PY_VERSION_HEX >= 0x030D0000
    #define cudriver_finalizing() Py_IsFinalizing()
    #else
    #define cudriver_finalizing() _Py_IsFinalizing()
    #endif
    """
    int _finalizing "cudriver_finalizing"()


cdef extern from "<unistd.h>":
    int getpid() nogil


# This process's id: cached (a system call each time costs more than the rest of a
# state's set-up on a virtual machine) and refreshed in a forked child.
cdef long _PID = getpid()


def _refresh_pid():
    global _PID
    _PID = getpid()


os.register_at_fork(after_in_child=_refresh_pid)


# -- release states ------------------------------------------------------------------------------
@cython.freelist(64)
cdef class State:
    """What a handle's release needs; never refers back to the owning object.

    ``deps`` holds the states of the handles in ``keep``; ``dependants`` counts the
    unreleased states that keep this one (it changes in C with the GIL held, so
    atomically). ``leases`` and ``pins`` are made when first asked for: most handles
    never need them. ``used_on`` is, for stream-ordered memory, the int handles of the
    other streams where work using it was enqueued (``_memory.memory``); else None.
    """

    def __init__(self, handle, release, func, kind, keep, on_release):
        _state_init(self, handle, release, func, kind, keep, on_release)

    @property
    def leases(self):
        """The ids of the live leases (a set, made when first asked for)."""
        cdef object made
        if self._leases is None:
            made = set()
            if self._leases is None:  # a collection while allocating may have made it
                self._leases = made
        return self._leases

    @property
    def pins(self):
        """One entry per slow-path driver call in flight (a list, made when first asked for)."""
        cdef object made
        if self._pins is None:
            made = []
            if self._pins is None:  # a collection while allocating may have made it
                self._pins = made
        return self._pins


cdef inline State _state_init(State self, object handle, object release, object func,
                              object kind, object keep, object on_release):
    cdef PyObject* p
    cdef Py_ssize_t n = 0, i = 0
    self.handle = handle
    self.release = release
    self.func = func
    self.pid = _PID
    self.kind = kind
    self.keep = keep
    self.on_release = on_release
    self.closing = False
    self.used_on = None
    deps = ()
    if keep:
        for k in keep:
            if isinstance(k, HandleRoot):
                p = (<HandleRoot>k)._st
                if p != NULL and type(<object>p) is State:
                    n += 1
        if n:
            deps = PyTuple_New(n)
            for k in keep:
                if isinstance(k, HandleRoot):
                    p = (<HandleRoot>k)._st
                    if p != NULL and type(<object>p) is State:
                        Py_INCREF(<object>p)
                        PyTuple_SET_ITEM(deps, i, <object>p)
                        (<State>p).dependants += 1
                        i += 1
    self.deps = deps
    return self


cdef State new_state(object handle, object release, object func, object kind, tuple keep,
                     object on_release):
    """A new state, as ``State(...)`` makes it, without the call."""
    cdef State st = State.__new__(State)
    return _state_init(st, handle, release, func, kind, keep, on_release)


cdef bint held_(State st) except -1:
    """Whether anything keeps ``st`` from being released: leases, dependants, pins."""
    return bool(st.busy or st.dependants or st._pins or st._leases)


def held(state):
    """Whether anything keeps ``state`` from being released: leases, dependants, pins."""
    return held_(<State?>state)


def link(state, dep):
    """Make ``dep`` outlive ``state``: its release waits until ``state``'s has run."""
    cdef State me = <State?>state
    cdef State d = <State?>dep
    me.deps = tuple(me.deps) + (d,)
    d.dependants += 1


def unlink(state, dep):
    """Undo :func:`link`; nothing if ``dep`` is not one of ``state``'s dependencies."""
    cdef State me = <State?>state
    cdef State d = <State?>dep
    deps = tuple(me.deps)
    if not any(x is d for x in deps):
        return
    me.deps = tuple([x for x in deps if x is not d])
    d.dependants -= 1


# -- pins ------------------------------------------------------------------------------------
cdef object pin(object o):
    """Pin the release state of ``o`` (an open HandleRoot, just checked) for a driver call
    made without the GIL; returns the state to pass to :func:`unpin`, or None.

    Check and pin run with the GIL held and no Python code between them, so a close()
    on another thread either came before the check or sees the pin."""
    cdef PyObject* p = (<HandleRoot>o)._st
    if p == NULL or type(<object>p) is not State:
        return None
    (<State>p).busy += 1  # a C counter: no allocation, and the GIL is held
    return <object>p


cdef int unpin(object state) except -1:
    cdef State st
    if state is None:
        return 0
    st = <State>state
    st.busy -= 1
    if st.closing and not held_(st):
        unpinned(st)
    return 0


# -- leases ----------------------------------------------------------------------------------
@cython.no_gc_clear
@cython.final
cdef class Lease:
    """Keeps a handle's release waiting while something can still use the handle.

    Made by ``Handle._lease``: ``Lease(state, target)`` adds its id to
    ``state.leases``; when it goes, the id is removed and, if the handle was closed
    (or collected) and nothing else holds it, its release is queued (it runs at the
    next :func:`drain`). ``target`` is the leased object, for diagnostics and fences.

    The state is held by a field the garbage collector never clears (as
    ``HandleRoot``'s is): a lease collected in a cycle still lets its handle go.
    """

    def __init__(self, state, target):
        if self._lstate is not None:
            raise RuntimeError("a Lease is made once")
        _lease_init(self, <State?>state, target)

    @property
    def _state(self):
        """The leased handle's release state."""
        return self._lstate

    def __dealloc__(self):
        cdef State st = self._lstate
        if st is None:
            return
        self._lstate = None
        try:
            leases = st._leases
            if leases is not None:
                leases.discard(id(self))
            if st.closing and st.handle is not None and not held_(st):
                DEFERRED.append(st)
                wake()
        except BaseException:  # at interpreter exit, once this module's globals are gone
            pass


cdef inline int _lease_init(Lease self, State st, object target) except -1:
    leases = st._leases
    if leases is None:
        leases = st.leases  # made on first use
    leases.add(id(self))
    self._lstate = st
    self.target = target
    return 0


cdef Lease new_lease(State st, object target):
    """``Lease(st, target)`` without the call."""
    cdef Lease lease = Lease.__new__(Lease)
    _lease_init(lease, st, target)
    return lease


# -- the root of every handle class --------------------------------------------------------
@cython.no_gc_clear
cdef class HandleRoot:
    """The C fields of every handle: the raw handle, its int value, its release state.

    An object collected while open queues its release (:func:`_collected`). The state
    is held by a reference the garbage collector does not see (as a
    ``weakref.finalize`` registry would hold it): a collection never clears the state
    of an object it frees, and what the state keeps (the objects this one depends on)
    stays alive until the release has run.
    """

    @property
    def _state(self):
        if self._st == NULL:
            return None
        return <object>self._st

    @_state.setter
    def _state(self, value):
        cdef PyObject* old = self._st
        if value is None:
            self._st = NULL
        else:
            Py_INCREF(value)
            self._st = <PyObject*>value
        Py_XDECREF(old)

    def __dealloc__(self):
        cdef PyObject* st = self._st
        if st == NULL:
            return
        self._st = NULL
        try:
            if self._h is not None:
                if not _release_at_collection(<State>st):
                    _collected(<object>st)
        except BaseException:
            pass
        finally:
            Py_XDECREF(st)


# -- releases that need no Python call -------------------------------------------------------
cdef class FastRelease:
    """The base of a release written in C (``_memory._core``'s frees).

    :func:`release` runs :meth:`run` without a Python call; when it returns 0 the
    release is called from Python instead, with the handle, as any release is.
    """

    cdef int run(self, CUresult* out) except -1:
        return 0

    cdef bint at_collection(self) except -1:
        return False

    cdef bint capturing(self) except -1:
        return False


cdef inline bint _may_release_now_c() except -1:
    if GUARD.captures:
        return False
    if GUARD.armed or GUARD.restrictive:
        return bool(_may_release_now())
    return True


cdef bint _release_at_collection(State st) except -1:
    """Run a dropped object's release here, when its release allows it; else False.

    A release that neither waits for the device nor takes a lock (a stream-ordered free
    with nothing to order it after: ``FastRelease.at_collection``) may run where the
    general rule would queue a collected object's release (collection can run inside a
    cudriver lock, on a host function's thread, during a capture) when: no capture begun
    through cudriver is open (the free would be captured, or break one), this thread
    runs no host function, releases may run here, nothing holds the object (leases,
    pins, dependants) and it is this process's. Queuing it instead cost a wake of the
    releasing thread per buffer (about 10 µs of GIL traffic on an H100 host).
    """
    rel = st.release
    if (not isinstance(rel, FastRelease) or GUARD.open or in_hostfn() or st.pid != _PID
            or st.handle is None or held_(st)
            or not (<FastRelease>rel).at_collection()
            or not _may_release_now_c()):
        return False
    st.closing = True
    _release(st)
    return True


def release_state(state, *, collected=False):
    """Release ``state``'s handle once, now or later (see the module docstring).

    ``collected`` says the call comes from garbage collection: it is then queued.
    Never raises.
    """
    release_state_(<State?>state, collected)


cdef int release_state_(State st, bint collected) except -1:
    if st.handle is None:
        return 0
    # Closing first, then the leases: a lease dying on another thread in between then
    # sees the closing flag and queues the release (queuing twice is harmless: the
    # release claims the handle once).
    st.closing = True
    if held_(st):
        return 0
    if collected or not _may_release_now_c() or (GUARD.open and _device_waiter(st)):
        # (a release that waits for the device or enqueues on a stream: see _waits)
        DEFERRED.append(st)
        wake()
        return 0
    _release(st, True)
    return 0


def release(state):
    """Run ``state``'s release now, once.

    Claiming the handle (test and clear) runs in C with the GIL held and no Python
    code in between, so two threads never both claim it.
    """
    _release(<State?>state)


#: Held while a release that waits for the whole device runs (``_gates.IDLE_WAITERS``:
#: ``cuMemFree``, ``cuMemFreeHost``, a context's destroy...; or a release callable
#: with ``device_wide = True``: a pool's destroy, which synchronises streams that may
#: include the legacy one, a resource written in Python). A capture
#: begun through cudriver marks itself open, then takes and leaves this lock before
#: ``cuStreamBeginCapture``: a synchronous free already waiting for the device ends
#: first, and none starts once the capture is open. A device-wide wait (``cuMemFree``,
#: ``cuMemFreeHost``) still in flight when another thread began capturing a blocking
#: stream invalidated that capture (measured: about half the runs of a create-and-close
#: cycle test on an H200). Reentrant: a release may run another one's hooks.
WAITER_LOCK = threading.RLock()
cdef object _WAITER_LOCK = WAITER_LOCK


cdef inline bint _device_waiter(State st) except -1:
    return st.func in _IDLE_WAITERS or _waits(st.release)


cdef int _release(State st, bint explicit=False) except -1:
    # ``explicit``: called by close() (release_state), for the name a report gives.
    if st.handle is None:
        return 0
    rel = st.release
    if st.pid != _PID or (st.func not in _IDLE_WAITERS and (
            isinstance(rel, FastRelease) or not getattr(rel, "device_wide", False))):
        # Not a device-wide wait (a stream-ordered free only enqueues): it never waits
        # on the lock behind one, which would make a stream-ordered close() wait for
        # every stream's work. (A forked child frees nothing, and never takes a lock a
        # parent's thread may have held at the fork.)
        return _release_now(st, explicit)
    _WAITER_LOCK.acquire()
    try:
        if GUARD.open:
            # A capture began meanwhile: the releasing thread runs it once captures end.
            DEFERRED.append(st)
            wake()
            return 0
        return _release_now(st, explicit)
    finally:
        _WAITER_LOCK.release()


def _report_wait(State st, bint explicit):
    """Tell the observers that ``st``'s release waits for the whole device here.

    Only on a thread of the program (the releasing thread's waits hold no one up), and
    never raising (a release must not raise: the sync debug mode warns even in
    "error"). Returns the token for ``_hooks.end``, or None.
    """
    if threading.get_ident() == _reaper_ident:
        return None
    what = f"{st.kind}.close" if explicit else f"a queued {st.kind} release"
    try:
        return _hooks.host_wait(f"{what} ({st.func} waits for the device)", False)
    except Exception as exc:  # an observer's failure (or its warning made an error)
        try:
            sys.stderr.write(f"cudriver: reporting a release that waits failed: {exc!r}\n")
        except Exception:  # pragma: no cover - stderr gone at shutdown
            pass
        return None


def _end_report(token):
    try:
        _hooks.end(token)
    except Exception:  # pragma: no cover - the markers never raise
        pass


cdef int _release_now(State st, bint explicit=False) except -1:
    cdef CUresult status = SUCCESS
    cdef int mode = _MODE_RELAXED
    cdef bint exchanged = False
    handle = st.handle
    if handle is None:
        return 0
    rel = st.release
    if (isinstance(rel, FastRelease) and (<FastRelease>rel).capturing()) or (
            _WAITING and st.func in _IDLE_WAITERS and st.pid == _PID and _gates_busy()):
        # It would enqueue on a stream that a capture begun outside cudriver holds (the
        # free would land in that graph), or it waits for the whole device while a
        # stream may wait for the host (and would stop every thread's driver calls
        # meanwhile: see _runtime._gates). The releasing thread retries it.
        _BLOCKED.append(st)
        wake()
        return 0
    st.handle = None
    global _claimed
    _claimed += 1
    if GUARD.initialized and st.pid == _PID:
        # RELAXED for the release: a synchronous free (cuMemFree, cuMemFreeHost, an
        # unload, a destroy) made while any thread captures in GLOBAL mode, through
        # cudriver or not, would fail and invalidate that capture (measured).
        ensure_loaded()
        if p_exchange_capture_mode != NULL and p_exchange_capture_mode(&mode) == SUCCESS:
            exchanged = True
    st.release = None
    on_release = st.on_release
    st.on_release = None
    token = None
    if _HOOKS_ON and st.pid == _PID and not _finalizing() and (
            st.func in _IDLE_WAITERS
            or (not isinstance(rel, FastRelease) and getattr(rel, "device_wide", False))):
        token = _report_wait(st, explicit)
    try:
        if rel is not None and not _finalizing() and st.pid == _PID:
            if isinstance(rel, FastRelease) and (<FastRelease>rel).run(&status):
                # A free in C, without the Python call.
                if status != SUCCESS:
                    _warn(f"releasing a {st.kind} failed: {make_error(code(status), st.func)}")
            else:
                try:
                    r = rel(handle)
                except Exception as exc:  # the driver or its library went away
                    _warn(f"{st.kind} release failed: {exc!r}")
                else:
                    if r is not None and r[0] is not _SUCCESS_CODE:
                        _warn(f"releasing a {st.kind} failed: {make_error(r[0], st.func)}")
        if on_release is not None and st.pid == _PID:
            try:
                on_release()
            except Exception as exc:
                _warn(f"{st.kind} release hook failed: {exc!r}")
    finally:
        if exchanged:
            p_exchange_capture_mode(&mode)
        if token is not None:
            _end_report(token)
        _drop_deps(st)
    return 0


cdef int _drop_deps(State st) except -1:
    # Dependencies go only after the handle: dependants are released first.
    cdef State d
    deps = st.deps
    st.deps = ()
    for dep in deps:
        d = <State?>dep
        d.dependants -= 1
        if d.closing and d.handle is not None and not held_(d):
            DEFERRED.append(d)
            wake()
    st.keep = None
    return 0


def drop_deps(state):
    """Let ``state``'s dependencies go (after its handle was released)."""
    _drop_deps(<State?>state)


def release_with(state, release):
    """Release ``state``'s handle once with ``release`` instead of its own, now.

    Leases are not waited for: for a release that the caller knows is ordered after
    every use (a free captured into the graph that holds the leases). Returns what
    ``release`` returned, or None when the handle was already released. The claim (test
    and clear) runs in C with the GIL held, as :func:`release`'s does.
    """
    cdef State st = <State?>state
    handle = st.handle
    if handle is None:
        return None
    st.closing = True
    st.handle = None
    st.release = None
    on_release = st.on_release
    st.on_release = None
    try:
        return release(handle)
    finally:
        if on_release is not None and st.pid == _PID:
            try:
                on_release()
            except Exception as exc:
                _warn(f"{st.kind} release hook failed: {exc!r}")
        _drop_deps(st)


# -- the queue ---------------------------------------------------------------------------------
#: States whose release was deferred; see the module docstring.
deferred = collections.deque()
DEFERRED = deferred
#: States whose release must wait: it would enqueue on a stream that a capture begun
#: outside cudriver holds (``FastRelease.capturing``), or it waits for the whole device
#: while a stream of ``_runtime._gates.WAITING`` has work pending. The releasing thread
#: tries them again every :data:`RETRY_S` seconds, and ``settle()`` does too.
blocked = collections.deque()
cdef object _BLOCKED = blocked
#: How many handles have been claimed for release: settle() measures progress by it.
cdef unsigned long long _claimed = 0
#: The most rounds settle() runs: each round follows one link of a chain of
#: dependencies (a view, its buffer, the buffer's stream, the stream's context).
cdef int _SETTLE_ROUNDS = 64
RETRY_S = 0.005

cdef enum:
    _MODE_RELAXED = 2  # CU_STREAM_CAPTURE_MODE_RELAXED


def _may_release_now():
    g = GUARD
    if g.captures or (g.armed and _GUARD_PY.in_host_function()):
        return False
    return not (g.restrictive and capturing_on_this_thread())


def _waits(release):
    # Releases that may wait for the device or enqueue on a stream: never beside a capture.
    return bool(getattr(release, "waits_for_device", False))


def _collected(state):
    release_state_(<State?>state, True)


def drain():
    """Run the deferred releases, if it is safe here; never raises.

    Where it is not (a capture forbids it on this thread), the releasing thread is
    woken instead.
    """
    if not deferred:
        return
    if not _may_release_now():
        wake()
        return
    later = []
    while not _exiting:
        try:
            state = deferred.popleft()
        except IndexError:
            break
        if held_(<State?>state):  # held again
            continue
        if GUARD.open and _device_waiter(<State>state):
            # A device-wide wait would break the capture another thread has open:
            # left to the releasing thread, which runs it once the captures end.
            later.append(state)
            continue
        _release(<State>state)
    if later:
        deferred.extend(later)
        wake()


def drain_quick():
    """Run the queued releases that never wait for the device, if it is safe here.

    What a constructor, a lookup, a launch's end, another object's ``close()`` and a
    capture's end call: a stream's, an event's, a graph's destroy runs at once, as
    before; a release that waits for the device (``_runtime._gates.IDLE_WAITERS``, or
    ``waits_for_device``) stays queued, and the releasing thread runs it. Never
    raises.
    """
    cdef State st
    if not deferred:
        return
    if not _may_release_now():
        wake()
        return
    rest = []
    while not _exiting:  # to the end: a release here may queue its dependencies
        try:
            state = deferred.popleft()
        except IndexError:
            break
        st = <State?>state
        if held_(st):
            continue
        if st.func in _IDLE_WAITERS or _waits(st.release):
            rest.append(state)
            continue
        _release(st)
    if rest:
        deferred.extend(rest)
        wake()


def pending_releases():
    """How many releases wait in the queue (for leak tests), blocked ones included."""
    return len(deferred) + len(_BLOCKED)


def describe_pending():
    """What waits in the queue, for a failing leak test's message."""
    return {
        "deferred": [((<State>s).kind, (<State>s).func, held_(s)) for s in list(deferred)],
        "blocked": [((<State>s).kind, (<State>s).func, held_(s)) for s in list(_BLOCKED)],
        "gates": list(_WAITING),
        "releasing": _reaping.locked(),
    }


def queue_if_free(state):
    """Queue ``state`` if it was closed and nothing holds it any more."""
    cdef State st = <State?>state
    if st.closing and st.handle is not None and not held_(st):
        deferred.append(st)
        wake()


def unpinned(state):
    """Called when the last pin of a closing state went: queue its release.

    It runs here if it never waits for the device (:func:`drain_quick`). A release that may wait goes to the releasing thread: the thread that made the
    pinned call (a launch, a record) must not wait for the device in a release it did
    not ask for.
    """
    queue_if_free(state)
    drain_quick()


def _warn(msg):
    try:
        warnings.warn(msg, CudaWarning, stacklevel=3)
    except Exception:  # warnings turned into errors must not escape a finaliser
        try:
            sys.stderr.write(f"cudriver: {msg}\n")
        except Exception:  # pragma: no cover - stderr gone at shutdown
            pass


# -- the releasing thread ----------------------------------------------------------------
# A daemon thread that runs the queue soon after a release is queued. It is woken by
# releasing ``_wake``, a plain lock held while it sleeps: releasing one takes no other
# lock, so garbage collection may wake it from anywhere. It is started by the first
# handle made (never in a forked child, which frees nothing); at exit it stops.
_wake = threading.Lock()
_wake.acquire()
_reaping = threading.Lock()  # held by the thread while it drains
cdef bint _reaper_started = False
_reaper_start_lock = threading.Lock()
cdef bint _exiting = False
_reaper_ident = 0


def start_releasing_thread():
    """Start the releasing thread, once per process (a test of a C flag after that)."""
    global _reaper_started
    if _reaper_started:
        return
    with _reaper_start_lock:
        if _reaper_started:
            return
        threading.Thread(target=_reap, name="cudriver-releases", daemon=True).start()
        _reaper_started = True


def wake():
    """Have the releasing thread run the queue; never blocks, never raises."""
    try:
        _wake.release()
    except RuntimeError:  # already awake: it drains again before sleeping
        pass


def settle():
    """Run the queue here if allowed, then wait for the releasing thread's pass.

    What ``synchronize()`` calls: once it returns, every release queued before it has
    run (or waits for what forbids it here: a capture; for a release that waits for
    the whole device to be idle, a stream that may wait for the host, see
    ``_runtime._gates``). Nothing else runs the queue on the calling thread (a
    constructor, a lookup, a launch, another object's ``close()``, the end of a pinned
    call or of a capture): those wake the releasing thread (:func:`wake`), so that
    they never wait for the device.
    """
    cdef unsigned long long before
    cdef int rounds
    for rounds in range(_SETTLE_ROUNDS):
        before = _claimed
        while _BLOCKED:  # tried again here: what held them back may be over
            deferred.append(_BLOCKED.popleft())
        drain()
        if _reaping.locked() and threading.get_ident() != _reaper_ident:
            with _reaping:
                pass
        # A release lets its dependencies go (a buffer its stream, a stream its
        # context): queued again, they run in the next round, until none is left or
        # no release ran in a round (what is left cannot run now). Progress is counted
        # in releases, not in the queue's length: one release that queues its one
        # dependency leaves the length as it was.
        if not (deferred or _BLOCKED) or _claimed == before:
            return


def reclaim():
    """Before an allocation that ran out of memory is tried again: run what is queued.

    Frees queued by garbage collection or by another thread's ``close()`` run on the
    releasing thread (a constructor never waits for them: see :func:`settle`), so an
    allocation may fail while memory is about to come back, or came back an instant
    after the failure. The queue is settled here (which may wait for the device, as
    ``cuMemFree`` does); the caller then tries once more. Never raises.
    """
    try:
        settle()
    except Exception:  # pragma: no cover - settle never raises; be sure of it here
        pass


def releasing():
    """Whether the releasing thread is running releases now."""
    return _reaping.locked()


def _reap():
    global _reaper_ident
    _reaper_ident = threading.get_ident()
    # Each release exchanges its thread's capture mode for RELAXED itself (_release).
    while True:
        if _BLOCKED:
            _wake.acquire(True, RETRY_S)
            while _BLOCKED:  # their streams may have stopped capturing
                deferred.append(_BLOCKED.popleft())
        else:
            _wake.acquire()
        if _exiting:
            return
        if GUARD.open:
            # No release runs beside an open capture (a synchronous free would
            # wait for, or break, it): the capture's end runs the queue (or wakes
            # this thread again).
            continue
        with _reaping:
            drain()


def _at_exit():
    global _exiting
    _exiting = True


def _in_forked_child():
    global _reaper_started
    _reaper_started = True  # a child frees nothing: it never needs the thread


atexit.register(_at_exit)
os.register_at_fork(after_in_child=_in_forked_child)
