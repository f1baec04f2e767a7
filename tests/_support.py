"""Plain helpers and constants shared by the test files (fixtures live in conftest.py).

Nothing here calls the driver at import time; the helpers that do are used by ``gpu``
tests only.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver._launch.program import NvrtcNotFoundError, nvrtc_version

# -- what this machine has --------------------------------------------------------------


def package_root() -> str:
    """The folder holding the cudriver under test (``src`` in place, or site-packages).

    Child processes put it first on ``PYTHONPATH``, so that they import the same build
    as the test run: the installed wheel, or the checkout with its core built in place.
    """
    from pathlib import Path

    import cudriver

    return str(Path(cudriver.__file__).resolve().parents[1])


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when a driver and a device are usable, else why not (probed once)."""
    try:
        cu.init()
        n = cu.Device.count()
    except cu.DriverNotFoundError:
        return "no NVIDIA driver on this machine"
    except cu.CudaError as exc:
        return f"the CUDA driver is unusable: {exc}"
    if n == 0:
        return "the CUDA driver sees no device"
    return None


def nvrtc_missing_reason() -> str | None:
    """None when NVRTC's library loads, else why not."""
    try:
        nvrtc_version()
    except NvrtcNotFoundError as exc:
        return str(exc)
    return None


# For the tests of what happens without a driver: they skip where one is present.
no_driver = pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a driver is present")

needs_nvrtc = pytest.mark.skipif(
    nvrtc_missing_reason() is not None, reason="NVRTC (cudriver[nvrtc]) is not installed"
)


def import_or_skip(name: str) -> ModuleType:
    """``pytest.importorskip``, with the warnings some libraries give on import silenced
    (the suite turns warnings into errors)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pytest.importorskip(name)


# -- stand-ins that need no GPU ---------------------------------------------------------

# A fake device address: the tests that use it only check what is done before any driver
# call, so it is never dereferenced.
FAKE = 0x7F0000000000


class FakeBuffer:
    """Anything with an int ``ptr`` (like cudriver.DeviceBuffer)."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class CAI:
    """A minimal foreign ``__cuda_array_interface__`` exporter (CuPy, PyTorch, Numba).

    Sixteen float32 at ``ptr``; keyword arguments replace entries of the interface.
    """

    def __init__(self, ptr: int | None = FAKE, **fields: Any) -> None:
        self.__cuda_array_interface__ = {
            "version": 3,
            "data": (ptr, False),
            "shape": (16,),
            "typestr": "<f4",
            "strides": None,
            "stream": None,
            **fields,
        }


class Pair(ctypes.Structure):
    """``struct Pair { int a; double b; }``: 16 bytes, passed to kernels by value."""

    _fields_ = [("a", ctypes.c_int32), ("b", ctypes.c_double)]


def keeps_alive(make_holder: Callable[[object], object]) -> None:
    """Assert that what ``make_holder(owner)`` returns keeps ``owner`` alive, and only
    as long as it lives itself."""

    class Owner:
        pass

    owner = Owner()
    ref = weakref.ref(owner)
    holder = make_holder(owner)
    del owner
    gc.collect()
    assert ref() is not None
    del holder
    gc.collect()
    assert ref() is None


# -- raw driver memory for the GPU tests (cudriver._memory.memory is not used) ------------------


def unwrap(result: tuple[Any, ...]) -> Any:
    """Check a raw ``cuda.bindings`` result tuple; return its value(s)."""
    assert result[0] == drv.CUresult.CUDA_SUCCESS, result[0]
    return result[1] if len(result) == 2 else result[1:]


