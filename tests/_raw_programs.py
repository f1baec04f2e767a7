"""Programs written the way NVIDIA's cuda-python samples are, for tests/test_compat.py.

Each is a complete script in the raw style: status tuples, a ``check_cuda_errors``
helper, status comparisons, cleanup on failure. The test runs each twice, once as
written (``cuda.bindings``) and once with only its import lines changed to
``cudriver.compat``, and compares what they print.
"""

from __future__ import annotations

RAW_IMPORTS = (
    "from cuda.bindings import driver as cuda\n"
    "from cuda.bindings import nvrtc\n"
    "from cuda.bindings import runtime as cudart\n"
)
COMPAT_IMPORTS = (
    "from cudriver.compat import driver as cuda\n"
    "from cudriver.compat import nvrtc\n"
    "from cudriver.compat import runtime as cudart\n"
)

HELPERS = """
import ctypes
import sys

import numpy as np


def _error_name(error):
    if isinstance(error, cuda.CUresult):
        err, name = cuda.cuGetErrorName(error)
        return name if err == cuda.CUresult.CUDA_SUCCESS else "<unknown>"
    if isinstance(error, nvrtc.nvrtcResult):
        return nvrtc.nvrtcGetErrorString(error)[1]
    if isinstance(error, cudart.cudaError_t):
        return cudart.cudaGetErrorName(error)[1]
    raise RuntimeError(f"Unknown error type: {error}")


def check_cuda_errors(result):
    if result[0].value:
        raise RuntimeError(f"CUDA error code={result[0].value}({_error_name(result[0])})")
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return result[1:]


def compile_kernel(source, name):
    err, = cuda.cuInit(0)
    if err != cuda.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuInit failed: {err}")
    dev = check_cuda_errors(cuda.cuDeviceGet(0))
    attr = cuda.CUdevice_attribute
    major = check_cuda_errors(cuda.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = check_cuda_errors(cuda.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    prog = check_cuda_errors(nvrtc.nvrtcCreateProgram(str.encode(source), name, 0, [], []))
    opts = [b"--fmad=false", f"--gpu-architecture=sm_{major}{minor}".encode()]
    err, = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        size = check_cuda_errors(nvrtc.nvrtcGetProgramLogSize(prog))
        log = b" " * size
        check_cuda_errors(nvrtc.nvrtcGetProgramLog(prog, log))
        raise RuntimeError(log.decode())
    size = check_cuda_errors(nvrtc.nvrtcGetCUBINSize(prog))
    cubin = b" " * size
    check_cuda_errors(nvrtc.nvrtcGetCUBIN(prog, cubin))
    check_cuda_errors(nvrtc.nvrtcDestroyProgram(prog))
    return dev, cubin


VADD = '''
extern "C" __global__ void vadd(const float* a, const float* b, float* c, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
'''
"""

VECTOR_ADD = """
dev, cubin = compile_kernel(VADD, b"vadd.cu")
ctx = check_cuda_errors(cuda.cuDevicePrimaryCtxRetain(dev))
check_cuda_errors(cuda.cuCtxSetCurrent(ctx))
module = check_cuda_errors(cuda.cuModuleLoadData(cubin))
kernel = check_cuda_errors(cuda.cuModuleGetFunction(module, b"vadd"))
n = 1 << 20
rng = np.random.default_rng(1)
a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
c = np.zeros(n, np.float32)
nbytes = a.nbytes
stream = check_cuda_errors(cuda.cuStreamCreate(0))
da = check_cuda_errors(cuda.cuMemAlloc(nbytes))
db = check_cuda_errors(cuda.cuMemAlloc(nbytes))
dc = check_cuda_errors(cuda.cuMemAlloc(nbytes))
try:
    check_cuda_errors(cuda.cuMemcpyHtoDAsync(da, a.ctypes.data, nbytes, stream))
    check_cuda_errors(cuda.cuMemcpyHtoDAsync(db, b.ctypes.data, nbytes, stream))
    args = ((da, db, dc, n), (None, None, None, ctypes.c_size_t))
    check_cuda_errors(cuda.cuLaunchKernel(kernel, (n + 255) // 256, 1, 1, 256, 1, 1, 0,
                                          stream, args, 0))
    err, = cuda.cuStreamQuery(stream)
    if err not in (cuda.CUresult.CUDA_SUCCESS, cuda.CUresult.CUDA_ERROR_NOT_READY):
        raise RuntimeError(f"query: {err}")
    check_cuda_errors(cuda.cuMemcpyDtoHAsync(c.ctypes.data, dc, nbytes, stream))
    check_cuda_errors(cuda.cuStreamSynchronize(stream))
finally:
    for p in (da, db, dc):
        check_cuda_errors(cuda.cuMemFree(p))
    check_cuda_errors(cuda.cuStreamDestroy(stream))
    check_cuda_errors(cuda.cuModuleUnload(module))
print("vector_add", np.array_equal(c, a + b), round(float(c.sum()), 1))
"""

