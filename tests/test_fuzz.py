"""Bad arguments to the public constructors and methods: always TypeError or ValueError.

Hypothesis draws arguments that no call accepts (wrong types, floats and strings as
handles, integers that do not fit the C type, NULL handles, malformed protocols). Every
call must raise ``TypeError`` or ``ValueError`` (a ``CudaError`` subclass of one counts)
naming the problem, before the driver is called: these tests need no GPU, and they run
the same where there is one. Examples are bounded so the module takes a few seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cudriver as cu

from ._support import FAKE, no_driver

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

_OBJECTS = st.sampled_from([object(), [], {}, (), b"", 1j, ...])
NOT_AN_INT = st.one_of(st.floats(allow_nan=True), st.text(max_size=3), st.booleans(), _OBJECTS)
NOT_A_BOOL = st.one_of(st.integers(), st.floats(), st.text(max_size=2), st.none(), _OBJECTS)
TOO_BIG = st.integers(min_value=2**64, max_value=2**80)
NEGATIVE = st.integers(max_value=-1, min_value=-(2**70))
NOT_A_SIZE = st.one_of(NOT_AN_INT, TOO_BIG, NEGATIVE, st.just(0))
NOT_A_HANDLE = st.one_of(
    st.floats(), st.text(max_size=3), st.booleans(), _OBJECTS, TOO_BIG, NEGATIVE, st.just(0)
)
NOT_A_CONTEXT = st.one_of(st.integers(), st.text(max_size=2), st.floats(), _OBJECTS)


class _Proto:
    """An object whose ``__cuda_stream__`` returns what it was given."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __cuda_stream__(self) -> Any:
        return self.value


BAD_CUDA_STREAM = st.one_of(
    st.tuples(st.integers().filter(lambda v: v != 0), st.integers(0, 2**63)),  # version
    st.tuples(st.sampled_from(["0", 0.0, None, True]), st.integers(0, 2**63)),
    st.tuples(st.just(0), st.one_of(st.text(max_size=2), st.floats(), TOO_BIG, NEGATIVE)),
    st.one_of(st.integers(), st.text(max_size=2), st.tuples(st.integers())),
).map(_Proto)
NOT_A_STREAM = st.one_of(
    st.floats(), st.text(max_size=3), _OBJECTS, TOO_BIG, NEGATIVE, BAD_CUDA_STREAM
)


def refused(call: Callable[[], object]) -> None:
    with pytest.raises((TypeError, ValueError)):
        call()


@FUZZ
@given(NOT_A_BOOL, NOT_AN_INT.filter(lambda v: v is not None), NOT_A_CONTEXT)
def test_stream(non_blocking: Any, priority: Any, context: Any) -> None:
    refused(lambda: cu.Stream(non_blocking=non_blocking))
    refused(lambda: cu.Stream(priority=priority))
    refused(lambda: cu.Stream(context=context))


@FUZZ
@given(NOT_A_STREAM)
def test_stream_handles(stream: Any) -> None:
    refused(lambda: cu.Stream.from_handle(stream))
    refused(lambda: cu.DeviceBuffer(64, stream=stream))


@FUZZ
@given(NOT_A_BOOL, NOT_A_CONTEXT)
def test_event(flag: Any, context: Any) -> None:
    refused(lambda: cu.Event(timing=flag))
    refused(lambda: cu.Event(blocking=flag, timing=False))
    refused(lambda: cu.Event(interprocess=flag, timing=False))
    refused(lambda: cu.Event(context=context))
    refused(lambda: cu.Graph(context=context))


@FUZZ
@given(NOT_A_HANDLE)
def test_from_handle(handle: Any) -> None:
    for cls in (cu.Context, cu.Event, cu.Graph, cu.Module, cu.Kernel):
        refused(lambda cls=cls: cls.from_handle(handle))
    refused(lambda: cu.DeviceBuffer.from_handle(handle, 64))


