"""The one place that knows which ``cuda.bindings`` version is installed.

Other modules ask this module instead of testing versions themselves. Differences
handled here (read from the 12.9 and 13.x wheels):

* ``cuCtxCreate(params_or_None, flags, dev)`` in 13.x vs ``cuCtxCreate(flags, dev)``
  in 12.x;
* ``cuStreamGetCaptureInfo`` returns 7 values in 13.x (with edge data), 6 in 12.x;
* in 13.x the outputs of a failed call are ``None``; in 12.x default objects;
* ``cuEventElapsedTime_v2`` (13.x) vs ``cuEventElapsedTime``;
* ``cuFuncGetParamInfo`` exists in 12.4+ bindings only;
* ``cuGraphAddNode``, ``cuStreamUpdateCaptureDependencies`` and
  ``cuStreamBeginCaptureToGraph`` take edge data in 13.x (12.x names that form
  ``_v2`` where it has it).
* ``cuMemPrefetchAsync`` and ``cuMemAdvise`` take a ``CUmemLocation`` (and, for the
  prefetch, flags) in 13.x, a ``CUdevice`` ordinal (``CU_DEVICE_CPU``, -1, for the
  host) in 12.x (whose ``_v2`` forms take the location); a managed range's preferred
  and last prefetch locations are read as ``_TYPE``/``_ID`` attribute pairs in 13.x,
  as one ordinal in 12.x.

It is also the one place that calls ``libcuda`` directly through ctypes, for the two
calls the bindings get wrong: ``cuLaunchHostFunc`` and ``cuGraphAddHostNode`` (the
bindings free their callback wrapper after the first call, so a host node would run
freed memory on its second replay) and ``cuGraphExecUpdate`` (the bindings drop the
result info when the update fails).

And it reads the driver's error log (``cuLogsDumpToMemory``, CUDA 12.9+ drivers), whose
entry points the bindings did not find (cuda-bindings 12.9.10 and 13.3.1 on a CUDA 13.0
driver, which exports them).
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import logging
import os
import re
import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import cuda.bindings
from cuda.bindings import driver as drv

from .. import errors
from ..errors import GUARD, DriverNotFoundError

__all__ = [
    "VERSION",
    "MAJOR",
    "version_string",
    "has",
    "ctx_create",
    "capture_info",
    "graph_instantiate",
    "CaptureInfo",
    "SUCCESS",
    "event_elapsed_time",
    "func_get_param_info",
    "libcuda",
    "launch_host_func",
    "graph_add_host_node",
    "graph_add_node",
    "graph_add_dependencies",
    "update_capture_dependencies",
    "begin_capture_to_graph",
    "graph_exec_update",
    "GraphExecUpdateInfo",
    "DEVICE_CPU",
    "DEVICE_INVALID",
    "mem_location",
    "mem_prefetch",
    "mem_advise",
    "mem_range_location",
    "struct_bytes",
    "set_struct_bytes",
    "LogLine",
    "DRIVER_LOG",
    "log_driver_messages",
]

SUCCESS = drv.CUresult.CUDA_SUCCESS


def _parse(v: str) -> tuple[int, ...]:
    parts: list[int] = []
    for p in v.split("."):
        digits = ""
        for ch in p:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or (0,)


def version_string() -> str:
    """The installed ``cuda.bindings`` version, e.g. ``"13.3.1"``."""
    return str(getattr(cuda.bindings, "__version__", "0"))


VERSION: tuple[int, ...] = _parse(version_string())
MAJOR: int = VERSION[0]

#: The oldest cuda-bindings cudriver runs on: the first whose calls release the GIL.
OLDEST = (12, 9, 1)


def refuse_old_bindings(version: tuple[int, ...]) -> None:
    """Raise ImportError for bindings older than :data:`OLDEST`.

    Before 12.9.1 every bindings call holds the GIL while the driver works. A call
    that waits for the device (a synchronize, a free, a pool's destroy) then waits for
    host functions that need the GIL to run: the process hangs.
    """
    if version < OLDEST:
        raise ImportError(
            f"cudriver needs cuda-bindings 12.9.1 or newer, and {version_string()} is "
            "installed: older bindings hold the GIL during every driver call, so a call "
            "that waits for the device hangs behind a Python host function; upgrade with "
            "pip install -U 'cuda-bindings>=12.9.1,<13' (CUDA 12 drivers) or "
            "'cuda-bindings>=13,<14' (CUDA 13)"
        )


refuse_old_bindings(VERSION)


def has(name: str) -> bool:
    """Whether the installed bindings expose ``cuda.bindings.driver.<name>``."""
    return hasattr(drv, name)


def ctx_create(flags: int, dev: Any) -> tuple[Any, ...]:
    """Call ``cuCtxCreate`` with the signature of the installed bindings.

    Returns the raw ``(CUresult, CUcontext)`` tuple.
    """
    if MAJOR >= 13:
        return drv.cuCtxCreate(None, flags, dev)  # type: ignore[no-any-return]
    return drv.cuCtxCreate(flags, dev)  # type: ignore[no-any-return]


def graph_instantiate(graph: Any, flags: int) -> tuple[Any, ...]:
    """Instantiate ``graph`` with ``flags``; returns ``(CUresult, CUgraphExec)``.

    13.x names the call ``cuGraphInstantiate(graph, flags)``; some 12.x bindings also
    expose it as ``cuGraphInstantiateWithFlags``.
    """
    fn = getattr(drv, "cuGraphInstantiateWithFlags", None)
    if fn is None:
        fn = drv.cuGraphInstantiate
    return fn(graph, flags)  # type: ignore[no-any-return]


class CaptureInfo(NamedTuple):
    """The version-independent part of ``cuStreamGetCaptureInfo``'s result."""

    status: Any
    id: int
    graph: Any
    num_dependencies: int
    dependencies: list[Any]


def capture_info(stream: Any) -> tuple[Any, CaptureInfo | None]:
    """Call ``cuStreamGetCaptureInfo`` and normalise its result.

    Returns ``(CUresult, CaptureInfo or None)``: ``None`` when the call failed.
    """
    r = drv.cuStreamGetCaptureInfo(stream)
    if r[0] is not SUCCESS:
        return r[0], None
    # 13.x: (res, status, id, graph, deps, edges, n); 12.x: (res, status, id, graph, deps, n)
    status, cid, graph = r[1], r[2], r[3]
    n = int(r[-1]) if r[-1] is not None else 0
    deps = list(r[4] or ())[:n]
    return r[0], CaptureInfo(status, int(cid), graph, n, deps)


_EDGES = MAJOR >= 13


def graph_add_node(graph: Any, deps: list[Any], params: Any) -> tuple[Any, ...]:
    """``cuGraphAddNode(graph, deps, params) -> (CUresult, CUgraphNode)``, no edge data."""
    if _EDGES:
        return drv.cuGraphAddNode(graph, deps, None, len(deps), params)  # type: ignore[no-any-return]
    return drv.cuGraphAddNode(graph, deps, len(deps), params)  # type: ignore[no-any-return]


def graph_add_dependencies(graph: Any, before: list[Any], after: list[Any]) -> tuple[Any, ...]:
    """``cuGraphAddDependencies(graph, before, after)``, no edge data."""
    if _EDGES:
        return drv.cuGraphAddDependencies(  # type: ignore[no-any-return]
            graph, before, after, None, len(before)
        )
    return drv.cuGraphAddDependencies(graph, before, after, len(before))  # type: ignore[no-any-return]


def update_capture_dependencies(stream: Any, nodes: list[Any], flags: int) -> tuple[Any, ...]:
    """``cuStreamUpdateCaptureDependencies(stream, nodes, flags)``, no edge data."""
    if _EDGES:
        return drv.cuStreamUpdateCaptureDependencies(  # type: ignore[no-any-return]
            stream, nodes, None, len(nodes), flags
        )
    return drv.cuStreamUpdateCaptureDependencies(  # type: ignore[no-any-return]
        stream, nodes, len(nodes), flags
    )


def begin_capture_to_graph(stream: Any, graph: Any, mode: Any) -> tuple[Any, ...]:
    """``cuStreamBeginCaptureToGraph(stream, graph)`` with no dependencies."""
    return drv.cuStreamBeginCaptureToGraph(  # type: ignore[no-any-return]
        stream, graph, None, None, 0, mode
    )


#: ``cuEventElapsedTime_v2`` where the bindings have it (13.x), else the original.
event_elapsed_time: Callable[..., tuple[Any, ...]] = (
    getattr(drv, "cuEventElapsedTime_v2", None) or drv.cuEventElapsedTime
)

#: ``cuFuncLoad``, ``cuModuleGetFunctionCount``, ``cuModuleEnumerateFunctions``
#: (bindings 12.4+), or None.
func_load: Callable[..., tuple[Any, ...]] | None = getattr(drv, "cuFuncLoad", None)
module_get_function_count: Callable[..., tuple[Any, ...]] | None = getattr(
    drv, "cuModuleGetFunctionCount", None
)
module_enumerate_functions: Callable[..., tuple[Any, ...]] | None = getattr(
    drv, "cuModuleEnumerateFunctions", None
)

#: ``cuFuncGetParamInfo`` (bindings 12.4+), or None.
func_get_param_info: Callable[..., tuple[Any, ...]] | None = getattr(
    drv, "cuFuncGetParamInfo", None
)


# -- the bytes of opaque structs -------------------------------------------------------------
def struct_bytes(obj: Any, n: int) -> bytes:
    """The first ``n`` bytes of a bindings struct, read through ``getPtr()``.

    Some versions expose no fields for opaque handles (cuda-bindings 12.9.10's
    ``CUipcEventHandle`` has no ``reserved``), so the memory is read directly.
    """
    return ctypes.string_at(int(obj.getPtr()), n)


def set_struct_bytes(obj: Any, data: bytes) -> None:
    """Write ``data`` over the start of a bindings struct (see :func:`struct_bytes`)."""
    ctypes.memmove(int(obj.getPtr()), data, len(data))


# -- libcuda through ctypes ------------------------------------------------------------
_lib_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def libcuda() -> ctypes.CDLL:
    """The driver library (``libcuda.so.1`` / ``nvcuda.dll``), loaded once.

    Raises
    ------
    DriverNotFoundError
        The library cannot be loaded.
    """
    global _lib
    lib = _lib
    if lib is not None:
        return lib
    with _lib_lock:
        if _lib is None:
            names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
            found = ctypes.util.find_library("cuda")
            if found:
                names.append(found)
            last: OSError | None = None
            for n in names:
                try:
                    _lib = ctypes.CDLL(n)
                    break
                except OSError as exc:
                    last = exc
            if _lib is None:
                raise DriverNotFoundError(str(last))
        return _lib


_HostFuncCall = Callable[[int, int, int], int]
_launch_host_func: _HostFuncCall | None = None


def launch_host_func() -> _HostFuncCall:
    """``cuLaunchHostFunc(stream, fn, user_data) -> status`` from libcuda, all as ints."""
    global _launch_host_func
    fn = _launch_host_func
    if fn is None:
        proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        fn = proto(("cuLaunchHostFunc", libcuda()))
        fn.__name__ = "cuLaunchHostFunc"  # type: ignore[attr-defined]  # named for errors
        _launch_host_func = fn
    return fn


class _HostNodeParams(ctypes.Structure):
    _fields_ = (("fn", ctypes.c_void_p), ("userData", ctypes.c_void_p))


def graph_add_host_node(graph: Any, deps: list[Any], fn: int, key: int) -> tuple[Any, Any]:
    """``cuGraphAddHostNode`` from libcuda with ``fn(key)``; ``(CUresult, CUgraphNode)``."""
    lib = libcuda()
    node = ctypes.c_void_p()
    params = _HostNodeParams(fn, key)
    arr = (ctypes.c_void_p * max(len(deps), 1))(*(int(d) for d in deps))
    code = lib.cuGraphAddHostNode(
        ctypes.byref(node),
        ctypes.c_void_p(int(graph)),
        arr if deps else None,
        ctypes.c_size_t(len(deps)),
        ctypes.byref(params),
    )
    return drv.CUresult(code), (drv.CUgraphNode(node.value or 0) if code == 0 else None)


class GraphExecUpdateInfo(ctypes.Structure):
    """``CUgraphExecUpdateResultInfo``: why ``cuGraphExecUpdate`` refused a graph."""

    _fields_ = (
        ("result", ctypes.c_int),
        ("errorNode", ctypes.c_void_p),
        ("errorFromNode", ctypes.c_void_p),
    )


def graph_exec_update(exec_h: Any, graph_h: Any) -> tuple[Any, GraphExecUpdateInfo | None]:
    """Call ``cuGraphExecUpdate``, keeping the result info that the bindings drop.

    Returns ``(CUresult, info or None)``; the info is given only on failure and only
    when libcuda has ``cuGraphExecUpdate_v2``.
    """
    try:
        fn = libcuda().cuGraphExecUpdate_v2
    except (AttributeError, OSError):
        r = drv.cuGraphExecUpdate(exec_h, graph_h)
        return r[0], None
    fn.restype = ctypes.c_int
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(GraphExecUpdateInfo))
    info = GraphExecUpdateInfo()
    code = fn(int(exec_h), int(graph_h), ctypes.byref(info))
    return drv.CUresult(code), (info if code != 0 else None)


