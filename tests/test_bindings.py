from __future__ import annotations

import cuda.bindings
from cuda.bindings import driver as drv

from cudriver._runtime import _bindings


def test_version_parsed() -> None:
    assert _bindings.version_string() == cuda.bindings.__version__
    assert _bindings.MAJOR in (12, 13)
    assert _bindings.VERSION[0] == _bindings.MAJOR


def test_parse() -> None:
    assert _bindings._parse("13.3.1") == (13, 3, 1)
    assert _bindings._parse("12.9.0rc1") == (12, 9, 0)
    assert _bindings._parse("garbage") == (0,)


def test_has() -> None:
    assert _bindings.has("cuInit")
    assert not _bindings.has("cuNoSuchThing")


def test_struct_bytes_round_trip_without_fields() -> None:
    # Some bindings versions expose no fields on CUipcEventHandle (12.9.10, 13.5.0):
    # Event.ipc_handle reads and writes its 64 bytes through getPtr().
    h = drv.CUipcEventHandle()
    data = bytes(range(64))
    _bindings.set_struct_bytes(h, data)
    assert _bindings.struct_bytes(h, 64) == data
    assert _bindings.struct_bytes(drv.CUipcEventHandle(), 64) == bytes(64)
