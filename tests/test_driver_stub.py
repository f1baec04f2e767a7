"""The typed mirror: ``src/cudriver/driver.pyi`` matches the bindings, and mypy uses it.

``tests/typing/good_driver_use.py`` must pass ``mypy --strict``; each line of
``tests/typing/bad_driver_use.py`` marked ``# E: <code>`` must fail with that code, and
no other line. mypy runs once for both files (and once for ``driver.py`` itself, which
the stub hides from ``mypy --strict src``), with a cache shared by the runs.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
TYPING = Path(__file__).resolve().parent / "typing"
GOOD = TYPING / "good_driver_use.py"
BAD = TYPING / "bad_driver_use.py"
COMPAT = TYPING / "good_compat_use.py"
GENERATOR = ROOT / "scripts" / "gen_driver_stub.py"
ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<msg>.*?)  \[(?P<code>[\w-]+)\]$")


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_driver_stub", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy_cache")


def _mypy(files: list[Path], cache: Path) -> tuple[str, int]:
    """Run ``mypy --strict`` with the repository's configuration, on ``src``'s cudriver."""
    api = pytest.importorskip("mypy.api", reason="mypy is not installed (the test extra has it)")
    old = os.environ.get("MYPYPATH")
    os.environ["MYPYPATH"] = str(SRC)
    try:
        out, err, status = api.run(
            [
                "--strict",
                "--config-file",
                str(ROOT / "pyproject.toml"),
                "--cache-dir",
                str(cache),
                "--no-color-output",
                "--no-error-summary",
                *map(str, files),
            ]
        )
    finally:
        if old is None:
            del os.environ["MYPYPATH"]
        else:
            os.environ["MYPYPATH"] = old
    return out + err, status


@pytest.fixture(scope="module")
def use_errors(mypy_cache: Path) -> dict[str, list[tuple[int, str, str]]]:
    """mypy's errors on the good and the bad file: file name -> (line, code, message)."""
    out, _ = _mypy([GOOD, BAD, COMPAT], mypy_cache)
    errors: dict[str, list[tuple[int, str, str]]] = {GOOD.name: [], BAD.name: [], COMPAT.name: []}
    for line in out.splitlines():
        m = ERROR.match(line)
        if m is not None:
            name = Path(m["path"]).name
            errors.setdefault(name, []).append((int(m["line"]), m["code"], m["msg"]))
        else:
            assert ": note: " in line or not line.strip(), f"unexpected mypy output: {line}"
    return errors


def test_good_use_passes_mypy_strict(use_errors: dict[str, list[tuple[int, str, str]]]) -> None:
    assert use_errors[GOOD.name] == []
    assert use_errors[COMPAT.name] == []
    assert set(use_errors) == {GOOD.name, BAD.name, COMPAT.name}


def test_bad_use_fails_where_marked(use_errors: dict[str, list[tuple[int, str, str]]]) -> None:
    expected = {
        (n, m.group(1))
        for n, text in enumerate(BAD.read_text().splitlines(), start=1)
        if (m := re.search(r"# E: ([\w-]+)$", text))
    }
    assert len(expected) >= 5
    assert {(n, code) for n, code, _ in use_errors[BAD.name]} == expected


def test_bad_use_messages(use_errors: dict[str, list[tuple[int, str, str]]]) -> None:
    messages = [msg for _, _, msg in use_errors[BAD.name]]
    assert any(msg.startswith('Module has no attribute "cuMemAloc"') for msg in messages)
    assert any(msg == 'Too many arguments for "cuMemAlloc"' for msg in messages)
    assert any('Missing positional argument "ByteCount"' in msg for msg in messages)


def test_driver_py_itself_still_type_checks(mypy_cache: Path) -> None:
    # With driver.pyi beside it, `mypy --strict src` reads the stub instead of driver.py.
    out, status = _mypy([SRC / "cudriver" / "driver.py"], mypy_cache)
    assert status == 0, out


def test_stub_matches_the_installed_bindings() -> None:
    gen = _load_generator()
    stub, installed = gen.stub_version(), gen.bindings_version()
    assert stub is not None, "driver.pyi has no version line: regenerate it"
    if gen.major_minor(stub) != gen.major_minor(installed):
        pytest.skip(f"driver.pyi was generated from cuda-bindings {stub}, {installed} is installed")
    diff = gen.check()
    assert diff == [], "\n".join(
        ["driver.pyi is out of date: run python scripts/gen_driver_stub.py", *diff[:60]]
    )


def test_compat_stub_matches_the_installed_bindings() -> None:
    gen = _load_generator()
    stub, installed = gen.stub_version(gen.COMPAT_STUB), gen.bindings_version()
    assert stub is not None, "compat/driver.pyi has no version line: regenerate it"
    if gen.major_minor(stub) != gen.major_minor(installed):
        pytest.skip(f"compat/driver.pyi is from cuda-bindings {stub}, {installed} is installed")
    diff = gen.check(gen.COMPAT_STUB, "compat")
    assert diff == [], "\n".join(
        ["compat/driver.pyi is out of date: run python scripts/gen_driver_stub.py", *diff[:60]]
    )


def test_stub_declares_what_the_mirror_exposes() -> None:
    import ast

    from cuda.bindings import driver as raw

    from cudriver import driver

    gen = _load_generator()
    stub_text = (SRC / "cudriver" / "driver.pyi").read_text()
    if gen.major_minor(gen.stub_version() or "0") != gen.major_minor(gen.bindings_version()):
        pytest.skip("driver.pyi was generated from another cuda-bindings version")
    declared = set()
    for node in ast.parse(stub_text).body:
        if isinstance(node, ast.FunctionDef):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            declared.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and node.module == "cuda.bindings.driver":
            declared.update(a.asname or a.name for a in node.names)
    public = {
        n
        for n in dir(raw)
        if not n.startswith("_")
        and not isinstance(getattr(raw, n), ModuleType)
        and getattr(getattr(raw, n), "__module__", None) != "typing"
    }
    assert declared == public | set(driver.__all__)
    for name in declared:
        assert hasattr(driver, name), name


def test_stub_header_says_how_to_regenerate() -> None:
    head = (SRC / "cudriver" / "driver.pyi").read_text()[:1500]
    assert "python scripts/gen_driver_stub.py" in head
    assert "--check" in head
    assert re.search(r"cuda-bindings \d+\.\d+", head)
