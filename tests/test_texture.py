"""CUDA arrays, texture objects and surface objects.

Without a GPU: the format of each dtype, the array descriptor and copy extent, the
texture and resource descriptors, every check made before the driver, and the packing
of the objects as kernel arguments (over made-up handles that no driver call sees).
With one: copies in and out of 1D, 2D, 3D and layered arrays, kernels sampling
textures (linear filtering against a numpy bilinear interpolation, normalised
coordinates with wrap and clamp, layered and 3D arrays, buffers as linear and pitched
memory, integers read as normalised floats), a kernel writing a surface, and the
lifetime of an array that a texture reads.
"""

from __future__ import annotations

import gc
import struct
import weakref
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver._launch._packing import pack_arg
from cudriver._memory import arrays, texture
from cudriver._memory.arrays import (
    ArrayFormat,
    array_descriptor,
    array_extent,
    array_format,
    shape_of_descriptor,
)
from cudriver._memory.texture import (
    AddressMode,
    FilterMode,
    ReadMode,
    array_resource,
    linear_resource,
    pitch2d_resource,
    texture_descriptor,
)

from ._support import FAKE, load_kernels, needs_nvrtc

_FAKE_ARRAY = 0x5A5A0000
_FAKE_TEX = 0xABC0000000001234

# -- pure parts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "fmt"),
    [
        (np.uint8, ArrayFormat.UNSIGNED_INT8),
        (np.int8, ArrayFormat.SIGNED_INT8),
        (np.uint16, ArrayFormat.UNSIGNED_INT16),
        (np.int16, ArrayFormat.SIGNED_INT16),
        (np.uint32, ArrayFormat.UNSIGNED_INT32),
        (np.int32, ArrayFormat.SIGNED_INT32),
        (np.float16, ArrayFormat.HALF),
        (np.float32, ArrayFormat.FLOAT),
    ],
)
def test_the_format_of_each_dtype(dtype: Any, fmt: ArrayFormat) -> None:
    assert array_format(dtype) is fmt
    assert int(fmt) == int(getattr(drv.CUarray_format, f"CU_AD_FORMAT_{fmt.name}"))


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint64, np.bool_, np.complex64, ">f4"])
def test_dtypes_without_a_format(dtype: Any) -> None:
    with pytest.raises(TypeError, match="a CUDA array holds"):
        array_format(dtype)


@pytest.mark.parametrize(
    ("shape", "layered", "dims"),
    [
        ((64,), False, (64, 0, 0)),
        ((17, 33), False, (33, 17, 0)),
        ((5, 6, 7), False, (7, 6, 5)),
        ((3, 40), True, (40, 0, 3)),
        ((4, 9, 10), True, (10, 9, 4)),
    ],
)
def test_the_descriptor_takes_numpy_order(
    shape: tuple[int, ...], layered: bool, dims: tuple[int, int, int]
) -> None:
    d = array_descriptor(shape, np.float32, 2, layered=layered)
    assert (d.Width, d.Height, d.Depth) == dims
    assert d.Format == drv.CUarray_format.CU_AD_FORMAT_FLOAT
    assert d.NumChannels == 2
    assert d.Flags == (drv.CUDA_ARRAY3D_LAYERED if layered else 0)
    assert shape_of_descriptor(d) == (shape, np.dtype(np.float32), 2, d.Flags)


def test_the_descriptor_flags() -> None:
    d = array_descriptor((8, 8), np.uint8, surface=True, texture_gather=True)
    assert d.Flags == drv.CUDA_ARRAY3D_SURFACE_LDST | drv.CUDA_ARRAY3D_TEXTURE_GATHER
    d = array_descriptor((2, 8, 8), np.uint8, layered=True, surface=True)
    assert d.Flags == drv.CUDA_ARRAY3D_SURFACE_LDST | drv.CUDA_ARRAY3D_LAYERED


@pytest.mark.parametrize(
    ("shape", "kwargs", "match"),
    [
        ((), {}, r"shape \(w,\), \(h, w\) or \(d, h, w\)"),
        ((2, 3, 4, 5), {}, r"shape \(w,\), \(h, w\) or \(d, h, w\)"),
        ((8,), {"layered": True}, r"\(layers, w\) or \(layers, h, w\)"),
        ((4, 0), {}, r"shape\[1\] = 0"),
        ((4, 4), {"channels": 3}, "channels must be 1, 2 or 4"),
        ((4, 4, 4), {"texture_gather": True}, "texture_gather needs a 2D array"),
        ((2, 4, 4), {"texture_gather": True, "layered": True}, "texture_gather"),
    ],
)
def test_descriptor_refusals(shape: tuple[int, ...], kwargs: dict[str, Any], match: str) -> None:
    ch = kwargs.pop("channels", 1)
    with pytest.raises(ValueError, match=match):
        array_descriptor(shape, np.float32, ch, **kwargs)


