"""Generate the type stubs of the two faces of the driver mirror (driver.pyi, compat/driver.pyi).

The mirror exposes every public name of the installed ``cuda.bindings.driver``: each
``cu*`` function wrapped by ``cudriver.checked`` (it returns its outputs: None, the one
output, or a tuple of them, and raises on failure), the special functions of
``cudriver.driver`` (its ``__all__``, and the refused ``cuLaunchHostFunc_v2``), and the
bindings' classes, enums and constants unchanged. This script reads all of them from the
installed bindings and writes one stub:

- classes and enums are re-exported from ``cuda.bindings.driver`` (the real classes);
- integer constants are declared ``NAME: int``;
- each function takes the parameters of ``inspect.signature`` (which works on the
  bindings' Cython functions), typed from the C declaration in the docstring's first
  line where it names a C scalar type (that is what the bindings convert to), else from
  the signature's annotation, else from the docstring's ``Parameters`` section, else
  ``Any``; it returns the outputs listed in the docstring's ``Returns`` section after the
  ``CUresult``, corrected by ``RETURNS_FIXES`` where that section is known to be wrong.

Handles (the bindings' classes that convert to int, such as ``CUstream``) are accepted as
the class, anything with ``__int__`` (cudriver objects, ints) or None, as the bindings
do; enum parameters take the enum (some calls read the member's ``.value``).

Usage::

    python scripts/gen_driver_stub.py           # write both stubs
    python scripts/gen_driver_stub.py --check   # exit 1 if a stub is not up to date

The ``compat`` face (``cudriver.compat.driver``, ``src/cudriver/compat/driver.pyi``) has
the same names and parameters; its functions return ``tuple[CUresult, *outputs]``.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import inspect
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "src" / "cudriver" / "driver.pyi"
COMPAT_STUB = ROOT / "src" / "cudriver" / "compat" / "driver.pyi"
# The two faces of the driver mirror: their module and stub. ``checked`` functions return
# their outputs; ``compat`` ones return the bindings' ``(CUresult, *outputs)`` tuple.
FACES = {"checked": ("cudriver.driver", STUB), "compat": ("cudriver.compat.driver", COMPAT_STUB)}
VERSION_PREFIX = "# Generated from cuda-bindings "
LINE = 100  # the repository's line length (the stub itself is left out of ruff)

# Special functions of cudriver.driver that always raise: typed NoReturn, with the
# bindings' parameters.
REFUSED = frozenset({"cuLaunchHostFunc_v2"})

# Where a docstring's ``Returns`` section disagrees with what the function returns:
# name -> the outputs after the CUresult, as (name, bindings type) pairs.
RETURNS_FIXES: dict[str, list[tuple[str, str]]] = {
    # The docstring swaps the input (hTexRef) and the output (float pBorderColor[4]).
    "cuTexRefGetBorderColor": [("pBorderColor", "list[float]")],
}

_C_INT = re.compile(
    r"(?:(?:signed|unsigned)\s+)?(?:char|short|int|long|long\s+long|long\s+int)"
    r"|unsigned|signed|size_t|ssize_t|u?int(?:8|16|32|64)_t|\w+_ptr"
)
_C_FLOAT = re.compile(r"float|double")
_C_BYTES = re.compile(r"(?:const\s+)?(?:unsigned\s+)?char\s*\*")
_OBJ_REF = re.compile(r":py:obj:`~?\.?(\w+)`")
_SECTION_RULE = re.compile(r"-{3,}")


# -- reading the bindings -------------------------------------------------------------


def _is_enum(cls: type) -> bool:
    return issubclass(cls, int) and cls is not bool and hasattr(cls, "__members__")


def _is_handle(cls: type) -> bool:
    return "__int__" in vars(cls) and not _is_enum(cls)


class Bindings:
    """What the installed ``cuda.bindings.driver`` exposes through the mirror."""

    def __init__(self, raw: ModuleType, special: dict[str, Any], own: Sequence[str]) -> None:
        self.classes: dict[str, type] = {}
        self.constants: dict[str, object] = {}
        self.wrapped: dict[str, Callable[..., Any]] = {}
        self.plain: dict[str, Callable[..., Any]] = {}
        self.own = {n: special[n] for n in own}
        unknown = set(special) - set(own) - REFUSED
        if unknown:
            raise SystemExit(
                f"cudriver.driver treats {sorted(unknown)} specially: teach the generator"
            )
        for name in dir(raw):
            if name.startswith("_") or name in self.own:
                continue
            obj = getattr(raw, name)
            if isinstance(obj, ModuleType) or getattr(obj, "__module__", None) == "typing":
                continue  # the bindings' own imports (ctypes, cuda, Any, Optional)
            if isinstance(obj, type):
                self.classes[name] = obj
            elif name.startswith("cu") and callable(obj):
                self.wrapped[name] = obj
            elif callable(obj):
                self.plain[name] = obj
            elif isinstance(obj, (bool, int, float, str, bytes)):
                self.constants[name] = obj
            else:
                raise SystemExit(f"cuda.bindings.driver.{name}: {type(obj)!r} is not handled")


# -- docstrings -----------------------------------------------------------------------


def _sections(doc: str) -> dict[str, list[str]]:
    """NumPy-style sections, each dedented to its header's indentation.

    Some docstrings indent their body but not their summary, so the indentation is
    taken from each header line, not from the whole docstring.
    """
    lines = doc.expandtabs().splitlines()
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    indent = 0
    for i, line in enumerate(lines):
        rule = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and _SECTION_RULE.fullmatch(rule.strip()):
            indent = len(line) - len(line.lstrip())
            current = out.setdefault(line.strip(), [])
        elif _SECTION_RULE.fullmatch(line.strip()):
            continue
        elif current is not None:
            current.append(line.lstrip() if line[:indent].strip() else line[indent:])
    return out


def _entries(lines: list[str]) -> list[tuple[str, str | None]]:
    """The ``name : type`` lines of a NumPy-style section (descriptions are indented)."""
    out: list[tuple[str, str | None]] = []
    for line in lines:
        if line and not line[0].isspace():
            name, sep, typ = line.partition(" : ")
            out.append((name.strip(), typ.strip() if sep else None))
    return out


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _c_types(name: str, doc: str) -> dict[str, str]:
    """Parameter name -> C type from the docstring's first line ``cuX(type name, ...)``."""
    first = inspect.cleandoc(doc).splitlines()[0] if doc.strip() else ""
    m = re.fullmatch(r"(\w+)\((.*)\)", first.strip())
    if m is None or m.group(1) != name:
        return {}
    out = {}
    for decl in _split_top(m.group(2)):
        decl = decl.split(":", 1)[0].split("=", 1)[0].strip()
        m2 = re.fullmatch(r"(.*?[\s*])(\w+)", decl)
        if m2 and m2.group(1).strip():
            out[m2.group(2)] = m2.group(1).strip()
    return out


