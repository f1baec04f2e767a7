"""Process checkpointing (cudriver.checkpoint).

Without a GPU: the driver's calls are replaced by a fake (``FakeDriver``) that keeps a
process state and records each call, so the argument checks, the state checks, the
errors' messages, the context managers and the GPU map's conversion are tested on
their own. The target pid is a real process (a sleeping child), since the functions
look for it before calling the driver.

On a GPU: a spawned child (tests/_checkpoint_children.py) holds device memory and a
stream; the test locks, checkpoints, restores and unlocks it, and the child checks its
memory and runs more work. Where the driver refuses (not permitted, not supported) the
test skips with the refusal. Every wait has a deadline, and the child is killed at the
end whatever happened.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver import checkpoint as ckpt
from cudriver.checkpoint import CheckpointStateError, ProcessState

from . import _checkpoint_children as kids
from ._support import no_driver

S = ProcessState
R = drv.CUresult
SUCCESS = R.CUDA_SUCCESS
GET = "cuCheckpointProcessGetState"
LOCK = "cuCheckpointProcessLock"
CKPT = "cuCheckpointProcessCheckpoint"
RESTORE = "cuCheckpointProcessRestore"
UNLOCK = "cuCheckpointProcessUnlock"
TID = "cuCheckpointProcessGetRestoreThreadId"
# What each operation does to the state when the driver accepts it.
MOVES = {
    LOCK: (S.RUNNING, S.LOCKED),
    CKPT: (S.LOCKED, S.CHECKPOINTED),
    RESTORE: (S.CHECKPOINTED, S.LOCKED),
    UNLOCK: (S.LOCKED, S.RUNNING),
}
U1 = uuid.UUID("4c9f0e1a-2b3c-4d5e-8f70-112233445566")
U2 = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


# -- the fake driver ------------------------------------------------------------------------
class FakeDriver:
    """Stands for ``cuda.bindings.driver`` inside cudriver.checkpoint.

    The checkpoint functions move ``state`` as the driver would and record
    ``(name, args)``; ``refuse`` maps a function's name to the status it returns instead
    (leaving the state alone); ``missing`` names attributes it lacks; ``extra`` replaces
    attributes. Everything else (the argument structs) is the real bindings'.
    """

    def __init__(
        self,
        state: ProcessState = S.RUNNING,
        *,
        refuse: dict[str, Any] | None = None,
        missing: tuple[str, ...] = (),
        extra: dict[str, Any] | None = None,
        tid: int | None = None,
    ) -> None:
        self.state = state
        self.refuse = dict(refuse or {})
        self.missing = set(missing)
        self.extra = dict(extra or {})
        self.tid = tid
        self.calls: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        if name in self.missing:
            raise AttributeError(name)
        if name in self.extra:
            return self.extra[name]
        if name in MOVES or name in (GET, TID):
            return self._function(name)
        return getattr(drv, name)

    def _function(self, name: str) -> Callable[..., tuple[Any, ...]]:
        def call(pid: int, args: Any = None) -> tuple[Any, ...]:
            self.calls.append((name, args))
            if name in self.refuse:
                return (self.refuse[name], None)
            if name == GET:
                try:
                    return (SUCCESS, drv.CUprocessState(int(self.state)))
                except ValueError:  # a state these bindings do not name
                    return (SUCCESS, int(self.state))
            if name == TID:
                return (SUCCESS, self.tid if self.tid is not None else pid)
            self.state = MOVES[name][1]
            return (SUCCESS,)

        call.__name__ = name
        return call

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.calls]

    def ops(self) -> list[str]:
        """The calls that are not queries."""
        return [n for n in self.names if n not in (GET, TID)]


@pytest.fixture(scope="module")
def target() -> Iterator[int]:
    """The pid of a sleeping child process: a real process other than this one."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait(30)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    f = FakeDriver()
    monkeypatch.setattr(ckpt, "_driver", f)
    monkeypatch.setattr(ckpt, "_ready", lambda: None)  # no cuInit: no driver here
    return f


# -- what the module is ---------------------------------------------------------------------
def test_process_states_have_the_drivers_values() -> None:
    for member in drv.CUprocessState:
        name = member.name.removeprefix("CU_PROCESS_STATE_")
        assert int(ProcessState[name]) == int(member), name
    assert [s.name for s in ProcessState][:4] == ["RUNNING", "LOCKED", "CHECKPOINTED", "FAILED"]


