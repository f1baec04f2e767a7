"""Stream memory operations: validation without a GPU, signalling and gating with one."""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver import (
    MAX_BATCH_MEM_OPS,
    DeviceAttribute,
    MemOp,
    MemOpType,
    NotSupportedError,
    WaitCondition,
)
from cudriver._work.memops import _address, _check_ops, _value

from ._support import Mapped, RawBuffer, blocked, until

# -- without a GPU ---------------------------------------------------------------------


def test_enums_match_the_driver() -> None:
    for c in WaitCondition:
        assert int(c) == int(getattr(drv.CUstreamWaitValue_flags, f"CU_STREAM_WAIT_VALUE_{c.name}"))
    for t in MemOpType:
        assert int(t) == int(getattr(drv.CUstreamBatchMemOpType, f"CU_STREAM_MEM_OP_{t.name}"))
    assert WaitCondition.__module__ == "cudriver"
    assert MemOpType.__module__ == "cudriver"
    assert MemOp.__module__ == "cudriver"
    assert MAX_BATCH_MEM_OPS == 255


@pytest.mark.parametrize(
    ("bits", "good", "bad"),
    [
        (32, [0, 1, 2**32 - 1, np.uint32(7), np.int64(2**31)], [-1, 2**32, 2**40]),
        (64, [0, 2**32, 2**64 - 1, np.uint64(2**63)], [-1, 2**64]),
    ],
)
def test_value_must_fit_the_width(bits: int, good: list[Any], bad: list[int]) -> None:
    for v in good:
        assert _value(v, bits) == int(v)
    for v in bad:
        with pytest.raises(ValueError, match=f"unsigned {bits}-bit"):
            _value(v, bits)


@pytest.mark.parametrize("v", [True, 1.0, "1", None])
def test_value_must_be_an_int(v: Any) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        _value(v, 32)


def test_address_alignment() -> None:
    assert _address(0x1004, 4) == (0x1004, None)
    assert _address(0x1008, 8) == (0x1008, None)
    with pytest.raises(ValueError, match="not 4-byte aligned"):
        _address(0x1002, 4)
    with pytest.raises(ValueError, match="not 8-byte aligned"):
        _address(0x1004, 8)
    with pytest.raises(ValueError, match="NULL"):
        _address(0, 4)
    with pytest.raises(ValueError, match="out of range"):
        _address(2**64, 8)
    with pytest.raises(TypeError, match="bool"):
        _address(True, 4)


def test_address_forms() -> None:
    assert _address(drv.CUdeviceptr(0x2000), 8) == (0x2000, None)
    assert _address(np.uint64(0x2000), 8) == (0x2000, None)
    dev = SimpleNamespace(ptr=0x10000, nbytes=64)
    assert _address(dev, 8) == (0x10000, dev)
    assert _address((dev, 56), 8) == (0x10038, dev)
    assert _address((dev, 60), 4) == (0x1003C, dev)
    # a pinned buffer: the device address, not the host one
    pin = SimpleNamespace(ptr=0x7F0000, device_ptr=drv.CUdeviceptr(0x20000), nbytes=16)
    assert _address(pin, 4) == (0x20000, pin)
    assert _address((pin, 12), 4) == (0x2000C, pin)
    arr = SimpleNamespace(
        __cuda_array_interface__={"data": (0x30000, False), "shape": (4,)}, nbytes=16
    )
    assert _address((arr, 8), 8) == (0x30008, arr)
    # a bare pointer with an offset: no size to check against
    assert _address((0x40000, 1 << 20), 4) == (0x40000 + (1 << 20), None)


def test_address_offsets_checked_against_the_buffer() -> None:
    dev = SimpleNamespace(ptr=0x10000, nbytes=64)
    with pytest.raises(ValueError, match="beyond the end of the 64-byte buffer"):
        _address((dev, 64), 4)
    with pytest.raises(ValueError, match="beyond the end"):
        _address((dev, 60), 8)
    with pytest.raises(ValueError, match=">= 0"):
        _address((dev, -4), 4)
    with pytest.raises(ValueError, match="not 4-byte aligned"):
        _address((dev, 2), 4)
    with pytest.raises(ValueError, match="smaller than the 8-byte value"):
        _address(SimpleNamespace(ptr=0x10000, nbytes=4), 8)
    with pytest.raises(TypeError, match=r"\(buffer, byte_offset\)"):
        _address((dev, 0, 4), 4)
    with pytest.raises(TypeError, match="byte offset must be an int"):
        _address((dev, 4.0), 4)


