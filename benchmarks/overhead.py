"""Host overhead per call: cudriver against raw cuda.bindings, cuda.core and CuPy.

Usage::

    python benchmarks/overhead.py [--quick] [--json PATH] [--only NAME,...] [--repeats N]

The same as ``python -m cudriver bench``; the code lives in ``cudriver._bench`` so that
an installed package can run it. See docs/performance.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from cudriver._bench import main
except ImportError:
    # Run from a source checkout without installing: use the package under src/.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from cudriver._bench import main

if __name__ == "__main__":
    sys.exit(main())