def test_every_public_name_is_documented() -> None:
    for name in ckpt.__all__:
        obj = getattr(ckpt, name)
        if callable(obj):
            assert obj.__doc__, name
    assert ckpt.DEFAULT_LOCK_TIMEOUT == 10.0
    for fn in (ckpt.state, ckpt.lock, ckpt.checkpoint, ckpt.restore, ckpt.unlock):
        assert "cuCheckpointProcess" in (fn.__doc__ or ""), fn.__name__


def test_a_state_error_pickles_and_is_a_value_error() -> None:
    e = CheckpointStateError(42, "unlock", S.CHECKPOINTED, S.LOCKED, "restore(pid) first")
    assert isinstance(e, ValueError)
    back = pickle.loads(pickle.dumps(e))
    assert (back.pid, back.operation, back.found, back.needed) == (
        42,
        "unlock",
        S.CHECKPOINTED,
        S.LOCKED,
    )
    assert str(back) == str(e)
    assert str(e) == (
        "cannot unlock process 42: it is CHECKPOINTED, and unlock needs it LOCKED: "
        "restore(pid) first"
    )


# -- argument checks (before any driver call) -----------------------------------------------
def _enter(cm: contextlib.AbstractContextManager[Any]) -> None:
    """Enter and leave ``cm`` (its checks run on entering)."""
    with cm:
        pass


OPS: list[tuple[str, Callable[[Any], Any]]] = [
    ("lock", lambda pid: ckpt.lock(pid)),
    ("checkpoint", lambda pid: ckpt.checkpoint(pid)),
    ("restore", lambda pid: ckpt.restore(pid)),
    ("unlock", lambda pid: ckpt.unlock(pid)),
    ("locked", lambda pid: _enter(ckpt.locked(pid))),
    ("suspended", lambda pid: _enter(ckpt.suspended(pid))),
]
QUERIES: list[tuple[str, Callable[[Any], Any]]] = [
    ("state", lambda pid: ckpt.state(pid)),
    ("restore_thread_id", lambda pid: ckpt.restore_thread_id(pid)),
]


@pytest.mark.parametrize(("name", "op"), OPS + QUERIES, ids=[n for n, _ in OPS + QUERIES])
@pytest.mark.parametrize(
    ("pid", "exc", "words"),
    [
        (True, TypeError, "pid must be an int, not bool"),
        (12.0, TypeError, "not float (12.0)"),
        ("123", TypeError, "not str ('123')"),
        (None, TypeError, "not NoneType"),
        (0, ValueError, "positive int below 2**31, not 0"),
        (-5, ValueError, "not -5"),
        (2**31, ValueError, f"not {2**31}"),
    ],
)
def test_a_bad_pid_is_refused_naming_it(
    fake: FakeDriver, name: str, op: Callable[[Any], Any], pid: Any, exc: type, words: str
) -> None:
    with pytest.raises(exc) as info:
        op(pid)
    assert words in str(info.value)
    assert fake.calls == []


@pytest.mark.parametrize(("name", "op"), OPS, ids=[n for n, _ in OPS])
def test_this_process_is_refused(fake: FakeDriver, name: str, op: Callable[[Any], Any]) -> None:
    with pytest.raises(ValueError, match=f"process {os.getpid()}: it is this process") as info:
        op(os.getpid())
    assert "other processes only" in str(info.value)
    assert fake.calls == []


def test_queries_may_ask_about_this_process(fake: FakeDriver) -> None:
    assert ckpt.state(os.getpid()) is S.RUNNING
    assert ckpt.restore_thread_id(os.getpid()) == os.getpid()
    assert fake.names == [GET, TID]


@pytest.mark.parametrize(
    ("timeout", "exc", "words"),
    [
        (True, TypeError, "not bool (True)"),
        ("1", TypeError, "not str ('1')"),
        (-0.5, ValueError, "not -0.5"),
        (float("nan"), ValueError, "not nan"),
        (float("inf"), ValueError, "not inf (None waits without a bound)"),
        (5e6, ValueError, "below 2**32 ms"),
    ],
)
def test_a_bad_timeout_is_refused_naming_it(
    fake: FakeDriver, target: int, timeout: Any, exc: type, words: str
) -> None:
    for call in (
        ckpt.lock,
        lambda pid, timeout: _enter(ckpt.locked(pid, timeout=timeout)),
        lambda pid, timeout: _enter(ckpt.suspended(pid, timeout=timeout)),
    ):
        with pytest.raises(exc) as info:
            call(target, timeout=timeout)
        assert words in str(info.value)
    assert fake.calls == []