@FUZZ
@given(NOT_A_SIZE, NOT_A_BOOL, NOT_A_CONTEXT)
def test_memory(nbytes: Any, flag: Any, context: Any) -> None:
    refused(lambda: cu.DeviceBuffer(nbytes))
    refused(lambda: cu.PinnedBuffer(nbytes))
    refused(lambda: cu.DeviceBuffer.from_handle(FAKE, nbytes))
    refused(lambda: cu.DeviceBuffer(64, context=context))
    refused(lambda: cu.PinnedBuffer(64, mapped=flag))
    refused(lambda: cu.PinnedBuffer(64, write_combined=flag))


@FUZZ
@given(
    st.one_of(
        NOT_AN_INT.filter(lambda v: not isinstance(v, (list, tuple))),  # () is a 0-d shape
        NEGATIVE,
        st.lists(NOT_AN_INT, min_size=1, max_size=3),
    )
)
def test_shapes_and_dtypes(shape: Any) -> None:
    refused(lambda: cu.DeviceBuffer.empty(shape, np.float32))
    refused(lambda: cu.DeviceBuffer.empty(4, object))


@FUZZ
@given(
    st.one_of(
        NOT_AN_INT.filter(lambda v: not isinstance(v, (bytes, tuple))),
        NEGATIVE,
        TOO_BIG,
        st.just(0),
        st.integers(1, 2**40).map(lambda v: 4 * v + 1),  # misaligned
    ),
    st.one_of(NOT_AN_INT, NEGATIVE, TOO_BIG),
    st.one_of(NOT_AN_INT, st.integers(4, 2**40), NEGATIVE),
)
def test_memops(addr: Any, value: Any, cond: Any) -> None:
    refused(lambda: cu.MemOp.write32(addr, 1))
    refused(lambda: cu.MemOp.write64(addr, 1))
    refused(lambda: cu.MemOp.wait32(FAKE, value))
    refused(lambda: cu.MemOp.wait32(FAKE, 1, cond))
    refused(lambda: cu.MemOp.write32((cu.DeviceBuffer.from_handle(FAKE, 64), value), 1))


@FUZZ
@given(st.one_of(st.integers(), st.floats(), st.none(), _OBJECTS), NOT_A_BOOL, NOT_A_CONTEXT)
def test_module_load(image: Any, flag: Any, context: Any) -> None:
    refused(lambda: cu.Module.load(image))
    refused(lambda: cu.Module.load(b".version 8.0\n", eager=flag))
    refused(lambda: cu.Module.load(b".version 8.0\n", context=context))


@FUZZ
@given(st.one_of(NOT_AN_INT.filter(lambda v: not isinstance(v, float)), NEGATIVE))
def test_device(ordinal: Any) -> None:
    refused(lambda: cu.Device(ordinal))


# -- the cases that escaped as the wrong exception before, one by one ---------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: cu.Stream(context="ctx"),
        lambda: cu.Event(context=0),
        lambda: cu.Module.load(".version 8.0\n.target sm_90\n", context=1),
        lambda: cu.Graph.from_handle(1.5),
        lambda: cu.Stream.from_handle(2**64),
        lambda: cu.Stream.from_handle(-1),
        lambda: cu.DeviceBuffer(2**64),
        lambda: cu.PinnedBuffer(-1),
        lambda: cu.DeviceBuffer.from_handle(2**64, 8),
        lambda: cu.MemOp.write32(2**64, 1),
    ],
    ids=lambda c: "",
)
def test_reported_bad_inputs(call: Callable[[], object]) -> None:
    refused(call)


@pytest.mark.parametrize("value", [(1, 5), (-1, 5), ("x", 0), (0, "h"), (0, 2**70), (0,)])
def test_cuda_stream_protocol_is_checked(value: Any) -> None:
    refused(lambda: cu.Stream.from_handle(_Proto(value)))


class _Foreign:
    def __init__(self, cai: Any) -> None:
        self.__cuda_array_interface__ = cai


