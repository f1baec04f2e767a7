"""The public surface: names, modules, return types, and the one checking mechanism."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path
from typing import Any

import pytest

import cudriver as cu

SRC = Path(cu.__file__).resolve().parent


def _public_classes() -> list[type]:
    return [o for n in cu.__all__ if isinstance(o := getattr(cu, n), type)]


def _classes_in(tp: Any) -> set[type]:
    """Every cudriver class named by a type annotation (through unions and generics)."""
    out: set[type] = set()
    if isinstance(tp, type):
        if tp.__module__.split(".")[0] == "cudriver":
            out.add(tp)
        return out
    for arg in typing.get_args(tp):
        out |= _classes_in(arg)
    return out


def _returned_classes(cls: type) -> dict[str, set[type]]:
    found: dict[str, set[type]] = {}
    for name, member in vars(cls).items():
        # A compiled hot method's slow path (annotated, as the stub) is _<name>_slow.
        if name.endswith("_slow"):
            name = {"_init_slow": "__init__", "_cuda_stream_slow": "__cuda_stream__"}.get(
                name, name.removeprefix("_").removesuffix("_slow")
            )
        if name.startswith("_") and name not in ("__enter__", "__cuda_stream__"):
            continue
        fn = member.fget if isinstance(member, property) else member
        if isinstance(fn, (classmethod, staticmethod)):
            fn = fn.__func__
        if not inspect.isfunction(fn):
            continue
        hints = typing.get_type_hints(fn, localns=vars(cu))
        if "return" in hints:
            found[f"{cls.__name__}.{name}"] = _classes_in(hints["return"])
    return found


def test_every_public_name_lives_in_cudriver() -> None:
    for name in cu.__all__:
        obj = getattr(cu, name)
        if isinstance(obj, type) or inspect.isfunction(obj):
            assert obj.__module__ == "cudriver", name


def test_every_returned_type_is_importable_from_cudriver() -> None:
    exported = {getattr(cu, n) for n in cu.__all__ if isinstance(getattr(cu, n), type)}
    missing = {
        where: sorted(c.__qualname__ for c in classes - exported)
        for cls in _public_classes()
        for where, classes in _returned_classes(cls).items()
        if classes - exported
    }
    assert missing == {}


def test_the_walk_finds_return_types() -> None:
    # The check above is only as good as this walk: it must see Stream.record's Event.
    assert cu.Event in _returned_classes(cu.Stream)["Stream.record"]


def test_reprs_show_the_public_module() -> None:
    assert repr(cu.WaitCondition.GEQ).startswith("<WaitCondition.GEQ")
    assert cu.Stream.__module__ == "cudriver"
    assert cu.DeviceBuffer.__qualname__ == "DeviceBuffer"


# A driver function named by a string literal where an error is built: the name must come
# from the function itself (checked(), error_for()), so it cannot drift from the call.
_LITERAL_NAME = re.compile(r"make_error\([^)]*?,\s*[\"']cu[A-Z]")


@pytest.mark.parametrize(
    "path",
    sorted([*SRC.rglob("*.py"), *SRC.rglob("*.pyx")]),
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_errors_name_the_function_they_called(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _LITERAL_NAME.findall(text) == []


def test_every_from_handle_takes_handle_first() -> None:
    # One vocabulary: wrapping a foreign handle reads the same on every class.
    firsts = {}
    for cls in _public_classes():
        fn = getattr(cls, "from_handle", None)
        if fn is None:
            continue
        params = list(inspect.signature(fn).parameters)
        if params[:1] == ["args"]:  # refused (VirtualBuffer owns its reservation)
            continue
        firsts[cls.__name__] = params[0]
    assert len(firsts) >= 8
    assert set(firsts.values()) == {"handle"}, firsts


def test_enqueue_only_calls_take_the_stream_first() -> None:
    # The stream rule's shape: a stream first (no default) on enqueue-only calls,
    # keyword-only stream= everywhere else.
    first = [
        (cu.Kernel, "launch"),
        (cu.LaunchPlan, "launch"),
        (cu.GraphExec, "launch"),
        (cu.GraphExec, "upload"),
        (cu.Event, "record"),
    ]
    for cls, name in first:
        # Both the compiled method and its slow path (annotated) take the stream first.
        for fn in (getattr(cls, name), cls.__dict__[f"_{name}_slow"]):
            p = list(inspect.signature(fn).parameters.values())[1]
            assert p.name == "stream" and p.default is inspect.Parameter.empty, (cls, name)
    for cls in _public_classes():
        for name, member in vars(cls).items():
            fn = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
            if not inspect.isfunction(fn) or name.startswith("_") or (cls, name) in first:
                continue
            p = inspect.signature(fn).parameters.get("stream")
            if p is not None:
                assert p.kind is inspect.Parameter.KEYWORD_ONLY, f"{cls.__name__}.{name}"