def test_a_descriptor_of_a_video_format_has_no_dtype() -> None:
    d = drv.CUDA_ARRAY3D_DESCRIPTOR()
    d.Width, d.Format, d.NumChannels = 8, drv.CUarray_format.CU_AD_FORMAT_NV12, 1
    with pytest.raises(TypeError, match="has no numpy dtype"):
        shape_of_descriptor(d)


def test_from_handle_checks_come_before_the_driver() -> None:
    with pytest.raises(ValueError, match="NULL CUDA array"):
        cu.CudaArray.from_handle(0)
    with pytest.raises(TypeError, match="CUDA array must be a CUarray or an int"):
        cu.CudaArray.from_handle(1.5)


def test_the_extent_of_a_copy() -> None:
    assert array_extent((64,), 4, 1, False) == (256, 1, 1)
    assert array_extent((17, 33), 2, 4, False) == (33 * 8, 17, 1)
    assert array_extent((5, 6, 7), 1, 2, False) == (14, 6, 5)
    assert array_extent((3, 40), 4, 1, True) == (160, 1, 3)  # 1D layers: rows of 1
    assert array_extent((4, 9, 10), 2, 1, True) == (20, 9, 4)


def test_the_texture_descriptor() -> None:
    d = texture_descriptor(
        ArrayFormat.FLOAT,
        2,
        address_mode=(AddressMode.WRAP, AddressMode.BORDER),  # numpy order: (y, x)
        filter_mode=FilterMode.LINEAR,
        normalized_coords=True,
        border_color=(1, 2, 3, 4),
    )
    modes = drv.CUaddress_mode
    assert list(d.addressMode) == [
        modes.CU_TR_ADDRESS_MODE_BORDER,  # x first, as the driver takes them
        modes.CU_TR_ADDRESS_MODE_WRAP,
        modes.CU_TR_ADDRESS_MODE_CLAMP,
    ]
    assert d.filterMode == drv.CUfilter_mode.CU_TR_FILTER_MODE_LINEAR
    assert d.flags == drv.CU_TRSF_NORMALIZED_COORDINATES  # floats are never read as integers
    assert list(d.borderColor) == [1.0, 2.0, 3.0, 4.0]