@pytest.mark.parametrize(
    "cai",
    [
        {"version": 3, "shape": (16,), "typestr": "<f4"},  # no data
        {"version": 3, "data": (FAKE,), "shape": (16,), "typestr": "<f4"},  # short data
        {"version": 3, "data": (FAKE, False), "typestr": "<f4"},  # no shape
        {"version": 3, "data": (FAKE, False), "shape": ("a",), "typestr": "<f4"},
        {"version": 3, "data": (FAKE, False), "shape": (16,), "typestr": "nope"},
        {"version": 3, "data": (-1, False), "shape": (16,), "typestr": "<f4"},
        {"version": 3, "data": (FAKE, False), "shape": (16,), "typestr": "<f4", "stream": "s"},
        {"version": 3, "data": (FAKE, False), "shape": (16,), "typestr": "<f4", "strides": (1,)},
    ],
)
def test_malformed_cuda_array_interface(cai: dict[str, Any]) -> None:
    dst = cu.DeviceBuffer.from_handle(FAKE, 64)
    refused(lambda: dst.copy_from(_Foreign(cai)))


@pytest.mark.parametrize("data", [None, (), ("x", False), (1.5, False), 7])
def test_malformed_cuda_array_interface_as_an_address(data: Any) -> None:
    refused(lambda: cu.MemOp.write32(_Foreign({"data": data}), 1))


def test_launch_configuration_errors_are_not_sticky() -> None:
    R = cu.driver.CUresult
    for code in (R.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, R.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE):
        err = cu.errors.make_error(code, "cuLaunchKernel")
        assert isinstance(err, cu.LaunchConfigError) and isinstance(err, ValueError)
        assert not isinstance(err, cu.LaunchError)
    assert isinstance(cu.errors.make_error(R.CUDA_ERROR_ILLEGAL_ADDRESS, "x"), cu.LaunchError)


@no_driver
@pytest.mark.parametrize(
    "call",
    [
        lambda: cu.Stream(),
        lambda: cu.Event(),
        lambda: cu.Graph(),
        lambda: cu.DeviceBuffer(8),
        lambda: cu.PinnedBuffer(8),
        lambda: cu.Stream.legacy().synchronize(),
        lambda: cu.Stream.from_handle(0x1230).query(),
        lambda: cu.Context.current(),
    ],
    ids=lambda c: "",
)
def test_without_a_driver_everything_says_so(call: Callable[[], object]) -> None:
    with pytest.raises(cu.DriverNotFoundError):
        call()


# -- methods: a borrowed stream and a foreign buffer over made-up handles ----------------
# Any driver call with them would fail, or without a GPU find no driver: what these see
# comes from the checks made before the driver.


@FUZZ
@given(st.one_of(st.integers(), st.floats(), st.text(max_size=2), _OBJECTS, NOT_A_STREAM))
def test_stream_methods(bad: Any) -> None:
    s = cu.Stream.from_handle(0x1230)
    buf = cu.DeviceBuffer.from_handle(FAKE, 64)
    refused(lambda: s.record(bad))
    if not isinstance(bad, int) or isinstance(bad, bool):
        refused(lambda: s.wait(bad))
        refused(lambda: s.copy_attributes_from(bad))
        refused(lambda: buf.copy_from(np.zeros(64, np.uint8), stream=bad))
    refused(lambda: s.launch_host_func(bad))
    refused(lambda: s.write_value32(bad if not isinstance(bad, int) else -1, 1))
    refused(lambda: s.wait_value32(buf, 1, bad if not isinstance(bad, int) else 99))
    refused(lambda: s.begin_capture(bad if not isinstance(bad, int) else 99))
    refused(lambda: s.attach_memory(buf, bad if not isinstance(bad, int) else -1))
    refused(lambda: buf.fill(bad if not isinstance(bad, int) else 256))
    refused(lambda: buf.view(bad if not isinstance(bad, int) else -1))
    refused(lambda: buf.copy_from(bad))
    refused(lambda: buf.copy_to(bad))
