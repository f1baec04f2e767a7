"""The public surface: what cudriver exports is what ``tests/public_surface.json`` records.

The snapshot lists every public name with its kind, its signature (parameter names, kinds
and which have defaults) and, for classes, their public members and bases; see
``scripts/gen_public_surface.py``, which writes it. A change of the public surface, even
one made while moving code between private modules, fails here with the names added,
removed or changed. When the change is intended, regenerate the snapshot::

    python scripts/gen_public_surface.py

No GPU and no driver are needed: nothing here calls the driver.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import cudriver as cu

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "scripts" / "gen_public_surface.py"
SNAPSHOT = ROOT / "tests" / "public_surface.json"
REGENERATE = "python scripts/gen_public_surface.py"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_public_surface", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return _load_generator()


@pytest.fixture(scope="module")
def collected(gen: ModuleType) -> tuple[dict[str, Any], set[str]]:
    """The live surface, and the modules that collecting it imported."""
    before = set(sys.modules)
    surface = gen.collect()
    return surface, set(sys.modules) - before


def test_public_surface_matches_snapshot(
    gen: ModuleType, collected: tuple[dict[str, Any], set[str]]
) -> None:
    live, _ = collected
    recorded = gen.load(SNAPSHOT)
    # The snapshot is of the compiled implementation; the pure-Python one shows the Python
    # parameters of the methods that the compiled core implements as C slots.
    pure = cu.info()["implementation"] != "compiled"
    problems = gen.diff(recorded, live, pure=pure)
    if problems:
        shown = problems[:200]
        if len(problems) > len(shown):
            shown.append(f"... and {len(problems) - len(shown)} more")
        pytest.fail(
            f"the public surface differs from {SNAPSHOT.relative_to(ROOT)} "
            f"({len(problems)} differences):\n"
            + "\n".join(shown)
            + f"\nIf the change is intended, run {REGENERATE} and commit the snapshot.",
            pytrace=False,
        )


def test_snapshot_is_written_as_generated(gen: ModuleType) -> None:
    text = SNAPSHOT.read_text(encoding="utf-8")
    assert text == gen.render(gen.load(SNAPSHOT)), f"not sorted or formatted: run {REGENERATE}"


def test_package_names_are_published() -> None:
    # Reprs, pickles and the API reference name cudriver.Stream, not a private module.
    for name in cu.__all__:
        obj = getattr(cu, name)
        if isinstance(obj, type) or inspect.isfunction(obj):
            assert obj.__module__ == "cudriver", name


def test_collecting_leaves_optional_and_lazy_parts_alone(
    collected: tuple[dict[str, Any], set[str]],
) -> None:
    live, imported = collected
    # nccl4py is imported by cudriver.nccl's functions only, when called.
    assert not {m for m in imported if m == "nccl" or m.startswith("nccl.")}
    # The mirrors are read through their namespace: no bindings name is listed.
    for mirror in ("cudriver.driver", "cudriver.compat.driver", "cudriver.compat.runtime"):
        assert live[mirror]["module_getattr"] is True
    assert "cudriver.driver.cuMemAlloc" not in live
    assert "cudriver.compat.driver.cuInit" not in live


def test_diff_names_what_changed(gen: ModuleType) -> None:
    sig = [
        {"name": "self", "kind": "POSITIONAL_OR_KEYWORD", "default": False},
        {"name": "timeout", "kind": "KEYWORD_ONLY", "default": True},
    ]
    recorded = {
        "cudriver": {"kind": "module", "all": ["Stream", "gone"], "module_getattr": False},
        "cudriver.Stream.query": {"kind": "method", "signature": sig},
        "cudriver.Stream.synchronize": {"kind": "method", "signature": sig},
    }
    live = {
        "cudriver": {"kind": "module", "all": ["Stream", "new"], "module_getattr": False},
        "cudriver.Stream.query": {"kind": "method", "signature": sig[:1]},
        "cudriver.Stream.sync": {"kind": "method", "signature": sig},
    }
    assert gen.diff(recorded, live) == [
        '- removed cudriver.Stream.synchronize: kind="method", signature=(self, *, timeout=...)',
        '+ added   cudriver.Stream.sync: kind="method", signature=(self, *, timeout=...)',
        '~ changed cudriver all: removed ["gone"], added ["new"]',
        "~ changed cudriver.Stream.query signature: (self, *, timeout=...) -> (self)",
    ]
    assert gen.diff(recorded, recorded) == []


def test_signatures_keep_names_kinds_and_defaults_only(gen: ModuleType) -> None:
    sentinel = object()

    def f(a: int, /, b: str = "x", *args: Any, c: object = sentinel, **kw: Any) -> None:
        pass

    recorded = gen.signature(f)
    assert recorded == [
        {"name": "a", "kind": "POSITIONAL_ONLY", "default": False},
        {"name": "b", "kind": "POSITIONAL_OR_KEYWORD", "default": True},
        {"name": "args", "kind": "VAR_POSITIONAL", "default": False},
        {"name": "c", "kind": "KEYWORD_ONLY", "default": True},
        {"name": "kw", "kind": "VAR_KEYWORD", "default": False},
    ]
    assert gen.show_signature(recorded) == "(a, /, b=..., *args, c=..., **kw)"
    assert gen.signature(42) == "<no signature>"