# -- managed memory: where a range goes or lives -------------------------------------------
#: ``CU_DEVICE_CPU``: the host, in the ordinal form of locations.
DEVICE_CPU = -1
#: ``CU_DEVICE_INVALID``: no location (none set, or not the same for the whole range).
DEVICE_INVALID = -2

# Whether cuMemPrefetchAsync and cuMemAdvise take a CUmemLocation (13.x) rather than a
# CUdevice (12.x). Read at each call, so that tests can pretend to be either.
_LOCATIONS = MAJOR >= 13


def mem_location(ordinal: int) -> Any:
    """A ``CUmemLocation``: device ``ordinal``, or the host for :data:`DEVICE_CPU`."""
    loc = drv.CUmemLocation()
    if ordinal == DEVICE_CPU:
        loc.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST
        loc.id = 0  # ignored for the host
    else:
        loc.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        loc.id = ordinal
    return loc


def mem_prefetch(ptr: Any, nbytes: int, ordinal: int, stream: Any) -> tuple[Any, ...]:
    """``cuMemPrefetchAsync`` of ``nbytes`` at ``ptr`` on ``stream``; ``(CUresult,)``.

    To device ``ordinal``, or to the host for :data:`DEVICE_CPU`.
    """
    if _LOCATIONS:
        return drv.cuMemPrefetchAsync(  # type: ignore[no-any-return]
            ptr, nbytes, mem_location(ordinal), 0, stream
        )
    return drv.cuMemPrefetchAsync(ptr, nbytes, drv.CUdevice(ordinal), stream)  # type: ignore[no-any-return]


