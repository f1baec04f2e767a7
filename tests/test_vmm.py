"""VirtualBuffer: arguments, growth in place, sleep and wake, sharing, and misuse.

The checks made before any driver call run without a GPU. The GPU tests cover growth
with a kernel writing the whole range after each step, offload/restore around a captured
graph, two processes sharing one buffer through file descriptors, a peer device reading
it, and the hostile cases (closing while another thread launches, collection with work
in flight, closing inside a capture), each of those in its own process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import cudriver as cu

from ._support import gpu_unavailable_reason, load_kernels, needs_nvrtc
from .test_safety import run_isolated

VirtualBuffer = cu.VirtualBuffer
MiB = 1 << 20

KERNELS = r"""
extern "C" __global__ void iota(unsigned* p, unsigned base, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) p[i] = base + (unsigned)i;
}
extern "C" __global__ void affine(float* x, float a, float b, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i] + b;
}
extern "C" __global__ void gather(float* out, const float* in, float scale, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = scale * in[i];
}
"""


def _grid(n: int) -> int:
    return (n + 255) // 256


# -- argument validation before any driver call -----------------------------------------


@pytest.mark.parametrize(
    ("reserve", "exc"),
    [
        (0, ValueError),
        (-1, ValueError),
        (2**64, ValueError),
        ("x", TypeError),
        (1.5, TypeError),
        (True, TypeError),
        (None, TypeError),
    ],
)
def test_bad_reserve_is_refused_before_the_driver(reserve: Any, exc: type[Exception]) -> None:
    with pytest.raises(exc, match="reserve"):
        VirtualBuffer(reserve)


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        ({"nbytes": -1}, ValueError, "nbytes"),
        ({"nbytes": 2**64}, ValueError, "nbytes"),
        ({"nbytes": 1 << 30}, ValueError, "nbytes .* exceeds the reservation"),
        ({"nbytes": "x"}, TypeError, "nbytes"),
        ({"nbytes": 2.0}, TypeError, "nbytes"),
        ({"nbytes": True}, TypeError, "nbytes"),
        ({"handle_type": "posix"}, ValueError, "handle_type"),
        ({"handle_type": 1}, TypeError, "handle_type"),
        ({"access": "0"}, TypeError, "access"),
        ({"access": 1}, TypeError, "access"),
        ({"access": [1.5]}, TypeError, "access"),
        ({"access": [True]}, TypeError, "access"),
        ({"device": "gpu0"}, TypeError, "device"),
        ({"device": 1.0}, TypeError, "device"),
    ],
)
def test_bad_keywords_are_refused_before_the_driver(
    kwargs: dict[str, Any], exc: type[Exception], name: str
) -> None:
    with pytest.raises(exc, match=name):
        VirtualBuffer(4 * MiB, **kwargs)


def test_constructors_of_device_buffer_that_do_not_apply() -> None:
    for call in (
        lambda: VirtualBuffer.from_array(np.ones(4)),
        lambda: VirtualBuffer.empty(4),
        lambda: VirtualBuffer.from_handle(0x1000, 16),
        lambda: VirtualBuffer.from_dlpack(object()),
    ):
        with pytest.raises(TypeError, match="VirtualBuffer.* not available"):
            call()


def test_import_handle_validation() -> None:
    r, w = os.pipe()
    try:
        with pytest.raises(ValueError, match="non-empty"):
            VirtualBuffer.import_handle([], [])
        with pytest.raises(ValueError, match="one length"):
            VirtualBuffer.import_handle([r], [2 * MiB, 2 * MiB])
        with pytest.raises(TypeError, match="file descriptors"):
            VirtualBuffer.import_handle([1.5], [2 * MiB])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="file descriptors"):
            VirtualBuffer.import_handle([r, b"x" * 64], [2 * MiB, 2 * MiB])
        with pytest.raises(TypeError, match="file descriptors"):
            VirtualBuffer.import_handle([b"short"], [2 * MiB])
        with pytest.raises(ValueError, match="not a file descriptor"):
            VirtualBuffer.import_handle([-1], [2 * MiB])
        with pytest.raises(ValueError, match="sizes entry"):
            VirtualBuffer.import_handle([r], [0])
        with pytest.raises(TypeError, match="sizes entry"):
            VirtualBuffer.import_handle([r], ["2M"])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="reserve"):
            VirtualBuffer.import_handle([r], [4 * MiB], reserve=2 * MiB)
    finally:
        os.close(r)
        os.close(w)
    with pytest.raises(OSError):  # closed descriptor: the OS's message
        VirtualBuffer.import_handle([r], [2 * MiB])


def test_import_handle_refuses_a_device_buffer_style_call() -> None:
    # DeviceBuffer.import_handle(data, nbytes, *, pool) opens a pool allocation; the
    # VirtualBuffer override maps chunks: a call meant for the former fails loudly.
    with pytest.raises(TypeError, match="DeviceBuffer.import_handle"):
        VirtualBuffer.import_handle(bytes(64), 2 * MiB)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pool"):
        VirtualBuffer.import_handle(bytes(64), 2 * MiB, pool=None)  # type: ignore[call-arg, arg-type]
    with pytest.raises(TypeError, match="handles must be a sequence"):
        VirtualBuffer.import_handle(3, [2 * MiB])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sizes must be a sequence"):
        VirtualBuffer.import_handle([3], 2 * MiB)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="file descriptors"):
        VirtualBuffer.import_handle([True], [2 * MiB])


def closed_virtual_buffer() -> VirtualBuffer:
    """A VirtualBuffer that reads as closed, made without the driver: for the checks made
    before the buffer's state is looked at."""
    vb = VirtualBuffer.__new__(VirtualBuffer)
    vb._set_fields(0, None, None, None, None, None, 0)
    vb._h = None
    vb._vm = SimpleNamespace(closed=True, asleep=False)  # type: ignore[assignment]
    return vb


