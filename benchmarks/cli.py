"""The command line: ``python benchmarks/overhead.py [options]``, its options and ``main``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from benchmarks.harness import OP_NAMES, OPS, OPS_BY_NAME, PEER_TITLES, calls_for
from benchmarks.report import failed, format_table, to_json

DEFAULT_REPEATS = 7
QUICK_REPEATS = 3


def _only(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError("--only needs at least one operation name")
    unknown = [n for n in names if n not in OPS_BY_NAME]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown operation {', '.join(unknown)}; choose from {', '.join(OP_NAMES)}"
        )
    return names


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {v}")
    return v


def _ordinal(text: str) -> int:
    # As cudriver._selftest's: this module parses its arguments without importing cudriver.
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a device ordinal, not {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"a device ordinal is >= 0, not {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's argument parser."""
    p = argparse.ArgumentParser(
        prog="python benchmarks/overhead.py",
        description=(
            "Host overhead per call of cudriver, raw cuda.bindings, cuda.core and CuPy, "
            "measured in one process on one device."
        ),
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a tenth of the calls and {QUICK_REPEATS} repeats (a smoke run)",
    )
    p.add_argument("--json", metavar="PATH", help="also write the environment and rows as JSON")
    p.add_argument(
        "--only",
        metavar="NAME,...",
        type=_only,
        help="measure only these operations (see --list)",
    )
    p.add_argument(
        "--repeats",
        metavar="N",
        type=_positive,
        help=f"repeats per measurement; the median is reported (default {DEFAULT_REPEATS}, "
        f"{QUICK_REPEATS} with --quick)",
    )
    p.add_argument("--device", metavar="N", type=_ordinal, default=0, help="device ordinal")
    p.add_argument("--list", action="store_true", help="list the operation names and exit")
    p.add_argument(
        "--check",
        action="store_true",
        help="exit with status 1 when a target is missed or a cudriver measurement failed",
    )
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse ``argv``; exits with status 2 on a usage error, as argparse does."""
    args = build_parser().parse_args(argv)
    if args.repeats is None:
        args.repeats = QUICK_REPEATS if args.quick else DEFAULT_REPEATS
    if args.only is None:
        args.only = OP_NAMES
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (as ``python -m cudriver``: 1 a CUDA
    error, 2 a usage error, 3 no driver)."""
    args = parse_args(argv)
    if args.list:
        for op in OPS:
            print(f"{op.name:<20} {op.label}")
        return 0
    # Imported only now: --help and --list need neither cudriver nor cuda.bindings.
    import cudriver as cu
    from benchmarks.run import run_benchmarks

    try:
        cu.init()
        env, rows = run_benchmarks(
            args.only, quick=args.quick, repeats=args.repeats, ordinal=args.device
        )
    except cu.DriverNotFoundError as exc:
        print(f"cudriver: {exc}", file=sys.stderr)
        return 3
    except cu.CudaError as exc:
        print(f"cudriver: {exc}", file=sys.stderr)
        return 1
    gpu = env.get("gpu", "unknown GPU")
    print(
        f"cudriver {env['cudriver']} ({env.get('cudriver_implementation', '?')}), "
        f"cuda-bindings {env['cuda_bindings']}, "
        f"CUDA driver {env.get('driver_cuda_version', '?')}, {gpu}, Python {env['python']}"
    )
    peers = ", ".join(
        f"{PEER_TITLES[k]} {v['version'] or '-'}"
        + ("" if v["state"] == "ok" else f" ({v['state']})")
        for k, v in env["peers"].items()
    )
    print(f"peers: {peers}")
    print(f"median of {args.repeats} repeats; ns per call on the host, µs per batch to completion")
    print()
    print(format_table(rows))
    if args.json:
        settings = {
            "quick": args.quick,
            "repeats": args.repeats,
            "only": list(args.only),
            "calls": {name: calls_for(OPS_BY_NAME[name], args.quick) for name in args.only},
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(to_json(env, rows, settings), f, indent=2)
            f.write("\n")
    if args.check and failed(rows):
        return 1
    return 0
