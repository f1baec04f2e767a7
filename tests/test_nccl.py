"""cudriver.nccl: which rank a process is, the unique id over TCP, and NCCL on two GPUs.

The CPU tests run the TCP bootstrap between threads of this process on localhost, with
short deadlines. The GPU tests spawn one process per GPU (spawn context), each with a
deadline, and skip with the reason on a machine with fewer than two GPUs or without
nccl4py.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import socket
import sys
import threading
import time
from typing import Any

import numpy as np
import pytest

from cudriver import nccl as cnccl

from . import _nccl_children as kids
from ._support import free_port, nccl_ranks_unavailable_reason

SPAWN = multiprocessing.get_context("spawn")


def _ranks(n: int, port: int, **kw: Any) -> list[cnccl.Ranks]:
    return [cnccl.Ranks(r, n, r, "127.0.0.1", port, **kw) for r in range(n)]


def _share_all(ranks: list[cnccl.Ranks], payload: bytes, timeout: float = 10.0) -> dict[int, Any]:
    """Run share_bytes for each rank in its own thread; what each returned or raised."""
    got: dict[int, Any] = {}

    def one(r: cnccl.Ranks) -> None:
        try:
            got[r.rank] = cnccl.share_bytes(r, payload if r.rank == 0 else None, timeout=timeout)
        except Exception as exc:
            got[r.rank] = exc

    threads = [threading.Thread(target=one, args=(r,)) for r in reversed(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
        assert not t.is_alive(), "share_bytes ran past its deadline"
    return got


def _serve_in_thread(rank0: cnccl.Ranks, got: dict[int, Any]) -> threading.Thread:
    """Rank 0 serving b"id" on its own thread; what it returns goes to ``got[0]``."""
    t = threading.Thread(
        target=lambda: got.update({0: cnccl.share_bytes(rank0, b"id", timeout=10)})
    )
    t.start()
    return t


def _connect_when_listening(port: int) -> socket.socket:
    """A raw connection to rank 0 on ``port``, once it listens (within 5 s)."""
    deadline = time.monotonic() + 5
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            assert time.monotonic() < deadline, "rank 0 never listened"
            time.sleep(0.02)


# -- from_environment ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "launcher", "want"),
    [
        (
            {
                "RANK": "3",
                "WORLD_SIZE": "8",
                "LOCAL_RANK": "1",
                "MASTER_ADDR": "h",
                "MASTER_PORT": "7",
            },
            "torchrun",
            (3, 8, 1, "h", 7),
        ),
        (
            {
                "OMPI_COMM_WORLD_RANK": "5",
                "OMPI_COMM_WORLD_SIZE": "6",
                "OMPI_COMM_WORLD_LOCAL_RANK": "2",
                "MASTER_ADDR": "node0",
            },
            "Open MPI",
            (5, 6, 2, "node0", cnccl.DEFAULT_PORT),
        ),
        (
            {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0", "MASTER_ADDR": "a"},
            "MPICH",
            (1, 2, 0, "a", cnccl.DEFAULT_PORT),
        ),
        (
            {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0"},
            "Slurm",
            (0, 1, 0, None, None),
        ),
        ({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "x"}, "torchrun", (1, 2, 1, "x", 29500)),
    ],
)
def test_each_launcher_is_read(env: dict[str, str], launcher: str, want: tuple[Any, ...]) -> None:
    r = cnccl.from_environment(env)
    assert r.launcher == launcher
    assert (r.rank, r.world_size, r.local_rank, r.address, r.port) == want


def test_torchrun_wins_over_a_slurm_allocation_it_runs_in() -> None:
    env = {"RANK": "1", "WORLD_SIZE": "4", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}
    env["MASTER_ADDR"] = "h"
    assert cnccl.from_environment(env).launcher == "torchrun"


def test_no_launcher_names_what_it_looked_for() -> None:
    with pytest.raises(LookupError, match="RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK"):
        cnccl.from_environment({})


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"RANK": "one", "WORLD_SIZE": "2"}, "RANK='one' is not an integer"),
        ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "x"}, "MASTER_PORT"),
        ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}, r"rank must be in \[0, 2\)"),
        ({"RANK": "0", "WORLD_SIZE": "0"}, "world_size must be >= 1"),
        ({"RANK": "1", "WORLD_SIZE": "2"}, "need the address of rank 0's machine"),
        ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "70000"}, "port"),
    ],
)
def test_a_bad_environment_says_which_variable(env: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cnccl.from_environment(env)


def test_the_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name in {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}:
            monkeypatch.delenv(name)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert cnccl.from_environment() == cnccl.Ranks(0, 1, 0, None, None, "torchrun")


def test_ranks_refuse_what_is_not_an_int() -> None:
    with pytest.raises(TypeError, match="rank must be an int"):
        cnccl.Ranks(True, 2, 0, "h", 1)
    with pytest.raises(ValueError, match="local_rank must be >= 0"):
        cnccl.Ranks(0, 1, -1)
    with pytest.raises(TypeError, match="port must be an int, not str"):
        cnccl.Ranks(0, 2, 0, "h", "29500")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="address must be a str"):
        cnccl.Ranks(0, 2, 0, b"h", 1)  # type: ignore[arg-type]


def test_a_rank_that_leaves_before_reading_is_served_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cnccl, "_HELLO_WAIT_S", 0.5)
    port = free_port()
    r0, r1 = _ranks(2, port)
    got: dict[int, Any] = {}
    server = _serve_in_thread(r0, got)
    with _connect_when_listening(
        port
    ) as quitter:  # says it is rank 1, then goes without a word of thanks
        quitter.sendall(cnccl._HELLO.pack(cnccl._MAGIC, 1, 2))
    assert cnccl.share_bytes(r1, None, timeout=10) == b"id"  # not refused as served
    server.join(15)
    assert got == {0: b"id"}


# -- share_bytes -----------------------------------------------------------------------------


def test_rank_0_gives_its_bytes_to_every_rank() -> None:
    payload = bytes(range(128))
    got = _share_all(_ranks(4, free_port()), payload)
    assert got == {r: payload for r in range(4)}


def test_one_rank_needs_no_network() -> None:
    assert cnccl.share_bytes(cnccl.Ranks(0, 1), b"id", timeout=0.01) == b"id"


def test_the_payload_comes_from_rank_0_only() -> None:
    r0, r1 = _ranks(2, free_port())
    with pytest.raises(ValueError, match="rank 0 gives the payload"):
        cnccl.share_bytes(r0, None)
    with pytest.raises(ValueError, match="rank 0 gives the payload"):
        cnccl.share_bytes(r1, b"x")
    with pytest.raises(TypeError, match="payload must be bytes"):
        cnccl.share_bytes(r0, "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cudriver.nccl.Ranks"):
        cnccl.share_bytes((0, 2), b"x")  # type: ignore[arg-type]
    for bad in (0, -1, True, "5"):
        with pytest.raises(ValueError, match="timeout"):
            cnccl.share_bytes(r0, b"x", timeout=bad)  # type: ignore[arg-type]


def test_rank_0_names_the_ranks_that_never_came() -> None:
    r0 = _ranks(3, free_port())[0]
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"for ranks \[1, 2\], which did not connect"):
        cnccl.share_bytes(r0, b"x", timeout=0.5)
    assert time.monotonic() - t0 < 5


def test_a_port_in_use_says_so_on_rank_0() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        r0 = cnccl.Ranks(0, 2, 0, "127.0.0.1", busy.getsockname()[1])
        with pytest.raises(OSError, match="cannot listen on 127.0.0.1:.*MASTER_PORT"):
            cnccl.share_bytes(r0, b"x", timeout=2)


def test_ipv6_loopback_works_where_the_machine_has_it() -> None:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
            port = s.getsockname()[1]
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    ranks = [cnccl.Ranks(r, 2, r, "::1", port) for r in range(2)]
    assert _share_all(ranks, b"six") == {0: b"six", 1: b"six"}


def test_a_rank_that_cannot_reach_rank_0_says_where_it_looked() -> None:
    r1 = _ranks(2, free_port())[1]
    with pytest.raises(TimeoutError, match=r"rank 1 could not reach rank 0 at 127.0.0.1:\d+"):
        cnccl.share_bytes(r1, None, timeout=0.5)


def test_a_rank_of_another_job_is_refused_with_the_reason() -> None:
    port = free_port()
    r0 = cnccl.Ranks(0, 2, 0, "127.0.0.1", port)
    stranger = cnccl.Ranks(1, 3, 1, "127.0.0.1", port)  # says there are 3 ranks
    r1 = cnccl.Ranks(1, 2, 1, "127.0.0.1", port)
    got = _share_all([r0, stranger], b"id", timeout=3.0)
    assert isinstance(got[1], ValueError)
    assert "rank 0 has 2 ranks, rank 1 says 3" in str(got[1])
    assert isinstance(got[0], TimeoutError)  # rank 1 of its own job never came
    assert _share_all([r0, r1], b"id") == {0: b"id", 1: b"id"}


def test_a_rank_that_joins_twice_is_refused() -> None:
    port = free_port()
    r0, r1, r2 = _ranks(3, port)
    results: dict[str, Any] = {}

    def run(name: str, r: cnccl.Ranks, payload: bytes | None) -> None:
        results[name] = cnccl.share_bytes(r, payload, timeout=10)

    threads = [
        threading.Thread(target=run, args=("0", r0, b"id")),
        threading.Thread(target=run, args=("1", r1, None)),
    ]
    for t in threads:
        t.start()
    time.sleep(1.0)  # rank 1 connects within 0.1 s of rank 0 listening: it is served
    with pytest.raises(ValueError) as refused:  # and waits for rank 2: a second rank 1
        cnccl.share_bytes(r1, None, timeout=10)
    assert "rank 1 is not awaited (awaited: [2])" in str(refused.value)
    assert "1" not in results  # no rank goes on before every rank joined
    assert cnccl.share_bytes(r2, None, timeout=10) == b"id"
    for t in threads:
        t.join(15)
    assert results == {"0": b"id", "1": b"id"}


def test_a_rank_that_never_comes_stops_every_rank_with_its_name() -> None:
    # Ranks 0 and 1 would go on to NCCL's rendezvous, which has no deadline, and wait
    # there for rank 2 forever: both raise at the deadline instead, naming it.
    port = free_port()
    r0, r1, _r2 = _ranks(3, port)
    t0 = time.monotonic()
    got = _share_all([r0, r1], b"id", timeout=1.5)
    assert time.monotonic() - t0 < 10
    for rank in (0, 1):
        assert isinstance(got[rank], TimeoutError), got
        msg = str(got[rank])
        assert f"127.0.0.1:{port} for ranks [2], which did not connect" in msg, msg


def test_a_silent_or_foreign_connection_does_not_hold_rank_0_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cnccl, "_HELLO_WAIT_S", 0.3)
    port = free_port()
    ranks = _ranks(2, port)
    got: dict[int, Any] = {}
    server = _serve_in_thread(ranks[0], got)
    with (
        _connect_when_listening(port),  # silent: holds rank 0 up, says nothing
        socket.create_connection(("127.0.0.1", port), timeout=1) as foreign,
    ):
        foreign.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"\0" * 24)
        t0 = time.monotonic()
        assert cnccl.share_bytes(ranks[1], None, timeout=10) == b"id"
        assert time.monotonic() - t0 < 5
    server.join(15)
    assert got == {0: b"id"}


# -- without nccl4py ---------------------------------------------------------------------------


def test_the_module_imports_without_nccl4py_and_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nccl", None)  # as if nccl4py were not installed
    monkeypatch.setitem(sys.modules, "nccl.core", None)
    with pytest.raises(ImportError, match=r"pip install '\.\[nccl\]'"):
        cnccl.unique_id(cnccl.Ranks(0, 1))
    with pytest.raises(ImportError, match="nccl4py"):
        cnccl.communicator(cnccl.Ranks(0, 1))


# -- on two GPUs -------------------------------------------------------------------------------


@pytest.fixture
def two_ranks() -> list[cnccl.Ranks]:
    reason = nccl_ranks_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return _ranks(2, free_port())


def _collect(procs: list[Any], out: Any, expect: int, timeout: float) -> list[tuple[Any, ...]]:
    """Every message the ranks send until each said done (or failed), within ``timeout``."""
    msgs: list[tuple[Any, ...]] = []
    done = 0
    deadline = time.monotonic() + timeout
    try:
        while done < expect:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the ranks did not finish within {timeout} s: {msgs!r}")
            try:
                rank, what, value = out.get(timeout=left)
            except queue.Empty:
                continue  # the deadline check above fails the test
            if what == "error":
                raise AssertionError(f"rank {rank} failed:\n{value}")
            msgs.append((rank, what, value))
            done += what == "done"
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join(10)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    return msgs


@pytest.mark.gpu
def test_a_64_mib_all_reduce_over_two_processes_equals_numpy(
    two_ranks: list[cnccl.Ranks],
) -> None:
    out = SPAWN.Queue()
    procs = [SPAWN.Process(target=kids.allreduce, args=(r, 64, 10, out)) for r in two_ranks]
    for p in procs:
        p.start()
    msgs = _collect(procs, out, 2, timeout=kids.HANG_S + 15)
    count = 64 * kids.MIB // 4
    want = kids.inputs(0, count) + kids.inputs(1, count)
    results = {rank: v for rank, what, v in msgs if what == "allreduce"}
    assert sorted(results) == [0, 1]
    for rank, got in results.items():
        assert got.dtype == np.float32
        assert got.shape == (count,)
        assert np.array_equal(got, want), f"rank {rank}'s all-reduce differs from numpy"
    # The same collective captured into a cudriver graph and replayed 10 times: each
    # replay doubles x (two ranks with equal x).
    replayed = {rank: v for rank, what, v in msgs if what == "replayed"}
    assert sorted(replayed) == [0, 1]
    for rank, x in replayed.items():
        assert np.array_equal(x, np.arange(1024, dtype=np.float32) * 2**10), rank
    refused = {rank: v for rank, what, v in msgs if what == "refused"}
    assert sorted(refused) == [0, 1]
    for msg in refused.values():
        assert "held by graphs captured on <cudriver.Stream" in msg, msg


# -- the communicator --------------------------------------------------------------------------


class _FakeComm:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.rank = 3

    def allreduce(self, send: Any, recv: Any, op: Any, *, stream: Any = None) -> None:
        self.calls.append("allreduce")

    def finalize(self) -> None:
        self.calls.append("finalize")

    def destroy(self) -> None:
        self.calls.append("destroy")


def test_destroy_is_refused_while_a_graph_holds_a_collective(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ncclCommDestroy never returns while a graph holds one of its collectives.
    from cudriver._lifetime import capture

    class Session:
        def __init__(self) -> None:
            self.keep: list[Any] = []

        def add(self, objs: tuple[Any, ...]) -> None:
            self.keep.extend(objs)

    session = Session()
    monkeypatch.setattr(capture, "ACTIVE", {42: session})
    monkeypatch.setattr(capture, "capture_id", lambda h: 42 if int(h) == 0x5000 else None)
    fake = _FakeComm()
    comm = cnccl.Communicator(fake)
    assert comm.rank == 3 and comm.nccl is fake
    comm.allreduce(1, 2, 0, stream=0x6000)  # not capturing: nothing kept
    assert session.keep == []
    comm.allreduce(1, 2, 0, stream=0x5000)  # captured into the session's graph
    assert len(session.keep) == 1 and comm.holders() == ["20480"]
    with pytest.raises(RuntimeError, match=r"held by graphs captured on 20480: close those"):
        comm.destroy()
    assert "destroy" not in fake.calls
    session.keep.clear()  # the graph and its executable graphs went
    comm.destroy()
    assert fake.calls == ["allreduce", "allreduce", "destroy"]
    comm.finalize()  # methods without a stream pass through as they are
    assert fake.calls[-1] == "finalize"