VMM = """
err, = cuda.cuInit(0)
assert err == cuda.CUresult.CUDA_SUCCESS
dev = check_cuda_errors(cuda.cuDeviceGet(0))
check_cuda_errors(cuda.cuCtxSetCurrent(check_cuda_errors(cuda.cuDevicePrimaryCtxRetain(dev))))
prop = cuda.CUmemAllocationProp()
prop.type = cuda.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
prop.location.type = cuda.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
prop.location.id = 0
gran = check_cuda_errors(cuda.cuMemGetAllocationGranularity(
    prop, cuda.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM))
size = 4 * gran
ptr = check_cuda_errors(cuda.cuMemAddressReserve(size, 0, 0, 0))
handle = check_cuda_errors(cuda.cuMemCreate(size, prop, 0))
check_cuda_errors(cuda.cuMemMap(ptr, size, 0, handle, 0))
desc = cuda.CUmemAccessDesc()
desc.location = prop.location
desc.flags = cuda.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
check_cuda_errors(cuda.cuMemSetAccess(ptr, size, [desc], 1))
check_cuda_errors(cuda.cuMemsetD32(ptr, 7, size // 4))
out = np.empty(size // 4, np.uint32)
check_cuda_errors(cuda.cuMemcpyDtoH(out.ctypes.data, ptr, size))
check_cuda_errors(cuda.cuMemUnmap(ptr, size))
check_cuda_errors(cuda.cuMemRelease(handle))
check_cuda_errors(cuda.cuMemAddressFree(ptr, size))
print("vmm", int(out.sum()), size // 4 * 7)
"""

STREAM_ORDERED = """
err, = cuda.cuInit(0)
dev = check_cuda_errors(cuda.cuDeviceGet(0))
check_cuda_errors(cuda.cuCtxSetCurrent(check_cuda_errors(cuda.cuDevicePrimaryCtxRetain(dev))))
pool = check_cuda_errors(cuda.cuDeviceGetDefaultMemPool(dev))
threshold = cuda.cuuint64_t(2**63 - 1)
check_cuda_errors(cuda.cuMemPoolSetAttribute(
    pool, cuda.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, threshold))
stream = check_cuda_errors(cuda.cuStreamCreate(cuda.CUstream_flags.CU_STREAM_NON_BLOCKING))
total = 0
for i in range(1, 11):
    p = check_cuda_errors(cuda.cuMemAllocAsync(1 << 20, stream))
    check_cuda_errors(cuda.cuMemsetD8Async(p, i, 1 << 20, stream))
    out = np.empty(1 << 20, np.uint8)
    check_cuda_errors(cuda.cuMemcpyDtoHAsync(out.ctypes.data, p, 1 << 20, stream))
    check_cuda_errors(cuda.cuMemFreeAsync(p, stream))
    check_cuda_errors(cuda.cuStreamSynchronize(stream))
    total += int(out.sum())
check_cuda_errors(cuda.cuStreamDestroy(stream))
print("stream_ordered", total)
"""

GRAPH = """
err, = cuda.cuInit(0)
dev = check_cuda_errors(cuda.cuDeviceGet(0))
check_cuda_errors(cuda.cuCtxSetCurrent(check_cuda_errors(cuda.cuDevicePrimaryCtxRetain(dev))))
stream = check_cuda_errors(cuda.cuStreamCreate(cuda.CUstream_flags.CU_STREAM_NON_BLOCKING))
p = check_cuda_errors(cuda.cuMemAlloc(4096))
check_cuda_errors(cuda.cuMemsetD32(p, 0, 1024))
check_cuda_errors(cuda.cuStreamBeginCapture(
    stream, cuda.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL))
check_cuda_errors(cuda.cuMemsetD32Async(p, 5, 512, stream))
err, status, *_ = cuda.cuStreamGetCaptureInfo(stream)
assert err == cuda.CUresult.CUDA_SUCCESS
assert status == cuda.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
graph = check_cuda_errors(cuda.cuStreamEndCapture(stream))
nodes, count = check_cuda_errors(cuda.cuGraphGetNodes(graph))
exe = check_cuda_errors(cuda.cuGraphInstantiate(graph, 0))
for _ in range(3):
    check_cuda_errors(cuda.cuGraphLaunch(exe, stream))
check_cuda_errors(cuda.cuStreamSynchronize(stream))
out = np.empty(1024, np.uint32)
check_cuda_errors(cuda.cuMemcpyDtoH(out.ctypes.data, p, 4096))
check_cuda_errors(cuda.cuGraphExecDestroy(exe))
check_cuda_errors(cuda.cuGraphDestroy(graph))
check_cuda_errors(cuda.cuMemFree(p))
print("graph", count, int(out.sum()))
"""

