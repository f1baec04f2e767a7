from __future__ import annotations

import gc
import weakref

import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver._lifetime._coerce import raw_stream_handle, stream_handle

from ._support import RawBuffer
from .test_safety import run_isolated


class FakeForeign:
    """An object speaking the __cuda_stream__ protocol (as PyTorch/CuPy streams do)."""

    def __init__(self, h: int) -> None:
        self.h = h

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.h)


def test_stream_handle_conversions() -> None:
    # The one stream rule: calls that only enqueue work refuse None, naming the way
    # to say "the legacy default stream"; only the drop-in mirror reads None as NULL.
    with pytest.raises(TypeError, match=r"not None: .*cudriver\.Stream\.legacy\(\)"):
        stream_handle(None)
    assert int(raw_stream_handle(None)) == 0
    assert int(raw_stream_handle(5)) == 5
    assert int(stream_handle(0)) == 0  # an explicit NULL handle is the caller's choice
    assert int(stream_handle(5)) == 5
    h = drv.CUstream(7)
    assert stream_handle(h) is h
    assert int(stream_handle(FakeForeign(9))) == 9

    class TorchLike:
        cuda_stream = 11

    assert int(stream_handle(TorchLike())) == 11
    with pytest.raises(TypeError, match="expected a stream"):
        stream_handle("nope")
    with pytest.raises(TypeError, match="expected a stream"):
        stream_handle(True)

    class Bad:
        def __cuda_stream__(self) -> int:
            return 3

    with pytest.raises(TypeError, match="expected \\(version, handle\\)"):
        stream_handle(Bad())


def test_protocol_is_runtime_checkable() -> None:
    assert isinstance(FakeForeign(1), cu.SupportsCudaStream)


def test_enums_are_public() -> None:
    assert cu.SyncPolicy.BLOCKING_SYNC == drv.CUsynchronizationPolicy.CU_SYNC_POLICY_BLOCKING_SYNC
    assert cu.AccessProperty.PERSISTING == drv.CUaccessProperty.CU_ACCESS_PROPERTY_PERSISTING
    assert cu.MemAttach.SINGLE == drv.CUmemAttach_flags.CU_MEM_ATTACH_SINGLE
    assert repr(cu.SyncPolicy.SPIN).startswith("<SyncPolicy.SPIN")
    assert cu.SyncPolicy.__module__ == "cudriver"


@pytest.mark.parametrize(
    ("args", "error", "field"),
    [
        ((0, 2**64), ValueError, "num_bytes"),
        ((2**64, 0), ValueError, "base_ptr"),
        ((-1, 16), ValueError, "base_ptr"),
        ((2**63, 2**63), ValueError, "base_ptr \\+ num_bytes"),
        ((0, 16, 1.5), ValueError, "hit_ratio"),
        ((0, 16, float("nan")), ValueError, "hit_ratio"),
        ((0, 16, True), TypeError, "hit_ratio"),
        ((0, 16, "1"), TypeError, "hit_ratio"),
        ((0, 16, 0.5, 7), ValueError, "hit_prop"),
        ((0, 16, 0.5, 1, 2.0), TypeError, "miss_prop"),
        (("0", 16), TypeError, "base_ptr"),
        ((0, 16.0), TypeError, "num_bytes"),
        ((0, False), TypeError, "num_bytes"),
    ],
)
def test_access_policy_window_refuses_bad_fields_when_made(
    args: tuple[object, ...], error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=field):
        cu.AccessPolicyWindow(*args)  # type: ignore[arg-type]


def test_access_policy_window_normalises_its_fields() -> None:
    prop = drv.CUaccessProperty.CU_ACCESS_PROPERTY_NORMAL
    w = cu.AccessPolicyWindow(4096, 2**64 - 4097, 1, prop, 1)  # type: ignore[arg-type]
    assert (w.base_ptr, w.num_bytes, w.hit_ratio) == (4096, 2**64 - 4097, 1.0)
    assert type(w.hit_ratio) is float
    assert w.hit_prop is cu.AccessProperty.NORMAL
    assert w.miss_prop is cu.AccessProperty.STREAMING


