"""Suspending another CUDA process and resuming it: the driver's checkpoint API.

A controller process takes another CUDA process (the target, named by its pid) through
the driver's checkpoint calls (Linux only; NVIDIA driver r570, CUDA 12.8, or newer):

1. :func:`lock`: the target's further CUDA calls block (its threads are not stopped),
   after the work it already submitted, stream callbacks included, has completed. LOCKED.
2. :func:`checkpoint`: its device memory is copied into host memory the driver manages
   and all its GPU resources are released: that GPU memory is free. CHECKPOINTED.
3. :func:`restore`: the GPUs are acquired again (or others of the same chip type:
   ``gpu_map``), device memory is copied back at the same addresses, and CUDA objects
   such as contexts and streams are restored. LOCKED again.
4. :func:`unlock`: its blocked CUDA calls proceed. RUNNING.

What survives, in NVIDIA's words (the driver reference and the ``cuda-checkpoint``
notes): device memory contents, at the same addresses, and CUDA objects such as
contexts and streams; pinned host memory stays valid throughout. cudriver's test checks
a buffer's contents and runs more work on a stream made before the round trip. A
checkpointed process holds no GPU, so a CPU checkpointing tool (CRIU) can then save it.

What the caller must do:

* Name another process: the driver does not checkpoint the calling process, and these
  functions refuse it (:func:`state` and :func:`restore_thread_id` may ask about it).
* Have permission over the target: NVIDIA does not document the rule; run as the
  target's user or as root (see the errors of :func:`lock`).
* Expect :func:`lock` to wait for the target's work in flight (a kernel that never
  ends keeps it from locking): ``timeout`` bounds the wait, :data:`DEFAULT_LOCK_TIMEOUT`
  seconds by default; ``None`` waits without a bound.
* Restore before unlocking, and let the target's CUDA restore thread
  (:func:`restore_thread_id`) run during :func:`checkpoint` and :func:`restore` (CRIU's
  CUDA plugin resumes it for both): these functions refuse when they find it stopped.
* Initialise CUDA here: restoring needs persistence mode or ``cuInit`` in the caller
  (the driver reference); these functions call ``cuInit`` first.

Where the driver refuses, or fails: a target holding managed (UVM) or IPC memory (a
``MemoryPool(ipc=True)`` and what travelled from one, a
``VirtualBuffer(handle_type="fd")``), per NVIDIA's notes for driver r570, which add that
the driver does not keep the process in a good state after such an error mid-way (it may
end FAILED); hosts other than Linux (and, as of r570, other than x86-64); restoring onto
other GPUs where the driver or the bindings (``CUcheckpointRestoreArgs.gpuPairs``) lack
it.

This module adds: arguments checked before any call; the state read before each
transition, refused with :class:`CheckpointStateError` (naming the pid, the operation,
the state found and the state needed); driver errors naming the pid and the operation
(and the known causes of ``NOT_PERMITTED``/``NOT_SUPPORTED``); a finite default lock
timeout; and :func:`locked` and :func:`suspended`, which always leave the target
running. The custom-storage variants are not exposed.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import operator
import os
import sys
import uuid as _uuid
from collections.abc import Iterator, Mapping
from enum import IntEnum
from typing import Any

from cuda.bindings import driver as _drv

from ._context.device import Device
from ._runtime import _bindings
from ._runtime._init import init
from .errors import GUARD, CudaError, NotSupportedError, error_for

__all__ = [
    "ProcessState",
    "CheckpointStateError",
    "DEFAULT_LOCK_TIMEOUT",
    "state",
    "lock",
    "checkpoint",
    "restore",
    "unlock",
    "restore_thread_id",
    "locked",
    "suspended",
]

#: The seconds :func:`lock` (and :func:`locked`, :func:`suspended`) wait for the target's
#: work in flight by default. ``timeout=None`` waits without a bound.
DEFAULT_LOCK_TIMEOUT = 10.0

# The bindings, looked up at each call (the tests put a fake driver here).
_driver: Any = _drv
_R = _drv.CUresult
_LINUX: bool = sys.platform.startswith("linux")
_PID_MAX = 2**31 - 1  # the driver takes an int
_U32_MAX = 2**32 - 1

_GET_STATE = "cuCheckpointProcessGetState"
_LOCK = "cuCheckpointProcessLock"
_CHECKPOINT = "cuCheckpointProcessCheckpoint"
_RESTORE = "cuCheckpointProcessRestore"
_UNLOCK = "cuCheckpointProcessUnlock"
_RESTORE_TID = "cuCheckpointProcessGetRestoreThreadId"

#: What a refusal for permission or support says: what is known of the causes.
_PERMISSION = (
    "the driver does not say which condition failed. Checkpointing another process "
    "needs permission over it: run as the target's user or as root (NVIDIA does not "
    "document the rule; in a container, the controller must see the target's pid, and "
    "may need CAP_SYS_ADMIN or the ptrace permission, CAP_SYS_PTRACE). Other known "
    "refusals: a target holding managed (UVM) or IPC memory (NVIDIA's notes for driver "
    "r570), a driver older than r570 (CUDA 12.8), and, as reported to NVIDIA's "
    "cuda-checkpoint project, a GPU without persistence mode (nvidia-smi -pm 1)"
)


class ProcessState(IntEnum):
    """A CUDA process's checkpoint state (``CUprocessState``), as :func:`state` reads it.

    RUNNING
        The default: the process makes CUDA calls.
    LOCKED
        :func:`lock` took its CUDA locks: its further CUDA calls block.
    CHECKPOINTED
        Its device memory was copied to host memory and its GPU resources released.
    FAILED
        A checkpoint or restore failed uncorrectably; the driver can do nothing more
        with its CUDA state.
    CHECKPOINTING, RESTORING
        A custom-storage checkpoint or restore is under way (newer drivers; cudriver
        does not start those).
    """

    RUNNING = 0
    LOCKED = 1
    CHECKPOINTED = 2
    FAILED = 3
    CHECKPOINTING = 4
    RESTORING = 5


_S = ProcessState

# What each operation needs, and what to do when the process is elsewhere.
_NEEDS: dict[str, ProcessState] = {
    "lock": _S.RUNNING,
    "checkpoint": _S.LOCKED,
    "restore": _S.CHECKPOINTED,
    "unlock": _S.LOCKED,
}
_HINTS: dict[tuple[str, ProcessState], str] = {
    ("lock", _S.LOCKED): "it is already locked: unlock(pid) first, or go on from there",
    ("lock", _S.CHECKPOINTED): "it is locked and checkpointed: restore(pid), then unlock(pid)",
    ("checkpoint", _S.RUNNING): "lock(pid) first (or use suspended(pid))",
    ("checkpoint", _S.CHECKPOINTED): "it is already checkpointed",
    ("restore", _S.RUNNING): "it holds no checkpoint: checkpoint(pid) after lock(pid) first",
    ("restore", _S.LOCKED): "it holds no checkpoint (it is locked only): unlock(pid) resumes it",
    ("unlock", _S.RUNNING): "it is not locked",
    ("unlock", _S.CHECKPOINTED): "restore(pid) first, then unlock(pid)",
}
_ANY_FAILED = "a checkpoint or restore of it failed uncorrectably: its CUDA state is lost"
_ANY_BUSY = "a custom-storage checkpoint or restore of it is under way"


class CheckpointStateError(ValueError):
    """A transition the target's state does not allow; the driver was not asked.

    Raised before the call, from the state just read (``cuCheckpointProcessGetState``).

    Attributes
    ----------
    pid : int
        The target process.
    operation : str
        ``"lock"``, ``"checkpoint"``, ``"restore"`` or ``"unlock"``.
    found : ProcessState
        The state the process was in.
    needed : ProcessState
        The state the operation needs.
    hint : str
        What to do about it, or ``""``.
    """

    def __init__(
        self, pid: int, operation: str, found: ProcessState, needed: ProcessState, hint: str = ""
    ) -> None:
        self.pid = pid
        self.operation = operation
        self.found = found
        self.needed = needed
        self.hint = hint
        msg = (
            f"cannot {operation} process {pid}: it is {found.name}, and {operation} "
            f"needs it {needed.name}"
        )
        super().__init__(f"{msg}: {hint}" if hint else msg)

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.pid, self.operation, self.found, self.needed, self.hint)
        return (CheckpointStateError, args)


# -- argument checks ------------------------------------------------------------------------
def _pid_arg(pid: object, operation: str, *, others_only: bool) -> int:
    """``pid`` as a positive int (not this process's own when ``others_only``)."""
    if isinstance(pid, bool):
        raise TypeError(f"pid must be an int, not bool ({pid!r})")
    try:
        p = operator.index(pid)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"pid must be an int, not {type(pid).__name__} ({pid!r})") from None
    if not 0 < p <= _PID_MAX:
        raise ValueError(f"pid must be a process id, a positive int below 2**31, not {p}")
    if others_only and p == os.getpid():
        raise ValueError(
            f"cannot {operation} process {p}: it is this process, and the driver "
            "checkpoints other processes only (run the controller in another process)"
        )
    return p