def test_address_rejects_what_is_no_device_memory() -> None:
    with pytest.raises(ValueError, match="device-mapped"):
        _address(SimpleNamespace(ptr=0x7F0000, device_ptr=None, nbytes=16), 4)
    with pytest.raises(TypeError, match="not a device address"):
        _address(np.zeros(4, np.uint32), 4)
    with pytest.raises(TypeError, match="not a device address"):
        _address("0x1000", 4)
    with pytest.raises(TypeError, match="pointer is not an int"):
        _address(SimpleNamespace(ptr="x", nbytes=4), 4)


def test_memop_write_and_wait_params() -> None:
    buf = SimpleNamespace(ptr=0x10000, nbytes=64)
    w = MemOp.write32((buf, 4), 0xDEADBEEF)
    assert (w.kind, w.address, w.value, w.flags) == (
        MemOpType.WRITE_VALUE_32,
        0x10004,
        0xDEADBEEF,
        0,
    )
    assert w.condition is None
    p = w.params.writeValue
    assert int(w.params.operation) == int(
        drv.CUstreamBatchMemOpType.CU_STREAM_MEM_OP_WRITE_VALUE_32
    )
    assert (int(p.address), int(p.value), int(p.flags)) == (0x10004, 0xDEADBEEF, 0)

    w64 = MemOp.write64((buf, 8), 2**64 - 1, no_memory_barrier=True)
    assert w64.kind is MemOpType.WRITE_VALUE_64
    assert int(w64.params.writeValue.value64) == 2**64 - 1
    nb = int(drv.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
    assert w64.flags == nb
    assert int(w64.params.writeValue.flags) == nb

    q = MemOp.wait32(buf, 3, WaitCondition.AND)
    assert (q.kind, q.address, q.value, q.condition) == (
        MemOpType.WAIT_VALUE_32,
        0x10000,
        3,
        WaitCondition.AND,
    )
    assert int(q.params.waitValue.flags) == int(WaitCondition.AND)
    assert int(q.params.waitValue.value) == 3

    flush = int(drv.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_FLUSH)
    q64 = MemOp.wait64(
        (buf, 16), 2**40, drv.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_EQ, flush=True
    )
    assert q64.condition is WaitCondition.EQ
    assert q64.flags == int(WaitCondition.EQ) | flush
    assert int(q64.params.waitValue.value64) == 2**40
    assert int(q64.params.operation) == int(MemOpType.WAIT_VALUE_64)

    assert MemOp.flush().kind is MemOpType.FLUSH_REMOTE_WRITES
    assert MemOp.flush().address is None
    b = MemOp.barrier(gpu_scope=True)
    assert b.kind is MemOpType.BARRIER
    gpu = int(drv.CUstreamMemoryBarrier_flags.CU_STREAM_MEMORY_BARRIER_TYPE_GPU)
    assert int(b.params.memoryBarrier.flags) == gpu
    assert MemOp.barrier().flags == int(
        drv.CUstreamMemoryBarrier_flags.CU_STREAM_MEMORY_BARRIER_TYPE_SYS
    )


def test_memop_features_needed() -> None:
    assert MemOp.write32(0x1000, 1)._needs == 0
    assert MemOp.wait32(0x1000, 1, WaitCondition.GEQ)._needs == 0
    assert MemOp.write64(0x1000, 1)._needs == 1
    assert MemOp.wait32(0x1000, 1, WaitCondition.NOR)._needs == 2
    assert MemOp.wait32(0x1000, 1, flush=True)._needs == 4
    assert MemOp.wait64(0x1000, 1, WaitCondition.NOR, flush=True)._needs == 7
    assert MemOp.flush()._needs == 4
    assert MemOp.barrier()._needs == 0


def test_memop_validates_at_construction() -> None:
    with pytest.raises(ValueError, match="unsigned 32-bit"):
        MemOp.write32(0x1000, 2**32)
    with pytest.raises(ValueError, match="not 8-byte aligned"):
        MemOp.wait64(0x1004, 1)
    with pytest.raises(ValueError, match="not a WaitCondition"):
        MemOp.wait32(0x1000, 1, int(drv.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_FLUSH))
    with pytest.raises(ValueError, match="not a WaitCondition"):
        MemOp.wait32(0x1000, 1, 4)
    with pytest.raises(TypeError, match="WaitCondition"):
        MemOp.wait32(0x1000, 1, "EQ")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="use MemOp.write32"):
        MemOp()