@pytest.mark.parametrize(
    ("timeout", "ms"),
    [(ckpt.DEFAULT_LOCK_TIMEOUT, 10_000), (2.5, 2500), (0, 1), (0.0001, 1), (1e-3, 1), (7, 7000)],
)
def test_the_timeout_becomes_whole_milliseconds_never_zero(
    fake: FakeDriver, target: int, timeout: float, ms: int
) -> None:
    ckpt.lock(target, timeout=timeout)
    (args,) = [a for n, a in fake.calls if n == LOCK]
    assert args.timeoutMs == ms


def test_no_timeout_passes_no_lock_arguments(fake: FakeDriver, target: int) -> None:
    ckpt.lock(target, timeout=None)
    assert fake.calls[-1] == (LOCK, None)  # the driver's NULL args: no timeout


def test_the_default_timeout_is_finite(fake: FakeDriver, target: int) -> None:
    ckpt.lock(target)
    assert fake.calls[-1][1].timeoutMs == 10_000


# -- the state machine ----------------------------------------------------------------------
def test_a_full_round_calls_the_driver_in_order(fake: FakeDriver, target: int) -> None:
    assert ckpt.state(target) is S.RUNNING
    ckpt.lock(target, timeout=3)
    assert ckpt.state(target) is S.LOCKED
    ckpt.checkpoint(target)
    assert ckpt.state(target) is S.CHECKPOINTED
    ckpt.restore(target)
    assert ckpt.state(target) is S.LOCKED
    ckpt.unlock(target)
    assert ckpt.state(target) is S.RUNNING
    assert ckpt.restore_thread_id(target) == target
    assert fake.names == [
        GET,
        GET, LOCK, GET,
        TID, GET, CKPT, GET,
        TID, GET, RESTORE, GET,
        GET, UNLOCK, GET,
        TID,
    ]  # fmt: skip
    assert [a for n, a in fake.calls if n in (CKPT, RESTORE, UNLOCK)] == [None, None, None]


REFUSED = [
    ("lock", S.LOCKED, "RUNNING", "already locked"),
    ("lock", S.CHECKPOINTED, "RUNNING", "restore(pid), then unlock(pid)"),
    ("checkpoint", S.RUNNING, "LOCKED", "lock(pid) first"),
    ("checkpoint", S.CHECKPOINTED, "LOCKED", "already checkpointed"),
    ("restore", S.RUNNING, "CHECKPOINTED", "holds no checkpoint"),
    ("restore", S.LOCKED, "CHECKPOINTED", "unlock(pid) resumes it"),
    ("unlock", S.RUNNING, "LOCKED", "not locked"),
    ("unlock", S.CHECKPOINTED, "LOCKED", "restore(pid) first"),
    ("lock", S.FAILED, "RUNNING", "failed uncorrectably"),
    ("restore", S.FAILED, "CHECKPOINTED", "failed uncorrectably"),
    ("unlock", S.RESTORING, "LOCKED", "custom-storage"),
]


@pytest.mark.parametrize(("op", "found", "needed", "hint"), REFUSED)
def test_a_refused_transition_names_pid_operation_and_states(
    fake: FakeDriver, target: int, op: str, found: ProcessState, needed: str, hint: str
) -> None:
    fake.state = found
    with pytest.raises(CheckpointStateError) as info:
        getattr(ckpt, op)(target)
    e = info.value
    assert (e.pid, e.operation, e.found, e.needed.name) == (target, op, found, needed)
    assert str(e).startswith(
        f"cannot {op} process {target}: it is {found.name}, and {op} needs it {needed}"
    )
    assert hint in str(e)
    assert fake.ops() == []  # the driver was only asked for the state
    assert fake.state is found