# -- types ----------------------------------------------------------------------------


class Typer:
    """Turns the bindings' type spellings into stub annotations."""

    def __init__(self, b: Bindings) -> None:
        self.b = b

    def _scalar(self, text: str) -> str | None:
        text = text.strip()
        if _C_BYTES.fullmatch(text):
            return "bytes"
        if _C_INT.fullmatch(text):
            return "int"
        if _C_FLOAT.fullmatch(text):
            return "float"
        if text in ("int", "float", "bytes", "str", "bool"):
            return text
        return None

    def _name(self, name: str, param: bool) -> list[str]:
        if name == "Any":
            return ["Any"]
        scalar = self._scalar(name)
        if scalar is not None:
            return [scalar]
        cls = self.b.classes.get(name)
        if cls is None:
            return []  # a type of another module (the runtime's cudaStream_t)
        if param and _is_handle(cls):
            return [name, "SupportsInt", "None"]
        return [name]  # enums too: some calls read the member's .value, so no plain ints

    def doc(self, text: str, param: bool) -> str:
        """A docstring type: ``int``, ``:py:obj:`~.X` or :py:obj:`~.Y```, ``list[...]``."""
        members: list[str] = []
        for alt in text.split(" or "):
            alt = alt.strip()
            m = re.fullmatch(r"list\[(.*)\]", alt)
            if m:
                members.append(f"list[{self.doc(m.group(1), param=False)}]")
                continue
            ref = _OBJ_REF.fullmatch(alt)
            members += self._name(ref.group(1) if ref else alt, param)
        return _union(members)

    def annotation(self, text: str, param: bool) -> str:
        """A signature annotation: ``Optional[tuple[X] | list[X]]``, ``X``."""
        return _union(self._ann(ast.parse(text, mode="eval").body, param))

    def _ann(self, node: ast.expr, param: bool) -> list[str]:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._ann(node.left, param) + self._ann(node.right, param)
        if isinstance(node, ast.Constant) and node.value is None:
            return ["None"]
        if isinstance(node, ast.Name):
            return self._name(node.id, param) or ["Any"]
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            head, arg = node.value.id, node.slice
            if head == "Optional":
                return [*self._ann(arg, param), "None"]
            if head == "Union" and isinstance(arg, ast.Tuple):
                return [t for e in arg.elts for t in self._ann(e, param)]
            if head in ("tuple", "Tuple", "list", "List") and not isinstance(arg, ast.Tuple):
                inner = _union(self._ann(arg, param=False))
                return [f"tuple[{inner}, ...]" if head.lower() == "tuple" else f"list[{inner}]"]
        return ["Any"]


