from __future__ import annotations

from collections.abc import Iterator

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


# -- device memory cudriver freed ----------------------------------------------------


@pytest.fixture
def freed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """One freed 1 KiB range at 0x7F0000000000 that the (fake) driver no longer knows.

    Returns the addresses the fake ``cuMemGetAddressRange`` was asked about.
    """
    from cudriver._runtime import _freed

    asked: list[int] = []

    def address_range(ptr: object) -> tuple[object, ...]:
        asked.append(int(ptr))  # type: ignore[call-overload]
        return (raw.CUresult.CUDA_ERROR_NOT_FOUND, None, None)

    monkeypatch.setattr(raw, "cuMemGetAddressRange", address_range)
    _freed.clear()
    _freed.noted(0x7F0000000000, 1024)
    yield asked
    _freed.clear()


@pytest.mark.parametrize("face", ["checked", "compat"])
@pytest.mark.parametrize(
    ("call", "role"),
    [
        (lambda d, p: d.cuMemcpy(p, p, 16), "dst"),
        (lambda d, p: d.cuMemcpy(0x1000, p + 1000, 16), "src"),
        (lambda d, p: d.cuMemcpyDtoH(0x1000, p + 8, 16), "srcDevice"),
        (lambda d, p: d.cuMemsetD8(dstDevice=p + 1, uc=0, N=16), "dstDevice"),
        (lambda d, p: d.cuMemcpyAsync(p, 0x1000, 16, 0), "dst"),
        (lambda d, p: d.cuStreamWriteValue32(0, p, 1, 0), "addr"),
        (lambda d, p: d.cuMemFree(raw.CUdeviceptr(p)), "dptr"),
    ],
)
def test_an_address_cudriver_freed_is_refused_before_the_driver(
    freed: list[int], face: str, call: object, role: str
) -> None:
    from cudriver.compat import driver as compat

    mirror = driver if face == "checked" else compat
    p = 0x7F0000000000
    with pytest.raises(cu.InvalidValueError) as info:
        call(mirror, p)  # type: ignore[operator]
    msg = str(info.value)
    assert msg.startswith(f"{info.value.func} failed: CUDA_ERROR_INVALID_VALUE")
    assert f"{role}=0x" in msg and "allocation at 0x7f0000000000, 1024 bytes" in msg
    assert "cudriver freed" in msg and len(freed) == 1


def test_addresses_outside_the_freed_range_go_to_the_driver(
    freed: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cudriver._runtime import _freed, _mirror

    for addr in (0x7F0000000000 - 1, 0x7F0000000000 + 1024, 0, None, 1.5, "x"):
        _mirror.refuse_freed("cuMemcpy", "dst", addr)
    assert freed == []
    assert _freed.freed_range(0x7F0000000000 + 1023) == (0x7F0000000000, 0x7F0000000400)


def test_an_address_handed_out_again_is_allowed_and_forgotten(
    freed: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cudriver._runtime import _freed, _mirror

    p = 0x7F0000000000
    monkeypatch.setattr(
        raw, "cuMemGetAddressRange", lambda ptr: (raw.CUresult.CUDA_SUCCESS, p, 4096)
    )
    _mirror.refuse_freed("cuMemcpy", "dst", p + 8)
    assert _freed.freed_range(p + 8) is None and _freed.count() == 0


def test_the_freed_record_keeps_the_newest_ranges() -> None:
    from cudriver._runtime import _freed

    _freed.clear()
    try:
        for i in range(_freed.CAP + 1):
            _freed.noted(0x10000000 + i * 0x1000, 0x800)
        assert _freed.count() <= _freed.CAP
        newest = 0x10000000 + _freed.CAP * 0x1000
        assert _freed.freed_range(newest + 0x7FF) == (newest, newest + 0x800)
        assert _freed.freed_range(newest + 0x800) is None  # between two ranges
        assert _freed.freed_range(0x10000000) is None  # the oldest went first
        _freed.noted(newest, 0x10)  # freed again, smaller: the newest record wins
        assert _freed.freed_range(newest + 0x10) is None
    finally:
        _freed.clear()