@pytest.mark.parametrize(
    ("name", "code", "cls", "words"),
    [
        (LOCK, R.CUDA_ERROR_NOT_PERMITTED, cu.NotPermittedError, "as root"),
        (CKPT, R.CUDA_ERROR_NOT_SUPPORTED, cu.NotSupportedError, "CAP_SYS_ADMIN"),
        (RESTORE, R.CUDA_ERROR_NOT_PERMITTED, cu.NotPermittedError, "persistence mode"),
        (UNLOCK, R.CUDA_ERROR_NOT_SUPPORTED, cu.NotSupportedError, "target's user"),
        (CKPT, R.CUDA_ERROR_OUT_OF_MEMORY, cu.OutOfMemoryError, "checkpoint of process"),
    ],
)
def test_a_driver_refusal_names_pid_and_operation_and_the_known_causes(
    fake: FakeDriver, target: int, name: str, code: Any, cls: type, words: str
) -> None:
    fake.state = MOVES[name][0]
    fake.refuse[name] = code
    op = {LOCK: "lock", CKPT: "checkpoint", RESTORE: "restore", UNLOCK: "unlock"}[name]
    with pytest.raises(cls) as info:
        getattr(ckpt, op)(target)
    msg = str(info.value)
    assert info.value.func == name
    assert f"{op} of process {target}" in msg
    assert words in msg
    assert fake.state is MOVES[name][0]


def test_a_refused_gpu_map_says_every_gpu_must_be_named(fake: FakeDriver, target: int) -> None:
    fake.state = S.CHECKPOINTED
    fake.refuse[RESTORE] = R.CUDA_ERROR_INVALID_VALUE
    uid = "GPU-8ef7caf0-ad3b-9df2-e66e-4bb1fdc5b67c"
    with pytest.raises(cu.InvalidValueError) as info:
        ckpt.restore(target, gpu_map={uid: uid})
    msg = str(info.value)
    assert "gpu_map names 1 GPU(s); the driver wants every GPU the process had" in msg
    assert "still CHECKPOINTED" in msg and fake.state is S.CHECKPOINTED
    # Without a map, the same status keeps its generic hint.
    with pytest.raises(cu.InvalidValueError) as info:
        ckpt.restore(target)
    assert "gpu_map" not in str(info.value)


def test_a_refusal_for_a_process_this_one_may_not_signal_says_so(
    fake: FakeDriver, target: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ckpt, "_exists", lambda pid: False)  # os.kill(pid, 0): EPERM
    fake.refuse[LOCK] = R.CUDA_ERROR_NOT_PERMITTED
    with pytest.raises(cu.NotPermittedError) as info:
        ckpt.lock(target)
    assert f"lock of process {target}; this process may not signal process {target}" in str(
        info.value
    )


def test_an_illegal_state_from_the_driver_says_the_state_now(fake: FakeDriver, target: int) -> None:
    # Another controller got there between the check and the call.
    fake.state = S.LOCKED
    fake.refuse[CKPT] = R.CUDA_ERROR_ILLEGAL_STATE
    with pytest.raises(cu.CudaError, match="CUDA_ERROR_ILLEGAL_STATE") as info:
        ckpt.checkpoint(target)
    assert f"checkpoint of process {target}; it is now LOCKED" in str(info.value)


def test_a_lock_timeout_says_the_process_runs_on(fake: FakeDriver, target: int) -> None:
    fake.refuse[LOCK] = R.CUDA_ERROR_NOT_READY
    with pytest.raises(cu.NotReadyError) as info:
        ckpt.lock(target, timeout=0.25)
    assert "not locked within the 0.25 s timeout" in str(info.value)
    assert "RUNNING" in str(info.value)


def test_a_state_query_refused_names_the_pid(fake: FakeDriver, target: int) -> None:
    fake.refuse[GET] = R.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(cu.InvalidValueError) as info:
        ckpt.state(target)
    assert f"state query of process {target}" in str(info.value)
    assert "initialised CUDA" in str(info.value)


def test_an_unknown_state_value_is_named(fake: FakeDriver, target: int) -> None:
    fake.extra[GET] = lambda pid: (SUCCESS, 77)
    with pytest.raises(ValueError, match=f"process {target} is in state 77"):
        ckpt.state(target)


def test_a_process_that_is_gone_is_named(fake: FakeDriver) -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait(30)  # reaped: its pid names no process now
    for call in (ckpt.state, ckpt.lock, ckpt.unlock, ckpt.restore_thread_id):
        with pytest.raises(ProcessLookupError, match=f"there is no process {p.pid}"):
            call(p.pid)