@pytest.mark.parametrize(
    ("access", "exc"),
    [
        (True, TypeError),
        (False, TypeError),
        (1.0, TypeError),
        ("rw", TypeError),
        (None, TypeError),
        (2, ValueError),
        (4, ValueError),
        (-1, ValueError),
    ],
)
def test_set_access_checks_the_access_first(access: object, exc: type[Exception]) -> None:
    with pytest.raises(exc, match="MemAccess"):
        closed_virtual_buffer().set_access(0, access)  # type: ignore[arg-type]


def test_a_closed_buffer_says_so_before_the_driver() -> None:
    vb = closed_virtual_buffer()
    for call in (
        lambda: vb.set_access(0),
        lambda: vb.set_access(0, cu.MemAccess.READ),
        lambda: vb.access(0),
        lambda: vb.export_handle(),
    ):
        with pytest.raises(cu.ClosedError, match="VirtualBuffer is closed"):
            call()


def test_deprecated_size_keyword() -> None:
    with pytest.warns(DeprecationWarning, match=r"VirtualBuffer\(size=...\).*nbytes=") as rec:
        with pytest.raises(ValueError, match="nbytes must be >= 0"):
            VirtualBuffer(4 * MiB, size=-1)  # checked as nbytes is
    assert [w.filename for w in rec] == [__file__]
    with pytest.warns(DeprecationWarning, match="size"):
        with pytest.raises(TypeError, match="nbytes"):
            VirtualBuffer(4 * MiB, size="1")  # type: ignore[arg-type]
    for nbytes in (0, 2 * MiB):
        with pytest.raises(TypeError, match="nbytes= or its deprecated name size=, not both"):
            VirtualBuffer(4 * MiB, nbytes=nbytes, size=2 * MiB)
    assert "Deprecated: use ``nbytes``" in (VirtualBuffer.__doc__ or "")