def test_the_read_mode_flag() -> None:
    d = texture_descriptor(ArrayFormat.UNSIGNED_INT8, 1)
    assert d.flags == drv.CU_TRSF_READ_AS_INTEGER
    d = texture_descriptor(ArrayFormat.UNSIGNED_INT8, 1, read_mode=ReadMode.NORMALIZED_FLOAT)
    assert d.flags == 0
    d = texture_descriptor(ArrayFormat.HALF, 3, address_mode=AddressMode.CLAMP)
    assert d.flags == 0
    # The bindings' members and plain ints are accepted too.
    d = texture_descriptor(
        ArrayFormat.SIGNED_INT16,
        1,
        address_mode=drv.CUaddress_mode.CU_TR_ADDRESS_MODE_BORDER,
        filter_mode=1,
        read_mode=1,
    )
    assert d.addressMode[0] == drv.CUaddress_mode.CU_TR_ADDRESS_MODE_BORDER
    assert d.filterMode == drv.CUfilter_mode.CU_TR_FILTER_MODE_LINEAR


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"address_mode": AddressMode.WRAP}, ValueError, "WRAP needs normalized_coords"),
        ({"address_mode": AddressMode.MIRROR}, ValueError, "MIRROR needs normalized_coords"),
        ({"address_mode": (AddressMode.CLAMP,)}, ValueError, "1 entries; the texture has 2"),
        ({"address_mode": "wrap"}, TypeError, "cudriver.AddressMode"),
        ({"address_mode": 7}, ValueError, "AddressMode"),
        ({"filter_mode": 2}, ValueError, "FilterMode"),
        ({"read_mode": True}, TypeError, "ReadMode"),
        ({"normalized_coords": 1}, TypeError, "True or False"),
        ({"border_color": (1.0, 2.0)}, ValueError, "4 floats"),
        ({"border_color": 1.0}, TypeError, "4 floats"),
    ],
)
def test_texture_option_refusals(kwargs: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        texture_descriptor(ArrayFormat.FLOAT, 2, **kwargs)


def test_linear_filtering_needs_float_results() -> None:
    with pytest.raises(ValueError, match="LINEAR needs float results"):
        texture_descriptor(ArrayFormat.UNSIGNED_INT8, 2, filter_mode=FilterMode.LINEAR)
    with pytest.raises(ValueError, match="NORMALIZED_FLOAT maps 8- and 16-bit"):
        texture_descriptor(ArrayFormat.SIGNED_INT32, 2, read_mode=ReadMode.NORMALIZED_FLOAT)
    d = texture_descriptor(
        ArrayFormat.UNSIGNED_INT16,
        2,
        filter_mode=FilterMode.LINEAR,
        read_mode=ReadMode.NORMALIZED_FLOAT,
    )
    assert d.flags == 0


def test_linear_memory_takes_no_sampling_options() -> None:
    texture_descriptor(ArrayFormat.FLOAT, 1, linear=True)
    for kwargs in (
        {"filter_mode": FilterMode.LINEAR},
        {"normalized_coords": True},
        {"address_mode": AddressMode.BORDER},
    ):
        with pytest.raises(ValueError, match="tex1Dfetch"):
            texture_descriptor(ArrayFormat.FLOAT, 1, linear=True, **kwargs)


def test_the_resource_descriptors() -> None:
    r = array_resource(drv.CUarray(_FAKE_ARRAY))
    assert r.resType == drv.CUresourcetype.CU_RESOURCE_TYPE_ARRAY
    assert int(r.res.array.hArray) == _FAKE_ARRAY
    r = linear_resource(FAKE, ArrayFormat.SIGNED_INT32, 2, 4096)
    assert r.resType == drv.CUresourcetype.CU_RESOURCE_TYPE_LINEAR
    lin = r.res.linear
    assert (int(lin.devPtr), lin.numChannels, lin.sizeInBytes) == (FAKE, 2, 4096)
    assert lin.format == drv.CUarray_format.CU_AD_FORMAT_SIGNED_INT32
    r = pitch2d_resource(FAKE, ArrayFormat.HALF, 4, 30, 20, 256)
    assert r.resType == drv.CUresourcetype.CU_RESOURCE_TYPE_PITCH2D
    p = r.res.pitch2D
    assert (int(p.devPtr), p.numChannels, p.width, p.height, p.pitchInBytes) == (
        FAKE,
        4,
        30,
        20,
        256,
    )


def test_the_enums_have_the_driver_values() -> None:
    for m in AddressMode:
        assert int(m) == int(getattr(drv.CUaddress_mode, f"CU_TR_ADDRESS_MODE_{m.name}"))
    for f in FilterMode:
        assert int(f) == int(getattr(drv.CUfilter_mode, f"CU_TR_FILTER_MODE_{f.name}"))
    for name in ("CudaArray", "ArrayFormat", "TextureObject", "SurfaceObject", "ReadMode"):
        assert getattr(cu, name).__module__ == "cudriver"


# -- objects over made-up handles (no driver call) ----------------------------------------


def _fake_array(
    shape: tuple[int, ...] = (4, 8),
    dtype: Any = np.float32,
    channels: int = 1,
    flags: int = 0,
) -> cu.CudaArray:
    """A CudaArray over a made-up handle: borrowed, so nothing is ever released."""
    a = cu.CudaArray.__new__(cu.CudaArray)
    a._shape = shape
    a._dtype = np.dtype(dtype)
    a._format = array_format(dtype)
    a._channels = channels
    a._flags = flags
    a._init_handle(drv.CUarray(_FAKE_ARRAY), release=None, func="cuArrayDestroy", owned=False)
    return a


def _fake_texture(resource: Any) -> cu.TextureObject:
    t = cu.TextureObject.__new__(cu.TextureObject)
    t._resource = resource
    t._address_mode = (AddressMode.CLAMP,)
    t._filter_mode = FilterMode.POINT
    t._read_mode = ReadMode.ELEMENT_TYPE
    t._normalized = False
    t._border_color = (0.0, 0.0, 0.0, 0.0)
    t._init_handle(drv.CUtexObject(_FAKE_TEX), release=None, func="cuTexObjectDestroy", owned=False)
    return t


def test_packs_as_its_64_bit_handle() -> None:
    t = _fake_texture(_fake_array())
    assert pack_arg(8, t) == struct.pack("<Q", _FAKE_TEX)
    with pytest.raises(TypeError, match="argument 2: the TextureObject has 8 bytes"):
        pack_arg(4, t, 2)
    t.close()
    with pytest.raises(cu.ClosedError, match="TextureObject is closed"):
        pack_arg(8, t)


@pytest.mark.parametrize(
    ("shape", "kwargs", "error", "match"),
    [
        ((4, 3), {"channels": 3}, ValueError, "channels must be 1, 2 or 4"),
        ((), {}, ValueError, r"shape \(w,\)"),
        ((4, -1), {}, ValueError, "negative"),
        ((4, 4), {"layered": 1}, TypeError, "layered must be True or False"),
        ((4, 4), {"dtype": np.float64}, TypeError, "a CUDA array holds"),
        ((4, 4), {"context": 0}, TypeError, "context must be a cudriver.Context"),
    ],
)
def test_constructor_checks_come_before_the_driver(
    shape: tuple[int, ...], kwargs: dict[str, Any], error: type, match: str
) -> None:
    dtype = kwargs.pop("dtype", np.float32)
    with pytest.raises(error, match=match):
        cu.CudaArray(shape, dtype, **kwargs)


def test_from_array_checks_come_before_the_driver() -> None:
    with pytest.raises(TypeError, match="takes a host array"):
        cu.CudaArray.from_array(cu.DeviceBuffer.from_handle(FAKE, 64))
    with pytest.raises(ValueError, match="no last axis of 4 channels"):
        cu.CudaArray.from_array(np.zeros((4, 3), np.float32), channels=4)
    with pytest.raises(ValueError, match="not C-contiguous"):
        cu.CudaArray.from_array(np.zeros((4, 6), np.float32)[:, ::2])


def test_copy_checks_name_both_sides() -> None:
    a = _fake_array((4, 8), np.float32, channels=2)
    assert a.host_shape == (4, 8, 2)
    assert a.nbytes == 4 * 8 * 2 * 4
    with pytest.raises(ValueError, match=r"dtype mismatch: src holds float64.*holds float32"):
        a.copy_from(np.zeros((4, 8, 2)))
    with pytest.raises(ValueError, match=r"shape mismatch: src has shape \(4, 8\).*\(4, 8, 2\)"):
        a.copy_from(np.zeros((4, 8), np.float32))
    with pytest.raises(ValueError, match="size mismatch: src has 10 bytes"):
        a.copy_from(bytes(10))
    with pytest.raises(ValueError, match=r"size mismatch: dst has 128 bytes.*\(256 bytes\)"):
        a.copy_to(cu.DeviceBuffer.from_handle(FAKE, 128))
    typed = cu.DeviceBuffer.from_handle(FAKE, 256).cast(np.int32)
    with pytest.raises(ValueError, match="dtype mismatch: dst holds int32"):
        a.copy_to(typed)
    with pytest.raises(ValueError, match="read-only"):
        a.copy_to(_ro())
    with pytest.raises(TypeError, match="must be a numpy array"):
        a.copy_from(object())
    a.close()
    with pytest.raises(cu.ClosedError, match="CudaArray is closed"):
        a.copy_to()


def _ro() -> np.ndarray[Any, Any]:
    x = np.zeros((4, 8, 2), np.float32)
    x.setflags(write=False)
    return x


def test_texture_and_surface_checks_come_before_the_driver() -> None:
    with pytest.raises(TypeError, match="reads a cudriver.CudaArray or a cudriver.DeviceBuffer"):
        cu.TextureObject(np.zeros(4, np.float32))  # type: ignore[arg-type]
    a = _fake_array((4, 8), np.uint8)
    with pytest.raises(TypeError, match="shape, pitch: for a texture over a buffer"):
        cu.TextureObject(a, shape=(2, 2), pitch=64)
    with pytest.raises(ValueError, match="LINEAR needs float results"):
        cu.TextureObject(a, filter_mode=FilterMode.LINEAR)
    with pytest.raises(ValueError, match="WRAP needs normalized_coords"):
        cu.TextureObject(a, address_mode=AddressMode.WRAP)
    layered = _fake_array((3, 4, 8), np.float32, flags=int(drv.CUDA_ARRAY3D_LAYERED))
    assert layered.ndim == 2  # the layers have no address mode
    with pytest.raises(ValueError, match="3 entries; the texture has 2"):
        cu.TextureObject(layered, address_mode=(1, 1, 1))
    with pytest.raises(TypeError, match="writes a cudriver.CudaArray"):
        cu.SurfaceObject(cu.DeviceBuffer.from_handle(FAKE, 64))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="without surface=True"):
        cu.SurfaceObject(a)
    a.close()
    with pytest.raises(cu.ClosedError, match="CudaArray is closed"):
        cu.TextureObject(a)
    surf = _fake_array(flags=int(drv.CUDA_ARRAY3D_SURFACE_LDST))
    surf.close()
    with pytest.raises(cu.ClosedError, match="CudaArray is closed"):
        cu.SurfaceObject(surf)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({}, ValueError, "not a whole number of 8-byte elements"),  # 100 bytes of float32x2
        ({"shape": (4, 20)}, ValueError, r"needs 640 bytes; the buffer holds 100"),
        ({"shape": (2, 4), "pitch": 16}, ValueError, "pitch 16 is smaller than a row"),
        ({"shape": (12,), "pitch": 64}, ValueError, "pitch= is for a 2D shape"),
        ({"shape": (1, 2, 3)}, ValueError, r"\(n,\) \(linear\) or \(h, w\)"),
        ({"dtype": np.float64}, TypeError, "a CUDA array holds"),
        ({"shape": (6,), "filter_mode": FilterMode.LINEAR}, ValueError, "tex1Dfetch"),
    ],
)
def test_buffer_textures_are_checked_before_the_driver(
    kwargs: dict[str, Any], error: type, match: str
) -> None:
    buf = cu.DeviceBuffer.from_handle(FAKE, 100).cast(np.float32, (25,))
    with pytest.raises(error, match=match):
        cu.TextureObject(buf, channels=2, **kwargs)


