"""Correct uses of the typed mirror ``cudriver.driver``: ``mypy --strict`` passes on this file.

Checked by ``tests/test_driver_stub.py``, never run (the calls need a GPU): every use is
inside a function. The names, argument counts and return types come from
``src/cudriver/driver.pyi``.
"""

from __future__ import annotations

from typing_extensions import assert_type

import cudriver
from cudriver import driver


def allocate_and_free() -> int:
    driver.cuInit(0)
    dev = driver.cuDeviceGet(0)
    ctx = driver.cuDevicePrimaryCtxRetain(dev)
    driver.cuCtxSetCurrent(ctx)
    ptr = driver.cuMemAlloc(1024)
    driver.cuMemsetD8(ptr, 0, 1024)
    driver.cuMemFree(ptr)
    driver.cuDevicePrimaryCtxRelease(dev)
    return int(ptr)


def outputs_have_their_types(dev: int) -> None:
    free, total = driver.cuMemGetInfo()
    assert_type(free, int)
    assert_type(total, int)
    assert_type(driver.cuDriverGetVersion(), int)
    assert_type(driver.cuDeviceGetCount(), int)
    assert_type(driver.cuDeviceGetName(64, dev), bytes)
    sms = driver.cuDeviceGetAttribute(
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev
    )
    assert_type(sms, int)
    least, greatest = driver.cuCtxGetStreamPriorityRange()
    assert_type(least + greatest, int)


def streams_and_events() -> None:
    stream = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
    event = driver.cuEventCreate(0)
    driver.cuEventRecord(event, stream)
    driver.cuStreamWaitEvent(driver.CU_STREAM_LEGACY, event, 0)
    driver.cuStreamSynchronize(stream)
    driver.cuStreamSynchronize(None)  # handles take None, ints and their classes
    driver.cuStreamSynchronize(driver.CUstream(driver.CU_STREAM_PER_THREAD))
    assert_type(driver.cuEventElapsedTime(event, event), float)
    driver.cuEventDestroy(event)
    driver.cuStreamDestroy(stream)


def cudriver_objects_go_where_handles_go(
    stream: cudriver.Stream, buf: cudriver.DeviceBuffer
) -> None:
    driver.cuMemsetD8Async(buf, 0, buf.nbytes, stream)
    driver.cuStreamSynchronize(stream)


def host_function(stream: cudriver.Stream) -> None:
    def callback(data: object) -> None:
        print(data)

    driver.cuLaunchHostFunc(stream, callback, None)


def graph_nodes(graph: driver.CUgraph) -> list[driver.CUgraphNode]:
    nodes, count = driver.cuGraphGetNodes(graph)
    assert_type(count, int)
    return nodes


def constants_and_classes() -> driver.CUstream:
    assert_type(driver.CUDA_VERSION, int)
    assert_type(driver.sizeof(driver.CUstream), int)
    return driver.CUstream(driver.CU_STREAM_LEGACY)
