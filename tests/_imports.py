"""Read a package's imports of itself, and check them against a layer table.

Every module of the package is parsed, never imported: the ``.py`` files with :mod:`ast`,
the Cython files (``.pyx``, ``.pxd``) with a small line-based reader. Each import of a
module of the package is resolved to the module's dotted name relative to the package
(``_handle``, ``compat.driver``; the package's own ``__init__`` is ``__init__``, a
subpackage's is the subpackage's name, ``compat``) and given a kind:

- ``top``: runs when the importer is imported (module level, class bodies, module-level
  ``if``/``try`` blocks, the ``else:`` of ``if TYPE_CHECKING:``; every ``cimport``);
- ``function``: inside a ``def`` (or a Cython ``cdef``/``cpdef`` function), at any depth;
  runs when the function is called;
- ``type``: under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``); never runs.

The rule (:func:`check`): the table is a list of layers, bottom first, each a list of
modules in order; flattened, it is one order. A module imports at run time (``top``) only
modules before it in that order, so the ``top`` imports form no cycle. A ``function``
import of a module after the importer needs an entry in the allow-list, with its reason,
and an entry that no import uses any more is an error. ``type`` imports may point
anywhere in the package. Every module is in the table exactly once, and every table entry
is a module, so a new module is placed deliberately.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

TOP, FUNCTION, TYPE = "top", "function", "type"
ROOT = "__init__"  # the package's own __init__ (imported by every import of the package)
SOURCES = (".py", ".pyx", ".pxd")


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    kind: str
    where: str  # "path:line", for messages

    def __str__(self) -> str:
        return f"{self.where}: {self.importer} imports {self.imported} ({self.kind})"


# -- the modules ---------------------------------------------------------------------------


def module_name(path: Path, pkg_dir: Path) -> str:
    """``_handle.py`` -> ``_handle``, ``compat/driver.py`` -> ``compat.driver``,
    ``compat/__init__.py`` -> ``compat``, ``__init__.py`` -> ``__init__``."""
    parts = list(path.relative_to(pkg_dir).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def module_files(pkg_dir: Path) -> dict[str, list[Path]]:
    """Every module of the package and its source files (a ``.pyx`` and its ``.pxd`` are one)."""
    found: dict[str, list[Path]] = {}
    for path in sorted(pkg_dir.rglob("*")):
        if path.suffix in SOURCES and path.is_file() and "__pycache__" not in path.parts:
            found.setdefault(module_name(path, pkg_dir), []).append(path)
    return found


def _is_package(name: str, modules: set[str]) -> bool:
    return name == ROOT or any(m.startswith(name + ".") for m in modules)


class _Resolver:
    """Turns the parts of an import statement into the package's modules it imports."""

    def __init__(self, package: str, modules: set[str]) -> None:
        self.package = package
        self.modules = modules

    def _parent(self, importer: str) -> list[str]:
        """The package an importer's ``from . import`` starts from, as dotted parts."""
        if importer == ROOT:
            return []
        parts = importer.split(".")
        return parts if _is_package(importer, self.modules) else parts[:-1]

    def _base(self, importer: str, level: int, module: str | None) -> list[str] | None:
        """The imported name's parts within the package; None when outside it."""
        tail = module.split(".") if module else []
        if level == 0:
            if not tail or tail[0] != self.package:
                return None
            return tail[1:]
        parent = self._parent(importer)
        if level - 1 > len(parent):
            return None  # above the package
        return parent[: len(parent) - (level - 1)] + tail

    def _with_parents(self, importer: str, target: list[str]) -> list[str]:
        """``target`` and the subpackages importing it runs first (not the importer's own)."""
        out = []
        for i in range(1, len(target) + 1):
            name = ".".join(target[:i])
            if importer == name or importer.startswith(name + "."):
                continue  # the importer itself, or a package it is in (which has run)
            out.append(name)
        return out

    def resolve(
        self, importer: str, level: int, module: str | None, names: list[str] | None
    ) -> list[str]:
        """The modules ``from <level dots><module> import <names>`` (or, when ``names`` is
        None, ``import <module>``) imports; the package's ``__init__`` and the importer
        itself are left out."""
        base = self._base(importer, level, module)
        if base is None:
            return []
        found = self._with_parents(importer, base) if base else []
        for name in names or ():
            sub = [*base, name]
            if ".".join(sub) in self.modules:  # ``from . import x``, x a submodule
                found += self._with_parents(importer, sub)
        return [m for m in dict.fromkeys(found) if m not in (importer, ROOT)]