def test_the_layout_of_a_buffer_texture() -> None:
    layout = texture._BufferLayout(4096, np.dtype(np.float32), None, None, None, None)
    assert (layout.shape, layout.pitch, layout.nbytes, layout.channels) == ((1024,), 4096, 4096, 1)
    layout = texture._BufferLayout(4096, np.dtype(np.uint8), np.int16, 2, (10, 30), 128)
    assert layout.fmt is ArrayFormat.SIGNED_INT16
    assert (layout.shape, layout.pitch, layout.nbytes) == ((10, 30), 128, 128 * 9 + 120)


def test_repr() -> None:
    a = _fake_array((3, 4, 8), np.uint8, 4, int(drv.CUDA_ARRAY3D_LAYERED))
    assert repr(a) == (
        f"<cudriver.CudaArray {_FAKE_ARRAY:#x} shape=(3, 4, 8) uint8x4 layered borrowed>"
    )
    t = _fake_texture(a)
    assert repr(t) == f"<cudriver.TextureObject {_FAKE_TEX:#x} of CudaArray POINT CLAMP borrowed>"
    a.close()
    assert repr(a) == "<cudriver.CudaArray closed>"


def test_module_names() -> None:
    assert arrays.__all__ and texture.__all__
    for name in arrays.__all__ + texture.__all__:
        assert hasattr(arrays, name) or hasattr(texture, name)


