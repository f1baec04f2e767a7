"""Command line: ``python -m cudriver [--version] {info, selftest, memory}``.

``--version`` prints ``cudriver X.Y.Z``. ``info`` prints what is installed (cudriver
and which implementation runs, cuda-bindings, Python, NVRTC) and, where a driver is
present, the driver's version and each device, then the machine as NVML sees it (a
"System (NVML)" section: each GPU's memory, utilization, temperature, power, clocks,
performance state, processes and MIG mode, and the topology between GPUs; see
:func:`cudriver.system_info`); ``info --json`` prints the same as one JSON object, with
``"driver": null`` and an ``"error"`` string where no driver or no device is usable, and
a ``"system"`` object whose ``"error"`` says why NVML could not be read (the exit status
does not depend on NVML). ``info --watch SECONDS`` prints the System (NVML) section
every SECONDS seconds, in place on a terminal (a new block each time otherwise, one
JSON object a line with ``--json``), until interrupted (Ctrl-C exits with 0) or, with
``--count N``, after N refreshes. ``selftest [--device N]`` runs the end-to-end check
of :mod:`cudriver._selftest`.

``memory SNAPSHOT [-o OUT.svg] [--device N|host] [--top K]`` draws a memory snapshot
(:func:`cudriver.save_memory_snapshot`'s file, JSON or gzip-compressed JSON) as an SVG
picture (:func:`cudriver.draw_memory_snapshot`), writes it to ``OUT.svg`` (by default
the snapshot's path with the suffix ``.svg``), and prints the path written and a line
with the peak, the number of allocation sites and of allocations refused for lack of
memory. It needs no driver and no GPU.

Exit statuses, the same for every command:

* 0 (:data:`EXIT_OK`): success.
* 1 (:data:`EXIT_FAILED`): a check failed (a self-test check, a CUDA error), or the
  picture could not be written.
* 2 (:data:`EXIT_USAGE`): a usage error (argparse's own status), or a snapshot that
  cannot be read or is not a cudriver memory snapshot.
* 3 (:data:`EXIT_NO_DRIVER`): no NVIDIA driver, or a driver that sees no CUDA device.

Without a driver, ``info`` still prints the versions it can read before the error,
and ``info --json`` still prints its object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from ._context.device import Device
from ._launch.program import _compatibility_note as compatibility_note
from ._launch.program import nvrtc_version
from ._observe.memory_picture import DeviceSelection, draw_memory, load_snapshot, summary_line
from ._observe.system import NvmlError, SystemInfo, format_system, system_info
from ._runtime._bindings import MAJOR as BINDINGS_MAJOR
from ._runtime._bindings import version_string
from ._runtime._enums import DeviceAttribute
from ._runtime._init import driver_version, init
from ._selftest import EXIT_FAILED, EXIT_NO_DRIVER, EXIT_OK, EXIT_USAGE, report_error
from ._selftest import main as selftest_main
from .errors import CudaError, DriverNotFoundError, NoDeviceError

__all__ = ["EXIT_FAILED", "EXIT_NO_DRIVER", "EXIT_OK", "EXIT_USAGE", "cli", "collect", "main"]

NO_DEVICE = "the CUDA driver sees no device"

# What ``"system"`` holds where NVML could not be read (with its ``"error"``).
NO_SYSTEM: dict[str, Any] = {
    "driver_version": None,
    "nvml_version": None,
    "cuda_driver_version": None,
    "gpus": [],
    "topology": [],
}

# ``info --watch``'s pause between refreshes (replaced by the tests).
_sleep = time.sleep

EPILOG = """\
exit statuses, the same for every command:
  0  success
  1  a check failed (a self-test check, a CUDA error), or a picture not written
  2  usage error, or a memory snapshot that cannot be read
  3  no NVIDIA driver, or no CUDA device