def _timeout_ms(timeout: object) -> int:
    """The lock's ``timeoutMs``: 0 (no bound) for None, else at least 1 ms.

    The driver reads 0 ms as no timeout, so a number never becomes 0.
    """
    if timeout is None:
        return 0
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(
            f"timeout must be a number of seconds or None, not {type(timeout).__name__} "
            f"({timeout!r})"
        )
    t = float(timeout)
    if not math.isfinite(t) or t < 0:
        raise ValueError(
            f"timeout must be a finite number of seconds >= 0, not {timeout!r} "
            "(None waits without a bound)"
        )
    ms = max(1, math.ceil(t * 1000))
    if ms > _U32_MAX:
        raise ValueError(f"timeout must be below 2**32 ms (49.7 days), not {timeout!r} s")
    return ms


_Gpu = Device | _uuid.UUID | str | bytes


def _uuid_bytes(gpu: object, what: str) -> bytes:
    """The 16 bytes of a GPU's UUID from a Device, a UUID, its string or its bytes."""
    if isinstance(gpu, Device):
        return gpu.uuid.bytes
    if isinstance(gpu, _uuid.UUID):
        return gpu.bytes
    if isinstance(gpu, str):
        text = gpu.strip()
        if text[:4].upper() == "GPU-":  # as nvidia-smi -L prints it
            text = text[4:]
        try:
            return _uuid.UUID(text).bytes
        except ValueError:
            raise ValueError(
                f"{what} {gpu!r} is not a GPU UUID (e.g. 'GPU-4c9f0e1a-...' as "
                "nvidia-smi -L prints it, or its hex digits)"
            ) from None
    if isinstance(gpu, (bytes, bytearray, memoryview)):
        raw = bytes(gpu)
        if len(raw) != 16:
            raise ValueError(f"{what} must be the 16 bytes of a UUID, not {len(raw)}: {raw!r}")
        return raw
    raise TypeError(
        f"{what} must be a cudriver.Device, a uuid.UUID, a UUID string or its 16 bytes, "
        f"not {type(gpu).__name__} ({gpu!r})"
        + (": for a device ordinal pass cudriver.Device(ordinal)" if isinstance(gpu, int) else "")
    )