def _union(members: list[str]) -> str:
    seen: list[str] = []
    for m in members:
        if m not in seen:
            seen.append(m)
    if not seen or "Any" in seen:
        return "Any"
    return " | ".join([m for m in seen if m != "None"] + (["None"] if "None" in seen else []))


# -- the stub -------------------------------------------------------------------------


def _def(name: str, params: list[str], ret: str) -> str:
    """A ``def`` line, or one parameter a line (and one tuple item a line) when too long."""
    line = f"def {name}({', '.join(params)}) -> {ret}: ..."
    if len(line) <= LINE:
        return line
    head = f"def {name}(\n" + "".join(f"    {p},\n" for p in params) if params else f"def {name}("
    tail = f") -> {ret}: ..."
    if len(tail) > LINE and ret.startswith("tuple[") and _split_top(ret[6:-1]) != [ret[6:-1]]:
        items = _split_top(ret[6:-1])
        tail = ") -> tuple[\n" + "".join(f"    {t},\n" for t in items) + "]: ..."
    return head + tail


def _params(name: str, fn: Callable[..., Any], typer: Typer) -> list[str]:
    doc = fn.__doc__ or ""
    c_types = _c_types(name, doc)
    doc_types = {n: t for n, t in _entries(_sections(doc).get("Parameters", [])) if t}
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind is not p.POSITIONAL_OR_KEYWORD:
            raise SystemExit(f"{name}: parameter {p.name} is {p.kind.name}: teach the generator")
        scalar = typer._scalar(c_types.get(p.name, ""))
        doc_type = doc_types.get(p.name) or doc_types.get(p.name.rstrip("_"))
        if scalar is not None:
            typ = scalar
        elif isinstance(p.annotation, str):
            typ = typer.annotation(p.annotation, param=True)
        elif doc_type is not None:
            typ = typer.doc(doc_type, param=True)
        else:
            typ = "Any"
        default = "" if p.default is p.empty else f" = {p.default!r}"
        out.append(f"{p.name}: {typ}{default}")
    return out


def _outputs(name: str, fn: Callable[..., Any], typer: Typer) -> list[str]:
    fixed = RETURNS_FIXES.get(name)
    if fixed is not None:
        entries: list[tuple[str, str | None]] = list(fixed)
    else:
        sections = _sections(fn.__doc__ or "")
        entries = _entries(sections.get("Returns", []))
        if not entries or entries[0][0] != "CUresult":
            raise SystemExit(f"{name}: its Returns section does not start with CUresult")
        # A C size argument that the docstring lists as a parameter and an output, but
        # that the function neither takes nor returns (cuCoredumpGetAttribute's size).
        taken = {p.rstrip("_") for p in inspect.signature(fn).parameters}
        phantom = {n for n, _ in _entries(sections.get("Parameters", []))} - taken
        entries = [(n, t) for n, t in entries[1:] if n not in phantom]
    return [typer.doc(t, param=False) if t else "Any" for _, t in entries]


def _returns(types: list[str]) -> str:
    if not types:
        return "None"
    if len(types) == 1:
        return types[0]
    return f"tuple[{', '.join(types)}]"


def _own_signature(fn: Callable[..., Any]) -> str:
    """A function of cudriver.driver itself, with its own (string) annotations."""

    def spell(annotation: object) -> str:
        if annotation is inspect.Parameter.empty:
            return "Any"
        return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)

    sig = inspect.signature(fn)
    params = [
        f"{p.name}: {spell(p.annotation)}" + ("" if p.default is p.empty else f" = {p.default!r}")
        for p in sig.parameters.values()
    ]
    return _def(fn.__name__, params, spell(sig.return_annotation))


def bindings_version() -> str:
    """The installed cuda-bindings version."""
    import cuda.bindings

    return str(cuda.bindings.__version__)