def mem_advise(ptr: Any, nbytes: int, advice: Any, ordinal: int) -> tuple[Any, ...]:
    """``cuMemAdvise`` of ``nbytes`` at ``ptr``; returns the raw ``(CUresult,)``.

    For device ``ordinal``, or for the host with :data:`DEVICE_CPU`.
    """
    if _LOCATIONS:
        return drv.cuMemAdvise(ptr, nbytes, advice, mem_location(ordinal))  # type: ignore[no-any-return]
    return drv.cuMemAdvise(ptr, nbytes, advice, drv.CUdevice(ordinal))  # type: ignore[no-any-return]


def mem_range_location(ptr: Any, nbytes: int, *, last_prefetch: bool) -> tuple[Any, int]:
    """A managed range's preferred or last prefetch location (``cuMemRangeGetAttribute``).

    ``last_prefetch`` picks the location the range was last prefetched to. Returns
    ``(CUresult, location)``: a device ordinal, :data:`DEVICE_CPU` for the host (any
    host NUMA node included), or :data:`DEVICE_INVALID` for none (not set, not the same
    for the whole range, or the call failed).
    """
    a = drv.CUmem_range_attribute
    if not _LOCATIONS:
        attr = (
            a.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION
            if last_prefetch
            else a.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION
        )
        r = drv.cuMemRangeGetAttribute(4, attr, ptr, nbytes)
        return r[0], (int(r[1]) if r[0] is SUCCESS else DEVICE_INVALID)
    if last_prefetch:
        kind_attr = a.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE
        id_attr = a.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID
    else:
        kind_attr = a.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE
        id_attr = a.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID
    # The bindings refuse the *_LOCATION_TYPE/_ID attributes (13.3: "Unsupported
    # attribute"), so these two go to libcuda directly.
    rc, kind = _range_int(kind_attr, ptr, nbytes)
    if rc is not SUCCESS:
        return rc, DEVICE_INVALID
    t = drv.CUmemLocationType
    if kind == int(t.CU_MEM_LOCATION_TYPE_DEVICE):
        rc, ordinal = _range_int(id_attr, ptr, nbytes)
        return rc, (ordinal if rc is SUCCESS else DEVICE_INVALID)
    host_kinds = (
        t.CU_MEM_LOCATION_TYPE_HOST,
        t.CU_MEM_LOCATION_TYPE_HOST_NUMA,
        t.CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT,
    )
    if kind in {int(k) for k in host_kinds}:
        return rc, DEVICE_CPU
    return rc, DEVICE_INVALID