def _gpu_pairs(gpu_map: object) -> list[tuple[bytes, bytes]]:
    """``gpu_map`` as (old UUID bytes, new UUID bytes) pairs, checked."""
    if gpu_map is None:
        return []
    if not isinstance(gpu_map, Mapping):
        raise TypeError(
            f"gpu_map must be a mapping of old GPU to new GPU (a dict), not "
            f"{type(gpu_map).__name__} ({gpu_map!r})"
        )
    pairs: list[tuple[bytes, bytes]] = []
    seen: dict[bytes, object] = {}
    for old, new in gpu_map.items():
        o = _uuid_bytes(old, "a gpu_map key")
        n = _uuid_bytes(new, "a gpu_map value")
        if o in seen:
            raise ValueError(
                f"gpu_map names GPU {_uuid.UUID(bytes=o)} twice ({seen[o]!r} and {old!r})"
            )
        seen[o] = old
        pairs.append((o, n))
    return pairs


# -- the driver calls -----------------------------------------------------------------------
def _ready() -> None:
    """Refuse where no call may be made (a forked child), and initialise the driver."""
    if GUARD.armed:
        GUARD.check()
    init()


def _unsupported(name: str, why: str) -> NotSupportedError:
    return NotSupportedError(_R.CUDA_ERROR_NOT_SUPPORTED, name, why)