# -- what the bindings or the platform lack -------------------------------------------------
@pytest.mark.parametrize("name", [GET, LOCK, CKPT, RESTORE, UNLOCK, TID])
def test_a_missing_binding_is_named(
    monkeypatch: pytest.MonkeyPatch, target: int, name: str
) -> None:
    f = FakeDriver(MOVES.get(name, (S.RUNNING,))[0], missing=(name,))
    monkeypatch.setattr(ckpt, "_driver", f)
    monkeypatch.setattr(ckpt, "_ready", lambda: None)
    op = {GET: "state", LOCK: "lock", CKPT: "checkpoint", RESTORE: "restore", UNLOCK: "unlock"}
    op[TID] = "restore_thread_id"
    if name == TID:  # the state-changing calls only use it for a check
        ckpt.lock(target)
    with pytest.raises(cu.NotSupportedError) as info:
        getattr(ckpt, op[name])(target)
    assert info.value.func == name
    assert f"have no {name}" in str(info.value)
    assert "cuda-bindings 12.8 or newer" in str(info.value)
    assert isinstance(info.value, NotImplementedError)


def test_a_driver_without_the_function_is_named(fake: FakeDriver, target: int) -> None:
    def missing(pid: int, args: Any = None) -> tuple[Any, ...]:
        raise RuntimeError(f'Function "{LOCK}" not found')

    fake.extra[LOCK] = missing
    with pytest.raises(cu.NotSupportedError, match="r570") as info:
        ckpt.lock(target)
    assert info.value.func == LOCK


def test_other_platforms_are_refused(
    fake: FakeDriver, target: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ckpt, "_LINUX", False)
    with pytest.raises(cu.NotSupportedError, match="Linux only"):
        ckpt.state(target)
    assert fake.calls == []


@no_driver
def test_without_a_driver_a_call_says_so(target: int) -> None:
    with pytest.raises(cu.DriverNotFoundError):
        ckpt.state(target)


# -- the GPU map ----------------------------------------------------------------------------
def _pairs(args: Any) -> list[tuple[bytes, bytes]]:
    n = args.gpuPairsCount
    return [(bytes(p.oldUuid.bytes)[:16], bytes(p.newUuid.bytes)[:16]) for p in args.gpuPairs[:n]]


@pytest.mark.skipif(
    not hasattr(drv.CUcheckpointRestoreArgs(), "gpuPairs"),
    reason="these cuda-bindings have no CUcheckpointRestoreArgs.gpuPairs",
)
def test_a_gpu_map_becomes_uuid_pairs(
    fake: FakeDriver, target: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cu.Device, "uuid", property(lambda self: U2))
    dev = object.__new__(cu.Device)  # no driver here: only its uuid is read
    other = uuid.UUID(int=7)
    third = uuid.UUID(int=9)
    fake.state = S.CHECKPOINTED
    ckpt.restore(
        target,
        gpu_map={
            U1: dev,
            f"GPU-{other}": third.bytes,
            third.hex.upper(): bytearray(U1.bytes),
        },
    )
    (args,) = [a for n, a in fake.calls if n == RESTORE]
    assert _pairs(args) == [
        (U1.bytes, U2.bytes),
        (other.bytes, third.bytes),
        (third.bytes, U1.bytes),
    ]


def test_an_empty_gpu_map_restores_onto_the_same_gpus(fake: FakeDriver, target: int) -> None:
    fake.state = S.CHECKPOINTED
    ckpt.restore(target, gpu_map={})
    assert fake.calls[-1] == (RESTORE, None)


@pytest.mark.parametrize(
    ("gpu_map", "exc", "words"),
    [
        ([(U1, U2)], TypeError, "gpu_map must be a mapping of old GPU to new GPU"),
        ({0: U2}, TypeError, "not int (0): for a device ordinal pass cudriver.Device(ordinal)"),
        ({U1: 1.5}, TypeError, "a gpu_map value must be a cudriver.Device"),
        ({"GPU-nonsense": U2}, ValueError, "'GPU-nonsense' is not a GPU UUID"),
        ({U1: b"\x01" * 15}, ValueError, "16 bytes of a UUID, not 15"),
        ({U1: U2, f"GPU-{U1}": U1}, ValueError, f"names GPU {U1} twice"),
    ],
)
def test_a_bad_gpu_map_is_refused_naming_the_value(
    fake: FakeDriver, target: int, gpu_map: Any, exc: type, words: str
) -> None:
    fake.state = S.CHECKPOINTED
    for call in (
        ckpt.restore,
        lambda pid, gpu_map: _enter(ckpt.suspended(pid, gpu_map=gpu_map)),
    ):
        with pytest.raises(exc) as info:
            call(target, gpu_map=gpu_map)
        assert words in str(info.value)
    assert fake.calls == []