@pytest.mark.gpu
class TestStreamGPU:
    def test_create_and_properties(self, ctx: cu.Context) -> None:
        s = cu.Stream()
        assert not s.non_blocking  # blocking, like cuStreamCreate(0)
        assert cu.Stream(non_blocking=True).non_blocking
        assert s.context == ctx
        assert s.device == ctx.device
        other = cu.Stream()
        assert isinstance(s.id, int)
        assert s.id != other.id  # unique per stream
        assert cu.Stream.from_handle(s.handle).id == s.id
        other.close()
        assert s.query() is True
        s.synchronize()
        assert s.__cuda_stream__() == (0, int(s))
        assert "owned" in repr(s)
        s.close()
        assert s.closed

    def test_blocking_and_priority(self, ctx: cu.Context) -> None:
        _least, greatest = ctx.stream_priority_range
        s = cu.Stream(non_blocking=False, priority=greatest)
        assert not s.non_blocking
        assert s.priority == greatest
        s.close()
        with pytest.raises(ValueError, match="outside this context's range"):
            cu.Stream(priority=greatest - 100)
        with pytest.raises(TypeError, match="priority must be an int"):
            cu.Stream(priority=1.5)  # type: ignore[arg-type]

    def test_closed_stream_raises(self, ctx: cu.Context) -> None:
        s = cu.Stream()
        s.close()
        for call in (s.synchronize, s.query, s.record, lambda: s.wait(cu.Event())):
            with pytest.raises(cu.ClosedError, match="Stream is closed"):
                call()
        with pytest.raises(cu.ClosedError):
            s.begin_capture()
        with pytest.raises(cu.ClosedError):
            stream_handle(s)
        assert repr(s) == "<cudriver.Stream closed>"

    def test_keeps_context_alive(self, device: cu.Device) -> None:
        ctx = cu.Context.create(device)
        ref = weakref.ref(ctx)
        s = cu.Stream(context=ctx)
        del ctx
        gc.collect()
        assert ref() is not None
        s.synchronize()
        del s
        gc.collect()
        # The stream's release waited for a cudriver call on an ordinary thread.
        device.primary_context().synchronize()
        assert ref() is None

    def test_from_handle_borrowed(self, stream: cu.Stream) -> None:
        b = cu.Stream.from_handle(stream.handle)
        assert b == stream
        assert not b.owned
        b.close()
        assert stream.query()  # the borrowed close destroyed nothing
        f = cu.Stream.from_handle(FakeForeign(int(stream)))
        assert f == stream
        assert f.context == stream.context
        with pytest.raises(TypeError, match="not None"):
            cu.Stream.from_handle(None)

    def test_legacy_and_per_thread(self, ctx: cu.Context) -> None:
        leg = cu.Stream.legacy()
        pts = cu.Stream.per_thread()
        assert not leg.owned
        assert not pts.owned
        leg.synchronize()
        pts.synchronize()
        assert leg.query()
        assert "legacy" in repr(leg)
        with pytest.raises(cu.StreamCaptureError, match="legacy default stream cannot be captured"):
            leg.begin_capture()

    def test_record_wait_event(self, ctx: cu.Context) -> None:
        a, b = cu.Stream(), cu.Stream()
        ev = a.record()
        assert isinstance(ev, cu.Event)
        assert not ev.timing
        b.wait(ev)
        b.wait(a)  # a stream: waits for its work so far
        b.synchronize()
        ev2 = cu.Event()
        assert a.record(ev2) is ev2
        with pytest.raises(TypeError, match="cudriver.Event"):
            a.record("x")  # type: ignore[arg-type]
        a.close()
        b.close()

    def test_sync_policy_attribute(self, stream: cu.Stream) -> None:
        stream.sync_policy = cu.SyncPolicy.BLOCKING_SYNC
        assert stream.sync_policy is cu.SyncPolicy.BLOCKING_SYNC
        stream.sync_policy = cu.SyncPolicy.SPIN
        assert stream.sync_policy is cu.SyncPolicy.SPIN
        other = cu.Stream()
        other.copy_attributes_from(stream)
        assert other.sync_policy is cu.SyncPolicy.SPIN
        other.close()

    def test_access_policy_window(self, stream: cu.Stream) -> None:
        buf = RawBuffer(1 << 20)
        try:
            w = cu.AccessPolicyWindow(buf.ptr, 1 << 16, 0.5)
            stream.access_policy_window = w
            got = stream.access_policy_window
            assert got.base_ptr == buf.ptr
            assert got.num_bytes == 1 << 16
            assert got.hit_prop is cu.AccessProperty.PERSISTING
            stream.access_policy_window = None
            assert stream.access_policy_window.num_bytes == 0
            with pytest.raises(ValueError, match="hit_ratio"):
                stream.access_policy_window = cu.AccessPolicyWindow(buf.ptr, 16, 2.0)
        finally:
            stream.synchronize()
            buf.close()

    def test_raw_calls_accept_stream(self, stream: cu.Stream) -> None:
        assert cu.driver.cuStreamQuery(stream) is None
        assert drv.cuStreamSynchronize(stream)[0] == drv.CUresult.CUDA_SUCCESS

    def test_attach_memory_validation(self, stream: cu.Stream) -> None:
        with pytest.raises(ValueError, match="non-negative"):
            stream.attach_memory(0, -1)
        with pytest.raises(TypeError, match="MemAttach"):
            stream.attach_memory(0, attach=True)
        with pytest.raises(ValueError, match="MemAttach"):
            stream.attach_memory(0, attach=3)
        buf = cu.ManagedBuffer(4096)
        try:
            stream.attach_memory(buf, attach=cu.MemAttach.SINGLE)
            stream.synchronize()
            stream.attach_memory(buf.ptr, buf.nbytes, attach=cu.MemAttach.GLOBAL)
            with pytest.warns(DeprecationWarning, match=r"attach_memory"):
                stream.attach_mem_async(int(buf.ptr), 0, cu.MemAttach.SINGLE)
            stream.synchronize()
        finally:
            buf.close()

    def test_enqueue_only_calls_refuse_none(self, stream: cu.Stream) -> None:
        # The stream rule: each names Stream.legacy() for those who mean it.
        legacy = r"Stream\.legacy\(\)"
        ev = cu.Event()
        with pytest.raises(TypeError, match=legacy):
            ev.record(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=legacy):
            stream.wait(None)
        with pytest.raises(TypeError, match=legacy):
            stream.copy_attributes_from(None)
        with stream.capture() as g:
            pass
        exe = g.instantiate()
        with pytest.raises(TypeError, match=legacy):
            exe.launch(None)
        with pytest.raises(TypeError, match=legacy):
            exe.upload(None)
        ev.close()


@pytest.mark.gpu
def test_the_legacy_stream_when_named() -> None:
    # What None used to mean, said explicitly. In a process of its own: the legacy
    # stream waits for every blocking stream of the context, whatever other tests left.
    run_isolated(
        """
        make_current()
        (fill,) = kernels("fill")
        legacy = cu.Stream.legacy()
        buf = cu.DeviceBuffer(256)
        fill.launch(legacy, 1, 64, buf, np.uint32(3), 64)
        fill.prepare(1, 64, buf, np.uint32(4), 64).launch(legacy)
        ev = cu.Event().record(legacy)
        ev.synchronize()
        assert (buf.copy_to().view(np.uint32) == 4).all()
        s = cu.Stream()
        with s.capture() as g:
            fill.launch(s, 1, 64, buf, np.uint32(5), 64)
        exe = g.instantiate()
        exe.upload(legacy)
        exe.launch(legacy)
        legacy.synchronize()
        assert (buf.copy_to().view(np.uint32) == 5).all()
        print("OK")
        """,
        timeout=120,
    )