def test_deprecated_method_aliases_warn_at_the_caller() -> None:
    vb = closed_virtual_buffer()
    with pytest.warns(DeprecationWarning, match=r"VirtualBuffer.export\(\) .*export_handle") as rec:
        with pytest.raises(cu.ClosedError):
            vb.export()
    assert [w.filename for w in rec] == [__file__]
    with pytest.warns(DeprecationWarning, match="read_write") as rec:
        with pytest.raises(cu.ClosedError):
            vb.set_access(0, read_write=False)
    assert [w.filename for w in rec] == [__file__]
    with pytest.raises(TypeError, match="not both"):
        vb.set_access(0, cu.MemAccess.READ, read_write=True)
    with pytest.raises(TypeError, match="read_write must be True or False"):
        vb.set_access(0, read_write=1)  # type: ignore[arg-type]
    with pytest.warns(DeprecationWarning, match=r"import_handles.*import_handle") as rec:
        with pytest.raises(ValueError, match="non-empty"):
            VirtualBuffer.import_handles([], [])
    assert [w.filename for w in rec] == [__file__]
    for name in ("export", "import_handles"):
        assert "Deprecated: use" in (getattr(VirtualBuffer, name).__doc__ or ""), name
    assert "Deprecated: use ``access``" in (VirtualBuffer.set_access.__doc__ or "")


def test_is_a_device_buffer_whose_methods_name_their_driver_calls() -> None:
    assert issubclass(VirtualBuffer, cu.DeviceBuffer)
    assert VirtualBuffer.__module__ == "cudriver"
    for name in (
        "grow",
        "shrink",
        "offload",
        "restore",
        "set_access",
        "export_handle",
        "import_handle",
        "close",
    ):
        doc = getattr(VirtualBuffer, name).__doc__ or ""
        assert "``cuMem" in doc, name


# -- on a GPU -----------------------------------------------------------------------------


@pytest.fixture
def kernels(ctx: cu.Context) -> dict[str, cu.Kernel]:
    return load_kernels(ctx, KERNELS, "iota", "affine", "gather")


@pytest.mark.gpu
@needs_nvrtc
def test_grown_16_times_in_place_with_a_kernel_over_the_whole_range(
    ctx: cu.Context, stream: cu.Stream, kernels: dict[str, cu.Kernel]
) -> None:
    iota = kernels["iota"]
    probe = VirtualBuffer(1)
    g = probe.granularity
    assert g > 0 and probe.reserved == g and probe.nbytes == 0
    probe.close()
    buf = VirtualBuffer(16 * g)
    ptr = buf.ptr
    assert buf.nbytes == 0 and buf.chunks == ()
    for step in range(16):
        assert buf.grow(g) == (step + 1) * g
        assert buf.ptr == ptr and int(buf) == ptr
        n = buf.nbytes // 4
        base = 1000 * step
        iota.launch(stream, _grid(n), 256, buf, np.uint32(base), n)
        stream.synchronize()
        want = (base + np.arange(n, dtype=np.uint64)).astype(np.uint32)
        np.testing.assert_array_equal(buf.copy_to().view(np.uint32), want)
        assert buf.__cuda_array_interface__["data"] == (ptr, False)
        assert buf.__cuda_array_interface__["shape"] == (buf.nbytes,)
    assert buf.chunks == (g,) * 16
    with pytest.raises(ValueError, match=rf"grow\(1\) needs {g} bytes .* 0 of the {16 * g}"):
        buf.grow(1)
    assert buf.shrink(3 * g) == 13 * g  # three chunks
    assert buf.ptr == ptr and buf.nbytes == 13 * g
    assert buf.grow(2 * g) == 15 * g
    assert buf.chunks == (*((g,) * 13), 2 * g)
    with pytest.raises(ValueError, match=f"shrink by {2 * g}, {3 * g}"):
        buf.shrink(g)  # half of the last chunk
    n = buf.nbytes // 4
    iota.launch(stream, _grid(n), 256, buf, np.uint32(7), n)
    stream.synchronize()
    got = buf.copy_to().view(np.uint32)
    np.testing.assert_array_equal(got, (7 + np.arange(n, dtype=np.uint64)).astype(np.uint32))
    buf.close()


