from __future__ import annotations

import pytest
from cuda.bindings import driver as raw

import cudriver as cu
from cudriver import driver

from ._support import no_driver


def test_types_and_enums_pass_through() -> None:
    assert driver.CUstream is raw.CUstream
    assert driver.CUresult is raw.CUresult
    assert driver.CUdevice_attribute is raw.CUdevice_attribute
    assert driver.cuuint64_t is raw.cuuint64_t


def test_functions_are_wrapped_once_and_cached() -> None:
    f = driver.cuStreamCreate
    assert f is driver.cuStreamCreate
    assert f is not raw.cuStreamCreate
    assert f.__wrapped__ is raw.cuStreamCreate
    assert f.__name__ == "cuStreamCreate"


def test_dir_lists_the_bindings() -> None:
    names = dir(driver)
    for n in ("cuInit", "cuMemAlloc", "CUstream", "CUresult", "cuLaunchKernel"):
        assert n in names
    assert len([n for n in names if n.startswith("cu")]) > 300


def test_unknown_name_is_attribute_error() -> None:
    with pytest.raises(AttributeError, match="cuNoSuchFunction"):
        _ = driver.cuNoSuchFunction
    assert not hasattr(driver, "nope")


SPECIAL = {"cuLaunchHostFunc", "cuLaunchHostFunc_v2"}


def test_every_function_wraps() -> None:
    for n in dir(raw):
        if (
            n.startswith("cu")
            and n not in SPECIAL
            and callable(getattr(raw, n))
            and not isinstance(getattr(raw, n), type)
        ):
            assert getattr(driver, n).__wrapped__ is getattr(raw, n)


def test_the_special_functions_are_documented() -> None:
    for n in SPECIAL:
        assert f"``{n}" in (driver.__doc__ or "")
        # cuLaunchHostFunc_v2 is refused even where the bindings lack it (12.9).
        assert getattr(driver, n) is not getattr(raw, n, None)


def test_host_func_v2_is_refused_with_a_reason() -> None:
    with pytest.raises(cu.NotSupportedError, match="cuLaunchHostFunc"):
        driver.cuLaunchHostFunc_v2(0, None, None, 0)


def test_host_func_arguments_are_checked_before_the_driver() -> None:
    with pytest.raises(TypeError, match="userData"):
        driver.cuLaunchHostFunc(1, 0x1000, "data")
    with pytest.raises(ValueError, match="NULL"):
        driver.cuLaunchHostFunc(1, 0, None)
    with pytest.raises(TypeError, match="stream"):
        driver.cuLaunchHostFunc(1.5, 0x1000, None)


@no_driver
def test_no_driver_error_is_clear() -> None:
    with pytest.raises(cu.DriverNotFoundError, match="CUDA driver not found") as info:
        driver.cuInit(0)
    assert info.value.__cause__ is None
    assert "install" in str(info.value)
    with pytest.raises(cu.DriverNotFoundError):
        cu.init()
    with pytest.raises(cu.DriverNotFoundError):
        cu.Device(0)
    with pytest.raises(cu.DriverNotFoundError):
        cu.driver_version()


@pytest.mark.gpu
def test_mirror_on_gpu(ctx: cu.Context) -> None:
    driver.cuInit(0)
    ptr = driver.cuMemAlloc(1024)
    assert int(ptr) != 0
    assert driver.cuMemFree(ptr) is None
    with pytest.raises(cu.InvalidValueError, match="^cuMemAlloc failed: CUDA_ERROR_INVALID_VALUE"):
        driver.cuMemAlloc(0)
    free, total = driver.cuMemGetInfo()
    assert 0 < free <= total
    assert driver.cuDriverGetVersion() >= 12000
