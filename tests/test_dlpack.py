"""DLPack both ways: the structs, dtypes, the stream rule, capsules, lifetimes.

The tests without a GPU run the producer over host memory (a ``from_handle`` buffer, its
DLPack device faked as CUDA where the export would otherwise ask the driver) and the
consumer over capsules the tests build with their own ctypes structs; numpy consumes
the capsules cudriver makes. The GPU tests exchange memory with PyTorch and CuPy.
"""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import textwrap
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import cudriver as cu
from cudriver._memory import _dlpack as dl

from ._support import import_or_skip, in_threads, load_kernels

# -- helpers ------------------------------------------------------------------------------

_capi = ctypes.pythonapi
_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _capi)
)
_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _capi)
)
_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _capi)
)
_New = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _capi)
)
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def capsule_name(cap: Any) -> str:
    for name in ("dltensor", "dltensor_versioned", "used_dltensor", "used_dltensor_versioned"):
        if _IsValid(cap, name.encode()):
            return name
    return "?"


class Hook:
    """Collects what reaches sys.unraisablehook."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __call__(self, args: Any) -> None:
        self.seen.append(args)


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> Hook:
    h = Hook()
    monkeypatch.setattr(sys, "unraisablehook", h)
    return h


@pytest.fixture
def host() -> Iterator[tuple[np.ndarray, cu.DeviceBuffer]]:
    """Host memory seen as a float32 (3, 4) DeviceBuffer (from_handle: no driver call)."""
    a = np.arange(12, dtype=np.float32)
    buf = cu.DeviceBuffer.from_handle(a.ctypes.data, a.nbytes, owner=a).cast(np.float32, (3, 4))
    yield a, buf
    buf.close()


@pytest.fixture
def as_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make DeviceBuffer's DLPack device (kDLCUDA, 0) without asking the driver."""
    real = dl.device

    def fake(buf: Any) -> tuple[int, int]:
        if isinstance(buf, cu.DeviceBuffer):
            if buf.closed:
                buf._raise_closed()
            return dl.KDLCUDA, 0
        return real(buf)

    monkeypatch.setattr(dl, "device", fake)


def managed_of(cap: Any) -> Any:
    versioned = capsule_name(cap) == "dltensor_versioned"
    name = b"dltensor_versioned" if versioned else b"dltensor"
    kind = dl.DLManagedTensorVersioned if versioned else dl.DLManagedTensor
    return kind.from_address(_GetPointer(cap, name))


# -- a foreign producer, written from the header with the tests' own structs -------------


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _Device),
        ("ndim", ctypes.c_int32),
        ("dtype", _DType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Legacy(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class _Versioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _Tensor),
    ]


# What the fake producer's deleter was called with, and what it keeps until then.
DELETED: list[int] = []
_HELD: dict[int, Any] = {}


def _fake_deleted(ptr: int | None) -> None:
    DELETED.append(ptr or 0)
    _HELD.pop(ptr or 0, None)


_FAKE_DELETER = _DELETER(_fake_deleted)


class FakeProducer:
    """Host memory claiming to be on a CUDA device, exported through DLPack.

    Its capsules have no destructor, so the tests see that the consumer calls the
    deleter (and that a refused capsule stays unconsumed).
    """

    def __init__(
        self,
        array: np.ndarray,
        *,
        device: tuple[int, int] = (2, 0),
        dtype: tuple[int, int, int] | None = None,
        shape: tuple[int, ...] | None = None,
        strides: tuple[int, ...] | None = None,
        byte_offset: int = 0,
        flags: int = 0,
        major: int = 1,
        versioned: bool = True,
    ) -> None:
        self.array = array
        self.device = device
        kind = {"f": 2, "i": 0, "u": 1, "b": 6, "c": 5}[array.dtype.kind]
        self.dtype = dtype or (kind, array.dtype.itemsize * 8, 1)
        self.shape = array.shape if shape is None else shape
        self.strides = strides
        self.byte_offset = byte_offset
        self.flags = flags
        self.major = major
        self.versioned = versioned
        self.streams: list[Any] = []
        self.capsule: Any = None

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, **kw: Any) -> Any:
        self.streams.append(stream)
        return self._capsule(self.versioned and max_version is not None)

    def _capsule(self, versioned: bool) -> Any:
        m: Any = _Versioned() if versioned else _Legacy()
        if versioned:
            m.major, m.minor, m.flags = self.major, 0, self.flags
        t = m.dl_tensor
        t.data = self.array.ctypes.data - self.byte_offset
        t.byte_offset = self.byte_offset
        t.device.device_type, t.device.device_id = self.device
        t.ndim = len(self.shape)
        t.dtype.code, t.dtype.bits, t.dtype.lanes = self.dtype
        shape = (ctypes.c_int64 * max(1, t.ndim))(*self.shape)
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        strides = None
        if self.strides is not None:
            strides = (ctypes.c_int64 * max(1, t.ndim))(*self.strides)
            t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        m.deleter = _FAKE_DELETER
        _HELD[ctypes.addressof(m)] = (m, shape, strides, self.array)
        name = b"dltensor_versioned" if versioned else b"dltensor"
        self.capsule = _New(ctypes.addressof(m), name, None)
        return self.capsule


class OldProducer(FakeProducer):
    """A producer from before ``max_version``: ``__dlpack__(stream=None)`` only."""

    def __dlpack__(self, *, stream: Any = None) -> Any:  # type: ignore[override]
        self.streams.append(stream)
        return self._capsule(False)


@pytest.fixture
def deleted() -> Iterator[list[int]]:
    gc.collect()  # buffers of earlier tests call the deleter before, not during, this one
    DELETED.clear()
    yield DELETED
    DELETED.clear()


# -- the structs --------------------------------------------------------------------------


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="layouts of 64-bit platforms")
def test_struct_layout_matches_dlpack_h() -> None:
    assert ctypes.sizeof(dl.DLDevice) == 8
    assert ctypes.sizeof(dl.DLDataType) == 4
    assert ctypes.sizeof(dl.DLPackVersion) == 8
    assert ctypes.sizeof(dl.DLTensor) == 48
    offsets = {name: getattr(dl.DLTensor, name).offset for name, _ in dl.DLTensor._fields_}
    assert offsets == {
        "data": 0,
        "device": 8,
        "ndim": 16,
        "dtype": 20,
        "shape": 24,
        "strides": 32,
        "byte_offset": 40,
    }
    assert ctypes.sizeof(dl.DLManagedTensor) == 64
    assert dl.DLManagedTensor.manager_ctx.offset == 48
    assert dl.DLManagedTensor.deleter.offset == 56
    assert ctypes.sizeof(dl.DLManagedTensorVersioned) == 80
    v = dl.DLManagedTensorVersioned
    assert (v.version.offset, v.manager_ctx.offset, v.deleter.offset) == (0, 8, 16)
    assert (v.flags.offset, v.dl_tensor.offset) == (24, 32)
    # and the tests' own structs, written separately from the header, agree
    assert ctypes.sizeof(_Versioned) == 80
    assert ctypes.sizeof(_Legacy) == 64


# -- dtypes ---------------------------------------------------------------------------------

