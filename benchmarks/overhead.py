"""Host overhead per call: cudriver against raw cuda.bindings, cuda.core and CuPy.

Usage::

    python benchmarks/overhead.py [--quick] [--json PATH] [--only NAME,...] [--repeats N]

Runs from a source checkout, with cudriver installed or not (then the package under
``src/`` is used). The harness is the ``benchmarks`` package beside this file, outside
the wheel; see docs/performance.md.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    # Run as a script, sys.path[0] is benchmarks/ itself: import the benchmarks package
    # from the repository's root instead, so that its modules are not top-level too.
    if sys.path and Path(sys.path[0] or ".").resolve() == _REPO / "benchmarks":
        sys.path[0] = str(_REPO)
    elif str(_REPO) not in sys.path:
        sys.path.insert(0, str(_REPO))
    if importlib.util.find_spec("cudriver") is None:
        # A source checkout without cudriver installed: use the package under src/.
        sys.path.insert(0, str(_REPO / "src"))
    from benchmarks.cli import main

    sys.exit(main())