# -- Python sources ------------------------------------------------------------------------


# The fields of the nodes that hold statements (an except clause's and a match case's
# statements are in their ``body``).
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return (
        isinstance(test, ast.Attribute)
        and test.attr == "TYPE_CHECKING"
        and isinstance(test.value, ast.Name)
        and test.value.id == "typing"
    )


def _python_imports(path: Path, label: str, importer: str, resolver: _Resolver) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []

    def visit(node: ast.AST, kind: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = FUNCTION if kind == TOP else kind
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, TYPE)
            for child in node.orelse:
                visit(child, kind)
            return
        if isinstance(node, ast.Import):
            targets = [t for a in node.names for t in resolver.resolve(importer, 0, a.name, None)]
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            targets = resolver.resolve(importer, node.level, node.module, names)
        else:
            targets = []
        for target in targets:
            found.append(Import(importer, target, kind, f"{label}:{node.lineno}"))
        for field in _BLOCKS:  # imports are statements: only the blocks can hold them
            for child in getattr(node, field, ()):
                visit(child, kind)

    visit(tree, TOP)
    return found


# -- Cython sources ------------------------------------------------------------------------

_SPECIAL = re.compile("#|'''|\"\"\"|'|\"")
_STRING_END = {q: re.compile(r"(?:\\.|[^\\])*?" + q) for q in ("'''", '"""', "'", '"')}
_FUNCTION = re.compile(
    r"(async\s+def|def|c?p?def(?!\s+(?:(?:public|api|readonly)\s+)*"
    r"(?:class|extern|struct|union|enum|cppclass|packed|fused)\b))\s.*\("
)
_CIMPORT = re.compile(r"cimport\s+(?P<names>.+)")
_IMPORT = re.compile(r"import\s+(?P<names>.+)")
_FROM = re.compile(r"from\s+(?P<dots>\.*)(?P<module>[\w.]*)\s+(?P<how>c?import)\s+(?P<names>.+)")
_TYPE_CHECKING = re.compile(r"if\s+(typing\.)?TYPE_CHECKING\s*:$")


def _code_lines(text: str) -> list[tuple[int, int, str]]:
    """The lines of code: (line number, indentation, code), with comments dropped and
    string contents (docstrings, ``cdef extern from *`` C blocks) blanked to ``""``;
    a line continued by an open bracket or a backslash is joined to the next ones."""
    out: list[tuple[int, int, str]] = []
    quote = ""  # the open string's quote, when a string spans lines
    pending: tuple[int, int, str] | None = None  # a statement continued on the next line
    for number, line in enumerate(text.splitlines(), 1):
        code, i = "", 0
        starts_in_string = bool(quote)
        while i < len(line):
            if quote:  # skip to the string's end (a backslash escapes the next character)
                end = _STRING_END[quote].match(line, i)
                if end is None:
                    break
                code, i, quote = code + '""', end.end(), ""
                continue
            start = _SPECIAL.search(line, i)  # a comment or a string (its prefix stays code)
            code += line[i : start.start() if start else len(line)]
            if start is None or start.group() == "#":
                break
            quote, i = start.group(), start.end()
        if quote and len(quote) == 1:
            quote = ""  # an unterminated one-line string: not ours to judge
        code = code.strip()
        if pending is not None:
            number0, indent0, before = pending
            code = f"{before} {code}"
            pending = None
        elif starts_in_string or not code:
            continue
        else:
            number0, indent0 = number, len(line) - len(line.lstrip())
        if code.count("(") > code.count(")") or code.endswith("\\") or quote:
            pending = (number0, indent0, code.removesuffix("\\"))
            continue
        out.append((number0, indent0, code))
    return out


def _names(text: str) -> list[str]:
    """``(a as b, c)`` -> ``["a", "c"]``."""
    text = text.strip().strip("()")
    return [n.split()[0] for n in text.split(",") if n.strip()]