_DTYPES = {
    "int8": (0, 8),
    "int16": (0, 16),
    "int32": (0, 32),
    "int64": (0, 64),
    "uint8": (1, 8),
    "uint16": (1, 16),
    "uint32": (1, 32),
    "uint64": (1, 64),
    "float16": (2, 16),
    "float32": (2, 32),
    "float64": (2, 64),
    "complex64": (5, 64),
    "complex128": (5, 128),
    "bool": (6, 8),
}


@pytest.mark.parametrize(("name", "code_bits"), _DTYPES.items())
def test_dtype_mapping_both_ways(name: str, code_bits: tuple[int, int]) -> None:
    dt = np.dtype(name)
    assert dl.dl_dtype(dt) == (*code_bits, 1)
    assert dl.numpy_dtype(*code_bits, 1) == dt


@pytest.mark.parametrize("dtype", [">f4" if sys.byteorder == "little" else "<f4", "V8", "M8[s]"])
def test_dtypes_dlpack_lacks_are_refused_on_export(dtype: str) -> None:
    with pytest.raises(BufferError, match="DLPack|byte order"):
        dl.dl_dtype(np.dtype(dtype))


def test_export_refuses_a_dtype_dlpack_lacks_before_the_driver() -> None:
    a = np.zeros(4, np.float32)
    buf = cu.DeviceBuffer.from_handle(a.ctypes.data, a.nbytes).cast("V4")
    with pytest.raises(BufferError, match="byte view"):
        buf.__dlpack__()


@pytest.mark.parametrize(
    ("dtype", "words"),
    [
        ((4, 16, 1), "bfloat16"),
        ((10, 8, 1), "float8_e4m3fn"),
        ((2, 32, 4), "4 lanes"),
        ((0, 7, 1), "int7"),
        ((3, 64, 1), "opaque_handle"),
        ((99, 8, 1), "code 99"),
    ],
)
def test_dtypes_numpy_lacks_are_refused_on_import(dtype: tuple[int, int, int], words: str) -> None:
    with pytest.raises(BufferError, match=words):
        dl.numpy_dtype(*dtype)


# -- the producer's arguments ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "error"),
    [
        (0, ValueError),
        (-2, ValueError),
        (1 << 64, ValueError),
        ("1", TypeError),
        (1.0, TypeError),
        (True, TypeError),
    ],
)
def test_stream_argument_is_checked_first(host: Any, stream: Any, error: type) -> None:
    _, buf = host
    with pytest.raises(error, match="stream"):
        buf.__dlpack__(stream=stream)


@pytest.mark.parametrize("stream", [None, -1, 1, 2, 0x1230])
def test_stream_values_the_spec_allows(host: Any, as_cuda: None, stream: Any) -> None:
    # A buffer that is not stream-ordered has nothing to order: no driver call.
    _, buf = host
    cap = buf.__dlpack__(stream=stream)
    assert capsule_name(cap) == "dltensor"


@pytest.mark.parametrize(
    ("max_version", "name"),
    [
        (None, "dltensor"),
        ((0, 8), "dltensor"),
        ((1, 0), "dltensor_versioned"),
        ((1, 3), "dltensor_versioned"),
        ((2, 0), "dltensor_versioned"),
    ],
)
def test_max_version_picks_the_capsule(
    host: Any, as_cuda: None, max_version: Any, name: str
) -> None:
    _, buf = host
    cap = buf.__dlpack__(max_version=max_version)
    assert capsule_name(cap) == name
    if name == "dltensor_versioned":
        m = managed_of(cap)
        assert (m.version.major, m.version.minor) == (1, 0)
        assert m.flags == 0


@pytest.mark.parametrize("bad", ["1.0", (1,), (1, "0"), 1, (True, 0)])
def test_max_version_must_be_a_pair_of_ints(host: Any, bad: Any) -> None:
    _, buf = host
    with pytest.raises(TypeError, match="max_version"):
        buf.__dlpack__(max_version=bad)


def test_copy_true_is_refused_and_false_exports(host: Any, as_cuda: None) -> None:
    _, buf = host
    with pytest.raises(BufferError, match="never copies"):
        buf.__dlpack__(copy=True)
    with pytest.raises(TypeError, match="copy"):
        buf.__dlpack__(copy="yes")
    assert capsule_name(buf.__dlpack__(copy=False)) == "dltensor"


def test_dl_device_must_be_the_buffers_own(host: Any, as_cuda: None) -> None:
    _, buf = host
    assert capsule_name(buf.__dlpack__(dl_device=(2, 0))) == "dltensor"
    for other in [(1, 0), (2, 1), (3, 0)]:
        with pytest.raises(BufferError, match="without copying"):
            buf.__dlpack__(dl_device=other)
    with pytest.raises(TypeError, match="dl_device"):
        buf.__dlpack__(dl_device="cuda:0")


def test_closed_buffer_refuses_dlpack(host: Any) -> None:
    _, buf = host
    buf.close()
    with pytest.raises(cu.ClosedError):
        buf.__dlpack__()
    with pytest.raises(cu.ClosedError):
        buf.__dlpack_device__()


def test_exported_struct_describes_the_buffer(host: Any, as_cuda: None) -> None:
    a, buf = host
    for mv in (None, (1, 0)):
        cap = buf.__dlpack__(max_version=mv)  # the struct lives as long as the capsule
        t = managed_of(cap).dl_tensor
        assert (t.data, t.byte_offset) == (a.ctypes.data, 0)
        assert (t.device.device_type, t.device.device_id) == (2, 0)
        assert (t.ndim, t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 2, 32, 1)
        assert list((ctypes.c_int64 * 2).from_address(t.shape)) == [3, 4]
        assert list((ctypes.c_int64 * 2).from_address(t.strides)) == [4, 1]  # elements


# -- capsules and their lifetimes ------------------------------------------------------------


class _Keep:
    pass


class _HostExport:
    """cudriver's capsule over a host array, as kDLCPU: numpy consumes it."""

    def __init__(self, a: np.ndarray, keep: object, legacy: bool = False) -> None:
        self.a, self.keep, self.legacy = a, keep, legacy

    def __dlpack_device__(self) -> tuple[int, int]:
        return dl.KDLCPU, 0

    def __dlpack__(self, *, max_version: Any = None, **kw: Any) -> Any:
        versioned = not self.legacy and max_version is not None and max_version[0] >= 1
        return dl.make_capsule(
            self.a.ctypes.data,
            (dl.KDLCPU, 0),
            self.a.dtype,
            self.a.shape,
            versioned=versioned,
            keep=self.keep,
        )


@pytest.mark.parametrize("legacy", [False, True])
def test_numpy_consumes_our_capsules_and_calls_the_deleter_once(legacy: bool) -> None:
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    keep = _Keep()
    ref = weakref.ref(keep)
    base = dl.registry_size()
    b = np.from_dlpack(_HostExport(a, keep, legacy))
    del keep
    assert dl.registry_size() == base + 1
    assert ref() is not None  # held until the consumer is done
    np.testing.assert_array_equal(b, a)
    if not legacy:  # numpy makes arrays from legacy capsules read-only
        b[1, 2] = -5
        assert a[1, 2] == -5
    a[0, 0] = 77
    assert b[0, 0] == 77
    del b
    gc.collect()
    assert dl.registry_size() == base
    assert ref() is None