def _require(name: str) -> Any:
    """The bindings function ``name``, or NotSupportedError naming what is missing."""
    if not _LINUX:
        raise _unsupported(
            name, f"CUDA checkpointing is available on Linux only, not {sys.platform}"
        )
    fn = getattr(_driver, name, None)
    if fn is None:
        raise _unsupported(
            name,
            f"the installed cuda-bindings ({_bindings.version_string()}) have no {name}: "
            "process checkpointing needs cuda-bindings 12.8 or newer",
        )
    return fn


def _missing_function(exc: BaseException) -> bool:
    """Whether the bindings raised because the driver library lacks the function."""
    return type(exc).__name__ == "FunctionNotFoundError" or (
        isinstance(exc, RuntimeError) and not isinstance(exc, CudaError) and "not found" in str(exc)
    )


def _exists(pid: int) -> bool:
    """Raise ProcessLookupError for no such process; False when it may not be signalled."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise ProcessLookupError(f"there is no process {pid}") from None
    except PermissionError:
        return False
    return True


def _call(
    name: str, operation: str, pid: int, *args: Any, timeout: float | None = None, pairs: int = 0
) -> Any:
    """Call ``name(pid, *args)`` and return its output, or raise naming pid and operation."""
    fn = _require(name)
    _ready()
    signalled = _exists(pid)
    try:
        r = fn(pid, *args)
    except Exception as exc:
        if _missing_function(exc):
            raise _unsupported(
                name,
                f"the NVIDIA driver has no {name} ({exc}): process checkpointing needs a "
                "Linux driver r570 (CUDA 12.8) or newer",
            ) from None
        raise
    status = r[0]
    if status is _R.CUDA_SUCCESS or int(status) == 0:
        return r[1] if len(r) > 1 else None
    detail = _detail(int(status), operation, pid, signalled, timeout, pairs)
    raise error_for(status, fn, detail)


def _detail(
    code: int, operation: str, pid: int, signalled: bool, timeout: float | None, pairs: int
) -> str:
    """What a driver error adds: the pid, the operation and what is known of the cause."""
    parts = [f"{operation} of process {pid}"]
    if not signalled:
        parts.append(f"this process may not signal process {pid} (EPERM): another user's?")
    if pairs and code == int(_R.CUDA_ERROR_INVALID_VALUE):
        parts.append(
            f"gpu_map names {pairs} GPU(s); the driver wants every GPU the process had "
            "at the checkpoint in it (map the others onto themselves), each new GPU of "
            "the same chip with enough memory; the process is still CHECKPOINTED"
        )
    elif code in (int(_R.CUDA_ERROR_NOT_PERMITTED), int(_R.CUDA_ERROR_NOT_SUPPORTED)):
        parts.append(_PERMISSION)
    elif code == int(_R.CUDA_ERROR_ILLEGAL_STATE):
        try:
            now = _read_state(pid)
        except Exception:  # the refusal is what matters; its state is a hint
            pass
        else:
            parts.append(f"it is now {now.name} (did another controller act on it?)")
    elif code in _TIMEOUT_CODES and operation == "lock" and timeout is not None:
        parts.append(
            f"it was not locked within the {timeout} s timeout, so the driver left it "
            "RUNNING: its work in flight, or a CUDA call of its own, did not finish"
        )
    elif code in _UNKNOWN_CODES:
        parts.append("is it a process that has initialised CUDA, and is still running?")
    return "; ".join(parts)


_TIMEOUT_CODES = frozenset(
    int(c) for c in (_R.CUDA_ERROR_NOT_READY, getattr(_R, "CUDA_ERROR_TIMEOUT", None)) if c
)
_UNKNOWN_CODES = frozenset(
    int(c)
    for c in (_R.CUDA_ERROR_INVALID_VALUE, _R.CUDA_ERROR_NOT_FOUND, _R.CUDA_ERROR_NOT_INITIALIZED)
)


def _read_state(pid: int) -> ProcessState:
    """``cuCheckpointProcessGetState`` for a checked pid."""
    v = int(_call(_GET_STATE, "state query", pid))
    try:
        return ProcessState(v)
    except ValueError:
        raise ValueError(
            f"the driver says process {pid} is in state {v}, which cudriver does not know "
            "(a newer driver's state?)"
        ) from None


def _expect(pid: int, operation: str) -> None:
    """Raise CheckpointStateError unless the process is in the state ``operation`` needs."""
    found = _read_state(pid)
    needed = _NEEDS[operation]
    if found is needed:
        return
    if found is ProcessState.FAILED:
        hint = _ANY_FAILED
    elif found in (ProcessState.CHECKPOINTING, ProcessState.RESTORING):
        hint = _ANY_BUSY
    else:
        hint = _HINTS.get((operation, found), "")
    raise CheckpointStateError(pid, operation, found, needed, hint)


def _thread_state(pid: int, tid: int) -> str | None:
    """The state letter of thread ``tid`` of process ``pid`` (``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 1 :].split()
    return fields[0] if fields else None