def test_bindings_without_gpu_pairs_refuse_a_gpu_map_only(fake: FakeDriver, target: int) -> None:
    class OldRestoreArgs:  # cuda-bindings 12.8's shape: no gpuPairs
        reserved = 0

    fake.extra["CUcheckpointRestoreArgs"] = OldRestoreArgs
    fake.state = S.CHECKPOINTED
    with pytest.raises(cu.NotSupportedError) as info:
        ckpt.restore(target, gpu_map={U1: U2})
    assert "CUcheckpointRestoreArgs.gpuPairs" in str(info.value)
    assert "restore onto the same GPUs (no gpu_map)" in str(info.value)
    assert fake.calls == []
    ckpt.restore(target)  # the same GPUs need no pairs
    assert fake.state is S.LOCKED


def test_bindings_without_gpu_pair_structs_refuse_a_gpu_map(fake: FakeDriver, target: int) -> None:
    fake.missing.add("CUcheckpointGpuPair")
    fake.state = S.CHECKPOINTED
    with pytest.raises(cu.NotSupportedError, match="needs CUcheckpointGpuPair, which"):
        ckpt.restore(target, gpu_map={U1: U2})
    assert fake.calls == []


# -- a stopped restore thread ---------------------------------------------------------------
def test_a_stopped_restore_thread_is_refused_before_the_call(fake: FakeDriver) -> None:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        os.kill(p.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 30
        while ckpt._thread_state(p.pid, p.pid) != "T":
            assert time.monotonic() < deadline, "the child did not stop"
            time.sleep(0.01)
        for op, state in (("checkpoint", S.LOCKED), ("restore", S.CHECKPOINTED)):
            fake.state = state
            with pytest.raises(RuntimeError, match="restore thread") as info:
                getattr(ckpt, op)(p.pid)
            assert f"cannot {op} process {p.pid}" in str(info.value)
            assert "is stopped (state T" in str(info.value)
        assert fake.ops() == []
        os.kill(p.pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while ckpt._thread_state(p.pid, p.pid) == "T":
            assert time.monotonic() < deadline, "the child did not continue"
            time.sleep(0.01)
        ckpt.restore(p.pid)  # running again: the call goes ahead
        assert fake.ops() == [RESTORE]
    finally:
        p.kill()
        p.wait(30)


# -- the context managers -------------------------------------------------------------------
def test_locked_locks_and_unlocks(fake: FakeDriver, target: int) -> None:
    with ckpt.locked(target, timeout=1):
        assert fake.state is S.LOCKED
        assert fake.ops() == [LOCK]
    assert fake.state is S.RUNNING
    assert fake.ops() == [LOCK, UNLOCK]


def test_locked_unlocks_when_the_body_raises(fake: FakeDriver, target: int) -> None:
    with pytest.raises(KeyError, match="body"), ckpt.locked(target):
        raise KeyError("body")
    assert fake.state is S.RUNNING
    assert fake.ops() == [LOCK, UNLOCK]


def test_locked_restores_what_the_body_left_checkpointed(fake: FakeDriver, target: int) -> None:
    with ckpt.locked(target):
        ckpt.checkpoint(target)
    assert fake.state is S.RUNNING
    assert fake.ops() == [LOCK, CKPT, RESTORE, UNLOCK]


def test_locked_leaves_alone_what_the_body_resumed(fake: FakeDriver, target: int) -> None:
    with ckpt.locked(target):
        ckpt.unlock(target)
    assert fake.ops() == [LOCK, UNLOCK]


def test_the_context_managers_check_their_arguments_first(fake: FakeDriver, target: int) -> None:
    with pytest.raises(ValueError, match="not -1"), ckpt.locked(target, timeout=-1):
        pytest.fail("the body ran")
    with (
        pytest.raises(TypeError, match="gpu_map must be a mapping"),
        ckpt.suspended(target, gpu_map=[1]),
    ):
        pytest.fail("the body ran")
    assert fake.calls == []


def test_locked_propagates_a_refused_lock(fake: FakeDriver, target: int) -> None:
    fake.state = S.LOCKED
    with pytest.raises(CheckpointStateError, match="already locked"), ckpt.locked(target):
        pytest.fail("the body ran")
    assert fake.ops() == []


def test_suspended_checkpoints_then_restores(fake: FakeDriver, target: int) -> None:
    with ckpt.suspended(target, timeout=2):
        assert fake.state is S.CHECKPOINTED
    assert fake.state is S.RUNNING
    assert fake.ops() == [LOCK, CKPT, RESTORE, UNLOCK]
    assert [a.timeoutMs for n, a in fake.calls if n == LOCK] == [2000]


def test_suspended_resumes_when_the_body_raises(fake: FakeDriver, target: int) -> None:
    with pytest.raises(ZeroDivisionError), ckpt.suspended(target):
        _ = 1 / 0
    assert fake.state is S.RUNNING
    assert fake.ops() == [LOCK, CKPT, RESTORE, UNLOCK]


def test_suspended_unlocks_when_the_checkpoint_fails(fake: FakeDriver, target: int) -> None:
    fake.refuse[CKPT] = R.CUDA_ERROR_NOT_SUPPORTED
    with pytest.raises(cu.NotSupportedError, match="checkpoint of process"), ckpt.suspended(target):
        pytest.fail("the body ran")
    assert fake.state is S.RUNNING
    assert fake.ops() == [LOCK, CKPT, UNLOCK]


def test_suspended_restores_with_the_gpu_map(fake: FakeDriver, target: int) -> None:
    if not hasattr(drv.CUcheckpointRestoreArgs(), "gpuPairs"):
        pytest.skip("these cuda-bindings have no CUcheckpointRestoreArgs.gpuPairs")
    with ckpt.suspended(target, gpu_map={U1: str(U2)}):
        pass
    (args,) = [a for n, a in fake.calls if n == RESTORE]
    assert _pairs(args) == [(U1.bytes, U2.bytes)]


def test_a_context_manager_exit_skips_a_process_that_is_gone(fake: FakeDriver) -> None:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        with ckpt.locked(p.pid):
            p.kill()
            p.wait(30)
        assert fake.ops() == [LOCK]  # nothing left to unlock
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)


# -- on a GPU: a real child -----------------------------------------------------------------
SPAWN = multiprocessing.get_context("spawn")
WAIT_S = 120.0
BUF_BYTES = 64 << 20
LOCK_S = 30.0


@dataclass
class Child:
    pid: int
    conn: Any
    process: Any

    def ask(self, command: str) -> Any:
        self.conn.send(command)
        return _receive(self)


def _receive(child: Child) -> Any:
    if not child.conn.poll(WAIT_S):
        raise AssertionError(f"no answer from the child within {WAIT_S} s")
    msg = child.conn.recv()
    if msg[0] == "error":
        raise AssertionError(f"the child failed:\n{msg[1]}")
    return msg


@contextlib.contextmanager
def _holding_child(nbytes: int = BUF_BYTES) -> Iterator[Child]:
    """A spawned child holding ``nbytes`` of device memory; killed at the end."""
    mine, theirs = SPAWN.Pipe()
    p = SPAWN.Process(target=kids.holder, args=(theirs, nbytes))
    p.start()
    theirs.close()
    child = Child(p.pid, mine, p)
    try:
        msg = _receive(child)
        assert msg == ("ready", p.pid), msg
        yield child
        mine.send("stop")
        p.join(WAIT_S)
        assert p.exitcode == 0, p.exitcode
    finally:
        if p.is_alive():
            with contextlib.suppress(Exception):  # leave it running before it dies
                ckpt._resume(p.pid, None)
            p.kill()
            p.join(30)
        mine.close()


def _or_skip(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, skipping the test where the driver refuses checkpointing."""
    try:
        return fn(*args, **kwargs)
    except (cu.NotPermittedError, cu.NotSupportedError) as exc:
        pytest.skip(str(exc))


@pytest.mark.gpu
@pytest.mark.device_memory
def test_a_child_is_suspended_and_resumed_with_its_memory_and_stream() -> None:
    dev = cu.Device(0)
    with _holding_child() as child:
        pid = child.pid
        assert _or_skip(ckpt.state, pid) is S.RUNNING
        tid = _or_skip(ckpt.restore_thread_id, pid)
        free_running = dev.mem_info[0]  # (this process's context exists from here on)
        _or_skip(ckpt.lock, pid, timeout=LOCK_S)
        assert ckpt.state(pid) is S.LOCKED
        _or_skip(ckpt.checkpoint, pid)
        assert ckpt.state(pid) is S.CHECKPOINTED
        free_checkpointed = dev.mem_info[0]
        ckpt.restore(pid)
        assert ckpt.state(pid) is S.LOCKED
        free_restored = dev.mem_info[0]
        ckpt.unlock(pid)
        assert ckpt.state(pid) is S.RUNNING
        assert child.ask("verify") == ("verified", True, True)
        # The memory, checked once the child has checked its own: the checkpoint freed at
        # least its buffer (587 MiB measured on an H200 for this child), the restore took
        # it back.
        freed = free_checkpointed - free_running
        assert freed >= BUF_BYTES, (free_running, free_checkpointed)
        assert free_checkpointed - free_restored >= BUF_BYTES, (free_checkpointed, free_restored)
        # The restore thread is a thread of the child (what the stopped-thread check reads).
        assert os.path.isdir(f"/proc/{pid}/task/{tid}"), (pid, tid)


@pytest.mark.gpu
@pytest.mark.device_memory
def test_refused_transitions_and_the_context_managers_on_a_child() -> None:
    dev = cu.Device(0)
    with _holding_child() as child:
        pid = child.pid
        assert _or_skip(ckpt.state, pid) is S.RUNNING
        for op in (ckpt.checkpoint, ckpt.restore, ckpt.unlock):
            with pytest.raises(CheckpointStateError, match=f"process {pid}: it is RUNNING"):
                op(pid)
        # May this process checkpoint it at all? (Refusals skip.)
        _or_skip(ckpt.lock, pid, timeout=LOCK_S)
        _or_skip(ckpt.checkpoint, pid)
        ckpt.restore(pid)
        ckpt.unlock(pid)

        with ckpt.locked(pid, timeout=LOCK_S):
            assert ckpt.state(pid) is S.LOCKED
            with pytest.raises(CheckpointStateError, match="it is LOCKED, and lock needs"):
                ckpt.lock(pid)
            with pytest.raises(CheckpointStateError, match="restore needs it CHECKPOINTED"):
                ckpt.restore(pid)
        assert ckpt.state(pid) is S.RUNNING

        free_running = dev.mem_info[0]
        with ckpt.suspended(pid, timeout=LOCK_S):
            assert ckpt.state(pid) is S.CHECKPOINTED
            assert dev.mem_info[0] - free_running >= BUF_BYTES
            with pytest.raises(CheckpointStateError, match="unlock needs it LOCKED"):
                ckpt.unlock(pid)
        assert ckpt.state(pid) is S.RUNNING
        assert child.ask("verify") == ("verified", True, True)

        with pytest.raises(KeyError, match="body"), ckpt.suspended(pid, timeout=LOCK_S):
            raise KeyError("body")
        assert ckpt.state(pid) is S.RUNNING
        assert child.ask("verify") == ("verified", True, True)


@pytest.mark.gpu
def test_a_child_is_restored_onto_its_gpus_named_by_uuid() -> None:
    # Every GPU the child sees, each onto itself: the driver refused (INVALID_VALUE) a
    # map naming one of the two GPUs of a two-GPU machine.
    every = {f"GPU-{d.uuid}": d for d in cu.Device.all()}
    with _holding_child() as child:
        pid = child.pid
        assert _or_skip(ckpt.state, pid) is S.RUNNING
        _or_skip(ckpt.lock, pid, timeout=LOCK_S)
        _or_skip(ckpt.checkpoint, pid)
        try:
            ckpt.restore(pid, gpu_map=every)
        except cu.NotSupportedError as exc:  # bindings or driver without GPU pairs
            ckpt.restore(pid)
            ckpt.unlock(pid)
            assert child.ask("verify") == ("verified", True, True)
            pytest.skip(str(exc))
        assert ckpt.state(pid) is S.LOCKED
        ckpt.unlock(pid)
        assert child.ask("verify") == ("verified", True, True)
