"""Objects that travel between processes through multiprocessing (cudriver._context._share).

The children run functions of tests/_share_children.py in spawned processes; every wait
has a deadline and every child is joined with a timeout, then killed.
"""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import os
import pickle
from collections.abc import Iterator
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import pytest

import cudriver as cu
from cudriver._context import _share
from cudriver._lifetime import _handle

from . import _share_children as kids

WAIT_S = 120.0
SPAWN = multiprocessing.get_context("spawn")
FAKE = 0x7F00_0000_0000


# -- no GPU -----------------------------------------------------------------------------
def test_plain_pickle_refuses_and_names_what_travels() -> None:
    for obj, name in [
        (cu.DeviceBuffer.from_handle(FAKE, 64), "DeviceBuffer"),
        (cu.Stream.from_handle(0x1230), "Stream"),
    ]:
        for dumps in (pickle.dumps, ForkingPickler.dumps):
            with pytest.raises(TypeError, match=f"cannot pickle a cudriver.{name}: ") as info:
                dumps(obj)
            assert "MemoryPool(ipc=True)" in str(info.value)
    with pytest.raises(TypeError, match="not an allocation of a MemoryPool"):
        pickle.dumps(cu.DeviceBuffer.from_handle(FAKE, 64))


@pytest.mark.parametrize("through", ["queue", "process-args"])
def test_a_descriptor_reaches_a_spawned_child(through: str) -> None:
    # The descriptor path itself, with a pipe: a Queue goes through the resource
    # sharer, Process arguments are handed to the child when it is spawned.
    r, w = os.pipe()
    os.write(w, b"across")
    os.close(w)
    out = SPAWN.Queue()
    if through == "queue":
        q = SPAWN.Queue()
        p = SPAWN.Process(target=_relay, args=(q, out))
        p.start()
        q.put(_Carrier(r))
    else:
        p = SPAWN.Process(target=_read, args=(_Carrier(r), out))
        p.start()
    try:
        assert out.get(timeout=WAIT_S) == b"across"
    finally:
        p.join(WAIT_S)
        if p.is_alive():
            p.kill()
    assert p.exitcode == 0


class _Carrier:
    """A stand-in for a shareable object: one descriptor, sent with send_fd."""

    def __init__(self, fd: int) -> None:
        self.fd = fd


class _Received:
    def __init__(self, wrapped: Any) -> None:
        self.fd = _share.receive_fd(wrapped)


def _reduce_carrier(c: _Carrier) -> tuple[Any, ...]:
    return (_Received, (_share.send_fd(c.fd),))


ForkingPickler.register(_Carrier, _reduce_carrier)


def _read(got: _Received, out: Any) -> None:
    with os.fdopen(got.fd, "rb") as f:
        out.put(f.read())


def _relay(q: Any, out: Any) -> None:
    _read(q.get(timeout=WAIT_S), out)


def test_a_device_travels_by_uuid_through_pickle_and_multiprocessing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pickled by ordinal, a Device named another GPU where CUDA_VISIBLE_DEVICES differs.
    import uuid

    from cudriver._context import device as _device

    def fake(ordinal: int) -> cu.Device:
        dev = object.__new__(cu.Device)
        dev._ordinal, dev._name, dev._attrs = ordinal, None, {}
        return dev

    ids = [uuid.UUID(int=0xA0 + i) for i in range(3)]
    sender = fake(0)
    # The receiver numbers the same GPUs differently (CUDA_VISIBLE_DEVICES=2,0).
    receiver = {0: fake(0), 1: fake(1)}
    seen = {id(sender): ids[0], id(receiver[0]): ids[2], id(receiver[1]): ids[0]}
    monkeypatch.setattr(cu.Device, "uuid", property(lambda d: seen[id(d)]))
    monkeypatch.setattr(cu.Device, "all", classmethod(lambda cls: list(receiver.values())))
    monkeypatch.setattr(cu.Device, "__new__", lambda cls, o=None: receiver[o])
    monkeypatch.setattr(_device, "_by_uuid", {})
    assert pickle.loads(pickle.dumps(sender)) is receiver[1]  # the sender's GPU
    assert pickle.loads(bytes(ForkingPickler.dumps(sender))) is receiver[1]
    assert cu.Device.from_uuid(f"GPU-{ids[0]}") is receiver[1]
    assert cu.Device.from_uuid(ids[2]) is receiver[0]
    blob = pickle.dumps(sender)
    del seen[id(receiver[1])]
    seen[id(receiver[1])] = ids[1]
    monkeypatch.setattr(_device, "_by_uuid", {})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,1")
    with pytest.raises(ValueError, match=rf"GPU-{ids[0]} is not visible.*'2,1'"):
        pickle.loads(blob)
    with pytest.raises(ValueError, match="not a device UUID"):
        cu.Device.from_uuid("GPU-nope")
    with pytest.raises(TypeError, match="uuid must be"):
        cu.Device.from_uuid(7)  # type: ignore[arg-type]