# -- the kernels ----------------------------------------------------------------------------

KERNELS = r"""
extern "C" __global__ void sample2d(cudaTextureObject_t tex, float* out, const float* xs,
                                    const float* ys, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float>(tex, xs[i], ys[i]);
}
extern "C" __global__ void sample2d_float4(cudaTextureObject_t tex, float4* out, int w, int h) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < w * h) out[i] = tex2D<float4>(tex, i % w + 0.5f, i / w + 0.5f);
}
extern "C" __global__ void sample2d_int(cudaTextureObject_t tex, int* out, int w, int h) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < w * h) out[i] = tex2D<int>(tex, i % w + 0.5f, i / w + 0.5f);
}
extern "C" __global__ void sample1d(cudaTextureObject_t tex, float* out, const float* xs, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1D<float>(tex, xs[i]);
}
extern "C" __global__ void sample3d(cudaTextureObject_t tex, float* out, int w, int h, int d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < w * h * d)
        out[i] = tex3D<float>(tex, i % w + 0.5f, (i / w) % h + 0.5f, i / (w * h) + 0.5f);
}
extern "C" __global__ void sample1d_layered(cudaTextureObject_t tex, float* out, int w, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < w * n) out[i] = tex1DLayered<float>(tex, i % w + 0.5f, i / w);
}
extern "C" __global__ void sample2d_layered(cudaTextureObject_t tex, float* out, int w, int h,
                                            int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < w * h * n)
        out[i] = tex2DLayered<float>(tex, i % w + 0.5f, (i / w) % h + 0.5f, i / (w * h));
}
extern "C" __global__ void fetch1d(cudaTextureObject_t tex, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1Dfetch<float>(tex, i);
}
extern "C" __global__ void surf_fill(cudaSurfaceObject_t surf, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) surf2Dwrite<float>(float(y * 1000 + x), surf, x * (int)sizeof(float), y);
}
extern "C" __global__ void surf_twice(cudaSurfaceObject_t surf, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) {
        float v = surf2Dread<float>(surf, x * (int)sizeof(float), y);
        surf2Dwrite<float>(2.0f * v + 1.0f, surf, x * (int)sizeof(float), y);
    }
}
"""

_NAMES = (
    "sample2d",
    "sample2d_float4",
    "sample2d_int",
    "sample1d",
    "sample3d",
    "sample1d_layered",
    "sample2d_layered",
    "fetch1d",
    "surf_fill",
    "surf_twice",
)


@needs_nvrtc
def test_the_kernels_compile_with_nvrtc_alone() -> None:
    # cudaTextureObject_t, cudaSurfaceObject_t and the tex*/surf* templates are NVRTC
    # builtins: no CUDA headers needed (and no GPU to compile).
    code = cu.compile(KERNELS, arch=(8, 0), target="ptx", cache=False)
    for name in _NAMES:
        assert f".entry {name}(" in code.decode()


# -- on a GPU -----------------------------------------------------------------------------


@pytest.fixture
def kernels(ctx: cu.Context) -> dict[str, cu.Kernel]:
    return load_kernels(ctx, KERNELS, *_NAMES)