def _check_restore_thread(pid: int, operation: str) -> None:
    """Refuse when the target's CUDA restore thread is stopped (the call would wait)."""
    _ready()
    try:
        r = getattr(_driver, _RESTORE_TID)(pid)
    except Exception:  # only a check: the operation itself reports what is wrong
        return
    if int(r[0]) != 0 or r[1] is None:
        return
    tid = int(r[1])
    letter = _thread_state(pid, tid)
    if letter in ("T", "t"):
        raise RuntimeError(
            f"cannot {operation} process {pid}: its CUDA restore thread {tid} is stopped "
            f"(state {letter} in /proc/{pid}/task/{tid}/stat: a SIGSTOP, a debugger or a "
            f"tracer), and the driver needs it running for the {operation} (CRIU's CUDA "
            "plugin resumes it for both checkpoint and restore): let it run first"
        )


# -- the public calls -----------------------------------------------------------------------
def state(pid: int) -> ProcessState:
    """The checkpoint state of process ``pid`` (``cuCheckpointProcessGetState``).

    ``pid`` is required, with no default, so that a call never asks about the wrong
    process by accident; it may be this process's own (``os.getpid()``). Does not block
    or synchronise; initialises the driver in this process (``cuInit``) first.

    Returns
    -------
    ProcessState

    Raises
    ------
    TypeError, ValueError
        ``pid`` is not a positive int.
    ProcessLookupError
        There is no such process.
    CudaError
        The driver's refusal, naming the pid (e.g. for a process that never initialised
        CUDA).
    NotSupportedError
        Not Linux, or the bindings or the driver lack the checkpoint API.
    """
    return _read_state(_pid_arg(pid, "query the state of", others_only=False))


def lock(pid: int, *, timeout: float | None = DEFAULT_LOCK_TIMEOUT) -> None:
    """Lock another process's CUDA (``cuCheckpointProcessLock``): RUNNING to LOCKED.

    Blocks the calling thread until the target's CUDA calls in progress have returned
    and the work it submitted has completed (stream callbacks included), or ``timeout``
    passes; the target's further CUDA calls then block until :func:`unlock`. Does not
    synchronise anything of this process.

    Parameters
    ----------
    pid
        Another process that uses CUDA.
    timeout
        Seconds to wait for the lock (``timeoutMs``, rounded up to a whole millisecond,
        at least 1): by default :data:`DEFAULT_LOCK_TIMEOUT`. ``None`` waits without a
        bound (the driver's ``timeoutMs=0``). On a timeout the driver leaves the process
        RUNNING and its error says so.

    Raises
    ------
    CheckpointStateError
        The process is not RUNNING (already locked, checkpointed or failed).
    TypeError, ValueError
        ``pid`` is not another process's id; ``timeout`` is not a finite number >= 0 or
        None.
    ProcessLookupError
        There is no such process.
    CudaError
        The driver refused (its class for the status), naming the pid and the operation;
        for ``NOT_PERMITTED``/``NOT_SUPPORTED`` the message lists the known causes.
    """
    p = _pid_arg(pid, "lock", others_only=True)
    ms = _timeout_ms(timeout)
    _require(_LOCK)
    _expect(p, "lock")
    args = None
    if ms:
        args = _driver.CUcheckpointLockArgs()
        args.timeoutMs = ms
    _call(_LOCK, "lock", p, args, timeout=timeout)


