"""Green contexts: SM resources, splits, green contexts and their streams."""

from __future__ import annotations

import asyncio
import gc as _gc
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as _drv

import cudriver as cu
from cudriver._context import green
from cudriver._lifetime import _handle, _release

from ._support import Mapped

SMID_KERNEL = r"""
extern "C" __global__ void smids(unsigned int* out, long long spin) {
    unsigned int id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    long long t0 = clock64();
    while (clock64() - t0 < spin) { }
    if (threadIdx.x == 0) out[blockIdx.x] = id;
}
"""

_SM = _drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM


# -- without a GPU: every check made before the driver ---------------------------------


def fake_device(ordinal: int) -> cu.Device:
    dev = object.__new__(cu.Device)
    dev._ordinal = ordinal
    dev._h = _drv.CUdevice(ordinal)
    dev._name = f"fake {ordinal}"
    dev._attrs = {}
    return dev


def fake_sm(dev: cu.Device, count: int, least: int = 8, align: int = 8) -> cu.SMResource:
    r = _drv.CUdevResource()
    r.type = _SM
    r.sm.smCount = count
    r.sm.minSmPartitionSize = least
    r.sm.smCoscheduledAlignment = align
    return green.SMResource._wrap(r, dev, 0, "device")


@pytest.fixture
def no_driver_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every driver call green.py would make fails the test (and is recorded)."""
    calls: list[str] = []

    def refuse(name: str) -> Any:
        def call(*args: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"{name} was called")

        return call

    for name in (
        "cuDevSmResourceSplitByCount",
        "cuDevResourceGenerateDesc",
        "cuGreenCtxCreate",
        "cuGreenCtxStreamCreate",
    ):
        monkeypatch.setattr(green._calls, name, refuse(name))
    return calls


def test_resources_are_not_made_directly() -> None:
    with pytest.raises(TypeError, match="SMResource.of"):
        cu.SMResource()
    with pytest.raises(TypeError, match="WorkqueueConfig.of"):
        cu.WorkqueueConfig()


@pytest.mark.parametrize(
    ("count", "groups", "exc", "match"),
    [
        (0, None, ValueError, "at least 1, not 0"),
        (-8, None, ValueError, "at least 1, not -8"),
        (136, None, ValueError, "136 is more than the 132 SMs"),
        (4, None, ValueError, "4 is below the 8 SMs a group needs"),
        (
            12,
            None,
            ValueError,
            r"12 is not a multiple of this device's alignment of 8 SMs \(say 8 or 16\)",
        ),
        (16, 0, ValueError, "groups must be at least 1, not 0"),
        (16, 9, ValueError, "9 groups of 16 SMs need 144 SMs; this resource has 132"),
        (True, None, TypeError, "sm_count must be an int, not bool"),
        (8.0, None, TypeError, "sm_count must be an int, not float"),
        (16, "2", TypeError, "groups must be an int, not str"),
    ],
)
def test_a_bad_split_is_refused_with_the_numbers(
    no_driver_calls: list[str], count: Any, groups: Any, exc: type[Exception], match: str
) -> None:
    whole = fake_sm(fake_device(0), 132)
    with pytest.raises(exc, match=match):
        whole.split(count, groups)
    assert no_driver_calls == []


def test_coscheduled_must_be_a_bool(no_driver_calls: list[str]) -> None:
    with pytest.raises(TypeError, match="coscheduled must be True or False"):
        fake_sm(fake_device(0), 132).split(8, coscheduled=1)  # type: ignore[arg-type]


def fake_split(monkeypatch: pytest.MonkeyPatch, made: int) -> list[tuple[Any, ...]]:
    """The driver's split, making ``made`` groups; records its arguments."""
    seen: list[tuple[Any, ...]] = []

    def split(nb: int, res: Any, flags: int, count: int) -> Any:
        seen.append((nb, flags, count))
        groups = []
        for _ in range(made):
            g = _drv.CUdevResource()
            g.type = _SM
            g.sm.smCount = count
            groups.append(g)
        rest = _drv.CUdevResource()
        rest.type = _SM
        rest.sm.smCount = int(res.sm.smCount) - made * count
        return groups, made, rest

    monkeypatch.setattr(green._calls, "cuDevSmResourceSplitByCount", split)
    return seen