def test_an_unconsumed_capsule_calls_the_deleter() -> None:
    a = np.zeros(8, np.float64)
    keep = _Keep()
    ref = weakref.ref(keep)
    base = dl.registry_size()
    caps = [dl.make_capsule(a.ctypes.data, (1, 0), a.dtype, a.shape, versioned=v, keep=keep)
            for v in (False, True)]  # fmt: skip
    del keep
    assert dl.registry_size() == base + 2
    del caps
    assert dl.registry_size() == base
    assert ref() is None


def test_export_holds_a_lease_until_the_deleter(host: Any, as_cuda: None) -> None:
    _, buf = host
    st = buf.base._state  # the view's lease is on its allocation
    cap = buf.__dlpack__()
    assert len(st.leases) == 1
    del cap
    gc.collect()
    assert len(st.leases) == 0


def test_a_second_deleter_call_is_reported_not_followed(hook: Hook) -> None:
    a = np.zeros(4, np.float32)
    base = dl.registry_size()
    cap = dl.make_capsule(a.ctypes.data, (1, 0), a.dtype, a.shape, versioned=False, keep=a)
    ptr = _GetPointer(cap, b"dltensor")
    deleter = _DELETER(dl.DLManagedTensor.from_address(ptr).deleter)
    assert _SetName(cap, b"used_dltensor") == 0  # consumed, as a consumer would
    del cap
    assert dl.registry_size() == base + 1
    deleter(ptr)
    assert dl.registry_size() == base
    assert hook.seen == []
    deleter(ptr)  # the struct is gone: found nowhere, reported, never read
    deleter(None)
    assert [type(h.exc_value) for h in hook.seen] == [LookupError, ValueError]
    assert "not a live cudriver export" in str(hook.seen[0].exc_value)


def test_a_capsule_dropped_during_an_exception_still_calls_the_deleter(hook: Hook) -> None:
    a = np.zeros(4, np.float32)
    keep = _Keep()
    ref = weakref.ref(keep)
    base = dl.registry_size()
    # int() fails with the capsule on the stack: it dies while TypeError propagates. The
    # destructor runs the deleter and leaves that exception as it was.
    with pytest.raises(TypeError):
        int(dl.make_capsule(a.ctypes.data, (1, 0), a.dtype, a.shape, versioned=True, keep=keep))
    del keep
    assert dl.registry_size() == base
    assert ref() is None
    assert hook.seen == []


@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4), (1, 0, 7), (2**20, 2**20)])
@pytest.mark.parametrize("versioned", [False, True])
def test_the_compiled_capsule_describes_its_tensor(shape: tuple[int, ...], versioned: bool) -> None:
    base = dl.registry_size()
    cap = dl.make_capsule(0x7F00_0000_1000, (2, 3), np.dtype(np.float16), shape,
                          versioned=versioned, keep=None)  # fmt: skip
    name = b"dltensor_versioned" if versioned else b"dltensor"
    ptr = _GetPointer(cap, name)
    if versioned:
        m = dl.DLManagedTensorVersioned.from_address(ptr)
        assert (m.version.major, m.version.minor, m.flags) == (1, 0, 0)
        assert m.deleter == dl._VERSIONED_DELETER_ADDR
    else:
        m = dl.DLManagedTensor.from_address(ptr)
        assert m.deleter == dl._LEGACY_DELETER_ADDR
    t = m.dl_tensor
    assert t.data == 0x7F00_0000_1000 and t.byte_offset == 0
    assert (t.device.device_type, t.device.device_id) == (2, 3)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 16, 1)
    assert t.ndim == len(shape)
    dims = (ctypes.c_int64 * max(len(shape), 1)).from_address(t.shape)
    steps = (ctypes.c_int64 * max(len(shape), 1)).from_address(t.strides)
    assert tuple(dims[: len(shape)]) == shape
    want = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        want[i] = want[i + 1] * shape[i + 1]
    assert list(steps[: len(shape)]) == want
    assert dl.registry_size() == base + 1
    del cap, m, t
    assert dl.registry_size() == base


def test_a_dimension_too_large_is_refused_and_nothing_registered() -> None:
    base = dl.registry_size()
    with pytest.raises(OverflowError):
        dl.make_capsule(0x1000, (1, 0), np.dtype(np.uint8), (2**64,), versioned=True, keep=None)
    assert dl.registry_size() == base


def test_threads_make_and_drop_capsules_with_collections_between() -> None:
    a = np.zeros(16, np.float32)
    base = dl.registry_size()

    def work(seed: int) -> None:
        held = []
        for i in range(2000):
            keep = _Keep()
            held.append(
                dl.make_capsule(
                    a.ctypes.data,
                    (1, 0),
                    a.dtype,
                    a.shape,
                    versioned=bool((i + seed) % 2),
                    keep=keep,
                )
            )
            if i % 7 == 0:
                held.clear()
            if i % 500 == 0:
                gc.collect()
        held.clear()

    errors = in_threads(work, 8)
    assert not errors, errors
    assert dl.registry_size() == base


