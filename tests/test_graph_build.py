"""Graphs built node by node, per-node updates, and conditional nodes."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

import cudriver as cu

from ._support import load_kernels
from .test_safety import run_isolated

SOURCE = r"""
// NVRTC has the type but does not declare the device-side setter: declare it.
extern "C" __device__ void cudaGraphSetConditional(cudaGraphConditionalHandle h, unsigned v);

extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
extern "C" __global__ void add(float* x, const float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}
extern "C" __global__ void fill_f(float* x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}
// Sets the condition from a word in device memory.
extern "C" __global__ void set_from(cudaGraphConditionalHandle h, const unsigned* flag) {
    cudaGraphSetConditional(h, *flag);
}
extern "C" __global__ void put(unsigned* out, unsigned v) { *out = v; }
// One Newton step for sqrt(a) on state = {x, a, steps}; the loop goes on until
// x * x is within 1e-12 of a (relative), without returning to the host.
extern "C" __global__ void newton(double* state, cudaGraphConditionalHandle h) {
    double x = state[0], a = state[1];
    x = 0.5 * (x + a / x);
    state[0] = x;
    state[2] += 1.0;
    cudaGraphSetConditional(h, fabs(x * x - a) > 1e-12 * a && state[2] < 100.0);
}
"""

N = 1024
GRID, BLOCK = N // 256, 256
NAMES = ("scale", "add", "fill_f", "set_from", "put", "newton")


@pytest.fixture(scope="module")
def k(primary: cu.Context) -> dict[str, cu.Kernel]:
    return load_kernels(primary, SOURCE, *NAMES)


def _newton_steps(a: float) -> int:
    x, steps = 1.0, 0
    while True:
        x = 0.5 * (x + a / x)
        steps += 1
        if not (abs(x * x - a) > 1e-12 * a and steps < 100):
            return steps


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


# -- without a GPU: what is checked before any driver call -----------------------------------
def test_node_types_and_conditional_types_mirror_the_driver() -> None:
    from cuda.bindings import driver as drv

    for m in cu.GraphNodeType:
        assert int(getattr(drv.CUgraphNodeType, f"CU_GRAPH_NODE_TYPE_{m.name}")) == m
    for c in cu.ConditionalType:
        assert int(getattr(drv.CUgraphConditionalNodeType, f"CU_GRAPH_COND_TYPE_{c.name}")) == c


def test_nodes_cannot_be_made_directly_or_pickled() -> None:
    import pickle

    with pytest.raises(TypeError, match="Graph.add_"):
        cu.GraphNode()
    node = cu.GraphNode._new(0x1234, cu.Graph._bare(None))
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(node)
    assert repr(cu.ConditionalHandle(3)) == "<cudriver.ConditionalHandle 3>"
    assert cu.ConditionalHandle(3) == 3


def test_programmatic_serialization_is_refused_on_a_node() -> None:
    cfg = cu.LaunchConfig(programmatic_stream_serialization=True, priority=1)
    with pytest.raises(ValueError, match="inside a capture"):
        cfg.node_attributes()
    pairs = cu.LaunchConfig(cluster=2, cooperative=True).node_attributes()
    assert [int(a) for a, _v in pairs] == [4, 2]
    assert pairs[0][1].clusterDim.x == 2


# -- on the GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
class TestExplicitGraph:
    def test_every_node_kind_replays_like_the_eager_work(
        self, ctx: cu.Context, stream: cu.Stream, k: dict[str, cu.Kernel]
    ) -> None:
        x = _x(1)
        y = _x(2)
        host_in = x.copy()
        dy = cu.DeviceBuffer.from_array(y)
        buf = cu.DeviceBuffer(4 * N)
        out = cu.DeviceBuffer(4 * N)
        side = cu.DeviceBuffer(64)
        flag = cu.DeviceBuffer(8)
        calls: list[int] = []
        start, end = cu.Event(timing=True), cu.Event(timing=True)
        gate = cu.Event()
        gate.record(stream)

        child = cu.Graph()
        child.add_memset(side, 0xAB)

        g = cu.Graph()
        rec0 = g.add_event_record(start)
        wait = g.add_event_wait(gate, after=rec0)
        scratch = g.add_alloc(4 * N, after=wait)
        fill = g.add_kernel(k["fill_f"], GRID, BLOCK, scratch, np.float32(0.5), N, after=scratch)
        h2d = g.add_memcpy(buf, host_in, after=wait)
        sc = g.add_kernel(k["scale"], GRID, BLOCK, buf, np.float32(2.0), N, after=h2d)
        ad1 = g.add_kernel(k["add"], GRID, BLOCK, buf, dy, N, after=sc)
        ad2 = g.add_kernel(k["add"], GRID, BLOCK, buf, scratch, N, after=[ad1, fill])
        free = g.add_free(scratch, after=ad2)
        d2d = g.add_memcpy(out, buf, after=ad2)
        ms = g.add_memset(flag, 0, element_size=4, after=wait)
        op = g.add_mem_ops([cu.MemOp.write32(flag, 7)], after=ms)
        kid = g.add_child_graph(child, after=wait)
        host = g.add_host_func(calls.append, 1, after=[d2d, op, kid])
        join = g.add_empty(after=[host, free])
        g.add_event_record(end, after=join)
        child.close()  # the child node is a copy

        assert g.num_nodes == 16
        assert {n.type for n in g.nodes()} >= {
            cu.GraphNodeType.KERNEL,
            cu.GraphNodeType.MEMCPY,
            cu.GraphNodeType.MEMSET,
            cu.GraphNodeType.HOST,
            cu.GraphNodeType.GRAPH,
            cu.GraphNodeType.EMPTY,
            cu.GraphNodeType.WAIT_EVENT,
            cu.GraphNodeType.EVENT_RECORD,
            cu.GraphNodeType.MEM_ALLOC,
            cu.GraphNodeType.MEM_FREE,
            cu.GraphNodeType.BATCH_MEM_OP,
        }
        assert ad2.dependencies == [ad1, fill] or set(ad2.dependencies) == {ad1, fill}
        assert set(wait.dependents) == {scratch, h2d, ms, kid}

        # The same work, eagerly.
        ref = (x * 2.0 + y) + 0.5
        exe = g.instantiate()
        for i in range(3):
            host_in[:] = x  # the memcpy node reads the host array at each replay
            exe.launch(stream)
            stream.synchronize()
            np.testing.assert_allclose(out.copy_to().view(np.float32), ref, rtol=1e-6)
            assert side.copy_to().tolist() == [0xAB] * 64
            assert flag.copy_to().view(np.uint32)[0] == 7
            assert calls == [1] * (i + 1)
            assert start.elapsed_ms(end) >= 0.0  # the record nodes are seen outside

        eager = cu.DeviceBuffer.from_array(x)
        k["scale"].launch(stream, GRID, BLOCK, eager, np.float32(2.0), N)
        k["add"].launch(stream, GRID, BLOCK, eager, dy, N)
        tmp = cu.DeviceBuffer(4 * N, stream=stream)
        k["fill_f"].launch(stream, GRID, BLOCK, tmp, np.float32(0.5), N)
        k["add"].launch(stream, GRID, BLOCK, eager, tmp, N)
        stream.synchronize()
        np.testing.assert_array_equal(eager.copy_to(), out.copy_to().view(np.float32))

        # Per-node updates between replays: a kernel argument, a memset value,
        # a node switched off and on.
        exe.set_kernel_args(sc, buf, np.float32(3.0), N)
        exe.set_memset(ms, flag, 0, element_size=4)
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_allclose(out.copy_to().view(np.float32), (x * 3.0 + y) + 0.5, rtol=1e-6)
        exe.set_enabled(ad1, False)
        assert not exe.is_enabled(ad1)
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_allclose(out.copy_to().view(np.float32), x * 3.0 + 0.5, rtol=1e-6)
        exe.set_enabled(ad1, True)
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_allclose(out.copy_to().view(np.float32), (x * 3.0 + y) + 0.5, rtol=1e-6)
        exe.close()
        g.close()
        with pytest.raises(cu.ClosedError):
            _ = sc.handle

    def test_a_node_update_keeps_its_new_arguments_alive(
        self, ctx: cu.Context, stream: cu.Stream, k: dict[str, cu.Kernel]
    ) -> None:
        x = _x(3)
        buf = cu.DeviceBuffer.from_array(x)
        g = cu.Graph()
        node = g.add_kernel(k["add"], GRID, BLOCK, buf, buf, N)
        exe = g.instantiate()
        other = cu.DeviceBuffer.from_array(np.ones(N, np.float32))
        exe.set_kernel_args(node, buf, other, N)
        other.close()  # unusable now, but its memory stays while exe uses it
        del other
        gc.collect()
        filler = [cu.DeviceBuffer(4 * N) for _ in range(4)]
        for f in filler:
            f.fill(0)
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_allclose(buf.copy_to().view(np.float32), x + 1.0, rtol=1e-6)

    def test_a_captured_kernel_node_is_updated_by_its_node(
        self, ctx: cu.Context, stream: cu.Stream, k: dict[str, cu.Kernel]
    ) -> None:
        x = _x(4)
        buf = cu.DeviceBuffer.from_array(x)
        with stream.capture() as g:
            k["scale"].launch(stream, GRID, BLOCK, buf, np.float32(2.0), N)
        exe = g.instantiate()
        (node,) = g.nodes()
        assert node.type is cu.GraphNodeType.KERNEL
        exe.set_kernel_args(node, buf, np.float32(-1.0), N)
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_allclose(buf.copy_to().view(np.float32), -x, rtol=1e-6)

    def test_bad_nodes_and_arguments_are_refused_clearly(
        self, ctx: cu.Context, stream: cu.Stream, k: dict[str, cu.Kernel]
    ) -> None:
        g, other = cu.Graph(), cu.Graph()
        a = g.add_empty()
        b = other.add_empty()
        buf = cu.DeviceBuffer(64)
        with pytest.raises(ValueError, match="another graph"):
            g.add_empty(after=b)
        with pytest.raises(TypeError, match="GraphNode"):
            g.add_empty(after=[a, 3])
        with pytest.raises(TypeError, match="takes 3 arguments"):
            g.add_kernel(k["scale"], 1, 1, buf)
        with pytest.raises(ValueError, match="grid"):
            g.add_kernel(k["scale"], 0, 1, buf, 1.0, 1)
        with pytest.raises(ValueError, match="nbytes="):
            g.add_memcpy(buf, np.zeros(8, np.uint8))
        with pytest.raises(ValueError, match="more than"):
            g.add_memcpy(buf, np.zeros(8, np.uint8), 16)
        with pytest.raises(ValueError, match="aligned"):
            g.add_memset((int(buf.ptr) + 1), 0, element_size=4, count=1)
        with pytest.raises(ValueError, match="count="):
            g.add_memset(int(buf.ptr), 0)
        with pytest.raises(TypeError, match="ConditionalHandle"):
            g.add_while(1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="callable"):
            g.add_host_func(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="Event"):
            g.add_event_record(stream)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="positive"):
            g.add_alloc(0)
        with pytest.raises(ValueError, match="inside a capture"):
            g.add_kernel(
                k["scale"],
                1,
                1,
                buf,
                1.0,
                1,
                config=cu.LaunchConfig(programmatic_stream_serialization=True),
            )
        assert g.num_nodes == 1  # nothing half-added
        exe = g.instantiate()
        with pytest.raises(ValueError, match="not a node of the graph"):
            exe.set_enabled(b, False)
        with pytest.raises(TypeError, match="GraphNode"):
            exe.set_enabled(1, False)  # type: ignore[arg-type]
        with pytest.raises(cu.CudaError):
            exe.set_enabled(a, False)  # an empty node cannot be disabled
        g.close()
        with pytest.raises(cu.ClosedError):
            g.add_empty()
        with pytest.raises(cu.ClosedError):
            _ = a.type
        with pytest.raises(cu.ClosedError):
            exe.set_enabled(a, True)
        exe.launch(stream)  # the executable graph outlives its graph
        stream.synchronize()

    def test_host_node_errors_reach_synchronize(self, ctx: cu.Context, stream: cu.Stream) -> None:
        def boom(n: int) -> None:
            raise RuntimeError(f"boom {n}")

        g = cu.Graph()
        g.add_host_func(boom, 5)
        exe = g.instantiate()
        del g
        gc.collect()
        exe.launch(stream)
        with pytest.raises(cu.HostCallbackError, match="boom 5"):
            stream.synchronize()
        exe.launch(stream)
        with pytest.raises(cu.HostCallbackError, match="boom 5"):
            stream.synchronize()

    def test_configured_kernel_node(self, ctx: cu.Context, stream: cu.Stream) -> None:
        if ctx.device.compute_capability < (9, 0):
            pytest.skip("clusters need compute capability 9.0")
        kern = load_kernels(
            ctx,
            r"""extern "C" __global__ void ranks(unsigned* out) {
                unsigned n; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
                if (threadIdx.x == 0) out[blockIdx.x] = n; }""",
            "ranks",
        )["ranks"]
        out = cu.DeviceBuffer(4 * 8)
        g = cu.Graph()
        g.add_kernel(kern, 8, 32, out, config=cu.LaunchConfig(cluster=4))
        g.instantiate().launch(stream)
        stream.synchronize()
        assert out.copy_to().view(np.uint32).tolist() == [4] * 8


@pytest.mark.gpu
class TestConditionals:
    def test_while_loop_converges_on_the_device(
        self, ctx: cu.Context, stream: cu.Stream, k: dict[str, cu.Kernel]
    ) -> None:
        state = cu.DeviceBuffer(24)
        host = np.zeros(3, np.float64)
        g = cu.Graph()
        cond = g.conditional_handle(default=1)
        load = g.add_memcpy(state, host)
        loop = g.add_while(cond, after=load)
        loop.body.add_kernel(k["newton"], 1, 1, state, cond)
        exe = g.instantiate()
        for a in (2.0, 10.0, 12345.0, 0.25):
            host[:] = (1.0, a, 0.0)  # x = 1, a, steps: read at each replay
            exe.launch(stream)
            stream.synchronize()
            x, _a, steps = state.copy_to().view(np.float64)
            assert math.isclose(x, math.sqrt(a), rel_tol=1e-9)
            # As many device-side iterations as the host needs for the same input (one
            # more or less: the device may fuse x * x - a into one rounding).
            assert abs(steps - _newton_steps(a)) <= 1
            assert 1 < steps < 100

    def test_if_else_and_switch_choose_per_replay(
        self, ctx: cu.Context, stream: cu.Stream, k: dict[str, cu.Kernel]
    ) -> None:
        flag = cu.DeviceBuffer(4)
        out = cu.DeviceBuffer(8)
        g = cu.Graph()
        c_if = g.conditional_handle()
        c_sw = g.conditional_handle()
        s1 = g.add_kernel(k["set_from"], 1, 1, c_if, flag)
        s2 = g.add_kernel(k["set_from"], 1, 1, c_sw, flag, after=s1)
        branch = g.add_if(c_if, with_else=True, after=s2)
        then, other = branch.bodies
        then.add_kernel(k["put"], 1, 1, out, np.uint32(1))
        other.add_kernel(k["put"], 1, 1, out, np.uint32(2))
        sw = g.add_switch(c_sw, 3, after=branch)
        for i, body in enumerate(sw.bodies):
            body.add_kernel(k["put"], 1, 1, out.ptr + 4, np.uint32(10 + i))
        exe = g.instantiate()
        for value, want_if, want_sw in [(1, 1, 11), (0, 2, 10), (2, 1, 12), (5, 1, 99)]:
            flag.copy_from(np.array([value], np.uint32))
            out.copy_from(np.array([0, 99], np.uint32))
            exe.launch(stream)
            stream.synchronize()
            assert out.copy_to().view(np.uint32).tolist() == [want_if, want_sw]

    def test_conditional_and_child_graph_inside_a_capture(
        self, ctx: cu.Context, stream: cu.Stream, k: dict[str, cu.Kernel]
    ) -> None:
        flag = cu.DeviceBuffer(4)
        out = cu.DeviceBuffer(8)
        x = _x(5)
        buf = cu.DeviceBuffer.from_array(x)
        child = cu.Graph()
        child.add_kernel(k["scale"], GRID, BLOCK, buf, np.float32(2.0), N)
        side = cu.Stream(context=ctx)
        with stream.capture() as g:
            out.fill(0, stream=stream)
            cond = g.conditional_handle()
            k["set_from"].launch(stream, 1, 1, cond, flag)
            node = g.add_if(cond)
            with side.capture(into=node.body) as body:
                assert body is node.body
                k["put"].launch(side, 1, 1, out, np.uint32(7))
            g.add_child_graph(child)
            k["put"].launch(stream, 1, 1, out.ptr + 4, np.uint32(3))
        assert g.num_nodes == 5
        exe = g.instantiate()
        for value, want in [(1, 7), (0, 0), (1, 7)]:
            flag.copy_from(np.array([value], np.uint32))
            exe.launch(stream)
            stream.synchronize()
            assert out.copy_to().view(np.uint32).tolist() == [want, 3]
        np.testing.assert_allclose(buf.copy_to().view(np.float32), x * 8.0, rtol=1e-6)
        side.close()

    def test_failed_capture_leaves_no_usable_nodes(
        self, ctx: cu.Context, stream: cu.Stream, k: dict[str, cu.Kernel]
    ) -> None:
        with pytest.raises(KeyError), stream.capture() as g:
            cond = g.conditional_handle(default=0)
            node = g.add_while(cond)
            raise KeyError("stop")
        with pytest.raises(cu.ClosedError, match="ended without a graph"):
            _ = node.handle
        with pytest.raises(cu.ClosedError):
            node.body.add_empty()
        with pytest.raises(cu.ClosedError):
            g.add_empty()
        with pytest.raises(ValueError, match="after="):
            with stream.capture() as g2:
                g2.add_empty(after=[])
        stream.synchronize()  # the stream is usable afterwards


@pytest.mark.gpu
def test_closing_a_graph_while_other_threads_build_and_update_it_does_not_crash() -> None:
    # Every node method pins the graph (a body: the graph owning it) for its driver
    # calls, so a close() on another thread waits for them; users see only ClosedError.
    run_isolated(
        """
        ctx = make_current()
        (k,) = kernels("fill")
        buf = cu.DeviceBuffer(64)

        def generation():
            g = cu.Graph()
            first = g.add_kernel(k, 1, 1, buf, np.uint32(1), 1)
            cond = g.conditional_handle(default=0)
            node = g.add_if(cond, after=first)
            return dict(g=g, first=first, body=node.body, exe=g.instantiate())

        box = generation()
        calls = [0]

        def user(stop):
            ctx.set_current()
            while not stop.is_set():
                b = box
                g, first, body, exe = b["g"], b["first"], b["body"], b["exe"]
                ops = (
                    lambda: g.add_empty(after=first),
                    lambda: g.add_kernel(k, 1, 1, buf, np.uint32(2), 1),
                    lambda: g.add_memset(buf, 0, element_size=4),
                    lambda: body.add_kernel(k, 1, 1, buf, np.uint32(3), 1),
                    g.nodes,
                    lambda: first.type,
                    lambda: first.dependents,
                    lambda: exe.set_kernel_args(first, buf, np.uint32(4), 1),
                    lambda: exe.set_enabled(first, True),
                    lambda: g.num_nodes,
                )
                for op in ops:
                    try:
                        op()
                    except cu.ClosedError:
                        pass
                    calls[0] += 1

        def closer(stop):
            global box
            ctx.set_current()
            while not stop.is_set():
                old, box = box, generation()
                old["g"].close()
                old["exe"].close()
                del old

        run_threads([user, user, user, closer])
        assert calls[0] > 1000, calls
        ctx.synchronize()
        print("calls", calls[0])
        print("OK")
        """
    )


@pytest.mark.gpu
def test_instantiate_flags(ctx: cu.Context, stream: cu.Stream, k: dict[str, cu.Kernel]) -> None:
    x = _x(6)
    buf = cu.DeviceBuffer.from_array(x)
    g = cu.Graph()
    tmp = g.add_alloc(4 * N)  # never freed by the graph
    g.add_kernel(k["fill_f"], GRID, BLOCK, tmp, np.float32(1.0), N, after=tmp)
    exe = g.instantiate(auto_free_on_launch=True)
    for _ in range(3):  # each launch frees what the previous one left allocated
        exe.launch(stream)
    stream.synchronize()
    exe.close()
    g.close()

    plain = cu.Graph()
    plain.add_kernel(k["scale"], GRID, BLOCK, buf, np.float32(2.0), N)
    dev = plain.instantiate(device_launch=True, upload_stream=stream)
    dev.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(buf.copy_to().view(np.float32), 2.0 * x, rtol=1e-6)


@pytest.mark.gpu
def test_a_host_node_in_a_body_is_added_or_refused_cleanly(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    from cudriver._lifetime import _hostfn

    ran: list[str] = []
    g = cu.Graph()
    node = g.add_while(g.conditional_handle(default=0))
    before = _hostfn.registry_size()
    # Drivers differ on host nodes in conditional bodies: refused when added, refused
    # when instantiated, or accepted. Each must be clean.
    try:
        node.body.add_host_func(ran.append, "never")
    except cu.CudaError:
        gc.collect()
        assert _hostfn.registry_size() == before  # the refused node's record is gone
    else:
        assert _hostfn.registry_size() == before + 1
        try:
            exe = g.instantiate()
        except cu.CudaError:
            pass
        else:
            exe.launch(stream)  # the condition is 0: the body never runs
            stream.synchronize()
            assert ran == []
    g.close()
    with pytest.raises(cu.ClosedError, match="conditional body"):
        node.body.add_empty()
    with pytest.raises(cu.ClosedError):
        _ = node.body.handle