@pytest.mark.gpu
@pytest.mark.device_memory
@needs_nvrtc
def test_sleep_and_wake_around_a_captured_graph(
    ctx: cu.Context, stream: cu.Stream, kernels: dict[str, cu.Kernel]
) -> None:
    affine = kernels["affine"]
    nbytes = 256 * MiB
    n = nbytes // 4
    x0 = (np.arange(n, dtype=np.uint32) % 4093).astype(np.float32)
    buf = VirtualBuffer(nbytes, nbytes=nbytes)
    ptr = buf.ptr
    buf.copy_from(x0)
    with stream.capture() as g:
        affine.launch(stream, _grid(n), 256, buf, np.float32(1.5), np.float32(-2.0), n)
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()

    free0, _ = cu.mem_get_info()
    buf.offload()
    free1, _ = cu.mem_get_info()
    assert buf.offloaded and not buf.closed
    assert free1 - free0 >= nbytes, (free0, free1)
    with pytest.raises(cu.ClosedError, match="offloaded"):
        buf.copy_to()
    with pytest.raises(cu.ClosedError, match="offloaded"):
        affine.launch(stream, _grid(n), 256, buf, np.float32(1.0), np.float32(0.0), n)
    assert "offloaded" in repr(buf)
    buf.restore()
    assert not buf.offloaded and buf.ptr == ptr and buf.nbytes == nbytes
    assert cu.mem_get_info()[0] <= free1 - nbytes
    exe.launch(stream)  # the graph holds the same address
    stream.synchronize()

    ref = cu.DeviceBuffer.from_array(x0)  # the same work, eagerly
    for _ in range(2):
        affine.launch(stream, _grid(n), 256, ref, np.float32(1.5), np.float32(-2.0), n)
    stream.synchronize()
    np.testing.assert_array_equal(buf.copy_to().view(np.float32), ref.copy_to().view(np.float32))
    del exe, g
    buf.close()
    ref.close()