"""


def _device(d: Device) -> dict[str, Any]:
    cc = d.compute_capability
    return {
        "ordinal": d.ordinal,
        "name": d.name,
        "compute_capability": f"{cc.major}.{cc.minor}",
        "arch": cc.arch,
        "total_memory": d.total_memory,
        "multiprocessor_count": d.multiprocessor_count,
        "pci_bus_id": d.pci_bus_id,
        "uuid": str(d.uuid),
        "can_use_64_bit_stream_mem_ops": bool(
            d.attribute(DeviceAttribute.CAN_USE_64_BIT_STREAM_MEM_OPS)
        ),
        "can_use_stream_wait_value_nor": bool(
            d.attribute(DeviceAttribute.CAN_USE_STREAM_WAIT_VALUE_NOR)
        ),
    }


def _system() -> tuple[dict[str, Any], SystemInfo | None]:
    """``"system"`` of the report (always the same keys), and what it was made from."""
    try:
        info = system_info()
    except CudaError as exc:  # NvmlError, NotSupportedError: reported, not raised
        return {**NO_SYSTEM, "error": str(exc)}, None
    return {**info.to_dict(), "error": None}, info


def collect() -> tuple[dict[str, Any], int]:
    """What ``info`` reports, as a JSON-ready dict, and the exit status.

    The dict always has the same keys: ``cudriver``, ``implementation``,
    ``implementation_reason``, ``cuda_bindings``, ``python``, ``python_implementation``,
    ``platform``, ``nvrtc``
    (``"13.0"`` or None) and ``nvrtc_error`` (why it is None), ``driver`` (``"13.0"``
    or None), ``devices`` (a list, empty without a driver), ``notes`` (warnings about
    the combination installed, e.g. an NVRTC newer than the driver), ``error``
    (None, or why the driver or a device could not be read) and ``system``: the machine
    as NVML sees it (:meth:`cudriver.SystemInfo.to_dict`'s keys and ``error``, None; or
    those keys empty and ``error`` saying why NVML could not be read). NVML does not
    change the exit status.
    """
    report, status, _ = _collect()
    return report, status


def _collect() -> tuple[dict[str, Any], int, SystemInfo | None]:
    report: dict[str, Any] = {
        "cudriver": __version__,
        "implementation": "compiled",
        "implementation_reason": "compiled core loaded",
        "cuda_bindings": version_string(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "nvrtc": None,
        "nvrtc_error": None,
        "driver": None,
        "devices": [],
        "notes": [],
        "error": None,
        "system": None,
    }
    nvrtc: tuple[int, int] | None = None
    try:
        nvrtc = nvrtc_version()
    except Exception as exc:  # missing (NvrtcNotFoundError) or broken: reported, not raised
        report["nvrtc_error"] = str(exc) or type(exc).__name__
    else:
        report["nvrtc"] = f"{nvrtc[0]}.{nvrtc[1]}"
    status = EXIT_OK
    drv: tuple[int, int] | None = None
    try:
        drv = driver_version()
        report["driver"] = f"{drv[0]}.{drv[1]}"
        init()
        n = Device.count()
        for i in range(n):
            report["devices"].append(_device(Device(i)))
        if n == 0:
            report["error"] = NO_DEVICE
            status = EXIT_NO_DRIVER
    except (DriverNotFoundError, NoDeviceError) as exc:
        report["error"] = str(exc)
        status = EXIT_NO_DRIVER
    except CudaError as exc:
        report["error"] = str(exc)
        status = EXIT_FAILED
    if nvrtc is not None:
        note = compatibility_note(nvrtc, driver=drv, bindings_major=BINDINGS_MAJOR)
        if note:
            report["notes"].append(note)
    report["system"], info = _system()
    return report, status, info


def _print_info(report: dict[str, Any], system: SystemInfo | None = None) -> None:
    r = report
    print(f"cudriver {r['cudriver']} ({r['implementation']}: {r['implementation_reason']})")
    print(f"cuda-bindings {r['cuda_bindings']}")
    print(f"Python {r['python']} ({r['python_implementation']}) on {r['platform']}")
    if r["nvrtc"] is not None:
        print(f"NVRTC {r['nvrtc']}")
    else:
        print(f"NVRTC not available: {r['nvrtc_error']}")
    if r["driver"] is not None:
        print(f"CUDA driver {r['driver']}")
        if r["error"] is None or r["devices"]:
            print(f"devices: {len(r['devices'])}")
    for d in r["devices"]:
        gib = d["total_memory"] / 2**30
        print(f"  [{d['ordinal']}] {d['name']}")
        print(f"      compute capability {d['compute_capability']} ({d['arch']})")
        print(f"      memory {gib:.1f} GiB, {d['multiprocessor_count']} SMs")
        print(f"      PCI {d['pci_bus_id']}, UUID {d['uuid']}")
        print(
            f"      stream memory ops: 64-bit {d['can_use_64_bit_stream_mem_ops']}, "
            f"wait NOR {d['can_use_stream_wait_value_nor']}"
        )
    if system is not None:
        for line in format_system(system):
            print(line)
    elif r["driver"] is not None:  # without a driver, the error below says it all
        print(f"System (NVML): not available: {r['system']['error']}")
    for note in r["notes"]:
        print(f"note: {note}")
    sys.stdout.flush()
    if r["error"] is not None:
        print(f"cudriver: {r['error']}", file=sys.stderr)


def _info(as_json: bool) -> int:
    report, status, system = _collect()
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        _print_info(report, system)
    return status


def _no_driver(exc: CudaError) -> bool:
    return isinstance(exc, DriverNotFoundError) or (isinstance(exc, NvmlError) and exc.no_driver)


def _watch(seconds: float, count: int | None, as_json: bool) -> int:
    """``info --watch``: the System (NVML) section every ``seconds``, until interrupted.

    On a terminal each block replaces the last (the cursor sent home, each line and
    then the rest of the screen cleared after it); otherwise each block follows the
    last after a blank line; with ``as_json`` each is one JSON line. Ctrl-C exits with
    0; an NVML failure with 3 (no driver) or 1.
    """
    out = sys.stdout
    tty = out.isatty() and not as_json
    done = 0
    try:
        while True:
            try:
                info = system_info()
            except CudaError as exc:
                out.flush()
                print(f"cudriver: {exc}", file=sys.stderr)
                return EXIT_NO_DRIVER if _no_driver(exc) else EXIT_FAILED
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            if as_json:
                out.write(json.dumps({"time": stamp, "system": info.to_dict()}) + "\n")
            else:
                lines = [
                    f"cudriver info --watch {seconds:g}: {stamp} (Ctrl-C to stop)",
                    *format_system(info),
                ]
                if tty:
                    clear = "\x1b[2J" if done == 0 else ""
                    out.write(clear + "\x1b[H" + "".join(f"{ln}\x1b[K\n" for ln in lines))
                    out.write("\x1b[J")
                else:
                    out.write(("\n" if done else "") + "".join(f"{ln}\n" for ln in lines))
            out.flush()
            done += 1
            if count is not None and done >= count:
                return EXIT_OK
            _sleep(seconds)
    except KeyboardInterrupt:
        return EXIT_OK


def _seconds_arg(text: str) -> float:
    """``--watch``: a number of seconds > 0."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, not {text!r}")
    return seconds