def test_tokens_name_pools_apart() -> None:
    class Pool:
        _token = None

    a, b = Pool(), Pool()
    assert _share.token(a) == _share.token(a) != _share.token(b)


class _Opened:
    """Stands for an object opened from a message: only its release state matters."""

    def __init__(self, released: list[int]) -> None:
        self._state = _handle._State(
            FAKE, released.append, "cuFake", "Fake", (), lambda: released.append(-1)
        )


def test_a_second_opening_waits_for_the_release_of_the_first() -> None:
    released: list[int] = []
    key = ("test", os.getpid())
    first = _Opened(released)
    _share.opened(key, first)
    assert _share.OPENED[key] is first._state
    # Dropped, with its release queued (as garbage collection queues it): the next
    # opening runs it first, then forgets the key.
    _handle.release_state(first._state, collected=True)
    _share.before_open(key, "thing")
    assert released == [FAKE, -1]  # the release, then the hook that was there before
    assert key not in _share.OPENED


def test_open_once_gives_what_is_open_and_opens_again_after_the_release() -> None:
    released: list[int] = []
    registry: dict[Any, Any] = {}
    key = ("test-once", os.getpid())

    class Thing(_Opened):
        closed = False

    made: list[Thing] = []

    def open_() -> Thing:
        made.append(Thing(released))
        return made[-1]

    with _share.LOCK:
        first, fresh = _share.open_once(registry, key, "thing", open_)
        assert fresh and first is made[0]
        again, fresh = _share.open_once(registry, key, "thing", open_)
        assert (again, fresh) == (first, False)
        first.closed = True
        _handle.release_state(first._state, collected=True)  # queued, not yet run
        second, fresh = _share.open_once(registry, key, "thing", open_)
    assert fresh and second is made[1] is not first
    assert released == [FAKE, -1]  # the first opening's release ran before the second
    assert _share.OPENED[key] is second._state
    _handle.release_state(second._state)
    assert key not in _share.OPENED


def test_a_second_opening_is_refused_while_the_first_is_in_use() -> None:
    released: list[int] = []
    key = ("test-leased", os.getpid())
    first = _Opened(released)
    _share.opened(key, first)
    lease = _handle.Lease(first._state, first)
    _handle.release_state(first._state)  # closed, but leased: the release waits
    with pytest.raises(RuntimeError, match="not released yet: something still uses it"):
        _share.before_open(key, "thing")
    assert released == []
    del lease
    _handle.drain()
    _share.before_open(key, "thing")
    assert released == [FAKE, -1]
    assert key not in _share.OPENED


# -- on the GPU -------------------------------------------------------------------------
@pytest.fixture
def ipc_pool(ctx: cu.Context) -> Iterator[cu.MemoryPool]:
    try:
        pool = cu.MemoryPool(ctx.device, ipc=True)
    except cu.NotSupportedError as exc:
        pytest.skip(f"this device has no IPC pools: {exc}")
    yield pool
    pool.close()


def _child(target: Any, *queues: Any) -> Any:
    p = SPAWN.Process(target=target, args=queues)
    p.start()
    return p


def _finish(p: Any) -> None:
    p.join(WAIT_S)
    if p.is_alive():
        p.kill()
        p.join(10)
        raise AssertionError(f"{p.name} did not finish")