def checkpoint(pid: int) -> None:
    """Checkpoint a locked process (``cuCheckpointProcessCheckpoint``): LOCKED to CHECKPOINTED.

    Blocks the calling thread while the driver copies the target's device memory into
    host memory it manages and releases the target's GPU resources (its device memory
    is then free). Does not synchronise anything of this process.

    Raises
    ------
    CheckpointStateError
        The process is not LOCKED: :func:`lock` it first.
    RuntimeError
        The target's CUDA restore thread is stopped (the call would wait for it).
    TypeError, ValueError
        ``pid`` is not another process's id.
    ProcessLookupError
        There is no such process.
    CudaError
        The driver refused, naming the pid and the operation (e.g. for managed or IPC
        memory in the target, which may leave it FAILED).
    """
    p = _pid_arg(pid, "checkpoint", others_only=True)
    _require(_CHECKPOINT)
    _check_restore_thread(p, "checkpoint")  # first: it answers for a stopped process
    _expect(p, "checkpoint")
    _call(_CHECKPOINT, "checkpoint", p, None)


def restore(pid: int, *, gpu_map: Mapping[_Gpu, _Gpu] | None = None) -> None:
    """Restore a checkpointed process (``cuCheckpointProcessRestore``): CHECKPOINTED to LOCKED.

    Blocks the calling thread while the driver acquires the GPUs again and copies the
    device memory back, at the same addresses. The process stays LOCKED: :func:`unlock`
    it. Does not synchronise anything of this process.

    Parameters
    ----------
    pid
        A CHECKPOINTED process.
    gpu_map
        Restore onto other GPUs: old GPU to new GPU, each a :class:`~cudriver.Device`, a
        :class:`uuid.UUID`, a UUID string (``"GPU-..."`` as ``nvidia-smi -L`` prints
        it, or its hex digits) or its 16 bytes (``CUcheckpointGpuPair``). The driver
        wants every GPU the process had at the checkpoint listed (measured: one of two
        visible GPUs alone was refused with ``CUDA_ERROR_INVALID_VALUE``), each new GPU
        of the same chip type as the old with enough memory. None or empty: the same
        GPUs.

    Raises
    ------
    CheckpointStateError
        The process is not CHECKPOINTED.
    TypeError, ValueError
        ``gpu_map`` is not a mapping of GPUs, or names an old GPU twice; or as for
        :func:`checkpoint`.
    NotSupportedError
        ``gpu_map`` was given and the bindings' ``CUcheckpointRestoreArgs`` has no
        ``gpuPairs`` (cuda-bindings too old); or as for :func:`state`.
    RuntimeError, ProcessLookupError, CudaError
        As for :func:`checkpoint`.
    """
    p = _pid_arg(pid, "restore", others_only=True)
    pairs = _gpu_pairs(gpu_map)
    _require(_RESTORE)
    args = None
    if pairs:
        args = _restore_args(pairs)
    _check_restore_thread(p, "restore")
    _expect(p, "restore")
    _call(_RESTORE, "restore", p, args, pairs=len(pairs))


def _restore_args(pairs: list[tuple[bytes, bytes]]) -> Any:
    """A ``CUcheckpointRestoreArgs`` holding ``pairs`` as ``CUcheckpointGpuPair`` s."""
    args_cls = getattr(_driver, "CUcheckpointRestoreArgs", None)
    pair_cls = getattr(_driver, "CUcheckpointGpuPair", None)
    args: Any = args_cls() if args_cls is not None else None
    if pair_cls is None or not hasattr(args, "gpuPairs"):
        have = {
            "CUcheckpointRestoreArgs.gpuPairs": hasattr(args, "gpuPairs"),
            "CUcheckpointGpuPair": pair_cls is not None,
        }
        missing = [name for name, ok in have.items() if not ok]
        raise _unsupported(
            _RESTORE,
            f"restoring onto other GPUs (gpu_map) needs {' and '.join(missing)}, which the "
            f"installed cuda-bindings ({_bindings.version_string()}) lack: install newer "
            "cuda-bindings, or restore onto the same GPUs (no gpu_map)",
        )
    items = []
    for old, new in pairs:
        pair = pair_cls()
        _bindings.set_struct_bytes(pair, old + new)  # { CUuuid oldUuid; CUuuid newUuid; }
        items.append(pair)
    args.gpuPairs = items
    args.gpuPairsCount = len(items)
    return args


