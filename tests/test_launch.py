"""Launch configuration (cuLaunchKernelEx) and occupancy queries."""

from __future__ import annotations

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver._launch.launch import NO_BLOCK, config_arg, shape_of

from ._support import load_kernels
from .test_safety import run_isolated

SOURCE = r"""
extern "C" __global__ void cluster_rank(unsigned* out) {
    unsigned r, n;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = r;
        out[2 * blockIdx.x + 1] = n;
    }
}

// Each block reads the shared variable of the other block of its pair, through
// distributed shared memory.
extern "C" __global__ void neighbour(unsigned* out) {
    __shared__ unsigned v;
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    if (threadIdx.x == 0) v = 100 + rank;
    asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
    unsigned local = (unsigned)__cvta_generic_to_shared(&v);
    unsigned other = rank ^ 1u, remote, val;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(other));
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(val) : "r"(remote) : "memory");
    asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
    if (threadIdx.x == 0) out[blockIdx.x] = val;
}

extern "C" __global__ void fill(unsigned* p, unsigned v) { p[blockIdx.x] = v; }

// Programmatic dependent launch: the producer lets its dependant start at once; the
// consumer waits (griddepcontrol.wait) for the producer's results before reading them.
extern "C" __global__ void producer(unsigned* p, long long cycles) {
    asm volatile("griddepcontrol.launch_dependents;");
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
    p[blockIdx.x] = 7;
}
extern "C" __global__ void consumer(const unsigned* p, unsigned* q) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    q[blockIdx.x] = p[blockIdx.x] + 1;
}

// For the overlap: the producer notes when it ends, the consumer when it starts (before
// it waits), both on the device's nanosecond timer.
__device__ unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
extern "C" __global__ void timed_producer(unsigned long long* t_end, long long cycles) {
    asm volatile("griddepcontrol.launch_dependents;");
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
    if (threadIdx.x == 0) atomicMax(t_end, now());
}
extern "C" __global__ void timed_consumer(unsigned long long* t_start, long long cycles) {
    if (threadIdx.x == 0) atomicMin(t_start, now());
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }   // work that does not need the producer's data
    asm volatile("griddepcontrol.wait;" ::: "memory");
}
"""

# A grid-wide barrier by hand: it only ends when every block of the grid is resident,
# which a cooperative launch guarantees.
COOPERATIVE = r"""
extern "C" __global__ void grid_count(unsigned* counter, unsigned* out, unsigned nblocks) {
    if (threadIdx.x == 0) {
        atomicAdd(counter, 1u);
        while (atomicAdd(counter, 0u) < nblocks) { }
        out[blockIdx.x] = atomicAdd(counter, 0u);
    }
}
"""


