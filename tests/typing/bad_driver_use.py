"""Wrong uses of the typed mirror ``cudriver.driver``: ``mypy --strict`` must reject each.

Checked by ``tests/test_driver_stub.py``, never run. Each wrong line ends with
``# E: <mypy error code>``; the test asserts that mypy reports exactly these.
"""

from __future__ import annotations

from cudriver import driver


def misspelt() -> None:
    driver.cuMemAloc(1024)  # E: attr-defined


def wrong_argument_counts() -> None:
    driver.cuMemAlloc(1024, 0)  # E: call-arg
    driver.cuMemcpyHtoD(0, b"")  # E: call-arg


def wrong_uses_of_the_outputs() -> None:
    free, total, used = driver.cuMemGetInfo()  # E: misc
    name: str = driver.cuDeviceGetName(64, 0)  # E: assignment
    status = driver.cuStreamSynchronize(None)  # E: func-returns-value
    print(free, total, used, name, status)


def wrong_argument_type() -> None:
    driver.cuMemAlloc("1024")  # E: arg-type
