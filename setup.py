"""Build script: the package, plus the optional compiled core.

The compiled core (``cudriver._core``, from ``src/cudriver/_core.pyx``) needs Cython and
a C compiler, and no CUDA toolkit or headers. When it cannot be built (no compiler),
the install still succeeds and cudriver runs its pure-Python implementation.
``CUDRIVER_PURE_PYTHON=1`` at build time skips the core, which makes a
``py3-none-any`` wheel.
"""

from __future__ import annotations

import os

from setuptools import Extension, setup


def _ext_modules() -> list[Extension]:
    if os.environ.get("CUDRIVER_PURE_PYTHON", "").strip() not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:  # building without the declared build requirements
        return []
    ext = Extension("cudriver._core", ["src/cudriver/_core.pyx"], optional=True)
    modules: list[Extension] = cythonize(
        [ext],
        compiler_directives={"language_level": "3", "binding": True},
        quiet=True,
    )
    for m in modules:
        m.optional = True  # no compiler: warn and install the pure-Python package
    return modules


setup(ext_modules=_ext_modules())