def generate(face: str = "checked") -> str:
    """The stub's text for the installed bindings and the mirror module of ``face``."""
    import importlib

    from cuda.bindings import driver as raw

    module_name, _ = FACES[face]
    sys.path.insert(0, str(ROOT / "src"))
    try:
        mirror = importlib.import_module(module_name)
    finally:
        sys.path.remove(str(ROOT / "src"))
    b = Bindings(raw, vars(mirror)["_SPECIAL"], mirror.__all__)
    typer = Typer(b)
    version = bindings_version()
    if face == "checked":
        head = [
            f'"""Type stub of ``{module_name}``, the checked mirror of ``cuda.bindings.driver``.',
            "",
            "Each ``cu*`` function returns its outputs (None, the single output, or a tuple of",
            "them) and raises ``cudriver.CudaError`` on failure; classes, enums and constants are",
            "the bindings' own. See docs/typed-mirror.md.",
            '"""',
        ]
    else:
        head = [
            f'"""Type stub of ``{module_name}``: ``cuda.bindings.driver`` whose failures raise.',
            "",
            "Each ``cu*`` function returns the bindings' ``(CUresult, *outputs)`` tuple and raises",
            "``cudriver.CudaError`` on failure; classes, enums and constants are the bindings'",
            "own. See docs/from-cuda-python.md.",
            '"""',
        ]
    lines = [
        *head,
        "",
        f"{VERSION_PREFIX}{version} by scripts/gen_driver_stub.py: do not edit.",
        "# Regenerate with `python scripts/gen_driver_stub.py` after changing the installed",
        "# cuda-bindings or the mirror; `--check` says whether this file is up to date.",
        "",
        "__all__ = [" + ", ".join(f'"{n}"' for n in sorted(mirror.__all__)) + "]",
        "",
        "from typing import Any, NoReturn, SupportsInt",
        "",
    ]
    lines += [f"from cuda.bindings.driver import {n} as {n}" for n in sorted(b.classes)]
    lines.append("")
    lines += [f"{n}: {type(v).__name__}" for n, v in sorted(b.constants.items())]
    lines.append("")
    functions: dict[str, str] = {}
    for n, fn in b.wrapped.items():
        outputs = _outputs(n, fn, typer)
        if n in REFUSED:
            ret = "NoReturn"
        elif face == "checked":
            ret = _returns(outputs)
        else:
            ret = f"tuple[{', '.join(['CUresult', *outputs])}]"
        functions[n] = _def(n, _params(n, fn, typer), ret)
    for n, fn in b.plain.items():
        entries = _entries(_sections(fn.__doc__ or "").get("Returns", []))
        ret = (
            typer.doc(entries[0][1], param=False) if len(entries) == 1 and entries[0][1] else "Any"
        )
        functions[n] = _def(n, _params(n, fn, typer), ret)
    for n, fn in b.own.items():
        functions[n] = _own_signature(fn)
    lines += [functions[n] for n in sorted(functions)]
    return "\n".join(lines) + "\n"


def _version_of(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith(VERSION_PREFIX):
            return line[len(VERSION_PREFIX) :].split()[0]
    return None


def stub_version(path: Path = STUB) -> str | None:
    """The cuda-bindings version the committed stub was generated from."""
    return _version_of(path.read_text()) if path.exists() else None


def major_minor(version: str) -> tuple[int, ...]:
    """``(13, 5)`` for ``"13.5.0"``."""
    return tuple(int(x) for x in re.findall(r"\d+", version)[:2])


def check(path: Path = STUB, face: str = "checked") -> list[str]:
    """The differences between the committed stub and a fresh one (empty when up to date).

    The version line is compared up to major.minor: a patch release of the bindings with
    the same functions needs no regeneration.
    """
    new = generate(face)
    old = path.read_text() if path.exists() else ""
    old_version, new_version = _version_of(old), _version_of(new)

    def body(text: str) -> list[str]:
        return [ln for ln in text.splitlines() if not ln.startswith(VERSION_PREFIX)]

    if old_version is None or major_minor(old_version) != major_minor(new_version or ""):
        return [f"stub generated from cuda-bindings {old_version}, installed {new_version}"]
    return list(
        difflib.unified_diff(body(old), body(new), str(path), "generated", n=1, lineterm="")
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Write the stubs, or with ``--check`` say whether they are up to date (1 if not)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a stub differs from a fresh one"
    )
    parser.add_argument(
        "--face", choices=sorted(FACES), help="only this face's stub (default: both)"
    )
    parser.add_argument("--output", type=Path, help="the stub's path (with --face)")
    args = parser.parse_args(argv)
    if args.output is not None and args.face is None:
        parser.error("--output needs --face")
    faces = [args.face] if args.face else list(FACES)
    status = 0
    for face in faces:
        path = args.output if args.output is not None else FACES[face][1]
        shown = path.resolve()
        shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown
        if args.check:
            diff = check(path, face)
            if diff:
                print("\n".join(diff[:200]))
                print(f"{shown} is out of date: run python scripts/gen_driver_stub.py")
                status = 1
            else:
                print(f"{shown} is up to date")
            continue
        path.write_text(generate(face))
        print(f"wrote {shown} (cuda-bindings {bindings_version()})")
    return status


if __name__ == "__main__":
    sys.exit(main())