_range_get: Any = None


def _range_int(attr: Any, ptr: Any, nbytes: int) -> tuple[Any, int]:
    """``cuMemRangeGetAttribute`` of a 4-byte attribute through libcuda: (CUresult, value)."""
    global _range_get
    fn = _range_get
    if fn is None:
        fn = libcuda().cuMemRangeGetAttribute
        fn.restype = ctypes.c_int
        fn.argtypes = (
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_uint64,
            ctypes.c_size_t,
        )
        _range_get = fn
    out = ctypes.c_int(0)
    rc = drv.CUresult(fn(ctypes.byref(out), 4, int(attr), int(ptr), nbytes))
    return rc, out.value


# -- the driver's error log ---------------------------------------------------------------
# A line: [time][thread][source][severity] message, the thread being pthread_self() (what
# threading.get_ident() gives); older drivers put [entry point] before the message. A
# failed call ends with "Returning <code> (<name>) from <entry point>".
_LINE = re.compile(r"^\[([^\]]*)\]\[(\d+)\]\[([^\]]*)\]\[(\w)\](?:\[(\w+)\])? ?(.*)$")
_RETURNING = re.compile(r"^Returning (\d+) \(\w+\) from (\w+)")
# What every lookup of an entry point newer than the driver logs (the bindings make
# such lookups at import): not the user's failure, never shown.
_NOISE = re.compile(r"^cudaVersion argument \(\d+\) exceeds the driver version")
_SUFFIX = re.compile(r"(_v\d+|_ptsz|_ptds)+$")
_LEVELS = {"E": logging.ERROR, "W": logging.WARNING}