# -- LaunchConfig, no GPU ------------------------------------------------------------------
def test_config_validates_and_normalises() -> None:
    c = cu.LaunchConfig(cluster=2, cooperative=True, priority=-1, mem_sync_domain=1)
    assert c.cluster == (2, 1, 1)
    assert not c.plain
    assert c.names() == ["cluster", "cooperative", "priority", "mem_sync_domain"]
    assert cu.LaunchConfig().plain
    assert cu.LaunchConfig().attributes() == []
    assert config_arg(cu.LaunchConfig()) is None  # a plain config takes cuLaunchKernel
    with pytest.raises(TypeError, match="cooperative"):
        cu.LaunchConfig(cooperative=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cluster"):
        cu.LaunchConfig(cluster=(2, 0))
    with pytest.raises(ValueError, match="mem_sync_domain"):
        cu.LaunchConfig(mem_sync_domain=2)
    with pytest.raises(TypeError, match="priority"):
        cu.LaunchConfig(priority=1.5)  # type: ignore[arg-type]
    for priority in (2**31, -(2**31) - 1, 2**64):
        with pytest.raises(ValueError, match="priority"):
            cu.LaunchConfig(priority=priority)
    with pytest.raises(TypeError, match="LaunchConfig"):
        config_arg({"cooperative": True})


def test_config_takes_cuda_cores_shape() -> None:
    # What a cuda.core user writes works; grid counts blocks, shared_mem is bytes.
    c = cu.LaunchConfig(grid=64, block=(16, 16), shmem_size=1024, cooperative_launch=True)
    assert (c.grid, c.block, c.shared_mem, c.cooperative) == ((64, 1, 1), (16, 16, 1), 1024, True)
    assert c == cu.LaunchConfig(grid=64, block=(16, 16), shared_mem=1024, cooperative=True)
    bare = c._attributes_only()
    assert bare is not None and bare.grid is None and bare.cooperative
    assert c._attributes_only() is bare  # made once
    assert cu.LaunchConfig(grid=1, block=1)._attributes_only() is None  # plain
    assert cu.LaunchConfig(grid=1, block=1).plain
    with pytest.raises(TypeError, match="keyword arguments only"):
        cu.LaunchConfig((1,), None, (32,))  # type: ignore[misc]
    with pytest.raises(ValueError, match="together"):
        cu.LaunchConfig(grid=4)
    with pytest.raises(ValueError, match="counts such a grid in clusters"):
        cu.LaunchConfig(grid=4, block=32, cluster=2)
    with pytest.raises(ValueError, match="goes with grid and block"):
        cu.LaunchConfig(shared_mem=16)
    with pytest.raises(TypeError, match="not both"):
        cu.LaunchConfig(grid=1, block=1, shared_mem=1, shmem_size=1)
    with pytest.raises(TypeError, match="not both"):
        cu.LaunchConfig(cooperative=True, cooperative_launch=True)
    with pytest.raises(ValueError, match="grid"):
        cu.LaunchConfig(grid=0, block=1)
    with pytest.raises(ValueError, match="shared_mem"):
        cu.LaunchConfig(grid=1, block=1, shared_mem=-1)
    # A config with a shape goes in place of grid and block, never as config=.
    with pytest.raises(TypeError, match="in their place"):
        config_arg(cu.LaunchConfig(grid=1, block=1))


def test_shape_of_reads_both_ways_of_writing_a_launch() -> None:
    cfg = cu.LaunchConfig(grid=8, block=32, shared_mem=64, priority=1)
    g, b, args, shmem, attrs = shape_of(cfg, "x", ("y",), 0, None)
    assert (g, b, args, shmem) == ((8, 1, 1), (32, 1, 1), ("x", "y"), 64)
    assert attrs is not None and attrs.priority == 1 and attrs.grid is None
    assert shape_of(cfg, NO_BLOCK, (), 0, None)[2] == ()
    assert shape_of(4, 32, (1,), 0, None) == (4, 32, (1,), 0, None)
    with pytest.raises(TypeError, match="given twice"):
        shape_of(cfg, NO_BLOCK, (), 0, cu.LaunchConfig(priority=1))
    with pytest.raises(TypeError, match="shared memory is its shared_mem"):
        shape_of(cfg, NO_BLOCK, (), 16, None)
    with pytest.raises(TypeError, match="has no grid and block"):
        shape_of(cu.LaunchConfig(cooperative=True), NO_BLOCK, (), 0, None)
    with pytest.raises(TypeError, match="needs grid and block"):
        shape_of(4, NO_BLOCK, (), 0, None)


def test_config_attributes_carry_the_values() -> None:
    c = cu.LaunchConfig(cluster=(2, 1, 1), programmatic_stream_serialization=True, priority=3)
    by_id = {int(a.id): a.value for a in c.attributes()}
    a = drv.CUlaunchAttributeID
    v = by_id[int(a.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)].clusterDim
    assert (v.x, v.y, v.z) == (2, 1, 1)
    assert by_id[int(a.CU_LAUNCH_ATTRIBUTE_PRIORITY)].priority == 3
    serial = by_id[int(a.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)]
    assert serial.programmaticStreamSerializationAllowed == 1


# -- on the GPU ----------------------------------------------------------------------------
def _needs_clusters(ctx: cu.Context) -> None:
    if ctx.device.attribute(cu.DeviceAttribute.COMPUTE_CAPABILITY_MAJOR) < 9:
        pytest.skip("thread-block clusters need compute capability 9.0")


@pytest.mark.gpu
def test_cluster_launch_sets_the_cluster_registers(ctx: cu.Context, stream: cu.Stream) -> None:
    _needs_clusters(ctx)
    k = load_kernels(ctx, SOURCE, "cluster_rank")["cluster_rank"]
    out = cu.DeviceBuffer(8 * 2 * 4)
    k.launch(stream, 8, 32, out, config=cu.LaunchConfig(cluster=2))
    got = out.copy_to(stream=stream).view(np.uint32).reshape(8, 2)
    stream.synchronize()
    assert got[:, 0].tolist() == [0, 1] * 4
    assert got[:, 1].tolist() == [2] * 8
    k.launch(stream, 8, 32, out)  # no config: clusters of one
    got = out.copy_to(stream=stream).view(np.uint32).reshape(8, 2)
    stream.synchronize()
    assert got[:, 1].tolist() == [1] * 8


@pytest.mark.gpu
def test_a_config_with_a_shape_launches_in_place_of_grid_and_block(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    k = load_kernels(ctx, SOURCE, "fill")["fill"]
    out = cu.DeviceBuffer(6 * 4)
    out.fill(0)
    k.launch(stream, cu.LaunchConfig(grid=3, block=32), out, np.uint32(7))
    k.launch(stream, cu.LaunchConfig(grid=(3, 1), block=32, priority=0), out[12:], np.uint32(9))
    stream.synchronize()
    assert out.copy_to().view(np.uint32).tolist() == [7, 7, 7, 9, 9, 9]
    plan = k.prepare(cu.LaunchConfig(grid=6, block=32), out, np.uint32(4))
    assert plan.grid == (6, 1, 1) and plan.block == (32, 1, 1)
    plan.launch(stream)
    stream.synchronize()
    assert out.copy_to().view(np.uint32).tolist() == [4] * 6
    g = cu.Graph()
    g.add_kernel(k, cu.LaunchConfig(grid=6, block=32), out, np.uint32(2))
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert out.copy_to().view(np.uint32).tolist() == [2] * 6
    with stream.capture() as cg:
        k.launch(stream, cu.LaunchConfig(grid=6, block=32), out, np.uint32(3))
    cg.instantiate().launch(stream)
    stream.synchronize()
    assert out.copy_to().view(np.uint32).tolist() == [3] * 6
    with pytest.raises(TypeError, match="in their place"):
        k.launch(stream, 6, 32, out, np.uint32(1), config=cu.LaunchConfig(grid=6, block=32))
    with pytest.raises(TypeError, match="takes 2 arguments, 1 given"):
        k.launch(stream, cu.LaunchConfig(grid=6, block=32), out)
    with pytest.raises(TypeError, match=r"Stream\.legacy\(\)"):
        k.launch(None, cu.LaunchConfig(grid=6, block=32), out, np.uint32(1))
    with pytest.raises(TypeError, match=r"Stream\.legacy\(\)"):
        k.launch(None, 6, 32, out, np.uint32(1))
    with pytest.raises(TypeError, match=r"Stream\.legacy\(\)"):
        plan.launch(None)


@pytest.mark.gpu
def test_cluster_blocks_read_each_others_shared_memory(ctx: cu.Context, stream: cu.Stream) -> None:
    _needs_clusters(ctx)
    k = load_kernels(ctx, SOURCE, "neighbour")["neighbour"]
    out = cu.DeviceBuffer(8 * 4)
    k.launch(stream, 8, 32, out, config=cu.LaunchConfig(cluster=2))
    got = out.copy_to(stream=stream).view(np.uint32)
    stream.synchronize()
    assert got.tolist() == [101, 100] * 4


@pytest.mark.gpu
def test_prepared_and_captured_launches_take_the_config(ctx: cu.Context, stream: cu.Stream) -> None:
    _needs_clusters(ctx)
    k = load_kernels(ctx, SOURCE, "cluster_rank")["cluster_rank"]
    out = cu.DeviceBuffer(4 * 2 * 4)
    plan = k.prepare(4, 32, out, config=cu.LaunchConfig(cluster=(4, 1, 1)))
    plan.launch(stream)
    got = out.copy_to(stream=stream).view(np.uint32).reshape(4, 2)
    stream.synchronize()
    assert got.tolist() == [[0, 4], [1, 4], [2, 4], [3, 4]]
    out.fill(0, stream=stream)
    with stream.capture() as g:
        k.launch(stream, 4, 32, out, config=cu.LaunchConfig(cluster=2))
    exe = g.instantiate()
    for _ in range(2):
        exe.launch(stream)
    got = out.copy_to(stream=stream).view(np.uint32).reshape(4, 2)
    stream.synchronize()
    assert got.tolist() == [[0, 2], [1, 2], [0, 2], [1, 2]]


@pytest.mark.gpu
def test_dependent_launch_waits_for_the_data_it_reads(ctx: cu.Context, stream: cu.Stream) -> None:
    _needs_clusters(ctx)  # griddepcontrol: compute capability 9.0 as well
    ks = load_kernels(ctx, SOURCE, "producer", "consumer")
    p, q = cu.DeviceBuffer(16 * 4), cu.DeviceBuffer(16 * 4)
    p.fill(0, stream=stream)
    pdl = cu.LaunchConfig(programmatic_stream_serialization=True)
    for _ in range(3):
        ks["producer"].launch(stream, 16, 32, p, 2_000_000)
        ks["consumer"].launch(stream, 16, 32, p, q, config=pdl)
    stream.synchronize()
    assert q.copy_to().view(np.uint32).tolist() == [8] * 16


@pytest.mark.gpu
def test_dependent_launch_overlaps_the_kernel_before_it(ctx: cu.Context, stream: cu.Stream) -> None:
    _needs_clusters(ctx)
    ks = load_kernels(ctx, SOURCE, "timed_producer", "timed_consumer")
    cycles = 20_000_000  # about 10 ms at 2 GHz, each
    times = cu.DeviceBuffer(16)

    def run(config: cu.LaunchConfig | None) -> tuple[int, float]:
        times.copy_from(np.array([0, 2**64 - 1], dtype=np.uint64), stream=stream)
        start, end = cu.Event(timing=True), cu.Event(timing=True)
        start.record(stream)
        ks["timed_producer"].launch(stream, 16, 32, times, cycles)
        ks["timed_consumer"].launch(stream, 16, 32, times.view(8), cycles, config=config)
        end.record(stream)
        stream.synchronize()
        t_end, t_start = (int(x) for x in times.copy_to().view(np.uint64))
        return t_start - t_end, start.elapsed_ms(end)

    gap_serial, ms_serial = run(None)
    gap_pdl, ms_pdl = run(cu.LaunchConfig(programmatic_stream_serialization=True))
    print(f"serial: consumer started {gap_serial} ns after the producer ended, {ms_serial:.2f} ms")
    print(f"dependent launch: {gap_pdl} ns, {ms_pdl:.2f} ms")
    assert gap_serial > 0  # in order: the consumer started after the producer ended
    assert gap_pdl < 0  # overlapped: it started while the producer ran
    assert ms_pdl < 0.8 * ms_serial


@pytest.mark.gpu
def test_a_refused_config_names_its_attributes(ctx: cu.Context, stream: cu.Stream) -> None:
    _needs_clusters(ctx)
    k = load_kernels(ctx, SOURCE, "fill")["fill"]
    out = cu.DeviceBuffer(3 * 4)
    with pytest.raises(cu.CudaError, match="cuLaunchKernelEx.*launch attributes set: cluster"):
        k.launch(stream, 3, 32, out, np.uint32(1), config=cu.LaunchConfig(cluster=2))
    k.launch(stream, 3, 32, out, np.uint32(5))  # the stream and context are still usable
    stream.synchronize()
    assert out.copy_to().view(np.uint32).tolist() == [5, 5, 5]


@pytest.mark.gpu
def test_cooperative_grid_barrier_and_too_large_grid() -> None:
    # In its own process: a grid that is not all resident would spin forever.
    run_isolated(
        f"""
        ctx = make_current()
        src = {COOPERATIVE!r}
        module = cu.Module.load(cu.compile(src, arch=cu.Device(0), target="cubin"))
        k = module.kernel("grid_count")
        sms = ctx.device.multiprocessor_count
        per_sm = k.max_active_blocks_per_sm(64)
        assert per_sm >= 1, per_sm
        n = per_sm * sms
        counter = cu.DeviceBuffer(4)
        counter.fill(0)
        out = cu.DeviceBuffer(4 * n)
        s = cu.Stream()
        k.launch(s, n, 64, counter, out, np.uint32(n), config=cu.LaunchConfig(cooperative=True))
        s.synchronize()
        assert (out.copy_to().view(np.uint32) == n).all()
        try:
            k.launch(s, n + 1, 64, counter, out, np.uint32(n + 1),
                     config=cu.LaunchConfig(cooperative=True))
        except cu.CudaError as e:
            assert "COOPERATIVE_LAUNCH_TOO_LARGE" in str(e), e
            assert "max_active_blocks_per_sm" in str(e), e
        else:
            raise AssertionError("a too-large cooperative grid was launched")
        s.synchronize()
        print("OK")
        """
    )


@pytest.mark.gpu
def test_occupancy_answers_fit_the_device(ctx: cu.Context) -> None:
    k = load_kernels(ctx, SOURCE, "fill")["fill"]
    dev = ctx.device
    most_blocks = dev.attribute(cu.DeviceAttribute.MAX_BLOCKS_PER_MULTIPROCESSOR)
    most_threads = dev.attribute(cu.DeviceAttribute.MAX_THREADS_PER_MULTIPROCESSOR)
    for block in (32, 128, 256, 1024):
        n = k.max_active_blocks_per_sm(block)
        assert 1 <= n <= most_blocks
        assert n * block <= most_threads
    min_grid, block = k.suggested_block_size()
    assert 32 <= block <= k.max_threads_per_block and block % 32 == 0
    assert min_grid >= dev.multiprocessor_count
    # Shared memory as a function of the block size: 64 bytes per thread.
    grid2, block2 = k.suggested_block_size(lambda b: 64 * b, max_block_size=512)
    assert 32 <= block2 <= 512 and block2 % 32 == 0
    assert grid2 == k.max_active_blocks_per_sm(block2, 64 * block2) * dev.multiprocessor_count
    with pytest.raises(TypeError, match="block_size"):
        k.max_active_blocks_per_sm(1.5)  # type: ignore[arg-type]
    if dev.attribute(cu.DeviceAttribute.COMPUTE_CAPABILITY_MAJOR) >= 9:
        size = k.max_potential_cluster_size(128)
        assert 1 <= size <= 16
        assert k.max_active_clusters(16, 128, 2) >= 1