@pytest.mark.gpu
def test_each_shareable_kind_is_written_by_a_child(
    ctx: cu.Context, stream: cu.Stream, ipc_pool: cu.MemoryPool
) -> None:
    inbox, outbox = SPAWN.Queue(), SPAWN.Queue()
    p = _child(kids.writer, inbox, outbox)
    try:
        inbox.put((ipc_pool, 0))  # the pool travels: the child opens it once
        assert outbox.get(timeout=WAIT_S) == ("pool", "MemoryPool", ctx.device.ordinal)
        typed = ipc_pool.allocate(4096, stream=stream).cast(np.uint32, (32, 32))
        raw = ipc_pool.allocate(1 << 20, stream=stream)
        vb = cu.VirtualBuffer(1 << 22, nbytes=1, handle_type="fd")
        stream.synchronize()
        cases: list[tuple[Any, int, str, str, tuple[int, ...], bool]] = [
            (typed, 7, "DeviceBuffer", "uint32", (32, 32), True),
            (raw, 8, "DeviceBuffer", "uint8", (1 << 20,), True),
            (raw[4096:8192], 9, "DeviceBuffer", "uint8", (4096,), True),  # a view
            (vb, 10, "VirtualBuffer", "uint8", (vb.nbytes,), False),
        ]
        for buf, value, kind, dtype, shape, pooled in cases:
            inbox.put((buf, value))
            ev, got_kind, nbytes, got_dtype, got_shape, same_pool = outbox.get(timeout=WAIT_S)
            assert isinstance(ev, cu.Event)
            ev.synchronize()  # the child's kernel has written: nothing else ordered it
            inbox.put("ack")
            assert (got_kind, nbytes, got_dtype, tuple(got_shape)) == (
                kind,
                buf.nbytes,
                dtype,
                shape,
            )
            assert same_pool is pooled  # the pool arrived once, the allocation holds it
            assert (buf.copy_to().view(np.uint32) == value).all(), kind
        assert (raw.copy_to().view(np.uint32)[:1024] == 8).all()  # the view wrote its part
        inbox.put(None)
        _finish(p)
        assert p.exitcode == 0
        for b in (typed, raw, vb):
            b.close()
    finally:
        if p.is_alive():
            p.kill()


@pytest.mark.gpu
def test_a_process_pool_maps_over_buffers(
    ctx: cu.Context, stream: cu.Stream, ipc_pool: cu.MemoryPool
) -> None:
    bufs = [ipc_pool.allocate(256 * 4, stream=stream) for _ in range(8)]
    stream.synchronize()
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=SPAWN) as ex:
        firsts = list(ex.map(kids.fill_and_read, bufs, range(100, 108), timeout=WAIT_S))
    assert firsts == list(range(100, 108))
    for b, v in zip(bufs, range(100, 108), strict=True):
        assert (b.copy_to().view(np.uint32) == v).all()
        b.close()


@pytest.mark.gpu
def test_200_rounds_leave_no_descriptor_or_opened_allocation(
    ctx: cu.Context, stream: cu.Stream, ipc_pool: cu.MemoryPool
) -> None:
    buf = ipc_pool.allocate(1 << 20, stream=stream)
    stream.synchronize()
    inbox, outbox = SPAWN.Queue(), SPAWN.Queue()
    p = _child(kids.echo, inbox, outbox)
    try:
        reports = []
        fds_after_10 = 0
        for i in range(1, 201):
            inbox.put(buf)
            r = outbox.get(timeout=WAIT_S)
            if isinstance(r, tuple):
                reports.append(r)
                if i == 10:
                    gc.collect()
                    fds_after_10 = len(os.listdir("/proc/self/fd"))
        inbox.put(None)
        _finish(p)
        gc.collect()
        (
            (n10, fds10, free10, pools10, bufs10, _),
            (n200, fds200, free200, pools200, bufs200, warned),
        ) = reports
        print(
            f"child after 10 and 200 rounds: fds {fds10} -> {fds200}, free device memory "
            f"{free10} -> {free200} (device-wide), open pools {pools10} -> {pools200}, "
            f"open allocations {bufs10} -> {bufs200}"
        )
        assert (n10, n200) == (10, 200)
        # Each round drops the buffer and opens it again: a release racing the next
        # opening would free the new one (a failed cuMemFree, or a fault in the write).
        assert warned == []
        assert fds200 <= fds10  # the child closes every descriptor it receives
        # Each opened allocation and pool is closed once dropped: none stays mapped.
        assert pools200 == bufs200 == 0
        assert len(os.listdir("/proc/self/fd")) <= fds_after_10
        assert len(_share.EXPORTED) <= 2  # weak: the pool and the buffer sent
    finally:
        if p.is_alive():
            p.kill()
    buf.close()