@pytest.mark.gpu
def test_two_processes_share_one_buffer_through_a_file_descriptor(ctx: cu.Context) -> None:
    if not ctx.device.attribute(cu.DeviceAttribute.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED):
        pytest.skip("this device cannot export memory as POSIX file descriptors")
    g = VirtualBuffer(1).granularity
    buf = VirtualBuffer(8 * g, nbytes=g, handle_type="fd")
    buf.grow(2 * g)  # two chunks: two descriptors
    n = buf.nbytes // 4
    buf.copy_from(np.arange(n, dtype=np.uint32))
    fds = [int(fd) for fd in buf.export_handle()]
    assert len(fds) == 2
    child_code = textwrap.dedent(
        """
        import faulthandler, os, socket, sys
        faulthandler.dump_traceback_later(100, exit=True)
        import numpy as np
        import cudriver as cu
        sock = socket.socket(fileno=int(sys.argv[1]))
        msg, fds, _flags, _addr = socket.recv_fds(sock, 1024, 8)
        sizes = [int(s) for s in msg.decode().split(",")]
        cu.Device(0).primary_context().set_current()
        buf = cu.VirtualBuffer.import_handle(fds, sizes)
        for fd in fds:
            os.close(fd)  # an open descriptor would keep the memory allocated
        n = buf.nbytes // 4
        got = buf.copy_to().view(np.uint32)
        assert (got == np.arange(n, dtype=np.uint32)).all(), got[:8]
        buf.fill(np.uint32(0xC0FFEE))
        buf.close()
        sock.sendall(b"done")
        """
    )
    parent, child = socket.socketpair()
    src = str(Path(cu.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", child_code, str(child.fileno())],
        pass_fds=[child.fileno()],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        child.close()
        socket.send_fds(parent, [",".join(map(str, buf.chunks)).encode()], fds)
        for fd in fds:
            os.close(fd)
        parent.settimeout(110)
        reply = parent.recv(4)
        out, _ = proc.communicate(timeout=110)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        parent.close()
    assert proc.returncode == 0, out.decode(errors="replace")[-4000:]
    assert reply == b"done"
    got = buf.copy_to().view(np.uint32)
    assert (got == 0xC0FFEE).all()  # the child's write, seen here
    buf.close()


@pytest.mark.gpu
def test_bad_sizes_and_types_on_a_buffer(ctx: cu.Context) -> None:
    buf = VirtualBuffer(4 * MiB, nbytes=1)
    g = buf.granularity
    assert buf.nbytes == g
    for bad, exc in ((0, ValueError), (-1, ValueError), (2**64, ValueError), ("1", TypeError)):
        with pytest.raises(exc, match="nbytes"):
            buf.grow(bad)
        with pytest.raises(exc, match="nbytes"):
            buf.shrink(bad)
    with pytest.raises(ValueError, match=r"grow\(.*\) needs .* bytes reserved"):
        buf.grow(buf.reserved)
    with pytest.raises(ValueError, match="only .* bytes are mapped"):
        buf.shrink(2 * g)
    with pytest.raises(TypeError, match="host"):
        buf.offload(host=np.zeros(g, np.uint8))  # type: ignore[arg-type]
    small = cu.PinnedBuffer(16)
    with pytest.raises(ValueError, match="host has 16 bytes"):
        buf.offload(host=small)
    small.close()
    with pytest.raises(TypeError, match="read_write"):
        buf.set_access(0, read_write="yes")  # type: ignore[arg-type]
    for refused in (cu.MemAccess.READ, cu.MemAccess.NONE, 1, 0):
        with pytest.raises(ValueError, match="own device keeps read-write"):
            buf.set_access(0, refused)
    with pytest.raises(TypeError, match="MemAccess"):
        buf.set_access(0, True)
    with pytest.raises(ValueError, match="MemAccess"):
        buf.set_access(0, 2)
    buf.set_access(0)  # already read-write: no change
    buf.set_access(0, cu.MemAccess.READ_WRITE)
    assert buf.access(0) is cu.MemAccess.READ_WRITE
    assert buf.access(ctx.device) is cu.MemAccess.READ_WRITE
    with pytest.raises(ValueError, match="handle_type"):
        buf.export_handle()
    with pytest.raises(ValueError, match="not offloaded"):
        buf.restore()
    view = buf[0:16]
    with pytest.raises(TypeError, match="view of a VirtualBuffer cannot grow"):
        view.grow(g)
    assert view.granularity == g and view.nbytes == 16
    assert buf.shrink(g) == 0
    assert view.closed  # it reached past the new end
    buf.close()


@pytest.mark.gpu
def test_deprecated_spellings_behave_like_the_new_ones(ctx: cu.Context) -> None:
    with pytest.warns(DeprecationWarning, match="size") as rec:
        old = VirtualBuffer(4 * MiB, size=1)
    assert [w.filename for w in rec] == [__file__]
    new = VirtualBuffer(4 * MiB, nbytes=1)
    assert old.nbytes == new.nbytes == new.granularity and old.chunks == new.chunks
    with pytest.warns(DeprecationWarning, match="read_write"):
        old.set_access(ctx.device, read_write=True)  # the own device: read-write, no change
    with pytest.warns(DeprecationWarning, match="read_write"):
        with pytest.raises(ValueError, match="own device keeps read-write"):
            old.set_access(ctx.device, read_write=False)  # MemAccess.READ
    assert old.access(ctx.device) is cu.MemAccess.READ_WRITE
    with pytest.warns(DeprecationWarning, match="export"):
        with pytest.raises(ValueError, match="handle_type"):
            old.export()
    assert new.device is ctx.device and new.view(0, 16).device is ctx.device
    old.close()
    new.close()


@pytest.mark.gpu
def test_a_closed_buffer_refuses_everything(ctx: cu.Context) -> None:
    buf = VirtualBuffer(4 * MiB, nbytes=2 * MiB)
    buf.close()
    buf.close()  # idempotent
    assert buf.closed and repr(buf) == "<cudriver.VirtualBuffer closed>"
    for call in (
        lambda: buf.grow(MiB),
        lambda: buf.shrink(MiB),
        lambda: buf.offload(),
        lambda: buf.restore(),
        lambda: buf.export_handle(),
        lambda: buf.set_access(0),
        lambda: buf.copy_to(),
        lambda: buf.ptr,
    ):
        with pytest.raises(cu.ClosedError, match="VirtualBuffer is closed"):
            call()
    asleep = VirtualBuffer(4 * MiB, nbytes=2 * MiB)
    asleep.offload()
    with pytest.raises(cu.ClosedError, match="offloaded"):
        asleep.offload()
    with pytest.raises(cu.ClosedError, match="offloaded"):
        asleep.grow(MiB)
    asleep.close()  # frees the host copy and the reservation
    with pytest.raises(cu.ClosedError, match="VirtualBuffer is closed"):
        asleep.restore()


@pytest.mark.gpu
@pytest.mark.device_memory
def test_device_buffer_behaviour_and_memory_returned(ctx: cu.Context, stream: cu.Stream) -> None:
    free0 = cu.mem_get_info()[0]
    buf = VirtualBuffer(1 << 30, nbytes=64 * MiB)
    assert cu.mem_get_info()[0] <= free0 - 64 * MiB
    x = np.random.default_rng(3).integers(0, 255, buf.nbytes, dtype=np.uint8)
    buf.copy_from(x, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(buf.copy_to(), x)
    typed = buf.cast(np.float32)
    assert typed.shape == (buf.nbytes // 4,) and isinstance(typed, VirtualBuffer)
    assert buf.__dlpack_device__() == (2, 0)
    other = cu.DeviceBuffer(buf.nbytes)
    other.copy_from(buf)
    np.testing.assert_array_equal(other.copy_to(), x)
    buf.fill(np.uint32(5))
    assert (buf.copy_to().view(np.uint32) == 5).all()
    host = cu.PinnedBuffer(buf.nbytes)
    buf.offload(host=host)
    assert typed.closed  # views are closed by offload
    assert (host.array(np.uint32) == 5).all()
    buf.restore()
    assert not host.closed  # the caller's buffer is never freed here
    assert (buf.copy_to().view(np.uint32) == 5).all()
    buf.close()
    other.close()
    host.close()
    ctx.synchronize()
    assert cu.mem_get_info()[0] >= free0 - 8 * MiB


@pytest.mark.gpu
def test_resizing_inside_a_capture_is_refused_and_the_capture_survives(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    buf = VirtualBuffer(8 * MiB, nbytes=4 * MiB)
    with stream.capture() as g:
        buf.fill(1, stream=stream)
        for call in (lambda: buf.grow(MiB), buf.offload, lambda: buf.shrink(buf.nbytes)):
            with pytest.raises(cu.StreamCaptureError, match="capture"):
                call()
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert (buf.copy_to() == 1).all()
    del exe, g
    buf.close()


@pytest.mark.gpu
def test_fabric_handles_where_the_driver_supports_them(ctx: cu.Context) -> None:
    if not ctx.device.attribute(cu.DeviceAttribute.HANDLE_TYPE_FABRIC_SUPPORTED):
        pytest.skip("this device has no fabric handles (HANDLE_TYPE_FABRIC_SUPPORTED is 0)")
    try:
        buf = VirtualBuffer(4 * MiB, nbytes=2 * MiB, handle_type="fabric")
        handles = buf.export_handle()
    except cu.CudaError as exc:  # e.g. no IMEX channel on this machine
        pytest.skip(f"fabric handles are not usable here: {exc}")
    assert [type(h) for h in handles] == [bytes] and len(handles[0]) == 64
    buf.close()


@pytest.mark.gpu
@needs_nvrtc
def test_a_kernel_on_a_peer_device_reads_the_buffer() -> None:
    reason = gpu_unavailable_reason()
    count = cu.Device.count() if reason is None else 0
    if count < 2:
        pytest.skip(reason or f"needs two GPUs; this machine has {count}")
    d0, d1 = cu.Device(0), cu.Device(1)
    if not d1.can_access_peer(d0):
        pytest.skip("device 1 cannot access device 0's memory")
    c0, c1 = d0.primary_context(), d1.primary_context()
    c0.set_current()
    n = 1 << 18
    x = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    buf = VirtualBuffer(64 * MiB, device=d0, nbytes=x.nbytes, access=[d1])
    assert buf.access(d1) is cu.MemAccess.READ_WRITE and buf.access(d0) is cu.MemAccess.READ_WRITE
    buf.view(0, x.nbytes).copy_from(x)
    gather = load_kernels(c1, KERNELS, "gather")["gather"]  # makes c1 current
    try:
        out = cu.DeviceBuffer(x.nbytes)
        s1 = cu.Stream()
        gather.launch(s1, _grid(n), 256, out, buf, np.float32(3.0), n)
        s1.synchronize()
        np.testing.assert_allclose(out.copy_to().view(np.float32), 3.0 * x, rtol=1e-6)
        buf.grow(2 * MiB)  # a new chunk gets the same access
        tail = buf.view(buf.nbytes - x.nbytes, x.nbytes)
        tail.copy_from(x)
        gather.launch(s1, _grid(n), 256, out, tail, np.float32(2.0), n)
        s1.synchronize()
        np.testing.assert_allclose(out.copy_to().view(np.float32), 2.0 * x, rtol=1e-6)
        out.close()
        s1.close()
    finally:
        c0.set_current()
    buf.close()
    c0.close()
    c1.close()


# -- hostile use, each in its own process ------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.device_memory
@needs_nvrtc
def test_closed_while_another_thread_launches_on_it() -> None:
    run_isolated(
        """
        import time
        from cudriver._lifetime import _handle
        ctx = make_current()
        (fill,) = kernels("fill")
        s = cu.Stream(non_blocking=True)

        def run(launch, stop):
            # Launch until a ClosedError (returned) or until ``stop`` is set (None).
            ctx.set_current()
            count = 0
            try:
                while not stop.is_set():
                    launch()
                    count += 1
                    if count % 8 == 0:
                        s.synchronize()
            except cu.ClosedError as exc:
                return count, str(exc)
            return count, None

        def in_thread(launch, stop):
            out = []
            t = threading.Thread(target=lambda: out.append(run(launch, stop)))
            t.start()
            return t, out

        # Direct launches: the ones after close() see a ClosedError; those before it
        # have run when the release unmaps (it waits with cuCtxSynchronize).
        buf = cu.VirtualBuffer(8 << 20, nbytes=8 << 20)
        n = buf.nbytes // 4
        stop = threading.Event()
        t, out = in_thread(lambda: fill.launch(s, n // 256, 256, buf, np.uint32(3), n), stop)
        time.sleep(0.3)
        buf.close()
        t.join(30)
        assert not t.is_alive() and out, out
        count, error = out[0]
        assert count > 0 and error and "VirtualBuffer is closed" in error, out
        s.synchronize()  # no fault
        ctx.synchronize()
        assert _handle.pending_releases() == 0

        # A prepared launch holds a lease: it keeps launching on mapped memory after
        # close(), and the memory is unmapped once the plan is gone.
        buf = cu.VirtualBuffer(8 << 20, nbytes=8 << 20)
        free_mapped = cu.mem_get_info()[0]
        plan = fill.prepare(n // 256, 256, buf, np.uint32(5), n)
        stop = threading.Event()
        t, out = in_thread(lambda: plan.launch(s), stop)
        time.sleep(0.2)
        buf.close()
        time.sleep(0.2)
        stop.set()
        t.join(30)
        assert not t.is_alive() and out and out[0][1] is None and out[0][0] > 0, out
        s.synchronize()
        assert cu.mem_get_info()[0] < free_mapped + (6 << 20)  # still mapped
        del plan, t, out
        gc.collect()
        ctx.synchronize()
        assert _handle.pending_releases() == 0
        assert cu.mem_get_info()[0] >= free_mapped + (6 << 20)  # unmapped now

        # offload() while another thread launches: the launches after it see the
        # buffer offloaded; those already on their way reach the driver before the unmap.
        for _ in range(5):
            buf = cu.VirtualBuffer(8 << 20, nbytes=8 << 20)
            stop = threading.Event()
            t, out = in_thread(lambda: fill.launch(s, n // 256, 256, buf, np.uint32(3), n), stop)
            time.sleep(0.05)
            buf.offload()
            t.join(30)
            assert not t.is_alive() and out and "offloaded" in (out[0][1] or ""), out
            s.synchronize()  # no fault
            buf.restore()
            assert (buf.copy_to().view(np.uint32) == 3).all()
            buf.close()

        other = cu.DeviceBuffer(4096)
        fill.launch(s, 4, 256, other, np.uint32(9), 1024)
        s.synchronize()
        assert (other.copy_to().view(np.uint32) == 9).all()  # the context is healthy
        print("OK")
        """
    )


@pytest.mark.gpu
@pytest.mark.device_memory
@needs_nvrtc
def test_collected_with_work_in_flight() -> None:
    run_isolated(
        """
        import time
        from cudriver._lifetime import _handle
        ctx = make_current()
        (spin_fill,) = kernels("spin_fill")
        s = cu.Stream(non_blocking=True)
        free0 = cu.mem_get_info()[0]
        buf = cu.VirtualBuffer(64 << 20, nbytes=64 << 20)
        spin_fill.launch(s, 4, 256, buf, np.uint32(7), 1024, 200_000_000)
        assert not s.query()
        del buf
        gc.collect()  # the release waits for the kernel (cuCtxSynchronize), then unmaps
        s.synchronize()
        ctx.synchronize()
        assert _handle.pending_releases() == 0
        assert cu.mem_get_info()[0] >= free0 - (8 << 20)
        print("OK")
        """
    )


@pytest.mark.gpu
@needs_nvrtc
def test_closed_inside_a_capture_the_graph_keeps_it() -> None:
    run_isolated(
        """
        from cudriver._lifetime import _handle
        ctx = make_current()
        (fill,) = kernels("fill")
        s = cu.Stream(non_blocking=True)
        buf = cu.VirtualBuffer(4 << 20, nbytes=4 << 20)
        n = buf.nbytes // 4
        out = cu.DeviceBuffer(buf.nbytes)
        with s.capture() as g:
            fill.launch(s, n // 256, 256, buf, np.uint32(11), n)
            out.copy_from(buf, stream=s)
            buf.close()  # queued: the graph holds the buffer, and a capture is open
            assert buf.closed
            for call in (lambda: buf.grow(1), lambda: buf.shrink(1), buf.offload):
                try:
                    call()
                except cu.ClosedError:
                    pass
                else:
                    raise AssertionError("a closed buffer was resized")
        exe = g.instantiate()
        for _ in range(3):
            exe.launch(s)
        s.synchronize()
        assert (out.copy_to().view(np.uint32) == 11).all()
        del exe, g
        gc.collect()
        ctx.synchronize()
        assert _handle.pending_releases() == 0
        print("OK")
        """
    )