def _cython_imports(path: Path, label: str, importer: str, resolver: _Resolver) -> list[Import]:
    found: list[Import] = []
    blocks: list[tuple[int, str]] = []  # the open blocks: (indentation, kind)
    for number, indent, code in _code_lines(path.read_text(encoding="utf-8")):
        while blocks and blocks[-1][0] >= indent:
            blocks.pop()
        kinds = [k for _, k in blocks]
        kind = TYPE if TYPE in kinds else FUNCTION if FUNCTION in kinds else TOP
        targets: list[str] = []
        if m := _FROM.fullmatch(code):
            names = _names(m["names"])
            targets = resolver.resolve(importer, len(m["dots"]), m["module"] or None, names)
            kind = TOP if m["how"] == "cimport" else kind
        elif m := _CIMPORT.fullmatch(code):
            targets = [
                t for n in _names(m["names"]) for t in resolver.resolve(importer, 0, n, None)
            ]
            kind = TOP
        elif m := _IMPORT.fullmatch(code):
            targets = [
                t for n in _names(m["names"]) for t in resolver.resolve(importer, 0, n, None)
            ]
        for target in targets:
            found.append(Import(importer, target, kind, f"{label}:{number}"))
        if code.endswith(":"):
            if _TYPE_CHECKING.match(code):
                block = TYPE
            elif _FUNCTION.match(code):
                block = FUNCTION
            else:
                block = "block"
            blocks.append((indent, block))
    return found


# -- the package ---------------------------------------------------------------------------


def package_imports(root: Path, package: str) -> tuple[set[str], list[Import]]:
    """The modules of ``root/package`` and every import of one of them by another."""
    pkg_dir = root / package
    files = module_files(pkg_dir)
    resolver = _Resolver(package, set(files))
    found: list[Import] = []
    for name, paths in files.items():
        for path in paths:
            read = _python_imports if path.suffix == ".py" else _cython_imports
            found += read(path, str(path.relative_to(pkg_dir)), name, resolver)
    return set(files), found


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (``[a, b, ..., a]``), or None: a depth-first search."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def top_graph(imports: list[Import]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.kind == TOP:
            graph.setdefault(imp.importer, set()).add(imp.imported)
    return graph


def check(
    root: Path,
    package: str,
    table: list[list[str]],
    allowed: dict[tuple[str, str], str],
) -> list[str]:
    """Every breach of the import rule by ``root/package``, as one line each (none: [])."""
    modules, imports = package_imports(root, package)
    order = [m for layer in table for m in layer]
    position = {m: i for i, m in enumerate(order)}
    layer = {m: n for n, members in enumerate(table) for m in members}
    errors = [
        f"{m} is in the table {order.count(m)} times"
        for m in sorted(set(order))
        if order.count(m) > 1
    ]
    errors += [
        f"{m} is not in the table: place it in its layer" for m in sorted(modules - set(order))
    ]
    errors += [f"the table's {m} is no module of the package" for m in sorted(set(order) - modules)]
    used: set[tuple[str, str]] = set()
    for imp in imports:
        if imp.imported not in modules:
            errors.append(f"{imp}: no such module")
            continue
        if imp.importer not in position or imp.imported not in position:
            continue
        if position[imp.imported] < position[imp.importer]:
            continue
        if imp.kind == TYPE and layer[imp.imported] == layer[imp.importer]:
            continue  # annotations may name a later module of the same layer
        if imp.kind == TOP:
            errors.append(f"{imp}: {imp.imported} is not before {imp.importer} in the table")
        elif (imp.importer, imp.imported) in allowed:
            used.add((imp.importer, imp.imported))
        elif any(a == imp.importer and b.startswith(imp.imported + ".") for a, b in allowed):
            pass  # the subpackage whose allowed module is imported runs first
        else:
            errors.append(f"{imp}: upward, and not in the allow-list")
    errors += [
        f"stale allow-list entry {pair}: no such upward import"
        for pair in sorted(set(allowed) - used)
    ]
    if cycle := find_cycle(top_graph(imports)):
        errors.append("import cycle: " + " -> ".join(cycle))
    return errors
