from __future__ import annotations

import gc
import types

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu

from ._support import COPY_KERNEL, load_kernels


def test_enums() -> None:
    mode = drv.CUstreamCaptureMode
    assert cu.CaptureMode.THREAD_LOCAL == mode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    assert cu.CaptureMode.GLOBAL == drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
    assert cu.CaptureMode.RELAXED == drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
    assert cu.CaptureStatus.INVALIDATED == 2
    for m in cu.CaptureMode:
        assert m.name in (cu.CaptureMode.__doc__ or "")


class _CapturingStream:
    """What Graph._pending reads of the stream whose capture fills the graph."""

    def __init__(self) -> None:
        self._capture = types.SimpleNamespace(closed=False)


def test_pending_graph_is_unusable() -> None:
    stream = _CapturingStream()
    g = cu.Graph._pending(stream)
    with pytest.raises(cu.ClosedError, match="still being captured"):
        _ = g.num_nodes
    with pytest.raises(cu.ClosedError, match="still being captured"):
        g.instantiate()
    stream._capture.closed = True  # the capture failed: the graph never comes
    with pytest.raises(cu.ClosedError, match="ended without a graph"):
        g.instantiate()


SRC = (
    r"""
extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
extern "C" __global__ void add(float* x, const float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}
"""
    + COPY_KERNEL
)

N = 4096
GRID, BLOCK = (N + 255) // 256, 256


@pytest.fixture(scope="module")
def kernels(primary: cu.Context) -> dict[str, cu.Kernel]:
    return load_kernels(primary, SRC, "scale", "add", "copy")