def _count_arg(text: str) -> int:
    """``--count``: an integer >= 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, not {text!r}")
    return n


def _device_arg(text: str) -> DeviceSelection:
    """``--device``: a device ordinal, or ``host``."""
    if text == "host":
        return "host"
    try:
        ordinal = int(text)
    except ValueError:
        ordinal = -1
    if ordinal < 0:
        raise argparse.ArgumentTypeError(f"expected a device ordinal or 'host', not {text!r}")
    return ordinal


def _top_arg(text: str) -> int:
    try:
        k = int(text)
    except ValueError:
        k = -1
    if k < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, not {text!r}")
    return k


def _default_output(snapshot: str) -> Path:
    """``run.json`` -> ``run.svg``; ``run.json.gz`` -> ``run.svg`` too."""
    p = Path(snapshot)
    if p.suffix == ".gz":
        p = p.with_suffix("")
    return p.with_suffix(".svg")


def _memory(args: argparse.Namespace) -> int:
    try:
        snap = load_snapshot(args.snapshot)
    except OSError as exc:  # its text names the file
        print(f"cudriver: cannot read the snapshot: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:  # "FILE: what is wrong"
        print(f"cudriver: {exc}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.output) if args.output is not None else _default_output(args.snapshot)
    try:
        draw_memory(snap, out, device=args.device, top=args.top)
    except OSError as exc:
        print(f"cudriver: cannot write the picture: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(os.fspath(out))
    print(summary_line(snap, device=args.device))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m cudriver",
        description="cudriver's command line: what is installed, an end-to-end check, "
        "and memory snapshots drawn.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cudriver {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser(
        "info",
        help="versions, driver and devices",
        description="Versions (cudriver, cuda-bindings, Python, NVRTC), the driver and "
        "each device, and the machine as NVML sees it (each GPU's memory, utilization, "
        "temperature, power, clocks, processes; the topology between GPUs).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.add_argument(
        "--watch",
        type=_seconds_arg,
        default=None,
        metavar="SECONDS",
        help="print the System (NVML) section every SECONDS seconds, in place on a "
        "terminal, until Ctrl-C (with --json: one JSON object a line)",
    )
    info.set_defaults(info_parser=info)  # for the errors only main() can see
    info.add_argument(
        "--count",
        type=_count_arg,
        default=None,
        metavar="N",
        help="with --watch: stop after N refreshes",
    )
    sub.add_parser("selftest", help="end-to-end check on a GPU (exit 0 when all passed)")
    memory = sub.add_parser(
        "memory",
        help="draw a memory snapshot as an SVG picture (no GPU needed)",
        description="Draw a memory snapshot (cudriver.save_memory_snapshot's file) as an SVG\n"
        "picture: live bytes over time by allocation site, with the peak and the\n"
        "allocations refused for lack of memory marked. Prints the path written and a\n"
        "summary line. Needs no driver and no GPU.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    memory.add_argument("snapshot", metavar="SNAPSHOT", help="the snapshot (JSON, or gzip)")
    memory.add_argument(
        "-o",
        "--output",
        metavar="OUT.svg",
        help="where to write the picture (default: SNAPSHOT with the suffix .svg)",
    )
    memory.add_argument(
        "--device",
        type=_device_arg,
        default=None,
        metavar="N|host",
        help="draw only device N's memory, or host (pinned) memory (default: all, summed)",
    )
    memory.add_argument(
        "--top",
        type=_top_arg,
        default=8,
        metavar="K",
        help="how many sites get a colour of their own; the rest are 'other sites' (default: 8)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (usage errors exit with 2)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if args_list and args_list[0] == "selftest":
        # The self-test parses its own options (and prints its own help).
        command, rest, as_json = args_list[0], args_list[1:], False
    else:
        args = parser.parse_args(args_list)
        command, rest, as_json = args.command, [], bool(getattr(args, "json", False))
        if command == "memory":
            return _memory(args)
        if command == "info" and args.count is not None and args.watch is None:
            args.info_parser.error("--count needs --watch")
        if command == "info" and args.watch is not None:
            return _watch(args.watch, args.count, as_json)
    try:
        if command == "info":
            return _info(as_json)
        if command == "selftest":
            return selftest_main(rest)
    except CudaError as exc:
        return report_error(exc)
    parser.error(f"unknown command {command!r}")  # pragma: no cover


def cli() -> None:
    """Entry point of the ``cudriver`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
