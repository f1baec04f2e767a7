"""Command line: ``python -m cudriver {info,selftest}``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__, _impl
from ._bindings import version_string
from ._enums import DeviceAttribute
from ._init import driver_version, init
from ._selftest import main as selftest_main
from .device import Device
from .errors import CudaError, DriverNotFoundError

EXIT_NO_DRIVER = 2


def _info() -> int:
    print(f"cudriver {__version__} ({_impl.IMPLEMENTATION}: {_impl.REASON})")
    print(f"cuda-bindings {version_string()}")
    init()
    major, minor = driver_version()
    print(f"CUDA driver {major}.{minor}")
    n = Device.count()
    print(f"devices: {n}")
    for i in range(n):
        d = Device(i)
        print(f"  [{i}] {d.name}")
        print(f"      compute capability {d.compute_capability} ({d.arch})")
        print(f"      memory {d.total_memory / 2**30:.1f} GiB, {d.multiprocessor_count} SMs")
        print(f"      PCI {d.pci_bus_id}, UUID {d.uuid}")
        mem_ops64 = d.attribute(DeviceAttribute.CAN_USE_64_BIT_STREAM_MEM_OPS)
        nor = d.attribute(DeviceAttribute.CAN_USE_STREAM_WAIT_VALUE_NOR)
        print(f"      stream memory ops: 64-bit {bool(mem_ops64)}, wait NOR {bool(nor)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m cudriver", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="driver, bindings and device information")
    sub.add_parser("selftest", help="end-to-end check on a GPU (exit 0 when all passed)")
    if args_list and args_list[0] == "selftest":
        command, rest = args_list[0], args_list[1:]
    else:
        command, rest = parser.parse_args(args_list).command, []
    try:
        if command == "info":
            return _info()
        if command == "selftest":
            return selftest_main(rest)
    except DriverNotFoundError as exc:
        print(f"cudriver: {exc}", file=sys.stderr)
        return EXIT_NO_DRIVER
    except CudaError as exc:
        print(f"cudriver: {exc}", file=sys.stderr)
        return 1
    parser.error(f"unknown command {command!r}")  # pragma: no cover


def cli() -> None:
    """Entry point of the ``cudriver`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