def _arr(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


@pytest.mark.gpu
class TestCapture:
    def test_capture_replay_equals_eager(self, stream: cu.Stream, kernels: dict) -> None:
        x0, y0 = _arr(1), _arr(2)
        x, y = cu.DeviceBuffer.from_array(x0), cu.DeviceBuffer.from_array(y0)
        with stream.capture() as g:
            kernels["scale"].launch(stream, GRID, BLOCK, x, np.float32(0.5), np.int32(N))
            kernels["add"].launch(stream, GRID, BLOCK, x, y, np.int32(N))
            kernels["scale"].launch(stream, GRID, BLOCK, x, 2.0, N)
        assert g.num_nodes == 3
        assert not stream.is_capturing
        exe = g.instantiate()
        expected = x0.copy()
        for _ in range(5):
            exe.launch(stream)
            expected = ((expected * np.float32(0.5)) + y0) * np.float32(2.0)
        stream.synchronize()
        np.testing.assert_allclose(x.copy_to(), expected, rtol=1e-5)

        # the same work done eagerly
        xe = cu.DeviceBuffer.from_array(x0)
        for _ in range(5):
            kernels["scale"].launch(stream, GRID, BLOCK, xe, np.float32(0.5), np.int32(N))
            kernels["add"].launch(stream, GRID, BLOCK, xe, y, np.int32(N))
            kernels["scale"].launch(stream, GRID, BLOCK, xe, 2.0, N)
        stream.synchronize()
        np.testing.assert_array_equal(xe.copy_to(), x.copy_to())
        exe.close()
        g.close()

    def test_explicit_begin_end_and_status(self, stream: cu.Stream, kernels: dict) -> None:
        x = cu.DeviceBuffer.from_array(_arr(3))
        assert stream.capture_status is cu.CaptureStatus.NONE
        assert stream.capture_id is None
        assert stream.capture_graph is None
        stream.begin_capture(cu.CaptureMode.GLOBAL)
        assert stream.is_capturing
        assert stream.capture_status is cu.CaptureStatus.ACTIVE
        first_id = stream.capture_id
        assert isinstance(first_id, int)
        kernels["scale"].launch(stream, GRID, BLOCK, x, 1.0, N)
        live = stream.capture_graph
        assert live is not None
        assert not live.owned
        assert live.num_nodes == 1
        assert "capturing" in repr(stream)
        with pytest.raises(cu.StreamCaptureError, match="already capturing"):
            stream.begin_capture()
        g = stream.end_capture()
        assert g.num_nodes == 1
        assert stream.capture_status is cu.CaptureStatus.NONE
        with stream.capture(cu.CaptureMode.RELAXED) as g2:
            assert stream.capture_id not in (None, first_id)  # each capture has its own
            kernels["scale"].launch(stream, GRID, BLOCK, x, 1.0, N)
        assert g2.num_nodes == 1

    def test_exception_in_block_propagates_unchanged(
        self, stream: cu.Stream, kernels: dict
    ) -> None:
        x = cu.DeviceBuffer.from_array(_arr(4))
        mine = KeyError("mine")
        with pytest.raises(KeyError) as info:
            with stream.capture():
                kernels["scale"].launch(stream, GRID, BLOCK, x, 3.0, N)
                raise mine
        assert info.value is mine
        assert info.value.__context__ is None
        assert info.value.__cause__ is None
        assert stream.capture_status is cu.CaptureStatus.NONE
        # a new capture and eager work on the same stream succeed
        with stream.capture() as g:
            kernels["scale"].launch(stream, GRID, BLOCK, x, 1.0, N)
        g.instantiate().launch(stream)
        kernels["scale"].launch(stream, GRID, BLOCK, x, 1.0, N)
        stream.synchronize()

    def test_exception_after_invalidation_still_propagates(self, stream: cu.Stream) -> None:
        with pytest.raises(ZeroDivisionError):
            with stream.capture():
                drv.cuStreamSynchronize(stream.handle)  # invalidates, status ignored
                _ = 1 / 0
        assert stream.capture_status is cu.CaptureStatus.NONE
        stream.synchronize()

    def test_invalidated_capture_raises_at_exit(self, stream: cu.Stream, kernels: dict) -> None:
        x = cu.DeviceBuffer.from_array(_arr(5))
        with pytest.raises(cu.StreamCaptureError, match="invalidated") as info:
            with stream.capture():
                kernels["scale"].launch(stream, GRID, BLOCK, x, 1.0, N)
                try:
                    stream.synchronize()
                except cu.StreamCaptureError:
                    pass  # swallowed by the user: the capture is now invalidated
                assert stream.capture_status is cu.CaptureStatus.INVALIDATED
        assert "cuStreamSynchronize" in str(info.value)
        assert info.value.code == drv.CUresult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
        # the stream works afterwards
        assert stream.capture_status is cu.CaptureStatus.NONE
        kernels["scale"].launch(stream, GRID, BLOCK, x, 1.0, N)
        stream.synchronize()
        with stream.capture() as g:
            kernels["scale"].launch(stream, GRID, BLOCK, x, 1.0, N)
        assert g.num_nodes == 1

    def test_raw_invalidation_says_invalidated(self, stream: cu.Stream) -> None:
        with pytest.raises(cu.StreamCaptureError, match="not allowed while capturing"):
            with stream.capture():
                drv.cuStreamSynchronize(stream.handle)
        stream.synchronize()

    def test_fork_join_and_dot(self, stream: cu.Stream, kernels: dict, tmp_path) -> None:
        x0, y0 = _arr(6), _arr(7)
        x, y = cu.DeviceBuffer.from_array(x0), cu.DeviceBuffer.from_array(y0)
        side = cu.Stream()
        with stream.capture() as g:
            kernels["scale"].launch(stream, GRID, BLOCK, x, 2.0, N)
            side.wait(stream.record())  # fork
            kernels["scale"].launch(side, GRID, BLOCK, y, 3.0, N)
            stream.wait(side.record())  # join
            kernels["add"].launch(stream, GRID, BLOCK, x, y, np.int32(N))
        assert g.num_nodes == 3
        dot = g.to_dot(verbose=True)
        assert dot.startswith("digraph")
        assert dot.count("scale") >= 2
        assert "add" in dot
        path = tmp_path / "g.dot"
        assert g.to_dot(path) == path.read_text()
        g.instantiate().launch(stream)
        stream.synchronize()
        np.testing.assert_allclose(x.copy_to(), x0 * 2 + y0 * 3, rtol=1e-5)
        side.close()

    def test_unjoined_fork_is_clear(self, stream: cu.Stream, kernels: dict) -> None:
        y = cu.DeviceBuffer.from_array(_arr(8))
        side = cu.Stream()
        with pytest.raises(cu.StreamCaptureError, match="not joined back"):
            with stream.capture():
                side.wait(stream.record())
                kernels["scale"].launch(side, GRID, BLOCK, y, 3.0, N)
        assert stream.capture_status is cu.CaptureStatus.NONE
        stream.synchronize()
        kernels["scale"].launch(stream, GRID, BLOCK, y, 1.0, N)
        stream.synchronize()
        side.close()

    def test_update_with_new_arguments(self, stream: cu.Stream, kernels: dict) -> None:
        x0 = _arr(9)
        x = cu.DeviceBuffer.from_array(x0)
        with stream.capture() as g1:
            kernels["scale"].launch(stream, GRID, BLOCK, x, 2.0, N)
        with stream.capture() as g2:
            kernels["scale"].launch(stream, GRID, BLOCK, x, 5.0, N)
        exe = g1.instantiate()
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_allclose(x.copy_to(), x0 * 2, rtol=1e-6)
        exe.update(g2)
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_allclose(x.copy_to(), x0 * 10, rtol=1e-6)

        with stream.capture() as g3:  # different topology
            kernels["scale"].launch(stream, GRID, BLOCK, x, 1.0, N)
            kernels["scale"].launch(stream, GRID, BLOCK, x, 1.0, N)
        with pytest.raises(cu.GraphUpdateError) as info:
            exe.update(g3)
        err = info.value
        assert err.code == drv.CUresult.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE
        assert "TOPOLOGY_CHANGED" in err.result
        assert err.reason
        assert err.result in str(err)
        with stream.capture() as g4:  # same topology, another node type (a memset)
            x.fill(0, stream=stream)
        with pytest.raises(cu.GraphUpdateError, match="NODE_TYPE_CHANGED"):
            exe.update(g4)
        # the old exec still replays correctly (with g2's arguments)
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_allclose(x.copy_to(), x0 * 50, rtol=1e-5)
        with pytest.raises(TypeError, match="cudriver.Graph"):
            exe.update("g")  # type: ignore[arg-type]

    def test_dropped_buffers_stay_valid(self, stream: cu.Stream, kernels: dict) -> None:
        src0 = _arr(10)
        out = cu.DeviceBuffer(N * 4)
        src = cu.DeviceBuffer.from_array(src0)
        with stream.capture() as g:
            kernels["copy"].launch(stream, GRID, BLOCK, out, src, N)
        exe = g.instantiate()
        del src, g  # the user drops the input buffer and the graph
        gc.collect()
        # allocations that would reuse freed memory, filled with garbage
        junk = [cu.DeviceBuffer(N * 4) for _ in range(8)]
        for j in junk:
            j.fill(0xFF)
        for _ in range(3):
            out.fill(0)
            exe.launch(stream)
            stream.synchronize()
            np.testing.assert_array_equal(out.copy_to().view(np.float32), src0)

    def test_graph_empty_clone_close(self, stream: cu.Stream, kernels: dict) -> None:
        g = cu.Graph()
        assert g.num_nodes == 0
        exe = g.instantiate(upload_stream=stream)
        exe.launch(stream)
        exe.upload(stream)
        stream.synchronize()
        x = cu.DeviceBuffer.from_array(_arr(11))
        with stream.capture() as g2:
            kernels["scale"].launch(stream, GRID, BLOCK, x, 1.0, N)
        c = g2.clone()
        assert c.num_nodes == 1
        assert c != g2
        e2 = c.instantiate(use_node_priority=True)
        c.close()
        e2.launch(stream)  # the exec outlives the graph it came from
        stream.synchronize()
        e2.close()
        with pytest.raises(cu.ClosedError, match="GraphExec is closed"):
            e2.launch(stream)
        with pytest.raises(cu.ClosedError, match="Graph is closed"):
            c.instantiate()
        with pytest.raises(TypeError):
            cu.GraphExec()
