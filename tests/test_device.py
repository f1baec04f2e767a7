from __future__ import annotations

import uuid

import pytest
from cuda.bindings import driver as drv

import cudriver as cu

from ._support import unwrap
from .test_safety import run_isolated


@pytest.mark.gpu
def test_one_object_per_ordinal(device: cu.Device) -> None:
    assert cu.Device(0) is device
    assert cu.Device() is device
    assert cu.Device(device) is device
    assert cu.Device(drv.CUdevice(0)) is device
    assert int(device) == 0
    assert device.ordinal == 0
    assert cu.Device.count() == unwrap(drv.cuDeviceGetCount())
    assert len(cu.Device.all()) == cu.Device.count()
    assert cu.Device.all()[0] is device


@pytest.mark.gpu
def test_default_device_is_the_current_contexts(device: cu.Device) -> None:
    # A thread with no current context gets device 0, and nothing is made current.
    import threading

    seen: list[object] = []

    def fresh_thread() -> None:
        seen.append(cu.Device())
        seen.append(cu.Context.current())

    t = threading.Thread(target=fresh_thread)
    t.start()
    t.join(60)
    assert seen == [cu.Device(0), None]
    last = cu.Device(cu.Device.count() - 1)
    with last.primary_context():
        assert cu.Device() is last
        assert cu.MemoryPool.current().device is last  # one default everywhere


@pytest.mark.gpu
def test_set_current_and_synchronize() -> None:
    # In a process of its own: Device.synchronize() waits for every stream of the
    # primary context, whatever other tests left running.
    run_isolated(
        """
        dev = cu.Device(0)
        assert cu.Context.current() is None
        ctx = dev.set_current()
        assert ctx.is_primary and ctx.device is dev and cu.Context.current() == ctx
        s = cu.Stream()

        def boom():
            raise RuntimeError("from the device's host function")

        s.launch_host_func(boom)
        try:
            dev.synchronize()
        except cu.HostCallbackError as e:
            assert "device's host function" in str(e), e
        else:
            raise AssertionError("Device.synchronize() did not re-raise")
        dev.synchronize()  # collected once
        s.close()
        print("OK")
        """,
        timeout=120,
    )


@pytest.mark.gpu
def test_properties(device: cu.Device) -> None:
    assert isinstance(device.name, str) and device.name
    assert isinstance(device.uuid, uuid.UUID)
    assert device.pci_bus_id.count(":") == 2
    cc = device.compute_capability
    assert cc >= (5, 0)
    assert device.arch == f"sm_{cc.major}{cc.minor}"
    assert device.total_memory > 2**30
    assert device.multiprocessor_count > 0
    assert repr(device).startswith("<cudriver.Device 0")


@pytest.mark.gpu
def test_attribute_accepts_enum_raw_and_int(device: cu.Device) -> None:
    a = device.attribute(cu.DeviceAttribute.MAX_THREADS_PER_BLOCK)
    b = device.attribute(drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
    c = device.attribute(1)
    assert a == b == c >= 512


@pytest.mark.gpu
def test_bad_ordinal_is_clear() -> None:
    n = cu.Device.count()
    with pytest.raises(cu.InvalidDeviceError, match=f"ordinal {n} is out of range"):
        cu.Device(n)
    with pytest.raises(ValueError, match="out of range"):
        cu.Device(-1)
    with pytest.raises(TypeError, match="must be an int"):
        cu.Device("0")  # type: ignore[arg-type]


@pytest.mark.gpu
def test_bad_attribute(device: cu.Device) -> None:
    # An unknown enum value is a ValueError everywhere (limits, attributes, access).
    with pytest.raises(ValueError, match="unknown device attribute 99999"):
        device.attribute(99999)


@pytest.mark.gpu
def test_peer(device: cu.Device) -> None:
    assert device.can_access_peer(device) is False
    for other in cu.Device.all()[1:]:
        assert isinstance(device.can_access_peer(other), bool)


@pytest.mark.gpu
def test_driver_version() -> None:
    major, minor = cu.driver_version()
    raw = unwrap(drv.cuDriverGetVersion())  # 1000 * major + 10 * minor, e.g. 13000
    assert major * 1000 + minor * 10 == raw
    assert major >= 12
    assert minor <= 9
