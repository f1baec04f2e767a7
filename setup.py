"""Build script: the package and its compiled core, which every install needs.

Every ``.pyx`` under ``src/cudriver`` (subpackages included) is built as the extension
named after its path: ``src/cudriver/_work/_core.pyx`` becomes ``cudriver._work._core``.
The build needs Cython (a build requirement, which pip fetches), a C compiler and
Python's headers, and no CUDA toolkit or headers: the core calls the driver through entry
points looked up at run time. A missing one stops the build with a message that names it;
there is no pure-Python fallback.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext as _build_ext
from setuptools.errors import PlatformError

HERE = Path(__file__).resolve().parent
SRC = "src"
PACKAGE_DIR = Path(SRC) / "cudriver"

COMPILER_DIRECTIVES = {"language_level": "3", "binding": True}


class BuildError(PlatformError):
    """A missing build requirement: the message says which and how to get it.

    setuptools turns it into ``error: <message>`` and a failed build, which pip reports.
    """


def _extensions() -> list[Extension]:
    """One extension per ``.pyx`` under ``src/cudriver``, named after its path."""
    sources = sorted((HERE / PACKAGE_DIR).rglob("*.pyx"))
    if not sources:
        # Not inside a command, where setuptools would turn a BuildError into a message.
        raise SystemExit(
            f"error: cudriver's compiled core has no sources: no .pyx file under {PACKAGE_DIR}/"
        )
    extensions = []
    for path in sources:
        relative = path.relative_to(HERE)  # src/cudriver/_work/_core.pyx
        name = ".".join(relative.relative_to(SRC).with_suffix("").parts)
        extensions.append(Extension(name, [relative.as_posix()]))
    return extensions


def _compiler_candidates() -> tuple[list[str], str]:
    """The compilers the build would run, in order, and where that choice comes from."""
    for source, value in (
        ("$CC", os.environ.get("CC")),
        ("Python's build configuration (sysconfig CC)", sysconfig.get_config_var("CC")),
    ):
        if value and value.strip():
            return [shlex.split(value)[0]], source
    return ["gcc", "cc"], "the usual names"


def _check_build_requirements() -> None:
    """Fail up front, naming what is missing, instead of deep inside the compile."""
    try:
        import Cython  # noqa: F401
    except ImportError:
        raise BuildError(
            "cudriver needs Cython to build its compiled core: it is not importable by "
            f"{sys.executable}; pip installs it from the build requirements in "
            "pyproject.toml (without --no-build-isolation), or install it with "
            "'python -m pip install \"Cython>=3.0\"' and retry"
        ) from None
    if os.name == "posix":
        candidates, source = _compiler_candidates()
        if not any(shutil.which(c) for c in candidates):
            looked = ", ".join(repr(c) for c in candidates)
            other = next((c for c in ("gcc", "cc", "clang") if shutil.which(c)), None)
            if source == "$CC":
                remedy = "set CC to a compiler that is installed" + (
                    f" (CC={other})" if other else ", or install one (e.g. 'apt install gcc')"
                )
            elif other:
                remedy = f"set CC={other}, which is installed, or install {candidates[0]!r}"
            else:
                remedy = "install one (e.g. 'apt install gcc' or 'build-essential')"
            raise BuildError(
                "cudriver needs a C compiler to build its compiled core: none found "
                f"(looked for {looked}, from {source}); {remedy} and retry"
            )
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        raise BuildError(
            "cudriver needs Python's C headers to build its compiled core: "
            f"{include}/Python.h is missing; install them (e.g. 'apt install "
            f"python{version}-dev' or 'python3-dev') and retry"
        )


class build_ext(_build_ext):
    """Check the build requirements, cythonize every core module, then compile in parallel."""

    def finalize_options(self) -> None:
        """Compile the extensions in parallel unless ``--parallel`` says otherwise."""
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1
        super().finalize_options()

    def run(self) -> None:
        """Check the build requirements, cythonize, then build the extensions."""
        _check_build_requirements()
        from Cython.Build import cythonize

        cythonized = cythonize(
            self.extensions,
            compiler_directives=COMPILER_DIRECTIVES,
            include_path=[SRC],  # .pxd files cimport each other across subpackages
            nthreads=os.cpu_count() or 1,
            force=self.force,
            quiet=True,
        )
        # Into the extensions themselves (the C sources, what a "# distutils:" line sets),
        # which keep what setuptools gave them when it finalized this command.
        by_name = {ext.name: ext for ext in cythonized}
        for ext in self.extensions:
            vars(ext).update(vars(by_name[ext.name]))
        super().run()


setup(ext_modules=_extensions(), cmdclass={"build_ext": build_ext})
