from __future__ import annotations

import pickle

import pytest
from cuda.bindings import driver as drv
from hypothesis import given
from hypothesis import strategies as st

import cudriver as cu
from cudriver.errors import check, checked, error_class, make_error

R = drv.CUresult


@pytest.mark.parametrize(
    ("code", "cls", "also"),
    [
        (R.CUDA_ERROR_OUT_OF_MEMORY, cu.OutOfMemoryError, MemoryError),
        (R.CUDA_ERROR_INVALID_VALUE, cu.InvalidValueError, ValueError),
        (R.CUDA_ERROR_INVALID_HANDLE, cu.InvalidHandleError, ValueError),
        (R.CUDA_ERROR_INVALID_DEVICE, cu.InvalidDeviceError, ValueError),
        (R.CUDA_ERROR_NOT_READY, cu.NotReadyError, cu.CudaError),
        (R.CUDA_ERROR_NOT_SUPPORTED, cu.NotSupportedError, NotImplementedError),
        (R.CUDA_ERROR_NOT_PERMITTED, cu.NotPermittedError, cu.CudaError),
        (R.CUDA_ERROR_NOT_FOUND, cu.NotFoundError, LookupError),
        (R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cu.StreamCaptureError, cu.CudaError),
        (R.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cu.StreamCaptureError, cu.CudaError),
        (R.CUDA_ERROR_STREAM_CAPTURE_UNJOINED, cu.StreamCaptureError, cu.CudaError),
        (R.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, cu.StreamCaptureError, cu.CudaError),
        (R.CUDA_ERROR_ILLEGAL_ADDRESS, cu.LaunchError, cu.CudaError),
        (R.CUDA_ERROR_LAUNCH_FAILED, cu.LaunchError, cu.CudaError),
        (R.CUDA_ERROR_ASSERT, cu.LaunchError, cu.CudaError),
        (R.CUDA_ERROR_INVALID_CONTEXT, cu.InvalidContextError, cu.CudaError),
        (R.CUDA_ERROR_NOT_INITIALIZED, cu.NotInitializedError, cu.CudaError),
        (R.CUDA_ERROR_NO_DEVICE, cu.NoDeviceError, cu.CudaError),
        (R.CUDA_ERROR_INVALID_PTX, cu.InvalidImageError, ValueError),
        (R.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cu.GraphUpdateError, cu.CudaError),
        (R.CUDA_ERROR_UNKNOWN, cu.CudaError, RuntimeError),
    ],
)
def test_error_table(code: R, cls: type[cu.CudaError], also: type[BaseException]) -> None:
    assert error_class(code) is cls
    assert error_class(int(code)) is cls
    err = make_error(code, "cuSomething")
    assert type(err) is cls
    assert isinstance(err, cu.CudaError)
    assert isinstance(err, also)
    assert err.code == code
    assert err.func == "cuSomething"
    assert err.name == code.name


def test_message_format() -> None:
    err = make_error(R.CUDA_ERROR_INVALID_VALUE, "cuStreamCreate")
    head = "cuStreamCreate failed: CUDA_ERROR_INVALID_VALUE (1): "
    assert str(err).startswith(head)
    assert err.description
    assert str(err) == head + err.description


def test_message_without_driver_uses_enum_name() -> None:
    err = make_error(700, "cuLaunchKernel")
    assert err.name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "(700)" in str(err)
    assert err.description  # from the driver or derived from the enum name


def test_unknown_code_keeps_number() -> None:
    err = make_error(123456, "cuX")
    assert type(err) is cu.CudaError
    assert "123456" in str(err)


def test_errors_pickle() -> None:
    err = make_error(R.CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cu.OutOfMemoryError
    assert str(back) == str(err)
    dn = pickle.loads(pickle.dumps(cu.DriverNotFoundError("x")))
    assert isinstance(dn, cu.DriverNotFoundError)


@given(st.sampled_from(list(R)))
def test_every_code_maps_to_a_cuda_error(code: R) -> None:
    err = make_error(code, "cuF")
    assert isinstance(err, cu.CudaError)
    assert str(err).startswith(f"cuF failed: {err.name} ({int(code)}): ")


def _ret(*values: object):  # type: ignore[no-untyped-def]
    def f(*args: object, **kwargs: object) -> tuple[object, ...]:
        return values

    f.__name__ = "cuFake"
    return f


def test_checked_outputs() -> None:
    ok = R.CUDA_SUCCESS
    assert checked(_ret(ok))() is None
    assert checked(_ret(ok, 5))() == 5
    assert checked(_ret(ok, 1, 2, 3))() == (1, 2, 3)


def test_checked_raises_with_name() -> None:
    f = checked(_ret(R.CUDA_ERROR_INVALID_VALUE, None))
    with pytest.raises(cu.InvalidValueError, match=r"^cuFake failed: CUDA_ERROR_INVALID_VALUE"):
        f()
    g = checked(_ret(R.CUDA_ERROR_INVALID_VALUE), name="cuOther")
    with pytest.raises(cu.CudaError, match="^cuOther failed"):
        g()


def test_checked_ok_returns_status() -> None:
    nr = R.CUDA_ERROR_NOT_READY
    q = checked(ok=(nr,))(_ret(nr))
    assert q() is nr
    q2 = checked(_ret(R.CUDA_SUCCESS), ok=[nr])
    assert q2() is R.CUDA_SUCCESS
    q3 = checked(_ret(nr, 7), ok=[nr])
    assert q3() == (nr, 7)
    bad = checked(_ret(R.CUDA_ERROR_INVALID_HANDLE), ok=[nr])
    with pytest.raises(cu.InvalidHandleError):
        bad()


def test_checked_passes_arguments_and_other_exceptions() -> None:
    seen = []

    def f(a: int, *, b: int) -> tuple[object, ...]:
        seen.append((a, b))
        if a < 0:
            raise TypeError("bad a")
        return (R.CUDA_SUCCESS, a + b)

    w = checked(f)
    assert w(1, b=2) == 3
    assert seen == [(1, 2)]
    with pytest.raises(TypeError, match="bad a"):
        w(-1, b=0)
    assert w.__wrapped__ is f
    assert w.__name__ == "f"


def test_check_helper() -> None:
    assert check((R.CUDA_SUCCESS,), "cuA") is None
    assert check((R.CUDA_SUCCESS, "x"), "cuA") == "x"
    assert check((R.CUDA_SUCCESS, 1, 2), "cuA") == (1, 2)
    with pytest.raises(cu.OutOfMemoryError, match="^cuMemAlloc failed"):
        check((R.CUDA_ERROR_OUT_OF_MEMORY, None), "cuMemAlloc")


def test_launch_error_docstring_says_sticky() -> None:
    assert "sticky" in (cu.LaunchError.__doc__ or "")


def test_graph_update_error_fields() -> None:
    e = cu.GraphUpdateError(
        R.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "cuGraphExecUpdate", "TOPOLOGY_CHANGED", "why"
    )
    assert e.result == "TOPOLOGY_CHANGED"
    assert e.reason == "why"
    assert "TOPOLOGY_CHANGED: why" in str(e)


def test_compile_error_log() -> None:
    e = cu.CompileError("compile failed", "line 1: error")
    assert e.log == "line 1: error"
    assert "line 1: error" in str(e)
    assert pickle.loads(pickle.dumps(e)).log == "line 1: error"