def test_memop_value_semantics() -> None:
    a = MemOp.wait32(0x1000, 1, WaitCondition.EQ)
    assert a == MemOp.wait32(0x1000, 1, WaitCondition.EQ)
    assert hash(a) == hash(MemOp.wait32(0x1000, 1, WaitCondition.EQ))
    assert a != MemOp.wait32(0x1000, 1, WaitCondition.GEQ)
    assert a != MemOp.write32(0x1000, 1)
    assert repr(a) == "MemOp.wait32(0x1000, 1, WaitCondition.EQ)"
    assert repr(MemOp.write64(0x2000, 5, no_memory_barrier=True)) == (
        "MemOp.write64(0x2000, 5, no_memory_barrier=True)"
    )
    assert repr(MemOp.barrier()) == "MemOp.barrier(gpu_scope=False)"
    with pytest.raises(TypeError, match="pickled"):
        pickle.dumps(a)


def test_batch_size_limits() -> None:
    op = MemOp.write32(0x1000, 1)
    assert len(_check_ops([op] * MAX_BATCH_MEM_OPS)) == MAX_BATCH_MEM_OPS
    assert _check_ops(iter([op, op])) == [op, op]
    with pytest.raises(ValueError, match="at most 255"):
        _check_ops([op] * (MAX_BATCH_MEM_OPS + 1))
    with pytest.raises(ValueError, match="at least one"):
        _check_ops([])
    with pytest.raises(TypeError, match="MemOp objects, not int"):
        _check_ops([op, 5])


def test_stream_methods_validate_before_the_driver(fake_stream: cu.Stream) -> None:
    s = fake_stream
    with pytest.raises(ValueError, match="aligned"):
        s.write_value32(0x1002, 1)
    with pytest.raises(ValueError, match="unsigned 32-bit"):
        s.write_value32(0x1000, -1)
    with pytest.raises(ValueError, match="unsigned 64-bit"):
        s.write_value64(0x1000, 2**64)
    with pytest.raises(ValueError, match="aligned"):
        s.wait_value64(0x1004, 1)
    with pytest.raises(ValueError, match="beyond the end"):
        s.wait_value32((SimpleNamespace(ptr=0x1000, nbytes=8), 8), 1)
    with pytest.raises(ValueError, match="not a WaitCondition"):
        s.wait_value32(0x1000, 1, 7)
    with pytest.raises(ValueError, match="at least one"):
        s.batch_mem_ops([])
    with pytest.raises(ValueError, match="at most 255"):
        s.batch_mem_ops([MemOp.write32(0x1000, 1)] * 256)
    s.close()
    with pytest.raises(cu.ClosedError, match="Stream is closed"):
        s.write_value32(0x1002, 1)
    with pytest.raises(cu.ClosedError):
        s.wait_value64(0x1000, 1)
    with pytest.raises(cu.ClosedError):
        s.batch_mem_ops([MemOp.write32(0x1000, 1)])


# -- with a GPU: raw driver memory (cudriver._memory.memory is not used here) -----------------
# The `mapped` fixture (conftest.py) is 4 KiB of device-mapped pinned memory.


@pytest.mark.gpu
def test_wait_value32_gates_the_stream_until_the_host_writes(
    stream: cu.Stream, mapped: Mapped
) -> None:
    ran: list[str] = []
    stream.wait_value32((mapped, 0), 1, WaitCondition.EQ)
    stream.write_value32((mapped, 4), 42)
    stream.launch_host_func(ran.append, "behind the wait")
    with blocked(stream, mapped.open):
        assert mapped.u32[1] == 0
        assert ran == []
    stream.synchronize()
    assert mapped.u32[1] == 42
    assert ran == ["behind the wait"]


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("cond", "value", "blocking", "releasing"),
    [
        (WaitCondition.GEQ, 5, 4, 7),
        (WaitCondition.EQ, 3, 2, 3),
        (WaitCondition.AND, 0b100, 0b011, 0b110),
        (WaitCondition.NOR, 0xFFFFFFF0, 0xF, 0xE),
    ],
)
def test_wait_conditions(
    stream: cu.Stream,
    mapped: Mapped,
    device: cu.Device,
    cond: WaitCondition,
    value: int,
    blocking: int,
    releasing: int,
) -> None:
    if cond is WaitCondition.NOR and not device.attribute(
        DeviceAttribute.CAN_USE_STREAM_WAIT_VALUE_NOR
    ):
        with pytest.raises(NotSupportedError, match="CAN_USE_STREAM_WAIT_VALUE_NOR"):
            stream.wait_value32(mapped, value, cond)
        return
    mapped.u32[0] = blocking
    stream.wait_value32(mapped, value, cond)
    stream.write_value32((mapped, 4), 1)
    with blocked(stream, lambda: mapped.open(releasing)):
        pass  # held by `blocking`, released by `releasing`
    assert mapped.u32[1] == 1