RUNTIME = """
n = 1 << 16
host = np.arange(n, dtype=np.int32)
err, dptr = cudart.cudaMalloc(host.nbytes)
if err != cudart.cudaError_t.cudaSuccess:
    raise RuntimeError(_error_name(err))
kind = cudart.cudaMemcpyKind
check_cuda_errors(cudart.cudaMemcpy(dptr, host.ctypes.data, host.nbytes,
                                    kind.cudaMemcpyHostToDevice))
stream = check_cuda_errors(cudart.cudaStreamCreate())
check_cuda_errors(cudart.cudaMemsetAsync(dptr, 0, host.nbytes // 2, stream))
err, = cudart.cudaStreamQuery(stream)
assert err in (cudart.cudaError_t.cudaSuccess, cudart.cudaError_t.cudaErrorNotReady), err
check_cuda_errors(cudart.cudaStreamSynchronize(stream))
back = np.empty_like(host)
check_cuda_errors(cudart.cudaMemcpy(back.ctypes.data, dptr, host.nbytes,
                                    kind.cudaMemcpyDeviceToHost))
check_cuda_errors(cudart.cudaStreamDestroy(stream))
check_cuda_errors(cudart.cudaFree(dptr))
print("runtime", int(back.sum()))
"""

TWO_GPUS = """
err, = cuda.cuInit(0)
count = check_cuda_errors(cuda.cuDeviceGetCount())
if count < 2:
    print("two_gpus skipped: one device")
    sys.exit(0)
d0 = check_cuda_errors(cuda.cuDeviceGet(0))
d1 = check_cuda_errors(cuda.cuDeviceGet(1))
c0 = check_cuda_errors(cuda.cuDevicePrimaryCtxRetain(d0))
c1 = check_cuda_errors(cuda.cuDevicePrimaryCtxRetain(d1))
can = check_cuda_errors(cuda.cuDeviceCanAccessPeer(d0, d1))
n = 1 << 20
src = np.arange(n // 4, dtype=np.uint32)
check_cuda_errors(cuda.cuCtxSetCurrent(c0))
p0 = check_cuda_errors(cuda.cuMemAlloc(n))
check_cuda_errors(cuda.cuMemcpyHtoD(p0, src.ctypes.data, n))
check_cuda_errors(cuda.cuCtxSetCurrent(c1))
p1 = check_cuda_errors(cuda.cuMemAlloc(n))
check_cuda_errors(cuda.cuMemcpyPeer(p1, c1, p0, c0, n))
out = np.empty_like(src)
check_cuda_errors(cuda.cuMemcpyDtoH(out.ctypes.data, p1, n))
check_cuda_errors(cuda.cuMemFree(p1))
check_cuda_errors(cuda.cuCtxSetCurrent(c0))
check_cuda_errors(cuda.cuMemFree(p0))
print("two_gpus", bool(can), np.array_equal(out, src))
"""

PROGRAMS = {
    "vector_add": VECTOR_ADD,
    "vmm": VMM,
    "stream_ordered": STREAM_ORDERED,
    "graph": GRAPH,
    "runtime": RUNTIME,
    "two_gpus": TWO_GPUS,
}


def script(name: str, *, compat: bool) -> str:
    """Program ``name`` with the raw or the compat import lines."""
    return (COMPAT_IMPORTS if compat else RAW_IMPORTS) + HELPERS + PROGRAMS[name]


# Failures injected into a compat program: each must raise CudaError naming the call.
FAILURES = """
dev, cubin = compile_kernel(VADD, b"vadd.cu")
check_cuda_errors(cuda.cuCtxSetCurrent(check_cuda_errors(cuda.cuDevicePrimaryCtxRetain(dev))))
module = check_cuda_errors(cuda.cuModuleLoadData(cubin))
kernel = check_cuda_errors(cuda.cuModuleGetFunction(module, b"vadd"))
spin = check_cuda_errors(cuda.cuModuleGetFunction(module, b"spin"))
import cudriver as cu
try:
    cuda.cuMemAlloc(2**50)
except cu.OutOfMemoryError as exc:
    assert exc.func == "cuMemAlloc", exc
    print("oom:", exc)
else:
    raise AssertionError("an allocation of 2**50 bytes returned")
stream = check_cuda_errors(cuda.cuStreamCreate(0))
d = check_cuda_errors(cuda.cuMemAlloc(1024))
args = ((d, d, d, 1), (None, None, None, ctypes.c_size_t))
try:
    cuda.cuLaunchKernel(kernel, 1, 1, 1, 2048, 1, 1, 0, stream, args, 0)
except cu.CudaError as exc:
    assert exc.func == "cuLaunchKernel", exc
    print("launch:", exc)
else:
    raise AssertionError("a launch of 2048 threads per block returned")
bad = check_cuda_errors(nvrtc.nvrtcCreateProgram(b"__global__ void k() { x; }", b"b.cu", 0, [], []))
try:
    nvrtc.nvrtcCompileProgram(bad, 0, [])
except cu.CompileError as exc:
    assert "identifier" in exc.log and "nvrtcCompileProgram" in str(exc), exc
    print("nvrtc: log has", len(exc.log), "characters")
else:
    raise AssertionError("a bad program compiled")
sargs = ((20_000_000,), (ctypes.c_longlong,))
check_cuda_errors(cuda.cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, sargs, 0))
result = cuda.cuStreamQuery(stream)
assert result == (cuda.CUresult.CUDA_ERROR_NOT_READY,), result
check_cuda_errors(cuda.cuStreamSynchronize(stream))
assert cuda.cuStreamQuery(stream) == (cuda.CUresult.CUDA_SUCCESS,)
print("busy stream query returned", result[0].name)
print("OK")
"""