def test_exports_work_in_a_forked_child_of_a_thread_that_exports() -> None:
    script = textwrap.dedent(
        """
        import os, signal, threading, warnings
        import numpy as np
        from cudriver._memory import _dlpack as dl
        a = np.zeros(4)
        going, done = threading.Event(), threading.Event()
        def churn():
            while not done.is_set():
                cap = dl.make_capsule(a.ctypes.data, (1, 0), a.dtype, (4,), versioned=True, keep=a)
                going.set()
                del cap
        t = threading.Thread(target=churn, daemon=True)
        t.start()
        going.wait()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded fork"
            pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a deadlock ends the child by SIGALRM
            cap = dl.make_capsule(a.ctypes.data, (1, 0), a.dtype, a.shape, versioned=True, keep=a)
            n = dl.registry_size()
            del cap
            os._exit(0 if dl.registry_size() == n - 1 else 3)
        _, status = os.waitpid(pid, 0)
        done.set()
        t.join()
        print(status)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0", proc.stdout + proc.stderr


# -- the compiled capsule, as a consumer sees it ----------------------------------------------


def _consume(cap: Any) -> tuple[int, Any]:
    """Act as a consumer: rename the capsule ``used_...``; its pointer and deleter."""
    versioned = capsule_name(cap) == "dltensor_versioned"
    name = b"dltensor_versioned" if versioned else b"dltensor"
    ptr = _GetPointer(cap, name)
    kind = dl.DLManagedTensorVersioned if versioned else dl.DLManagedTensor
    deleter = _DELETER(kind.from_address(ptr).deleter)
    assert _SetName(cap, b"used_" + name) == 0
    return ptr, deleter


def _in_a_c_thread(fn_addr: int, arg: int) -> Any:
    """Start a thread Python does not know (``pthread_create``) running ``fn_addr(arg)``.

    The deleter is the thread's start routine: it runs without the GIL and without a
    thread state, as in a consumer's own thread. Join with :func:`_join`.
    """
    tid = ctypes.c_ulong()
    rc = _LIBC.pthread_create(
        ctypes.byref(tid), None, ctypes.c_void_p(fn_addr), ctypes.c_void_p(arg)
    )
    assert rc == 0
    return tid


def _join(tid: Any) -> None:
    assert _LIBC.pthread_join(tid, None) == 0  # a ctypes call: the GIL is released


_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None
linux_only = pytest.mark.skipif(_LIBC is None, reason="pthread_create through ctypes (Linux)")


@pytest.mark.parametrize("versioned", [False, True])
def test_a_consumed_capsule_is_left_to_its_consumer(versioned: bool, hook: Hook) -> None:
    a = np.zeros(4, np.float32)
    keep = _Keep()
    ref = weakref.ref(keep)
    base = dl.registry_size()
    cap = dl.make_capsule(a.ctypes.data, (1, 0), a.dtype, a.shape, versioned=versioned, keep=keep)
    del keep
    ptr, deleter = _consume(cap)
    del cap
    gc.collect()
    assert dl.registry_size() == base + 1  # the destructor left it to the consumer
    assert ref() is not None
    deleter(ptr)  # a ctypes call: the deleter runs without the GIL and takes it
    assert dl.registry_size() == base
    assert ref() is None
    assert hook.seen == []
    deleter(ptr)  # once only: the second call is reported, nothing is read
    assert [type(h.exc_value) for h in hook.seen] == [LookupError]


@pytest.mark.parametrize("versioned", [False, True])
def test_an_unconsumed_capsule_ends_its_export_once(versioned: bool, hook: Hook) -> None:
    a = np.zeros(4, np.float32)
    keep = _Keep()
    ref = weakref.ref(keep)
    base = dl.registry_size()
    cap = dl.make_capsule(a.ctypes.data, (1, 0), a.dtype, a.shape, versioned=versioned, keep=keep)
    name = b"dltensor_versioned" if versioned else b"dltensor"
    ptr = _GetPointer(cap, name)
    kind = dl.DLManagedTensorVersioned if versioned else dl.DLManagedTensor
    deleter = _DELETER(kind.from_address(ptr).deleter)
    del keep, cap  # never consumed: the destructor calls the deleter
    assert dl.registry_size() == base
    assert ref() is None
    gc.collect()
    assert hook.seen == []
    deleter(ptr)  # a consumer that calls it anyway: reported, the block is not read
    assert [type(h.exc_value) for h in hook.seen] == [LookupError]
    assert dl.registry_size() == base


@pytest.mark.parametrize(("name", "code_bits"), _DTYPES.items())
@pytest.mark.parametrize("versioned", [False, True])
def test_the_compiled_capsule_carries_each_dtype(
    name: str, code_bits: tuple[int, int], versioned: bool
) -> None:
    cap = dl.make_capsule(0x1000, (2, 0), np.dtype(name), [7], versioned=versioned, keep=None)
    t = managed_of(cap).dl_tensor
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (*code_bits, 1)
    assert (t.ndim, (ctypes.c_int64 * 1).from_address(t.shape)[0]) == (1, 7)
    assert (ctypes.c_int64 * 1).from_address(t.strides)[0] == 1


@linux_only
@pytest.mark.parametrize("versioned", [False, True])
def test_a_deleter_called_from_a_thread_python_does_not_know(versioned: bool, hook: Hook) -> None:
    a = np.zeros(4, np.float32)
    base = dl.registry_size()
    keeps = [_Keep() for _ in range(32)]
    refs = [weakref.ref(k) for k in keeps]
    caps = [
        dl.make_capsule(a.ctypes.data, (1, 0), a.dtype, a.shape, versioned=versioned, keep=k)
        for k in keeps
    ]
    del keeps
    taken = [_consume(c) for c in caps]
    del caps
    assert dl.registry_size() == base + 32
    addr = dl._VERSIONED_DELETER_ADDR if versioned else dl._LEGACY_DELETER_ADDR
    # All at once: they wait for the GIL, which the joins below release.
    threads = [_in_a_c_thread(addr, ptr) for ptr, _ in taken]
    for tid in threads:
        _join(tid)
    assert dl.registry_size() == base
    assert all(r() is None for r in refs)
    assert hook.seen == []


@linux_only
def test_a_deleter_called_while_the_interpreter_finalises_does_nothing() -> None:
    # A consumer's thread may call the deleter once the interpreter is finalising: it must
    # neither take the GIL (a thread Python does not know would hang or end there) nor
    # touch the registry; the block and the lease are left to the process's end.
    script = textwrap.dedent(
        """
        import ctypes, os, sys
        import numpy as np
        from cudriver._memory import _dlpack as dl

        capi = ctypes.pythonapi
        get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_GetPointer", capi))
        rename = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_SetName", capi))
        libc = ctypes.CDLL(None)
        a = np.zeros(4)

        def consumed():
            cap = dl.make_capsule(a.ctypes.data, (1, 0), a.dtype, a.shape, versioned=True,
                                  keep=a)
            ptr = get(cap, b"dltensor_versioned")
            rename(cap, b"used_dltensor_versioned")
            return ptr

        class Late:
            # Dropped as __main__ is torn down, after finalisation began.
            def __init__(self, ptr, deleter=dl._VERSIONED_DELETER_ADDR, size=dl.registry_size,
                         finalizing=sys.is_finalizing, write=os.write, libc=libc,
                         c_ulong=ctypes.c_ulong, byref=ctypes.byref, vp=ctypes.c_void_p):
                self.args = (ptr, deleter, size, finalizing, write, libc, c_ulong, byref, vp)

            def __del__(self):
                ptr, deleter, size, finalizing, write, libc, c_ulong, byref, vp = self.args
                before = size()
                tid = c_ulong()
                libc.pthread_create(byref(tid), None, vp(deleter), vp(ptr))
                libc.pthread_join(tid, None)
                write(1, f"{finalizing()} {size() == before}\\n".encode())

        late = Late(consumed())
        unconsumed = dl.make_capsule(a.ctypes.data, (1, 0), a.dtype, a.shape, versioned=False,
                                     keep=a)
        never_deleted = consumed()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True True", proc.stdout + proc.stderr
    assert proc.stderr == ""


# -- the export's compiled common path ----------------------------------------------------------


class _KnownDevice:
    """A stand-in for a context that knows its device, as a device buffer's does."""

    def __init__(self, ordinal: int) -> None:
        self._device = _Ordinal(ordinal)


class _Ordinal:
    def __init__(self, ordinal: int) -> None:
        self._ordinal = ordinal


def _known_buffer() -> tuple[np.ndarray, cu.DeviceBuffer]:
    """Host memory as a float32 (3, 4) DeviceBuffer whose context knows its device (3).

    The export's common path reads the device from those fields (no driver call, and no
    stand-in for ``dl.device``), as it does for a buffer made on a device.
    """
    a = np.arange(12, dtype=np.float32)
    buf = cu.DeviceBuffer.from_handle(a.ctypes.data, a.nbytes, owner=a).cast(np.float32, (3, 4))
    buf._context = _KnownDevice(3)
    dl._dl_code(np.dtype(np.float32))  # a dtype exported before: its DLPack type is known
    return a, buf


@pytest.fixture
def known() -> Iterator[tuple[np.ndarray, cu.DeviceBuffer]]:
    """:func:`_known_buffer`, closed after the test."""
    a, buf = _known_buffer()
    yield a, buf
    buf.close()


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The arguments of each call that left the compiled common path for the Python export."""
    calls: list[tuple[Any, ...]] = []
    real = dl._core._export_slow
    assert real is dl._export_slow

    def spy(*args: Any) -> Any:
        calls.append(args[1:])
        return real(*args)

    monkeypatch.setattr(dl._core, "_export_slow", spy)
    return calls


_COMMON = [
    {},
    {"stream": None},
    {"stream": -1},
    {"stream": 1},
    {"stream": 2},
    {"stream": 0x1230},
    {"stream": (1 << 64) - 1},
    {"max_version": None},
    {"max_version": (0, 8)},
    {"max_version": (1, 0)},
    {"max_version": (1, 3)},
    {"max_version": (2, 0)},
    {"dl_device": None},
    {"dl_device": (2, 3)},
    {"copy": None},
    {"copy": False},
    {"stream": -1, "max_version": (1, 0)},  # what cuda.core's StridedMemoryView passes
    {"stream": 1, "max_version": (1, 0), "dl_device": (2, 3), "copy": False},
]


@pytest.mark.parametrize("kwargs", _COMMON)
def test_the_common_path_exports_in_c(known: Any, slow: list[Any], kwargs: dict[str, Any]) -> None:
    a, buf = known
    base = dl.registry_size()
    st = buf.base._state
    cap = buf.__dlpack__(**kwargs)
    assert slow == []
    mv = kwargs.get("max_version")
    versioned = mv is not None and mv[0] >= 1
    assert capsule_name(cap) == ("dltensor_versioned" if versioned else "dltensor")
    m = managed_of(cap)
    if versioned:
        assert (m.version.major, m.version.minor, m.flags) == (1, 0, 0)
        assert m.deleter == dl._VERSIONED_DELETER_ADDR
    else:
        assert m.deleter == dl._LEGACY_DELETER_ADDR
    t = m.dl_tensor
    assert (t.data, t.byte_offset) == (a.ctypes.data, 0)
    assert (t.device.device_type, t.device.device_id) == (2, 3)
    assert (t.ndim, t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 2, 32, 1)
    assert list((ctypes.c_int64 * 2).from_address(t.shape)) == [3, 4]
    assert list((ctypes.c_int64 * 2).from_address(t.strides)) == [4, 1]
    assert dl.registry_size() == base + 1
    assert len(st.leases) == 1
    del cap, m, t
    assert dl.registry_size() == base
    assert len(st.leases) == 0


_LEASED: list[Any] = []


class _SubBuffer(cu.DeviceBuffer):
    """A DeviceBuffer subclass with a lease of its own: the export asks for it."""

    __slots__ = ()

    def _lease(self) -> Any:
        _LEASED.append(self)
        return super()._lease()


@pytest.mark.parametrize("kind", [cu.DeviceBuffer, _SubBuffer])
@pytest.mark.parametrize("kwargs", [{}, {"stream": -1, "max_version": (1, 0)}])
def test_a_device_buffer_and_a_subclass_with_its_own_lease_export_alike(
    slow: list[Any], kind: type[cu.DeviceBuffer], kwargs: dict[str, Any]
) -> None:
    # A DeviceBuffer's lease is made in C; a subclass's own _lease is called.
    _LEASED.clear()
    a = np.arange(12, dtype=np.float32)
    parent = kind.from_handle(a.ctypes.data, a.nbytes, owner=a)
    buf = parent.cast(np.float32, (3, 4))
    assert type(buf) is kind
    buf._context = _KnownDevice(3)
    dl._dl_code(np.dtype(np.float32))
    cap = buf.__dlpack__(**kwargs)
    assert slow == []
    t = managed_of(cap).dl_tensor
    assert (t.data, t.ndim, t.dtype.code, t.dtype.bits) == (a.ctypes.data, 2, 2, 32)
    assert (t.device.device_type, t.device.device_id) == (2, 3)
    assert list((ctypes.c_int64 * 2).from_address(t.shape)) == [3, 4]
    assert len(parent._state.leases) == 1  # a view's lease is on its parent
    assert len(buf._state.leases) == 0
    expected = [buf] if kind is _SubBuffer else []
    assert expected == _LEASED
    del cap, t
    assert len(parent._state.leases) == 0
    parent.close()  # closes the view too
    with pytest.raises(cu.ClosedError):
        buf.__dlpack__(**kwargs)


class _TypedBytes(cu.DeviceBuffer):
    """A subclass whose dtype and shape come from properties, with no remembered layout."""

    __slots__ = ()

    @property
    def dtype(self) -> np.dtype[Any]:
        return np.dtype(np.int16)

    @property
    def shape(self) -> tuple[int, ...]:
        return (2, self._nbytes // 4)


def test_a_subclass_layout_from_properties_is_exported(slow: list[Any]) -> None:
    # Without a remembered dtype and shape, the export asks the buffer's attributes
    # (as the Python export does), whichever compiled path it takes.
    a = np.arange(12, dtype=np.int16)
    buf = _TypedBytes.from_handle(a.ctypes.data, a.nbytes, owner=a)
    assert buf._dtype is None and buf._shape is None
    buf._context = _KnownDevice(0)
    dl._dl_code(np.dtype(np.int16))
    cap = buf.__dlpack__(stream=-1)
    assert slow == []
    t = managed_of(cap).dl_tensor
    assert (t.ndim, t.dtype.code, t.dtype.bits) == (2, 0, 16)
    assert list((ctypes.c_int64 * 2).from_address(t.shape)) == [2, 6]
    del cap, t
    buf.close()


def test_a_view_of_a_closed_parent_is_refused_and_leases_nothing(slow: list[Any]) -> None:
    a = np.arange(12, dtype=np.float32)
    parent = cu.DeviceBuffer.from_handle(a.ctypes.data, a.nbytes, owner=a)
    view = parent.cast(np.float32, (3, 4))
    view._context = _KnownDevice(0)
    parent.close()
    assert view.closed
    with pytest.raises(cu.ClosedError):
        view.__dlpack__()
    assert len(parent._state.leases) == 0 and len(view._state.leases) == 0


def test_a_device_buffer_is_kdlcuda() -> None:
    # The compiled export writes kDLCUDA (2) for an exact DeviceBuffer.
    assert cu.DeviceBuffer._DL_DEVICE_TYPE == 2


def test_the_common_path_exports_a_buffer_of_bytes(slow: list[Any]) -> None:
    a = np.arange(48, dtype=np.uint8)
    buf = cu.DeviceBuffer.from_handle(a.ctypes.data, a.nbytes, owner=a)  # no dtype: bytes
    buf._context = _KnownDevice(1)
    dl._dl_code(np.dtype(np.uint8))
    base = dl.registry_size()
    cap = buf.__dlpack__(stream=-1, max_version=(1, 0))
    assert slow == []
    t = managed_of(cap).dl_tensor
    assert (t.data, t.ndim, t.dtype.code, t.dtype.bits) == (a.ctypes.data, 1, 1, 8)
    assert (t.device.device_type, t.device.device_id) == (2, 1)
    assert (ctypes.c_int64 * 1).from_address(t.shape)[0] == 48
    assert (ctypes.c_int64 * 1).from_address(t.strides)[0] == 1
    del cap, t
    assert dl.registry_size() == base
    buf.close()


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"stream": 0}, ValueError, "stream=0"),
        ({"stream": -2}, ValueError, "stream"),
        ({"stream": 1 << 64}, ValueError, "stream"),
        ({"stream": True}, TypeError, "stream"),
        ({"stream": "1"}, TypeError, "stream"),
        ({"stream": np.int64(1)}, TypeError, "stream"),
        ({"max_version": (True, 0)}, TypeError, "max_version"),
        ({"max_version": (1,)}, TypeError, "max_version"),
        ({"max_version": "1.0"}, TypeError, "max_version"),
        ({"copy": True}, BufferError, "never copies"),
        ({"copy": "yes"}, TypeError, "copy"),
        ({"copy": np.False_}, TypeError, "copy"),
        ({"dl_device": (2, 0)}, BufferError, "without copying"),
        ({"dl_device": (1, 0)}, BufferError, "without copying"),
        ({"dl_device": "cuda:3"}, TypeError, "dl_device"),
        ({"stream": 0, "copy": True}, ValueError, "stream=0"),  # the stream is checked first
        ({"max_version": (1,), "copy": True}, TypeError, "max_version"),
    ],
)
def test_off_the_common_path_the_python_export_checks(
    known: Any, slow: list[Any], kwargs: dict[str, Any], error: type, words: str
) -> None:
    _, buf = known
    base = dl.registry_size()
    st = buf.base._state
    with pytest.raises(error, match=words):
        buf.__dlpack__(**kwargs)
    assert len(slow) == 1  # handed over before any side effect
    assert dl.registry_size() == base
    assert len(st.leases) == 0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_version": [1, 0]}, "dltensor_versioned"),  # a list: the Python checks take it
        ({"dl_device": [2, 3]}, "dltensor"),
    ],
)
def test_off_the_common_path_the_python_export_exports(
    known: Any, slow: list[Any], kwargs: dict[str, Any], name: str
) -> None:
    _, buf = known
    cap = buf.__dlpack__(**kwargs)
    assert len(slow) == 1
    assert capsule_name(cap) == name
    t = managed_of(cap).dl_tensor
    assert (t.device.device_type, t.device.device_id) == (2, 3)


def test_a_closed_buffer_goes_the_python_way_and_is_refused(known: Any, slow: list[Any]) -> None:
    _, buf = known
    buf.close()
    with pytest.raises(cu.ClosedError):
        buf.__dlpack__(stream=-1, max_version=(1, 0))
    assert len(slow) == 1
    with pytest.raises(cu.ClosedError):
        buf.__dlpack_device__()


def test_a_dtype_exported_first_goes_the_python_way_then_the_common_one(
    known: Any, slow: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, buf = known
    dt = np.dtype(np.int32)
    monkeypatch.delitem(dl._CODES, dt, raising=False)  # as if never exported
    view = buf.cast(np.int32, (12,))
    for _ in range(2):  # the first through the Python export, which remembers the dtype
        cap = view.__dlpack__()
        assert len(slow) == 1
        t = managed_of(cap).dl_tensor
        assert (t.dtype.code, t.dtype.bits, t.ndim) == (0, 32, 1)
        assert (t.device.device_type, t.device.device_id) == (2, 3)
    assert dl._CODES[dt] == (0, 32, 1)


def test_a_dtype_dlpack_lacks_is_refused_and_never_remembered(known: Any, slow: list[Any]) -> None:
    _, buf = known
    view = buf.cast("V4")
    for _ in range(2):
        with pytest.raises(BufferError, match="byte view"):
            view.__dlpack__()
    assert len(slow) == 2
    assert np.dtype("V4") not in dl._CODES


def test_a_buffer_whose_context_does_not_know_its_device_goes_the_python_way(
    host: Any, as_cuda: None, slow: list[Any]
) -> None:
    _, buf = host  # no context yet: the Python export asks dl.device (the stand-in here)
    cap = buf.__dlpack__(stream=-1, max_version=(1, 0))
    assert len(slow) == 1
    t = managed_of(cap).dl_tensor
    assert (t.device.device_type, t.device.device_id) == (2, 0)
    assert buf.__dlpack_device__() == (2, 0)


def test_dlpack_device_reads_the_fields(known: Any) -> None:
    _, buf = known
    assert buf.__dlpack_device__() == (2, 3)


@pytest.mark.parametrize(("stream", "queue"), [(None, 1), (1, 1), (2, 2), (0x1230, 0x1230)])
def test_the_common_path_leases_then_orders_a_stream_ordered_buffer(
    known: Any, slow: list[Any], monkeypatch: pytest.MonkeyPatch, stream: Any, queue: int
) -> None:
    _, buf = known
    st = buf.base._state
    base = dl.registry_size()
    seen: list[tuple[Any, ...]] = []

    def order(b: Any, q: int) -> None:  # dl._order's place: what it is called with, and when
        seen.append((b, q, len(st.leases), dl.registry_size()))

    monkeypatch.setattr(dl._core, "_order", order)
    monkeypatch.setattr(buf, "_stream", object())  # stream-ordered
    cap = buf.__dlpack__(stream=stream)
    assert slow == []
    assert seen == [(buf, queue, 1, base)]  # after the lease, before the capsule
    del cap
    monkeypatch.setattr(buf, "_stream", None)  # not stream-ordered: nothing to order
    seen.clear()
    buf.__dlpack__(stream=stream)
    assert seen == []


def test_the_common_path_never_orders_for_stream_minus_one(
    known: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, buf = known
    seen: list[Any] = []
    monkeypatch.setattr(dl._core, "_order", lambda b, q: seen.append(q))
    monkeypatch.setattr(buf, "_stream", object())
    buf.__dlpack__(stream=-1, max_version=(1, 0))
    assert seen == []


def test_an_ordering_that_fails_leaves_nothing_behind(
    known: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, buf = known
    st = buf.base._state
    base = dl.registry_size()

    def order(b: Any, q: int) -> None:
        raise RuntimeError("cuStreamWaitEvent failed")

    monkeypatch.setattr(dl._core, "_order", order)
    monkeypatch.setattr(buf, "_stream", object())
    with pytest.raises(RuntimeError, match="cuStreamWaitEvent"):
        buf.__dlpack__(stream=1)
    assert dl.registry_size() == base
    assert len(st.leases) == 0


@linux_only
def test_the_common_path_holds_the_buffer_until_a_late_deleter() -> None:
    _, buf = _known_buffer()
    st = buf.base._state
    base = dl.registry_size()
    ref = weakref.ref(buf)
    cap = buf.__dlpack__(stream=-1, max_version=(1, 0))
    ptr, _ = _consume(cap)
    del cap
    buf.close()  # the consumer still has the tensor: the lease holds the memory
    del buf
    gc.collect()
    assert ref() is not None
    assert len(st.leases) == 1
    _join(_in_a_c_thread(dl._VERSIONED_DELETER_ADDR, ptr))
    gc.collect()
    assert dl.registry_size() == base
    assert len(st.leases) == 0
    assert ref() is None


def test_threads_export_one_buffer_through_the_common_path(known: Any, slow: list[Any]) -> None:
    _, buf = known
    st = buf.base._state
    base = dl.registry_size()
    choices = [{}, {"stream": -1, "max_version": (1, 0)}, {"max_version": (1, 0)}, {"stream": 2}]

    def work(seed: int) -> None:
        held = []
        for i in range(1500):
            held.append(buf.__dlpack__(**choices[(i + seed) % len(choices)]))
            if i % 5 == 0:
                held.clear()
            if i % 400 == 0:
                gc.collect()
        held.clear()

    errors = in_threads(work, 8)
    assert not errors, errors
    assert slow == []
    assert dl.registry_size() == base
    assert len(st.leases) == 0


# -- the consumer ------------------------------------------------------------------------------


@pytest.mark.parametrize("versioned", [True, False])
def test_from_dlpack_wraps_the_memory_and_consumes_the_capsule(
    deleted: list[int], versioned: bool
) -> None:
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    p = FakeProducer(a, versioned=versioned)
    buf = cu.DeviceBuffer.from_dlpack(p)
    assert (buf.ptr, buf.nbytes) == (a.ctypes.data, a.nbytes)
    assert (buf.dtype, buf.shape) == (np.dtype(np.float32), (2, 3, 4))
    assert not buf.owned
    assert capsule_name(p.capsule) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    assert p.streams == [1]  # None: the legacy default stream
    assert deleted == []
    v = buf[4:8]  # a view keeps the tensor too
    buf.close()  # closing frees nothing of the producer's
    del buf
    gc.collect()
    assert deleted == []
    del v
    gc.collect()
    assert len(deleted) == 1
    gc.collect()
    assert len(deleted) == 1


def test_from_dlpack_honours_byte_offset(deleted: list[int]) -> None:
    a = np.arange(8, dtype=np.int64)
    buf = cu.DeviceBuffer.from_dlpack(FakeProducer(a, byte_offset=64))
    assert buf.ptr == a.ctypes.data
    del buf
    gc.collect()
    assert len(deleted) == 1


def test_from_dlpack_falls_back_for_producers_without_max_version(deleted: list[int]) -> None:
    p = OldProducer(np.zeros(4, np.uint16))
    buf = cu.DeviceBuffer.from_dlpack(p, stream=cu.Stream.from_handle(0x1230))
    assert capsule_name(p.capsule) == "used_dltensor"
    assert p.streams == [0x1230]
    assert buf.dtype == np.uint16


@pytest.mark.parametrize(("stream", "passed"), [(None, 1), (0, 1), (2, 2), (-1, -1)])
def test_from_dlpack_passes_the_stream(stream: Any, passed: int, deleted: list[int]) -> None:
    p = FakeProducer(np.zeros(4, np.float32))
    cu.DeviceBuffer.from_dlpack(p, stream=stream)
    assert p.streams == [passed]


@pytest.mark.parametrize(
    ("shape", "strides"),
    [((3, 4), None), ((3, 4), (4, 1)), ((3, 1, 4), (4, 99, 1)), ((1,), (7,))],
)
def test_from_dlpack_accepts_c_order(shape: Any, strides: Any, deleted: list[int]) -> None:
    a = np.zeros(shape, np.float32)
    buf = cu.DeviceBuffer.from_dlpack(FakeProducer(a, strides=strides))
    assert buf.shape == shape


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"shape": (4, 3), "strides": (1, 4)}, "not C-contiguous"),
        ({"shape": (6,), "strides": (2,)}, "not C-contiguous"),
        ({"dtype": (2, 32, 2), "shape": (6,)}, "2 lanes"),
        ({"dtype": (4, 16, 1), "shape": (24,)}, "bfloat16"),
        ({"flags": dl.FLAG_READ_ONLY}, "read-only"),
        ({"major": 2}, "DLPack 2.0"),
        ({"shape": (0, 4)}, "empty"),
        ({"shape": (3, -4)}, "negative"),
    ],
)
def test_from_dlpack_refuses_before_consuming(
    kwargs: dict[str, Any], words: str, deleted: list[int]
) -> None:
    p = FakeProducer(np.zeros(12, np.float32), **kwargs)
    with pytest.raises(BufferError, match=words):
        cu.DeviceBuffer.from_dlpack(p)
    assert capsule_name(p.capsule) == "dltensor_versioned"  # left to its producer
    gc.collect()
    assert deleted == []


def test_from_dlpack_refuses_host_devices_with_a_pointer_to_from_array() -> None:
    with pytest.raises(BufferError, match="from_array"):
        cu.DeviceBuffer.from_dlpack(FakeProducer(np.zeros(4), device=(1, 0)))
    with pytest.raises(BufferError, match="from_array"):
        cu.DeviceBuffer.from_dlpack(np.zeros(4))  # numpy: kDLCPU
    with pytest.raises(TypeError, match="does not support DLPack"):
        cu.DeviceBuffer.from_dlpack([1, 2, 3])


def test_from_dlpack_checks_the_tensors_own_device(deleted: list[int]) -> None:
    class Lying(FakeProducer):
        def __dlpack_device__(self) -> tuple[int, int]:
            return (2, 0)

    p = Lying(np.zeros(4), device=(1, 0))
    with pytest.raises(BufferError, match="not CUDA memory"):
        cu.DeviceBuffer.from_dlpack(p)
    assert capsule_name(p.capsule) == "dltensor_versioned"


def test_from_dlpack_refuses_what_is_not_a_capsule() -> None:
    class NotACapsule(FakeProducer):
        def __dlpack__(self, **kw: Any) -> Any:
            return object()

    with pytest.raises(BufferError, match="not an unconsumed DLPack capsule"):
        cu.DeviceBuffer.from_dlpack(NotACapsule(np.zeros(4)))


def test_round_trip_through_our_own_capsule(as_cuda: None) -> None:
    a = np.arange(12, dtype=np.float32)
    buf = cu.DeviceBuffer.from_handle(a.ctypes.data, a.nbytes).cast(np.float32, (3, 4))
    base = dl.registry_size()
    ref = weakref.ref(buf)
    twin = cu.DeviceBuffer.from_dlpack(buf)
    assert (twin.ptr, twin.dtype, twin.shape) == (a.ctypes.data, np.dtype(np.float32), (3, 4))
    assert dl.registry_size() == base + 1
    buf.close()
    del buf
    gc.collect()
    assert ref() is not None  # the export's lease holds it
    del twin
    gc.collect()
    assert dl.registry_size() == base
    assert ref() is None


# -- GPU: PyTorch, CuPy, streams ----------------------------------------------------------------

SLOW_FILL = r"""
extern "C" __global__ void slow_fill(float* x, float v, int n, long long spin) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}
"""
N = 1 << 16
GRID, BLOCK = N // 256, 256
SPIN = 20_000_000  # about 10 ms of clock cycles: unordered work would see old data


@pytest.fixture(scope="module")
def slow_fill(primary: cu.Context) -> cu.Kernel:
    return load_kernels(primary, SLOW_FILL, "slow_fill")["slow_fill"]


@pytest.mark.gpu
def test_torch_from_dlpack_shares_memory_both_ways(ctx: cu.Context) -> None:
    torch = import_or_skip("torch")
    buf = cu.DeviceBuffer.from_array(np.arange(16, dtype=np.float32))
    assert buf.__dlpack_device__() == (2, 0)
    t = torch.from_dlpack(buf)
    assert (t.device.type, t.dtype, tuple(t.shape)) == ("cuda", torch.float32, (16,))
    assert t.data_ptr() == buf.ptr
    t[3] = 42.0
    torch.cuda.synchronize()
    assert buf.copy_to()[3] == 42.0
    buf.copy_from(np.full(16, 7, np.float32))
    assert bool((t == 7).all())


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("max_version", "name"), [(None, "dltensor"), ((1, 0), "dltensor_versioned")]
)
def test_torch_takes_legacy_and_versioned_capsules(
    ctx: cu.Context, max_version: Any, name: str
) -> None:
    torch = import_or_skip("torch")
    buf = cu.DeviceBuffer.from_array(np.arange(6, dtype=np.int64).reshape(2, 3))
    base = dl.registry_size()
    cap = buf.__dlpack__(stream=1, max_version=max_version)
    assert capsule_name(cap) == name
    t = torch.from_dlpack(cap)
    assert capsule_name(cap).startswith("used_")
    assert (t.dtype, tuple(t.shape), t.data_ptr()) == (torch.int64, (2, 3), buf.ptr)
    assert t.cpu().tolist() == [[0, 1, 2], [3, 4, 5]]
    del cap
    assert dl.registry_size() == base + 1
    buf.close()  # the tensor's export keeps the memory
    assert t.cpu().tolist() == [[0, 1, 2], [3, 4, 5]]
    del t
    gc.collect()
    assert dl.registry_size() == base


@pytest.mark.gpu
def test_stream_ordered_buffer_is_ordered_before_the_torch_stream(
    ctx: cu.Context, slow_fill: cu.Kernel
) -> None:
    torch = import_or_skip("torch")
    s, ts = cu.Stream(), torch.cuda.Stream()
    results = []
    for stream in ("torch's", -1):  # the second, unordered, is the control
        buf = cu.DeviceBuffer.empty(N, np.float32, stream=s)
        buf.fill(0)  # on s, and waited for
        slow_fill.launch(s, GRID, BLOCK, buf, 7.0, N, SPIN)
        with torch.cuda.stream(ts):
            t = torch.from_dlpack(buf if stream == "torch's" else buf.__dlpack__(stream=-1))
            u = t * 2
        ts.synchronize()
        results.append(u.cpu().numpy())
        s.synchronize()
        del t, u
    np.testing.assert_array_equal(results[0], np.full(N, 14, np.float32))
    assert (results[1] == 0).all()  # without the wait, torch read before the fill


@pytest.mark.gpu
def test_from_dlpack_orders_the_torch_producers_work(ctx: cu.Context) -> None:
    torch = import_or_skip("torch")
    ts = torch.cuda.Stream()
    s = cu.Stream()
    with torch.cuda.stream(ts):
        t = torch.zeros(N, device="cuda")
        torch.cuda._sleep(SPIN)
        t.fill_(5.0)
        buf = cu.DeviceBuffer.from_dlpack(t, stream=s)  # s waits for ts
    out = buf.copy_to(stream=s)
    s.synchronize()
    np.testing.assert_array_equal(out, np.full(N, 5, np.float32))
    ts.synchronize()


@pytest.mark.gpu
def test_from_dlpack_torch_shares_memory_and_keeps_the_storage(ctx: cu.Context) -> None:
    torch = import_or_skip("torch")
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    t = torch.arange(1024, dtype=torch.float32, device="cuda")
    buf = cu.DeviceBuffer.from_dlpack(t)
    assert (buf.ptr, buf.nbytes) == (t.data_ptr(), 4096)
    assert (buf.dtype, buf.shape) == (np.dtype(np.float32), (1024,))
    t[0] = -1.0
    torch.cuda.synchronize()
    assert buf.copy_to()[0] == -1.0
    buf.copy_from(np.full(1024, 3, np.float32))
    assert bool((t == 3).all())
    del t
    gc.collect()
    assert torch.cuda.memory_allocated() == base + 4096  # still held by buf
    other = torch.full((1024,), 9.0, device="cuda")  # would reuse a freed block
    np.testing.assert_array_equal(buf.copy_to(), np.full(1024, 3, np.float32))
    del other, buf
    gc.collect()
    assert torch.cuda.memory_allocated() == base


@pytest.mark.gpu
def test_from_dlpack_refuses_torch_tensors_it_cannot_share(ctx: cu.Context) -> None:
    torch = import_or_skip("torch")
    with pytest.raises(BufferError, match="not C-contiguous"):
        cu.DeviceBuffer.from_dlpack(torch.arange(12.0, device="cuda").reshape(3, 4).t())
    with pytest.raises(BufferError, match="bfloat16"):
        cu.DeviceBuffer.from_dlpack(torch.zeros(4, dtype=torch.bfloat16, device="cuda"))
    with pytest.raises(BufferError, match="from_array"):
        cu.DeviceBuffer.from_dlpack(torch.zeros(4))
    buf = cu.DeviceBuffer.from_dlpack(torch.arange(12.0, device="cuda").reshape(3, 4)[1:])
    assert buf.shape == (2, 4)


@pytest.mark.gpu
def test_closed_buffer_is_refused_by_torch(ctx: cu.Context) -> None:
    torch = import_or_skip("torch")
    buf = cu.DeviceBuffer(64)
    buf.close()
    with pytest.raises(cu.ClosedError):
        torch.from_dlpack(buf)


@pytest.mark.gpu
def test_cupy_both_ways(ctx: cu.Context) -> None:
    cupy = import_or_skip("cupy")
    buf = cu.DeviceBuffer.from_array(np.arange(8, dtype=np.float64))
    c = cupy.from_dlpack(buf)
    assert (c.data.ptr, c.dtype, c.shape) == (buf.ptr, cupy.float64, (8,))
    c[2] = 99.0
    cupy.cuda.Device().synchronize()
    assert buf.copy_to()[2] == 99.0
    pool = cupy.get_default_memory_pool()
    x = cupy.arange(256, dtype=cupy.int32)
    gc.collect()  # garbage of earlier tests in this process frees pool memory here, not later
    used = pool.used_bytes()
    back = cu.DeviceBuffer.from_dlpack(x)
    assert (back.ptr, back.dtype, back.shape) == (x.data.ptr, np.dtype(np.int32), (256,))
    x[0] = -7
    cupy.cuda.Device().synchronize()
    assert back.copy_to()[0] == -7
    del x
    gc.collect()
    assert pool.used_bytes() == used  # held by back
    np.testing.assert_array_equal(back.copy_to()[1:4], [1, 2, 3])
    del back
    gc.collect()
    assert pool.used_bytes() < used


@pytest.mark.gpu
def test_our_own_round_trip_on_the_device(ctx: cu.Context) -> None:
    buf = cu.DeviceBuffer.from_array(np.arange(4, dtype=np.uint32))
    twin = cu.DeviceBuffer.from_dlpack(buf)
    assert (twin.ptr, twin.dtype, twin.shape) == (buf.ptr, np.dtype(np.uint32), (4,))
    assert twin.context == ctx
    twin.copy_from(np.full(4, 9, np.uint32))
    np.testing.assert_array_equal(buf.copy_to(), np.full(4, 9, np.uint32))
    with pytest.raises(BufferError, match="without copying"):
        buf.__dlpack__(dl_device=(1, 0))


@pytest.mark.gpu
def test_pinned_buffer_exports_host_memory(ctx: cu.Context) -> None:
    p = cu.PinnedBuffer(16)
    assert p.__dlpack_device__() == (3, 0)
    a = p.array()
    a[:] = np.arange(16)
    for kw in ({}, {"device": "cpu"}):
        a[0] = 0
        b = np.from_dlpack(p, **kw)
        assert b.ctypes.data == p.ptr
        np.testing.assert_array_equal(b, np.arange(16, dtype=np.uint8))
        b[0] = 200
        assert a[0] == 200
    with pytest.raises(BufferError):
        p.__dlpack__(dl_device=(2, 0))
    p.close()
    with pytest.raises(cu.ClosedError):
        p.__dlpack__()