def _run(kern: cu.Kernel, n: int, *args: Any) -> None:
    kern.launch(cu.Stream.legacy(), (n + 127) // 128, 128, *args)


_ROUND_TRIPS = [
    ((64,), np.float32, 1, False),
    ((17, 33), np.float32, 1, False),
    ((17, 33), np.float32, 2, False),
    ((9, 31), np.uint8, 4, False),
    ((5, 6, 7), np.int16, 1, False),
    ((3, 40), np.float32, 1, True),
    ((4, 9, 10), np.float16, 2, True),
    ((2, 3, 5), np.uint32, 4, False),
]


def _data(shape: tuple[int, ...], dtype: Any, channels: int) -> np.ndarray[Any, Any]:
    full = shape if channels == 1 else (*shape, channels)
    rng = np.random.default_rng(sum(full))
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(full).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, full, dtype=dtype, endpoint=True)


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "dtype", "channels", "layered"), _ROUND_TRIPS)
def test_round_trips(
    ctx: cu.Context,
    stream: cu.Stream,
    shape: tuple[int, ...],
    dtype: Any,
    channels: int,
    layered: bool,
) -> None:
    a = _data(shape, dtype, channels)
    with cu.CudaArray.from_array(a, channels=channels, layered=layered) as arr:
        assert (arr.shape, arr.dtype, arr.channels, arr.layered) == (
            shape,
            np.dtype(dtype),
            channels,
            layered,
        )
        assert arr.host_shape == a.shape and arr.nbytes == a.nbytes
        # host -> array -> host (synchronous)
        np.testing.assert_array_equal(arr.copy_to(), a)
        # device buffer -> array -> device buffer
        b = _data(shape, dtype, channels)[::-1].copy()
        src = cu.DeviceBuffer.from_array(b)
        out = cu.DeviceBuffer.empty(b.shape, b.dtype)
        arr.copy_from(src)
        assert arr.copy_to(out) is out
        np.testing.assert_array_equal(out.copy_to(), b)
        # pinned -> array -> pinned, on a stream
        pin = cu.PinnedBuffer(a.nbytes)
        pin.array(a.dtype, a.shape)[...] = a
        back = cu.PinnedBuffer(a.nbytes)
        arr.copy_from(pin, stream=stream)
        arr.copy_to(back, stream=stream)
        stream.synchronize()
        np.testing.assert_array_equal(back.array(a.dtype, a.shape), a)
        # pageable host memory on a stream
        got = np.empty_like(a)
        arr.copy_from(b, stream=stream)
        arr.copy_to(got, stream=stream)
        stream.synchronize()
        np.testing.assert_array_equal(got, b)
        for x in (src, out, pin, back):
            x.close()


def _bilinear(a: np.ndarray[Any, Any], xs: np.ndarray[Any, Any], ys: np.ndarray[Any, Any]) -> Any:
    """CUDA's linear filter with clamp addressing at unnormalised (x, y): texel centres at
    i + 0.5, so it interpolates at (x - 0.5, y - 0.5) in index space."""
    h, w = a.shape
    xb, yb = xs - 0.5, ys - 0.5
    i, j = np.floor(xb).astype(int), np.floor(yb).astype(int)
    alpha, beta = xb - i, yb - j

    def t(jj: Any, ii: Any) -> Any:
        return a[np.clip(jj, 0, h - 1), np.clip(ii, 0, w - 1)]

    return (
        (1 - alpha) * (1 - beta) * t(j, i)
        + alpha * (1 - beta) * t(j, i + 1)
        + (1 - alpha) * beta * t(j + 1, i)
        + alpha * beta * t(j + 1, i + 1)
    )


@needs_nvrtc
@pytest.mark.gpu
def test_linear_filtering_matches_numpy(ctx: cu.Context, kernels: dict[str, cu.Kernel]) -> None:
    h, w = 24, 40
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    a = (np.sin(xx / 5) * np.cos(yy / 7) * 10 + xx).astype(np.float32)
    rng = np.random.default_rng(1)
    n = 4096
    xs = rng.uniform(-2, w + 2, n).astype(np.float32)  # past the edges too: clamped
    ys = rng.uniform(-2, h + 2, n).astype(np.float32)
    with (
        cu.CudaArray.from_array(a) as arr,
        cu.TextureObject(arr, filter_mode=FilterMode.LINEAR) as tex,
    ):
        out = cu.DeviceBuffer.empty(n, np.float32)
        dx, dy = cu.DeviceBuffer.from_array(xs), cu.DeviceBuffer.from_array(ys)
        _run(kernels["sample2d"], n, tex, out, dx, dy, n)
        got = out.copy_to()
    expected = _bilinear(a.astype(np.float64), xs.astype(np.float64), ys.astype(np.float64))
    span = float(a.max() - a.min())
    # The filter's weights are 9-bit fixed point (8 fractional bits).
    np.testing.assert_allclose(got, expected, atol=1e-2 * span, rtol=0)
    # At texel centres it is exact.
    cx = (np.arange(w, dtype=np.float32) + 0.5)[None, :].repeat(h, 0).ravel()
    cy = (np.arange(h, dtype=np.float32) + 0.5)[:, None].repeat(w, 1).ravel()
    with (
        cu.CudaArray.from_array(a) as arr,
        cu.TextureObject(arr, filter_mode=FilterMode.LINEAR) as tex,
    ):
        out = cu.DeviceBuffer.empty(h * w, np.float32)
        _run(
            kernels["sample2d"],
            h * w,
            tex,
            out,
            cu.DeviceBuffer.from_array(cx),
            cu.DeviceBuffer.from_array(cy),
            h * w,
        )
        np.testing.assert_allclose(out.copy_to(), a.ravel(), rtol=1e-6)