class LogLine(NamedTuple):
    """One line of the driver's error log, parsed."""

    thread: int  # the logging thread's ``threading.get_ident()``
    level: str  # "E" (error) or "W" (warning)
    text: str  # the message, without the time, thread and severity
    line: str  # the whole line


def _same_call(logged: str, func: str) -> bool:
    a, b = _SUFFIX.sub("", logged), _SUFFIX.sub("", func)
    return a.startswith(b) or b.startswith(a)


class DriverLog:
    """The reader of the driver's error log: one iterator, shared by the whole process.

    Lines are read only when a :class:`~cudriver.CudaError` is made (or by the
    forwarding thread of :func:`log_driver_messages`): a call that succeeds costs
    nothing. Read lines wait in :attr:`recent` until their thread's failure claims them.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.recent: collections.deque[LogLine] = collections.deque(maxlen=512)
        # () -> the text of the lines logged since the last call, or None without a
        # log; resolved at the first read (tests put a fake one here).
        self.source: Callable[[], str | None] | None = None
        self._noisy: set[int] = set()  # threads whose next cuGetProcAddress return is noise
        self.logger: logging.Logger | None = None  # set while forwarding
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def _libcuda_source(self) -> Callable[[], str | None]:
        try:
            fn = libcuda().cuLogsDumpToMemory
        except (AttributeError, OSError, DriverNotFoundError):
            return lambda: None  # a driver before CUDA 12.9: no log
        fn.restype = ctypes.c_int
        fn.argtypes = (
            ctypes.POINTER(ctypes.c_uint),
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.c_uint,
        )
        it = ctypes.c_uint(0)
        buf = ctypes.create_string_buffer(25601)  # the driver keeps at most 25,600 bytes
        size = ctypes.c_size_t()

        def dump() -> str | None:
            size.value = len(buf) - 1
            if fn(ctypes.byref(it), buf, ctypes.byref(size), 0) != 0:
                return None
            return buf.raw[: size.value].decode("utf-8", "replace")

        return dump

    def read(self) -> list[LogLine]:
        """Read the lines logged since the last read into :attr:`recent`; return them.

        The caller holds :attr:`lock`. Never raises.
        """
        if GUARD.forked:
            return []
        src = self.source
        if src is None:
            src = self.source = self._libcuda_source()
        try:
            text = src()
        except Exception:
            return []
        if not text:
            return []
        new: list[LogLine] = []
        noisy = self._noisy
        for raw in text.splitlines():
            m = _LINE.match(raw.strip())
            if m is None:
                continue
            tid, msg = int(m[2]), m[6]
            if m[5] and not msg.startswith("Returning"):
                msg = f"{m[5]}: {msg}"
            if _NOISE.match(msg):
                noisy.add(tid)
                continue
            if tid in noisy and msg.startswith("Returning") and "cuGetProcAddress" in msg:
                noisy.discard(tid)
                continue
            new.append(LogLine(tid, m[4], msg, raw.strip()))
        self.recent.extend(new)
        return new

    def lines_for(self, code: int, func: str) -> tuple[str, ...]:
        """The logged lines of the failure of ``func`` with ``code`` on this thread.

        The lines of this thread's last failed call, if that call was ``func`` failing
        with ``code``; else none. The lines are claimed: no later error gets them.
        """
        with self.lock:
            new = self.read()
            tid = threading.get_ident()
            rec = self.recent
            end = -1
            for i in range(len(rec) - 1, -1, -1):
                e = rec[i]
                if e.thread != tid:
                    continue
                m = _RETURNING.match(e.text)
                if m is None:
                    continue
                if int(m[1]) == code and _same_call(m[2], func):
                    end = i
                break
            taken: list[int] = []
            if end >= 0:
                taken.append(end)
                for i in range(end - 1, -1, -1):  # back to its previous failure, 16 at most
                    e = rec[i]
                    if e.thread != tid:
                        continue
                    if _RETURNING.match(e.text) or len(taken) > 16:
                        break
                    taken.append(i)
            lines = tuple(rec[i].text for i in reversed(taken))
            for i in taken:  # descending: each index still names its line
                del rec[i]
        self._forward(new)
        return lines

    def _forward(self, lines: list[LogLine]) -> None:
        log = self.logger
        if log is None:
            return
        for e in lines:
            level = _LEVELS.get(e.level, logging.WARNING)
            log.log(level, "%s", e.text, extra={"driver_thread": e.thread})

    def _poll(self, stop: threading.Event, interval: float) -> None:
        while True:
            done = stop.wait(interval)
            with self.lock:
                new = self.read()
            try:
                self._forward(new)
            except Exception:  # a handler that raises: keep forwarding the next lines
                pass
            if done:
                return

    def forward(self, on: bool, interval: float) -> None:
        """Start or stop the forwarding thread (see :func:`log_driver_messages`)."""
        stop, thread = self._stop, self._thread
        if stop is not None and thread is not None:
            stop.set()
            if thread is not threading.current_thread():
                thread.join(10)
            self._stop = self._thread = None
        if not on:
            self.logger = None
            return
        with self.lock:
            self.read()  # what was logged before: not forwarded
        self.logger = logging.getLogger("cudriver.driver")
        stop = self._stop = threading.Event()
        thread = self._thread = threading.Thread(
            target=self._poll, args=(stop, interval), name="cudriver-driver-log", daemon=True
        )
        thread.start()

    def after_fork_in_child(self) -> None:
        self.lock = threading.Lock()
        self._stop = self._thread = None
        self.logger = None


#: The process's reader of the driver's error log.
DRIVER_LOG = DriverLog()
errors.DRIVER_LINES = DRIVER_LOG.lines_for
os.register_at_fork(after_in_child=DRIVER_LOG.after_fork_in_child)


def log_driver_messages(enabled: bool = True, *, interval: float = 0.1) -> None:
    """Send the driver's error and warning messages to the ``cudriver.driver`` logger.

    A thread of cudriver's own reads the driver's error log (``cuLogsDumpToMemory``)
    every ``interval`` seconds and logs each new line, at ``ERROR`` for the driver's
    errors and ``WARNING`` for its warnings, with the logging thread's identifier as
    the record's ``driver_thread``; a :class:`~cudriver.CudaError` being made logs its
    own lines at once. No Python runs on a driver thread (the driver's log callback is
    not used). Lines logged before the call are not sent. Drivers before CUDA 12.9 log
    nothing. The lookups of entry points newer than the driver that the bindings make
    are left out.

    Parameters
    ----------
    enabled
        True to start (or restart, with a new ``interval``), False to stop.
    interval
        Seconds between two reads of the log, at least 0.001.

    Raises
    ------
    ValueError
        ``interval`` is not a number of at least 0.001.
    """
    is_number = isinstance(interval, (int, float)) and not isinstance(interval, bool)
    if not is_number or not interval >= 0.001:
        raise ValueError(f"interval must be a number of seconds >= 0.001, got {interval!r}")
    DRIVER_LOG.forward(bool(enabled), float(interval))