def test_a_split_gives_disjoint_groups_and_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = fake_split(monkeypatch, 2)
    dev = fake_device(0)
    groups, rest = fake_sm(dev, 132).split(16, 2)
    assert seen == [(2, 0, 16)]
    assert [g.sm_count for g in groups] == [16, 16] and rest.sm_count == 100
    assert all(g.device is dev for g in (*groups, rest))
    assert len({g._split for g in (*groups, rest)}) == 1
    assert "group 1 of a split" in repr(groups[1])
    with pytest.raises(ValueError, match="cannot be split again: make a GreenContext"):
        groups[0].split(8)


def test_fewer_groups_than_asked_is_an_error_not_a_surprise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_split(monkeypatch, 1)
    with pytest.raises(ValueError, match="the driver made 1 of the 2 groups of 16 SMs"):
        fake_sm(fake_device(0), 132).split(16, 2)
    # Without a number of groups, as many as the driver makes is the answer.
    groups, _rest = fake_sm(fake_device(0), 132).split(16)
    assert len(groups) == 1


def test_without_coscheduling_the_minimum_and_alignment_do_not_apply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = fake_split(monkeypatch, 3)
    groups, _rest = fake_sm(fake_device(0), 132).split(3, 3, coscheduled=False)
    assert seen == [(3, 1, 3)] and len(groups) == 3


def test_old_bindings_fall_back_to_the_documented_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        cu.Device, "compute_capability", property(lambda self: cu.ComputeCapability(8, 0))
    )
    r = fake_sm(fake_device(0), 108, least=0, align=0)
    assert (r.min_partition_size, r.alignment) == (4, 2)
    with pytest.raises(ValueError, match="alignment of 2 SMs"):
        r.split(5)


def test_a_green_context_checks_its_resources_first(no_driver_calls: list[str]) -> None:
    d0, d1 = fake_device(0), fake_device(1)
    a, b = fake_sm(d0, 16), fake_sm(d1, 16)
    cases: list[tuple[Any, dict[str, Any], type[Exception], str]] = [
        ("sm", {}, TypeError, "resources must be an SMResource"),
        ([], {}, ValueError, "at least one resource"),
        ([a, 3], {}, TypeError, "not a resource: int"),
        ([a, b], {}, ValueError, r"devices \[0, 1\]; a green context has one"),
        (a, {"device": d1}, ValueError, "belong to device 0, not to device 1"),
        (a, {"device": True}, TypeError, "device must be a cudriver.Device"),
        ([a, a], {}, ValueError, "given twice"),
        ([a, fake_sm(d0, 16)], {}, ValueError, "must all come from one split"),
    ]
    for resources, kw, exc, match in cases:
        with pytest.raises(exc, match=match):
            cu.GreenContext(resources, **kw)
    empty = fake_sm(d0, 0)
    empty._role = "remainder of a split"
    with pytest.raises(ValueError, match="the remainder of a split holds no SMs"):
        cu.GreenContext(empty)
    assert no_driver_calls == []