@needs_nvrtc
@pytest.mark.gpu
def test_point_filtering_with_normalized_coordinates(
    ctx: cu.Context, kernels: dict[str, cu.Kernel]
) -> None:
    w = 16
    a = np.arange(w, dtype=np.float32) * 3 + 1
    centres = (np.arange(w) + 0.5) / w
    xs = np.concatenate([centres, centres - 1, centres + 2, [-0.3, 1.7, 0.999]]).astype(np.float32)
    n = xs.size
    dx = cu.DeviceBuffer.from_array(xs)
    out = cu.DeviceBuffer.empty(n, np.float32)
    with cu.CudaArray.from_array(a) as arr:
        for mode in (AddressMode.WRAP, AddressMode.CLAMP, AddressMode.MIRROR):
            with cu.TextureObject(arr, address_mode=mode, normalized_coords=True) as tex:
                assert tex.address_mode == (mode,) and tex.normalized_coords
                _run(kernels["sample1d"], n, tex, out, dx, n)
                got = out.copy_to()
            if mode is AddressMode.WRAP:
                idx = np.floor((xs - np.floor(xs)) * w).astype(int)
            elif mode is AddressMode.CLAMP:
                idx = np.clip(np.floor(xs * w).astype(int), 0, w - 1)
            else:  # MIRROR: every other period runs backwards
                period = np.floor(xs).astype(int)
                f = np.floor((xs - period) * w).astype(int)
                idx = np.where(period % 2 == 0, f, w - 1 - f)
            np.testing.assert_array_equal(got, a[np.clip(idx, 0, w - 1)], err_msg=mode.name)
        # BORDER reads the border colour outside, also with unnormalised coordinates.
        with cu.TextureObject(
            arr, address_mode=AddressMode.BORDER, border_color=(-5.0, 0.0, 0.0, 0.0)
        ) as tex:
            pts = np.array([-1.0, 0.5, w - 0.5, w + 1.0], np.float32)
            _run(kernels["sample1d"], 4, tex, out, cu.DeviceBuffer.from_array(pts), 4)
            np.testing.assert_array_equal(out.copy_to()[:4], [-5.0, a[0], a[-1], -5.0])


@needs_nvrtc
@pytest.mark.gpu
def test_3d_and_layered_textures_read_every_texel(
    ctx: cu.Context, kernels: dict[str, cu.Kernel]
) -> None:
    vol = _data((5, 6, 7), np.float32, 1)
    with cu.CudaArray.from_array(vol) as arr, cu.TextureObject(arr) as tex:
        out = cu.DeviceBuffer.empty(vol.shape, np.float32)
        _run(kernels["sample3d"], vol.size, tex, out, 7, 6, 5)
        np.testing.assert_array_equal(out.copy_to(), vol)
    lay1 = _data((3, 40), np.float32, 1)
    with cu.CudaArray.from_array(lay1, layered=True) as arr, cu.TextureObject(arr) as tex:
        out = cu.DeviceBuffer.empty(lay1.shape, np.float32)
        _run(kernels["sample1d_layered"], lay1.size, tex, out, 40, 3)
        np.testing.assert_array_equal(out.copy_to(), lay1)
    lay2 = _data((4, 9, 10), np.float32, 1)
    with cu.CudaArray.from_array(lay2, layered=True) as arr, cu.TextureObject(arr) as tex:
        out = cu.DeviceBuffer.empty(lay2.shape, np.float32)
        _run(kernels["sample2d_layered"], lay2.size, tex, out, 10, 9, 4)
        np.testing.assert_array_equal(out.copy_to(), lay2)


@needs_nvrtc
@pytest.mark.gpu
def test_integer_textures(ctx: cu.Context, kernels: dict[str, cu.Kernel]) -> None:
    h, w = 6, 11
    rgba = _data((h, w), np.uint8, 4)
    with cu.CudaArray.from_array(rgba, channels=4) as arr:
        with cu.TextureObject(arr, read_mode=ReadMode.NORMALIZED_FLOAT) as tex:
            out = cu.DeviceBuffer.empty((h, w, 4), np.float32)
            _run(kernels["sample2d_float4"], h * w, tex, out, w, h)
            np.testing.assert_allclose(out.copy_to(), rgba / 255.0, atol=1e-6)
    ints = _data((h, w), np.int32, 1)
    with cu.CudaArray.from_array(ints) as arr, cu.TextureObject(arr) as tex:
        out = cu.DeviceBuffer.empty((h, w), np.int32)
        _run(kernels["sample2d_int"], h * w, tex, out, w, h)
        np.testing.assert_array_equal(out.copy_to(), ints)