@pytest.mark.gpu
def test_what_cannot_travel_says_so(ctx: cu.Context, stream: cu.Stream, device: cu.Device) -> None:
    k = kids.kernel()
    g = cu.Graph()
    g.add_empty()
    refused = {
        "DeviceBuffer": cu.DeviceBuffer(64),
        "PinnedBuffer": cu.PinnedBuffer(64),
        "Stream": stream,
        "Graph": g,
        "GraphExec": g.instantiate(),
        "Kernel": k,
        "Module": k.module,
        "Context": ctx,
        "Event": cu.Event(),
        "MemoryPool": cu.MemoryPool(device),
        "VirtualBuffer": cu.VirtualBuffer(1 << 21, nbytes=1),
    }
    if device.attribute(cu.DeviceAttribute.MANAGED_MEMORY):
        refused["ManagedBuffer"] = cu.ManagedBuffer(64)
    try:
        for name, obj in refused.items():
            for dumps in (pickle.dumps, ForkingPickler.dumps):
                with pytest.raises(TypeError, match=f"cannot pickle a cudriver.{name}: "):
                    dumps(obj)
        with pytest.raises(TypeError, match="LaunchPlan"):
            pickle.dumps(k.prepare(1, 1, refused["DeviceBuffer"], np.uint32(0), np.uint64(0)))
        with pytest.raises(TypeError, match="borrowed pool"):
            ForkingPickler.dumps(cu.MemoryPool.default(device))
        # What travels, pickled outside multiprocessing: a clear refusal too.
        pool = cu.MemoryPool(device, ipc=True)
        with pytest.raises(TypeError, match="only through multiprocessing"):
            pickle.dumps(pool)
        pool.close()
    finally:
        for name, obj in refused.items():
            if name not in ("Stream", "Context", "Kernel", "Module"):  # not this test's
                obj.close()


@pytest.mark.gpu
def test_a_child_that_dies_holding_a_buffer_leaves_the_parent_working(
    ctx: cu.Context, stream: cu.Stream, ipc_pool: cu.MemoryPool
) -> None:
    buf = ipc_pool.allocate(4096, stream=stream)
    stream.synchronize()
    inbox, outbox = SPAWN.Queue(), SPAWN.Queue()
    p = _child(kids.die_holding, inbox, outbox)
    inbox.put(buf)
    assert outbox.get(timeout=WAIT_S) == 4096
    _finish(p)
    assert p.exitcode == 3
    kids.fill(buf, 5, stream)
    stream.synchronize()
    assert (buf.copy_to().view(np.uint32) == 5).all()
    buf.close()
    stream.synchronize()


@pytest.mark.gpu
def test_an_importer_outliving_its_exporter_does_not_crash(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    try:
        pool = cu.MemoryPool(ctx.device, ipc=True)
    except cu.NotSupportedError as exc:
        pytest.skip(f"this device has no IPC pools: {exc}")
    buf = pool.allocate(1 << 20, stream=stream)
    stream.synchronize()
    inbox, outbox = SPAWN.Queue(), SPAWN.Queue()
    p = _child(kids.outlive_exporter, inbox, outbox)
    try:
        inbox.put(buf)
        assert outbox.get(timeout=WAIT_S) == "opened"
        buf.close()  # the rule broken on purpose: freed while the importer holds it
        pool.close()
        stream.synchronize()
        inbox.put("freed")
        what = outbox.get(timeout=WAIT_S)
        print("after the exporter freed:", what)
        _finish(p)
        assert p.exitcode == 0, what  # an answer or a Python error, never a crash
    finally:
        if p.is_alive():
            p.kill()
    kids.fill(cu.DeviceBuffer(64), 1, stream)  # the parent goes on
    stream.synchronize()