def test_groups_of_two_splits_do_not_mix(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_split(monkeypatch, 2)
    dev = fake_device(0)
    (g1, _), _ = fake_sm(dev, 132).split(16, 2)
    (g2, _), _ = fake_sm(dev, 132).split(16, 2)
    with pytest.raises(ValueError, match="one split"):
        cu.GreenContext([g1, g2])


@pytest.mark.parametrize(
    ("counts", "kw", "exc", "match"),
    [
        ([], {}, ValueError, "sm_counts is empty"),
        ([8, -8], {}, ValueError, r"cannot be negative: \[8, -8\]"),
        ([100, 40], {}, ValueError, r"groups of \[100, 40\] SMs need 140; this resource has 132"),
        ([8, 8], {"coscheduled_sm_count": 0}, ValueError, "at least 1, not 0"),
        ([8, 12], {"coscheduled_sm_count": 8}, ValueError, r"SM counts \[12\] are not multiples"),
        ("8", {}, TypeError, "sm_counts must be a list of ints, not str"),
        ([8.0], {}, TypeError, "each of sm_counts must be an int, not float"),
    ],
)
def test_a_bad_general_split_is_refused_first(
    monkeypatch: pytest.MonkeyPatch, counts: Any, kw: dict[str, Any], exc: type, match: str
) -> None:
    monkeypatch.setattr(green, "_cuDevSmResourceSplit", None)  # any call would say so
    with pytest.raises(exc, match=match):
        fake_sm(fake_device(0), 132).split_by(counts, **kw)


def test_the_general_split_says_when_the_driver_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(green, "driver_version", lambda: (13, 0))
    whole = fake_sm(fake_device(0), 132)
    monkeypatch.setattr(green, "_cuDevSmResourceSplit", None)
    with pytest.raises(cu.NotSupportedError, match="no general split.*CUDA 13.0"):
        whole.split_by([8])

    def missing(*args: Any) -> Any:
        raise RuntimeError('Function "cuDevSmResourceSplit" not found')

    monkeypatch.setattr(green, "_cuDevSmResourceSplit", missing)
    with pytest.raises(cu.NotSupportedError, match="the driver has none.*CUDA 13.0"):
        whole.split_by([8])
    refused = _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED
    monkeypatch.setattr(green, "_cuDevSmResourceSplit", lambda *a: (refused, None, None))
    with pytest.raises(cu.NotSupportedError, match="refused.*CUDA 13.0"):
        whole.split_by([8])

    def cuDevSmResourceSplit(*args: Any) -> Any:  # named as the driver function
        return _drv.CUresult.CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, None, None

    monkeypatch.setattr(green, "_cuDevSmResourceSplit", cuDevSmResourceSplit)
    with pytest.raises(cu.CudaError, match="cuDevSmResourceSplit"):
        whole.split_by([8])


def test_the_general_split_passes_each_group(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def split(nb: int, res: Any, flags: int, params: list[Any]) -> Any:
        seen.append((nb, flags, [(p.smCount, p.coscheduledSmCount) for p in params]))
        out = []
        for p in params:
            g = _drv.CUdevResource()
            g.type = _SM
            g.sm.smCount = p.smCount
            out.append(g)
        rest = _drv.CUdevResource()
        rest.type = _SM
        rest.sm.smCount = 132 - sum(p.smCount for p in params)
        return _drv.CUresult.CUDA_SUCCESS, out, rest

    monkeypatch.setattr(green, "_cuDevSmResourceSplit", split)
    groups, rest = fake_sm(fake_device(0), 132).split_by([8, 16], coscheduled_sm_count=8)
    assert seen == [(2, 0, [(8, 8), (16, 8)])]
    assert [g.sm_count for g in groups] == [8, 16] and rest.sm_count == 108
    with pytest.raises(ValueError, match="cannot be split again"):
        groups[1].split_by([8])


def test_a_green_contexts_streams_are_non_blocking() -> None:
    gc = cu.GreenContext.__new__(cu.GreenContext)
    with pytest.raises(ValueError, match="non_blocking=True, or use create_stream"):
        gc._create_stream(0, None)


@pytest.mark.skipif(green._WQ_CONFIG is None, reason="these bindings have no work queues")
def test_a_workqueue_config_is_checked_and_copied() -> None:
    dev = fake_device(0)
    r = _drv.CUdevResource()
    r.type = green._WQ_CONFIG
    r.wqConfig.wqConcurrencyLimit = 32
    wq = object.__new__(cu.WorkqueueConfig)
    wq._device, wq._res = dev, r
    balanced = wq.configured(concurrency_limit=4, scope=cu.WorkqueueScope.GREEN_CTX_BALANCED)
    assert (balanced.concurrency_limit, balanced.scope) == (4, cu.WorkqueueScope.GREEN_CTX_BALANCED)
    assert (wq.concurrency_limit, wq.scope) == (32, cu.WorkqueueScope.DEVICE_CTX)
    assert "GREEN_CTX_BALANCED" in repr(balanced)
    with pytest.raises(ValueError, match="at least 1, not 0"):
        wq.configured(concurrency_limit=0)
    with pytest.raises(TypeError, match="concurrency_limit must be an int"):
        wq.configured(concurrency_limit=True)
    with pytest.raises((TypeError, ValueError), match="scope"):
        wq.configured(scope=7)
    with pytest.raises(ValueError, match="at most one WorkqueueConfig"):
        cu.GreenContext([fake_sm(dev, 16), wq, balanced])


def test_bindings_without_work_queues_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(green, "_WQ_CONFIG", None)
    monkeypatch.setattr(green, "driver_version", lambda: (12, 8))
    with pytest.raises(cu.NotSupportedError, match="no work-queue resources.*CUDA 12.8"):
        cu.WorkqueueConfig.of(fake_device(0))


# -- on the GPU ----------------------------------------------------------------------------


def _smids(kernel: cu.Kernel, stream: cu.Stream, blocks: int, spin: int = 20000) -> set[int]:
    out = cu.DeviceBuffer.empty(blocks, np.uint32)
    kernel.launch(stream, blocks, 64, out, np.int64(spin))
    stream.synchronize()
    return set(out.copy_to().tolist())


def _kernel(ctx: cu.Context, cubin: Any) -> cu.Kernel:
    return cu.Module.load(cubin, context=ctx).kernel("smids")


@pytest.fixture
def cubin(ctx: cu.Context) -> Any:
    return cu.compile(SMID_KERNEL, arch=ctx.device, target="cubin")


def _pair(device: cu.Device) -> tuple[int, list[cu.SMResource], cu.SMResource]:
    whole = cu.SMResource.of(device)
    n = max(whole.min_partition_size, whole.alignment)
    n += -n % whole.alignment
    groups, rest = whole.split(n, 2)
    return n, groups, rest


@pytest.mark.gpu
def test_the_device_resource_matches_the_device(device: cu.Device) -> None:
    whole = cu.SMResource.of(device)
    assert whole.sm_count == device.multiprocessor_count
    assert 1 <= whole.min_partition_size <= whole.sm_count
    assert whole.alignment >= 1
    print(
        f"{device.name}: {whole.sm_count} SMs, min {whole.min_partition_size}, "
        f"alignment {whole.alignment}"
    )


@pytest.mark.gpu
def test_kernels_of_a_green_context_run_on_its_sms_only(
    ctx: cu.Context, device: cu.Device, cubin: Any
) -> None:
    total = device.multiprocessor_count
    blocks = 16 * total
    n, groups, rest = _pair(device)
    assert [g.sm_count for g in groups] == [n, n] and rest.sm_count == total - 2 * n
    seen = []
    for g in groups:
        with cu.GreenContext(g) as gc:  # the context is pushed, not closed, by `with`
            pass
        assert gc.sm_count == n and gc.resources == (g,)
        s = gc.create_stream()
        ids = _smids(_kernel(gc, cubin), s, blocks)
        s.close()
        gc.close()
        assert 0 < len(ids) <= n, sorted(ids)
        seen.append(ids)
    assert not seen[0] & seen[1], (sorted(seen[0]), sorted(seen[1]))
    plain = cu.Stream(non_blocking=True, context=ctx)
    everywhere = _smids(_kernel(ctx, cubin), plain, blocks)
    plain.close()
    assert len(everywhere) > n
    print(f"distinct SMs: green {[len(x) for x in seen]} of {n} each, ordinary {len(everywhere)}")


@pytest.mark.gpu
def test_a_green_stream_captures_runs_host_functions_memops_and_awaits(
    ctx: cu.Context, device: cu.Device, cubin: Any, mapped: Mapped
) -> None:
    n, groups, _ = _pair(device)
    gc = cu.GreenContext(groups[0])
    s = cu.Stream(non_blocking=True, context=gc)
    assert s.context is gc
    k = _kernel(gc, cubin)
    blocks = 8 * device.multiprocessor_count
    out = cu.DeviceBuffer.empty(blocks, np.uint32)
    with s.capture() as g:
        k.launch(s, blocks, 64, out, np.int64(1000))
    with g, g.instantiate() as exe:
        for _ in range(3):
            exe.launch(s)
        s.synchronize()
    assert 0 < len(set(out.copy_to().tolist())) <= n
    ran: list[int] = []
    s.launch_host_func(ran.append, 1)
    s.write_value32((mapped, 4), 42)
    s.wait_value32((mapped, 0), 0, cu.WaitCondition.EQ)
    s.synchronize()
    assert ran == [1] and mapped.u32[1] == 42

    async def main() -> None:
        k.launch(s, blocks, 64, out, np.int64(1000))
        await s

    asyncio.run(asyncio.wait_for(main(), 30))
    with gc:  # memory and queries in the green context
        buf = cu.DeviceBuffer.from_array(np.arange(8, dtype=np.int32))
        current = cu.Context.current()
        assert current is not None and int(current.handle) == int(gc.handle)
    assert buf.context is gc
    assert np.array_equal(buf.copy_to(), np.arange(8, dtype=np.int32))
    free, total = gc.mem_info
    assert 0 < free <= total
    s.close()
    gc.close()


@pytest.mark.gpu
def test_a_green_context_closed_with_work_in_flight_waits_for_it(
    ctx: cu.Context, device: cu.Device, cubin: Any
) -> None:
    _n, groups, _ = _pair(device)
    gc = cu.GreenContext(groups[0])
    s = gc.create_stream()
    k = _kernel(gc, cubin)
    out = cu.DeviceBuffer.empty(4096, np.uint32)
    out.fill(0xFF)  # no SM has this id: every block must overwrite its entry
    k.launch(s, 4096, 64, out, np.int64(200000))
    gc.close()  # the stream and the kernel's module keep it until they go
    with pytest.raises(cu.ClosedError):
        gc.create_stream()
    with pytest.raises(cu.ClosedError):
        with gc:
            pass
    s.synchronize()
    assert (out.copy_to() < device.multiprocessor_count).all()  # the kernel ran whole
    del s, k
    _gc.collect()
    cu.Stream(non_blocking=True, context=ctx).synchronize()


@pytest.mark.gpu
def test_what_was_made_in_a_closed_green_context_stays_usable(
    ctx: cu.Context, device: cu.Device, cubin: Any
) -> None:
    # Found from outside: after close() with work in flight, copy_to() of a buffer
    # made in the green context raised ClosedError, holding the results hostage.
    _n, groups, _ = _pair(device)
    gc = cu.GreenContext(groups[0])
    s = gc.create_stream()
    module = cu.Module.load(cubin, context=gc)
    out = cu.DeviceBuffer.empty(4096, np.uint32, context=gc)
    out.fill(0xFF, stream=s)
    module.kernel("smids").launch(s, 4096, 64, out, np.int64(200000))
    done = cu.Event(context=gc)
    done.record(s)
    gc.close()
    assert gc.closed
    done.synchronize()
    s.synchronize()
    host = out.copy_to()  # the results of the work in flight
    assert (host < device.multiprocessor_count).all()
    # Everything made in it keeps working: copies, fills, views, lookups, launches.
    view = out.view(0, 64)
    view.copy_from(np.arange(16, dtype=np.uint32))
    assert np.array_equal(view.copy_to().view(np.uint32), np.arange(16, dtype=np.uint32))
    out.fill(3, stream=s)
    module.kernel("smids").launch(s, 4, 64, out, np.int64(0))
    s.synchronize()
    assert (out.copy_to()[4:] == 0x03030303).all()  # fill() writes bytes
    ordered = cu.DeviceBuffer(256, stream=s)  # its stream allocates, in the green context
    ordered.fill(1, stream=s)
    assert ordered.context is gc and (ordered.copy_to() == 1).all()
    ordered.close()
    other = cu.DeviceBuffer(out.nbytes, context=ctx)
    other.copy_from(out)
    assert np.array_equal(other.copy_to().view(np.uint32), out.copy_to())
    # Nothing new is made in it, and its own methods refuse.
    for make in (
        lambda: cu.DeviceBuffer(16, context=gc),
        lambda: cu.Event(context=gc),
        lambda: cu.Module.load(cubin, context=gc),
        gc.create_stream,
        gc.synchronize,
        lambda: gc.mem_info,
    ):
        with pytest.raises(cu.ClosedError, match="GreenContext is closed"):
            make()
    # The driver context goes with its last object.
    state = gc._state
    del s, module, out, view, done, host, ordered  # a closed buffer keeps its stream object
    _gc.collect()
    cu.Stream(non_blocking=True, context=ctx).synchronize()
    _handle.settle()
    left = [  # for the message: the states that still depend on it
        (s2.kind, s2.func, s2.handle is not None, s2.closing, s2.dependants, s2.busy)
        for t in _gc.get_referrers(state)
        if isinstance(t, tuple)
        for s2 in _gc.get_referrers(t)
        if type(s2) is type(state)
    ]
    assert state.handle is None, (
        state.dependants,
        state.closing,
        state.busy,
        left,
        _release.describe_pending(),
    )


@pytest.mark.gpu
def test_bad_input_on_the_device_is_refused_before_the_driver(
    ctx: cu.Context, device: cu.Device
) -> None:
    whole = cu.SMResource.of(device)
    with pytest.raises(ValueError, match="at least 1, not 0"):
        whole.split(0)
    with pytest.raises(ValueError, match=f"more than the {whole.sm_count} SMs"):
        whole.split(whole.sm_count + whole.alignment)
    if whole.alignment > 1:
        with pytest.raises(ValueError, match=f"alignment of {whole.alignment} SMs"):
            whole.split(whole.min_partition_size + 1)
    if whole.min_partition_size > 1:
        with pytest.raises(ValueError, match="below the"):
            whole.split(whole.min_partition_size - 1)
    if cu.Device.count() > 1:
        other = cu.SMResource.of(cu.Device(1))
        with pytest.raises(ValueError, match=r"devices \[0, 1\]"):
            cu.GreenContext([_pair(device)[1][0], other])
        with pytest.raises(ValueError, match="belong to device 1, not to device 0"):
            cu.GreenContext(other, device=device)


@pytest.mark.gpu
def test_the_general_split_makes_groups_of_each_size_or_says_why_not(
    ctx: cu.Context, device: cu.Device, cubin: Any
) -> None:
    whole = cu.SMResource.of(device)
    a = whole.alignment * max(1, -(-whole.min_partition_size // whole.alignment))
    try:
        groups, rest = whole.split_by([a, 2 * a])
    except cu.NotSupportedError as exc:
        refusal = str(exc)
    else:
        refusal = ""
    if refusal:
        assert "CUDA" in refusal  # the message names the driver's version
        pytest.skip(refusal)
    assert [g.sm_count for g in groups] == [a, 2 * a]
    assert rest.sm_count == whole.sm_count - 3 * a
    gc = cu.GreenContext(groups[1])
    s = gc.create_stream()
    ids = _smids(_kernel(gc, cubin), s, 4 * device.multiprocessor_count)
    assert gc.sm_count == 2 * a and 0 < len(ids) <= 2 * a
    s.close()
    gc.close()


@pytest.mark.gpu
def test_a_workqueue_config_joins_a_green_context_or_says_why_not(
    ctx: cu.Context, device: cu.Device, cubin: Any
) -> None:
    try:
        wq = cu.WorkqueueConfig.of(device)
    except cu.NotSupportedError as exc:
        refusal = str(exc)
    else:
        refusal = ""
    if refusal:
        assert "CUDA" in refusal  # the message names the driver's version
        pytest.skip(refusal)
    print(repr(wq))
    n, groups, _ = _pair(device)
    cfg = wq.configured(concurrency_limit=4, scope=cu.WorkqueueScope.GREEN_CTX_BALANCED)
    gc = cu.GreenContext([groups[0], cfg])
    s = gc.create_stream()
    ids = _smids(_kernel(gc, cubin), s, 4 * device.multiprocessor_count)
    assert 0 < len(ids) <= n
    s.close()
    gc.close()