@pytest.mark.gpu
def test_write_value32_is_seen_by_the_host(stream: cu.Stream, mapped: Mapped) -> None:
    stream.write_value32(mapped.device_ptr + 4, 0xFEEDF00D)
    stream.write_value32(drv.CUdeviceptr(mapped.device_ptr + 8), 7)
    stream.write_value32((mapped, 12), 9)
    assert until(lambda: mapped.u32[1:4].tolist() == [0xFEEDF00D, 7, 9])
    stream.synchronize()


@pytest.mark.gpu
def test_64_bit_write_and_wait(stream: cu.Stream, mapped: Mapped, device: cu.Device) -> None:
    if not device.attribute(DeviceAttribute.CAN_USE_64_BIT_STREAM_MEM_OPS):
        with pytest.raises(NotSupportedError, match="CAN_USE_64_BIT_STREAM_MEM_OPS"):
            stream.write_value64((mapped, 16), 1)
        return
    stream.write_value64((mapped, 16), 2**63 + 5)
    stream.wait_value64((mapped, 16), 2**63 + 5, WaitCondition.EQ)
    stream.write_value32((mapped, 24), 1)
    assert until(lambda: mapped.u32[6] == 1)
    assert mapped.u64(2) == 2**63 + 5
    stream.synchronize()


@pytest.mark.gpu
def test_no_memory_barrier_flag(stream: cu.Stream, mapped: Mapped) -> None:
    # Documented as unsupported by the CUDA 12+ (v2) memop API: either the driver takes
    # it and the write lands, or the refusal is a NotSupportedError saying why.
    refused: list[str] = []
    try:
        stream.write_value32((mapped, 4), 3, no_memory_barrier=True)
    except NotSupportedError as exc:
        refused.append(str(exc))
    if refused:
        assert "NO_MEMORY_BARRIER" in refused[0]
        with pytest.raises(NotSupportedError, match="NO_MEMORY_BARRIER"):
            stream.batch_mem_ops([MemOp.write32((mapped, 4), 3, no_memory_barrier=True)])
    else:
        stream.synchronize()
        assert mapped.u32[1] == 3
    stream.synchronize()  # the stream is usable either way


@pytest.mark.gpu
def test_two_streams_ordered_only_through_device_memory(
    ctx: cu.Context, stream: cu.Stream, mapped: Mapped
) -> None:
    other = cu.Stream(context=ctx)
    dev = RawBuffer(16)
    try:
        stream.wait_value32(dev, 1, WaitCondition.EQ)  # waits for `other`
        stream.write_value32((mapped, 4), 7)
        other.wait_value32(mapped, 1, WaitCondition.EQ)  # waits for the host
        other.write_value32(dev, 1)
        with blocked(stream, mapped.open):
            assert not other.query()
            assert mapped.u32[1] == 0
        assert mapped.u32[1] == 7
        other.synchronize()
    finally:
        mapped.open()
        other.synchronize()
        stream.synchronize()
        other.close()
        dev.close()


@pytest.mark.gpu
def test_flush_is_checked_against_the_device(
    stream: cu.Stream, mapped: Mapped, device: cu.Device
) -> None:
    if device.attribute(DeviceAttribute.CAN_FLUSH_REMOTE_WRITES):
        mapped.u32[0] = 1
        stream.wait_value32(mapped, 1, flush=True)
        stream.batch_mem_ops([MemOp.flush()])
        stream.synchronize()
    else:
        with pytest.raises(NotSupportedError, match="CAN_FLUSH_REMOTE_WRITES"):
            stream.wait_value32(mapped, 1, flush=True)
        with pytest.raises(NotSupportedError, match="CAN_FLUSH_REMOTE_WRITES"):
            stream.batch_mem_ops([MemOp.write32(mapped, 1), MemOp.flush()])
    assert stream.query()