class RawBuffer:
    """Zeroed device memory from ``cuMemAlloc``, with a DeviceBuffer's ``ptr`` and
    ``nbytes``."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.ptr = int(unwrap(drv.cuMemAlloc(nbytes)))
        unwrap(drv.cuMemsetD8(self.ptr, 0, nbytes))

    @classmethod
    def from_array(cls, a: np.ndarray[Any, Any]) -> RawBuffer:
        b = cls(a.nbytes)
        unwrap(drv.cuMemcpyHtoD(b.ptr, a.ctypes.data, a.nbytes))
        return b

    def to(self, dtype: Any, n: int) -> np.ndarray[Any, Any]:
        out = np.empty(n, dtype)
        unwrap(drv.cuMemcpyDtoH(out.ctypes.data, self.ptr, out.nbytes))
        return out

    def close(self) -> None:
        if self.ptr:
            unwrap(drv.cuMemFree(self.ptr))
            self.ptr = 0


class Mapped:
    """Zeroed device-mapped pinned host memory, shaped like a mapped PinnedBuffer.

    Word 0 (``u32[0]``) serves as the gate that stream waits in the tests wait on.
    """

    def __init__(self, nbytes: int) -> None:
        self.ptr = int(unwrap(drv.cuMemHostAlloc(nbytes, drv.CU_MEMHOSTALLOC_DEVICEMAP)))
        self.nbytes = nbytes
        self.device_ptr = int(unwrap(drv.cuMemHostGetDevicePointer(self.ptr, 0)))
        raw = (ctypes.c_uint32 * (nbytes // 4)).from_address(self.ptr)
        self.u32 = np.ctypeslib.as_array(raw)
        self.u32[:] = 0

    def u64(self, i: int) -> int:
        return int(ctypes.c_uint64.from_address(self.ptr + 8 * i).value)

    def open(self, value: int = 1) -> None:
        """Set the gate word."""
        self.u32[0] = value

    def close(self) -> None:
        unwrap(drv.cuMemFreeHost(self.ptr))


# -- waiting on streams -----------------------------------------------------------------


def in_threads(work: Callable[[int], object], n: int, timeout: float = 60.0) -> list[BaseException]:
    """Run ``work(k)`` for k in ``range(n)`` on ``n`` threads at once; what they raised.

    A thread still running after ``timeout`` seconds counts as an error (a hang), never
    as a pass.
    """
    import threading

    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            work(k)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(deadline - time.monotonic(), 0.0))
    hung = sum(t.is_alive() for t in threads)
    if hung:
        errors.append(AssertionError(f"{hung} of {n} threads still ran after {timeout} s"))
    return errors


def until(pred: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``pred`` until it holds or ``timeout`` seconds pass; return its last value."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.0005)
    return bool(pred())


def stays_blocked(stream: cu.Stream, seconds: float = 0.05) -> bool:
    """True when ``stream`` still has work pending for all of ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if stream.query():
            return False
        time.sleep(0.002)
    return True


@contextmanager
def blocked(stream: cu.Stream, release: Callable[[], object]) -> Iterator[None]:
    """Assert that ``stream`` stays blocked, then run the block (checks made while it
    waits); then ``release()`` it, even when a check failed, and wait until it drains."""
    try:
        assert stays_blocked(stream), "the stream finished its work before it was released"
        yield
    finally:
        release()
    assert until(stream.query), "the stream did not finish within 10 s of its release"


# -- kernels ----------------------------------------------------------------------------

AXPY_KERNEL = r"""
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

COPY_KERNEL = r"""
extern "C" __global__ void copy(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}
"""


def load_kernels(ctx: cu.Context, source: str, *names: str) -> dict[str, cu.Kernel]:
    """Compile ``source`` to a cubin for ``ctx``'s device, load it there and return the
    kernels named. (A cubin, not PTX: it loads even where NVRTC is newer than the driver.)
    """
    ctx.set_current()
    module = cu.Module.load(cu.compile(source, arch=ctx.device, target="cubin"), context=ctx)
    return {name: module.kernel(name) for name in names}


# -- NCCL across processes (tests/test_nccl.py, tests/test_examples.py) ------------------


def nccl_ranks_unavailable_reason() -> str | None:
    """None when two GPUs and nccl4py are here for a two-rank NCCL job, else why not."""
    reason = gpu_unavailable_reason()
    if reason is not None:
        return reason
    n = cu.Device.count()
    if n < 2:
        return f"needs two GPUs, one per rank; this machine has {n}"
    try:
        import nccl.core  # noqa: F401
    except ImportError as exc:
        return f"nccl4py is not installed (pip install '.[nccl]'): {exc}"
    return None


def free_port() -> int:
    """A TCP port of localhost that nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(argv: list[str], world_size: int, timeout: float) -> list[tuple[int, str, str]]:
    """Run ``argv`` as ``world_size`` processes set up as ``torchrun`` would set them up.

    Each gets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1 and a free
    MASTER_PORT, the tested cudriver first on PYTHONPATH, faulthandler armed.
    Their output goes to files, never to pipes: a rank blocked writing to a full pipe
    that nobody reads would hold up the others inside a collective. Returns (exit
    status, stdout, stderr) per rank; a rank past ``timeout`` is killed (status -9).
    """
    import os
    import subprocess
    import tempfile
    from pathlib import Path

    src = package_root()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for rank in range(world_size):
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
            env.update(
                RANK=str(rank),
                WORLD_SIZE=str(world_size),
                LOCAL_RANK=str(rank),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
                PYTHONFAULTHANDLER="1",
                PYTHONUNBUFFERED="1",
            )
            out = open(Path(tmp) / f"{rank}.out", "w+")  # noqa: SIM115 - closed below
            err = open(Path(tmp) / f"{rank}.err", "w+")  # noqa: SIM115
            procs.append((subprocess.Popen(argv, env=env, stdout=out, stderr=err), out, err))
        deadline = time.monotonic() + timeout
        results = []
        for p, out, err in procs:
            try:
                p.wait(timeout=max(deadline - time.monotonic(), 1.0))
                note = ""
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                note = f"\n(killed after {timeout} s)"
            with out, err:
                out.seek(0)
                err.seek(0)
                results.append((p.returncode, out.read(), err.read() + note))
    return results