def unlock(pid: int) -> None:
    """Unlock a locked process (``cuCheckpointProcessUnlock``): LOCKED to RUNNING.

    Its blocked CUDA calls proceed. Returns without waiting for them; does not
    synchronise anything of this process.

    Raises
    ------
    CheckpointStateError
        The process is not LOCKED (a CHECKPOINTED one is restored first).
    TypeError, ValueError, ProcessLookupError, CudaError
        As for :func:`lock`.
    """
    p = _pid_arg(pid, "unlock", others_only=True)
    _require(_UNLOCK)
    _expect(p, "unlock")
    _call(_UNLOCK, "unlock", p, None)


def restore_thread_id(pid: int) -> int:
    """The id of the target's CUDA restore thread (``cuCheckpointProcessGetRestoreThreadId``).

    A tool that stops the target's threads (ptrace, as CRIU does) must let this one run
    during :func:`checkpoint` and :func:`restore`. In any state; ``pid`` may be this
    process's own. Does not block or synchronise.

    Raises
    ------
    TypeError, ValueError, ProcessLookupError, CudaError
        As for :func:`state`.
    """
    p = _pid_arg(pid, "get the restore thread of", others_only=False)
    return int(_call(_RESTORE_TID, "restore thread query", p))


# -- context managers -----------------------------------------------------------------------
def _resume(pid: int, gpu_map: Mapping[_Gpu, _Gpu] | None) -> None:
    """Bring ``pid`` back to RUNNING from LOCKED or CHECKPOINTED; nothing if it is gone."""
    try:
        found = _read_state(pid)
    except ProcessLookupError:
        return
    if found is ProcessState.CHECKPOINTED:
        restore(pid, gpu_map=gpu_map)
        found = ProcessState.LOCKED
    if found is ProcessState.LOCKED:
        unlock(pid)


@contextlib.contextmanager
def locked(pid: int, *, timeout: float | None = DEFAULT_LOCK_TIMEOUT) -> Iterator[None]:
    """Hold another process's CUDA locked for a ``with`` block: :func:`lock`, then unlock.

    A context manager: on entering the block, the arguments are checked and the lock is
    taken (see :func:`lock` for ``timeout`` and what blocks). On leaving it, whether the
    block returned or raised, the process is brought back to RUNNING from where the
    block left it: restored (onto the same GPUs) then unlocked if CHECKPOINTED, unlocked
    if LOCKED, left alone if already RUNNING, FAILED, or gone. Errors are those of
    :func:`lock` on entry, of :func:`restore` and :func:`unlock` on exit (the block's
    own exception, if any, is then their ``__context__``).
    """
    p = _pid_arg(pid, "lock", others_only=True)
    lock(p, timeout=timeout)
    try:
        yield
    finally:
        _resume(p, None)


@contextlib.contextmanager
def suspended(
    pid: int,
    *,
    timeout: float | None = DEFAULT_LOCK_TIMEOUT,
    gpu_map: Mapping[_Gpu, _Gpu] | None = None,
) -> Iterator[None]:
    """Keep another process suspended, its GPU memory freed, for a ``with`` block.

    A context manager: on entering the block, the arguments are checked, then
    :func:`lock` (with ``timeout``) and :func:`checkpoint`; if the checkpoint fails, the
    process is unlocked again before the error propagates. On leaving the block,
    whether it returned or raised: :func:`restore` (with ``gpu_map``) if still
    CHECKPOINTED, then :func:`unlock`, so the process runs again. Each step blocks as
    its function says, and raises as it does.
    """
    p = _pid_arg(pid, "suspend", others_only=True)
    _timeout_ms(timeout)
    _gpu_pairs(gpu_map)
    lock(p, timeout=timeout)
    try:
        checkpoint(p)
    except BaseException:
        _resume(p, None)
        raise
    try:
        yield
    finally:
        _resume(p, gpu_map)