@pytest.mark.gpu
def test_batch_of_waits_and_writes(stream: cu.Stream, mapped: Mapped) -> None:
    ops = [
        MemOp.wait32(mapped, 1, WaitCondition.EQ),
        MemOp.write32((mapped, 4), 5),
        MemOp.barrier(),
        MemOp.wait32((mapped, 4), 5, WaitCondition.GEQ),
    ]
    ops.append(MemOp.write32((mapped, 16), 9))
    stream.batch_mem_ops(ops)
    with blocked(stream, mapped.open):
        assert mapped.u32[1] == 0
    assert mapped.u32[1] == 5
    assert mapped.u32[4] == 9


@pytest.mark.gpu
def test_batch_with_64_bit_ops(stream: cu.Stream, mapped: Mapped, device: cu.Device) -> None:
    ops = [
        MemOp.write64((mapped, 8), 2**40 + 3),
        MemOp.wait64((mapped, 8), 2**40, WaitCondition.GEQ),
        MemOp.write32((mapped, 16), 1),
    ]
    if not device.attribute(DeviceAttribute.CAN_USE_64_BIT_STREAM_MEM_OPS):
        with pytest.raises(NotSupportedError, match="CAN_USE_64_BIT_STREAM_MEM_OPS"):
            stream.batch_mem_ops(ops)
        return
    stream.batch_mem_ops(ops)
    stream.synchronize()
    assert mapped.u64(1) == 2**40 + 3
    assert mapped.u32[4] == 1


@pytest.mark.gpu
def test_largest_batch(stream: cu.Stream, mapped: Mapped) -> None:
    ops = [MemOp.write32((mapped, 4 * i), i + 1) for i in range(MAX_BATCH_MEM_OPS)]
    stream.batch_mem_ops(ops)
    stream.synchronize()
    assert mapped.u32[:MAX_BATCH_MEM_OPS].tolist() == list(range(1, MAX_BATCH_MEM_OPS + 1))


@pytest.mark.gpu
def test_memops_captured_and_replayed(stream: cu.Stream, mapped: Mapped) -> None:
    gate, out, out2 = (mapped, 0), (mapped, 4), (mapped, 8)
    with stream.capture() as g:
        stream.wait_value32(gate, 1, WaitCondition.EQ)
        stream.batch_mem_ops([MemOp.write32(out, 5), MemOp.write32(gate, 0)])
        stream.write_value32(out2, 9)
    assert any(o is mapped for o in g._keep)  # the graph keeps the buffer alive
    exe = g.instantiate()
    try:
        for _ in range(3):
            mapped.u32[1:3] = 0
            exe.launch(stream)
            with blocked(stream, mapped.open):
                assert mapped.u32[1] == 0
            assert mapped.u32[:3].tolist() == [0, 5, 9]  # the graph closed the gate again
    finally:
        mapped.open()
        stream.synchronize()
        exe.close()
        g.close()


@pytest.mark.gpu
def test_with_cudriver_memory_buffers(ctx: cu.Context, stream: cu.Stream) -> None:
    from cudriver import DeviceBuffer, PinnedBuffer

    pin = PinnedBuffer(64, mapped=True, context=ctx)
    dev = DeviceBuffer(64, context=ctx)
    host = pin.array(np.uint32)
    host[:] = 0
    dev.fill(0, stream=stream)
    stream.write_value32((dev, 4), 3)  # a DeviceBuffer: its ptr
    stream.wait_value32((dev, 4), 3, WaitCondition.EQ)
    stream.write_value32((pin, 8), 11)  # a mapped PinnedBuffer: its device_ptr
    stream.batch_mem_ops([MemOp.wait32((pin, 8), 11, WaitCondition.EQ), MemOp.write32(pin, 5)])
    stream.synchronize()
    assert host[:3].tolist() == [5, 0, 11]
    with pytest.raises(ValueError, match="beyond the end"):
        stream.write_value32((dev, 64), 1)
    unmapped = PinnedBuffer(64, mapped=False, context=ctx)
    with pytest.raises(ValueError, match="not mapped"):
        stream.write_value32(unmapped, 1)
    unmapped.close()
    dev.close()
    pin.close()