@needs_nvrtc
@pytest.mark.gpu
def test_textures_over_buffers(ctx: cu.Context, kernels: dict[str, cu.Kernel]) -> None:
    a = np.arange(1000, dtype=np.float32) * 0.5
    buf = cu.DeviceBuffer.from_array(a)
    with cu.TextureObject(buf) as tex:  # linear memory: tex1Dfetch
        out = cu.DeviceBuffer.empty(a.shape, np.float32)
        _run(kernels["fetch1d"], a.size, tex, out, a.size)
        np.testing.assert_array_equal(out.copy_to(), a)
    # Pitched 2D: rows of 40 floats every 256 bytes (a multiple of the pitch alignment).
    h, w, pitch = 12, 40, 256
    if pitch % ctx.device.attribute(cu.DeviceAttribute.TEXTURE_PITCH_ALIGNMENT):
        pytest.skip("the device's texture pitch alignment does not divide 256")
    img = _data((h, w), np.float32, 1)
    rows = np.zeros((h, pitch // 4), np.float32)
    rows[:, :w] = img
    pbuf = cu.DeviceBuffer.from_array(rows)
    with cu.TextureObject(pbuf, shape=(h, w), pitch=pitch) as tex:
        n = h * w
        cx = (np.arange(w, dtype=np.float32) + 0.5)[None, :].repeat(h, 0).ravel()
        cy = (np.arange(h, dtype=np.float32) + 0.5)[:, None].repeat(w, 1).ravel()
        out = cu.DeviceBuffer.empty(n, np.float32)
        dx, dy = cu.DeviceBuffer.from_array(cx), cu.DeviceBuffer.from_array(cy)
        _run(kernels["sample2d"], n, tex, out, dx, dy, n)
        np.testing.assert_array_equal(out.copy_to().reshape(h, w), img)


@needs_nvrtc
@pytest.mark.gpu
def test_a_kernel_writes_a_surface(ctx: cu.Context, kernels: dict[str, cu.Kernel]) -> None:
    h, w = 19, 45
    with cu.CudaArray((h, w), np.float32, surface=True) as arr, cu.SurfaceObject(arr) as surf:
        assert arr.surface and surf.resource is arr
        grid = ((w + 15) // 16, (h + 15) // 16)
        kernels["surf_fill"].launch(cu.Stream.legacy(), grid, (16, 16), surf, w, h)
        yy, xx = np.mgrid[0:h, 0:w]
        expected = (yy * 1000 + xx).astype(np.float32)
        np.testing.assert_array_equal(arr.copy_to(), expected)
        # Read and written back through the surface.
        kernels["surf_twice"].launch(cu.Stream.legacy(), grid, (16, 16), surf, w, h)
        np.testing.assert_array_equal(arr.copy_to(), 2 * expected + 1)
    with cu.CudaArray((h, w), np.float32) as plain, pytest.raises(ValueError, match="surface"):
        cu.SurfaceObject(plain)


@needs_nvrtc
@pytest.mark.gpu
def test_a_texture_keeps_its_array(ctx: cu.Context, kernels: dict[str, cu.Kernel]) -> None:
    w = 256
    a = np.linspace(-1, 1, w, dtype=np.float32)
    xs = cu.DeviceBuffer.from_array((np.arange(w) + 0.5).astype(np.float32))
    out = cu.DeviceBuffer.empty(w, np.float32)

    def sample(tex: cu.TextureObject) -> np.ndarray[Any, Any]:
        out.fill(0)
        _run(kernels["sample1d"], w, tex, out, xs, w)
        return out.copy_to()

    # The user drops the array: the texture keeps it.
    arr = cu.CudaArray.from_array(a)
    tex = cu.TextureObject(arr)
    ref = weakref.ref(arr)
    del arr
    gc.collect()
    ctx.synchronize()
    assert ref() is not None
    np.testing.assert_array_equal(sample(tex), a)
    # The user closes the array: unusable at once, its memory kept for the texture.
    arr2 = cu.CudaArray.from_array(a[::-1].copy())
    tex2 = cu.TextureObject(arr2)
    arr2.close()
    with pytest.raises(cu.ClosedError):
        arr2.copy_to()
    with pytest.raises(cu.ClosedError):
        cu.TextureObject(arr2)
    ctx.synchronize()
    np.testing.assert_array_equal(sample(tex2), a[::-1])
    # Once the textures go, so do the arrays.
    del tex
    tex2.close()
    gc.collect()
    ctx.synchronize()
    assert ref() is None


@needs_nvrtc
@pytest.mark.gpu
def test_a_graph_keeps_its_texture(
    ctx: cu.Context, stream: cu.Stream, kernels: dict[str, cu.Kernel]
) -> None:
    w = 64
    a = np.arange(w, dtype=np.float32)
    xs = cu.DeviceBuffer.from_array((np.arange(w) + 0.5).astype(np.float32))
    out = cu.DeviceBuffer.empty(w, np.float32)
    arr = cu.CudaArray.from_array(a)
    tex = cu.TextureObject(arr)
    with stream.capture() as g:
        kernels["sample1d"].launch(stream, 1, w, tex, out, xs, w)
    tex.close()  # the graph holds a lease: the texture is released after the graph
    arr.close()
    with g, g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(out.copy_to(), a)


@pytest.mark.gpu
def test_from_handle_borrows_an_array(ctx: cu.Context) -> None:
    a = _data((3, 5, 6), np.uint16, 2)
    with cu.CudaArray.from_array(a, channels=2, layered=True, surface=True) as arr:
        view = cu.CudaArray.from_handle(int(arr), owner=arr)
        assert not view.owned and view == arr
        assert (view.shape, view.dtype, view.channels, view.layered, view.surface) == (
            (3, 5, 6),
            np.dtype(np.uint16),
            2,
            True,
            True,
        )
        np.testing.assert_array_equal(view.copy_to(), a)
        view.close()  # borrowed: the array stays
        np.testing.assert_array_equal(arr.copy_to(), a)
