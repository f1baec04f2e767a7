"""Write or check the snapshot of cudriver's public surface (``tests/public_surface.json``).

The surface is what code using cudriver can name, and its shape:

- every name of ``cudriver.__all__``: its kind (class, exception, protocol, enum,
  function, module, type alias, constant), the ``__module__`` of classes and functions
  and the signature of functions;
- every public class (those of ``__all__`` and of the public submodules): its public
  bases, its public members (names without a leading underscore, and the special methods
  of :data:`DUNDERS`), each with its kind (method, classmethod, staticmethod, property,
  attribute) and the signature of callables; an enum's members and their values;
- the public submodules of :data:`MODULES`: their ``__all__``, whether they answer names
  through a module ``__getattr__`` (the mirrors of ``cuda.bindings``), and the names they
  define themselves;
- the keys of ``cudriver.info()``.

It is meant to be the same whatever ``cuda-bindings`` is installed and whether or not a
GPU and a driver are present:

- A signature is the list of the parameters with their name, their kind
  (``POSITIONAL_ONLY``...) and whether they have a default: neither annotations (a
  compiled method has none) nor defaults (a sentinel's repr names its address).
  ``"<no signature>"`` where :func:`inspect.signature` finds none.
- Members come from ``dir()`` and :func:`inspect.getattr_static`, inherited ones
  included, but only those that cudriver defines: what a class inherits from ``object``,
  ``int``, ``tuple``, the exceptions, ``enum`` or ``typing.Protocol`` is left out, as is
  the ``__new__`` of a C type (its parameters are ``__init__``'s).
- Where something is defined privately does not count: a member may move from one
  private base class to another, and a public base is named by its public name.
- The mirrors (``cudriver.driver``, ``cudriver.compat.*``) are read through their
  namespace (``vars()``), never through their ``__getattr__``: the bindings' names they
  mirror are not listed, and nothing is looked up in the bindings.
- Nothing calls the driver, and ``cudriver.nccl`` does not import ``nccl4py``.

The snapshot is written from the compiled implementation (the script refuses to write it
from the pure-Python one). A special method that the compiled core implements in C (a slot
such as ``DeviceBuffer.__init__``) shows Python only ``(self, /, *args, **kwargs)``; where
the pure-Python implementation runs, ``--check`` and the test accept its Python
parameters there, and nothing else differs.

Usage::

    python scripts/gen_public_surface.py           # write tests/public_surface.json
    python scripts/gen_public_surface.py --check   # exit 1, with the differences, if not current

``tests/test_public_surface.py`` compares the live surface with the snapshot. After an
intended change of the public surface, run this script and commit the snapshot with it.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import importlib
import inspect
import json
import sys
import typing
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType, UnionType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tests" / "public_surface.json"
LINE = 100  # the repository's line length: shorter JSON values stay on one line

#: The public modules whose surface is recorded, the package first.
MODULES = (
    "cudriver",
    "cudriver.aio",
    "cudriver.checkpoint",
    "cudriver.nccl",
    "cudriver.driver",
    "cudriver.compat",
    "cudriver.compat.driver",
    "cudriver.compat.runtime",
    "cudriver.compat.nvrtc",
)

#: The special methods that users call or that protocols look up, recorded like public
#: names wherever cudriver defines them.
DUNDERS = frozenset(
    {
        "__init__",
        "__new__",
        "__enter__",
        "__exit__",
        "__aenter__",
        "__aexit__",
        "__await__",
        "__cuda_stream__",
        "__cuda_array_interface__",
        "__cudriver_kernel_arg__",
        "__dlpack__",
        "__dlpack_device__",
        "__array__",
        "__buffer__",
        "__release_buffer__",
        "__bytes__",
        "__int__",
        "__index__",
        "__bool__",
        "__call__",
        "__reduce__",
        "__reduce_ex__",
        "__getstate__",
        "__setstate__",
        "__copy__",
        "__deepcopy__",
        "__eq__",
        "__ne__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__hash__",
        "__len__",
        "__iter__",
        "__next__",
        "__aiter__",
        "__anext__",
        "__contains__",
        "__getitem__",
        "__setitem__",
        "__delitem__",
        "__repr__",
        "__str__",
        "__class_getitem__",
    }
)

#: The standard library's bases that are named among a class's bases; other bases from
#: outside cudriver (``typing.Generic``, ``enum.ReprEnum`` of Python 3.11+) are not.
STDLIB_BASES = {
    enum.Enum: "enum.Enum",
    enum.IntEnum: "enum.IntEnum",
    enum.Flag: "enum.Flag",
    enum.IntFlag: "enum.IntFlag",
    typing.Protocol: "typing.Protocol",
}

NO_SIGNATURE = "<no signature>"
#: The signature Python gives a special method that a C type implements (a slot wrapper).
C_SLOT_SIGNATURE = [
    {"name": "self", "kind": "POSITIONAL_ONLY", "default": False},
    {"name": "args", "kind": "VAR_POSITIONAL", "default": False},
    {"name": "kwargs", "kind": "VAR_KEYWORD", "default": False},
]
_EMPTY = inspect.Parameter.empty

Entry = dict[str, Any]


# -- what one object is -----------------------------------------------------------------


def signature(obj: Any) -> list[dict[str, Any]] | str:
    """The parameters of ``obj``: name, kind and whether each has a default.

    Parameters
    ----------
    obj
        A function, a compiled (Cython) function, a method descriptor or a class.

    Returns
    -------
    list of dict or str
        One ``{"name", "kind", "default"}`` per parameter, in order (``default`` is a
        bool), or ``"<no signature>"`` where :func:`inspect.signature` finds none.
    """
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return NO_SIGNATURE
    return [
        {"name": p.name, "kind": p.kind.name, "default": p.default is not _EMPTY}
        for p in sig.parameters.values()
    ]


def _is_callable_member(raw: Any) -> bool:
    return isinstance(
        raw, (staticmethod, classmethod, property, functools.cached_property)
    ) or inspect.isroutine(raw)


def _origin(raw: Any) -> str | None:
    """The module that defined the function behind ``raw``, where it says."""
    f = raw
    if isinstance(f, (staticmethod, classmethod)):
        f = f.__func__
    elif isinstance(f, property):
        f = f.fget
    elif isinstance(f, functools.cached_property):
        f = f.func
    objclass = getattr(f, "__objclass__", None)  # slot wrappers, method descriptors
    if isinstance(objclass, type):
        return objclass.__module__
    owner = getattr(f, "__self__", None)  # a builtin bound to its type (a C __new__)
    if inspect.isbuiltin(f) and isinstance(owner, type):
        return owner.__module__
    module = getattr(f, "__module__", None)
    return module if isinstance(module, str) else None


def _ours(module: str | None) -> bool:
    return module is not None and (module == "cudriver" or module.startswith("cudriver."))


def _owner(cls: type, name: str) -> type | None:
    """The first class of ``cls``'s method order that defines ``name`` itself."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass
    return None


def _wanted(name: str) -> bool:
    return not name.startswith("_") or name in DUNDERS


def member(raw: Any) -> Entry:
    """The kind of a class member as :func:`inspect.getattr_static` finds it, and its signature.

    Parameters
    ----------
    raw
        The object in the class's ``__dict__`` (not bound, no descriptor called).

    Returns
    -------
    dict
        ``kind`` (``method``, ``classmethod``, ``staticmethod``, ``property`` or
        ``attribute``), with ``signature`` for the callables, ``settable`` for a
        ``property`` and ``type`` (its type's name) for a plain value.
    """
    if isinstance(raw, staticmethod):
        return {"kind": "staticmethod", "signature": signature(raw.__func__)}
    if isinstance(raw, classmethod):
        return {"kind": "classmethod", "signature": signature(raw.__func__)}
    if type(raw).__name__ == "classmethod_descriptor":  # a C type's classmethod
        return {"kind": "classmethod", "signature": signature(raw)}
    if isinstance(raw, property):
        return {"kind": "property", "settable": raw.fset is not None}
    if inspect.ismemberdescriptor(raw):  # a __slots__ field
        return {"kind": "attribute"}
    if isinstance(raw, functools.cached_property) or inspect.isdatadescriptor(raw):
        return {"kind": "property"}
    if inspect.isroutine(raw):  # functions, compiled functions, slot wrappers
        return {"kind": "method", "signature": signature(raw)}
    return {"kind": "attribute", "type": type(raw).__name__}


def _class_kind(cls: type) -> str:
    if issubclass(cls, enum.Enum):
        return "enum"
    if issubclass(cls, BaseException):
        return "exception"
    if getattr(cls, "_is_protocol", False):
        return "protocol"
    return "class"


def _bases(cls: type, public: dict[type, str]) -> list[str]:
    """The public classes of ``cls``'s method order, by their public names, in order."""
    names = []
    for klass in cls.__mro__[1:]:
        if klass in public:
            names.append(public[klass])
        elif klass in STDLIB_BASES:
            names.append(STDLIB_BASES[klass])
        elif klass.__module__ == "builtins" and klass is not object:
            names.append(klass.__qualname__)
    return names


def _value(value: Any) -> Any:
    """An enum member's value as JSON keeps it."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return repr(value)


def describe_class(key: str, cls: type, public: dict[type, str]) -> dict[str, Entry]:
    """The entries of a public class: the class's own, its members', an enum's members'.

    Parameters
    ----------
    key
        The class's public name (``"cudriver.Stream"``).
    cls
        The class.
    public
        The public classes and their public names, to name its bases.

    Returns
    -------
    dict
        ``key`` and ``key.<member>`` for each recorded member, each with its entry.
    """
    head: Entry = {
        "kind": _class_kind(cls),
        "module": cls.__module__,
        "bases": _bases(cls, public),
    }
    if dataclasses.is_dataclass(cls):
        head["fields"] = [f.name for f in dataclasses.fields(cls)]
        head["frozen"] = bool(cls.__dataclass_params__.frozen)  # type: ignore[attr-defined]
    elif issubclass(cls, tuple) and hasattr(cls, "_fields"):  # a named tuple
        head["fields"] = list(cls._fields)
    if head["kind"] == "protocol":
        head["runtime_checkable"] = bool(getattr(cls, "_is_runtime_protocol", False))
    out = {key: head}

    members: dict[str, Any] = {}
    if issubclass(cls, enum.Enum):
        members = dict(cls.__members__)
        for name, m in members.items():
            entry: Entry = {"kind": "enum member", "value": _value(m.value)}
            if m.name != name:
                entry["alias_of"] = m.name
            out[f"{key}.{name}"] = entry

    for name in dir(cls):
        if not _wanted(name) or name in members:
            continue
        owner = _owner(cls, name)
        if owner is None or not _ours(owner.__module__):
            continue  # inherited from object, int, an exception, enum, typing...
        raw = vars(owner)[name]
        if _is_callable_member(raw) and not _ours(_origin(raw)):
            continue  # put there by enum, typing or namedtuple machinery
        if name == "__new__" and not isinstance(raw, staticmethod):
            continue  # a C type's __new__: any arguments, the parameters are __init__'s
        out[f"{key}.{name}"] = member(raw)

    # Attributes that only an annotation declares (instance attributes, dataclass fields
    # without a default).
    for klass in cls.__mro__:
        if not _ours(klass.__module__):
            continue
        for name in inspect.get_annotations(klass):
            if not name.startswith("_") and f"{key}.{name}" not in out:
                out[f"{key}.{name}"] = {"kind": "attribute"}
    return out


def _alias_arg(arg: Any) -> str:
    if arg is Any:
        return "Any"
    if isinstance(arg, type):
        return arg.__qualname__
    return repr(arg)


def describe(key: str, obj: Any, public: dict[type, str]) -> dict[str, Entry]:
    """The entries of one public name of a module.

    Parameters
    ----------
    key
        Its public name (``"cudriver.init"``).
    obj
        Its object.
    public
        The public classes and their public names.

    Returns
    -------
    dict
        The name's entry, and for a class those of its members.
    """
    if inspect.ismodule(obj):
        if key in MODULES and obj is sys.modules.get(key):
            return {}  # described with the modules
        return {key: {"kind": "module", "name": obj.__name__}}
    if isinstance(obj, type):
        return describe_class(key, obj, public)
    if inspect.isroutine(obj):
        return {
            key: {
                "kind": "function",
                "module": getattr(obj, "__module__", None),
                "signature": signature(obj),
            }
        }
    if isinstance(obj, UnionType) or typing.get_origin(obj) is not None:
        # A type alias such as StreamLike: its members by name (a private class among
        # them would otherwise be named with its private module).
        return {key: {"kind": "type alias", "args": sorted(map(_alias_arg, typing.get_args(obj)))}}
    return {key: {"kind": "constant", "type": type(obj).__name__}}


# -- the modules ------------------------------------------------------------------------


def _own_names(module: ModuleType) -> list[str]:
    """A module's ``__all__`` and the public functions and classes it defines itself.

    Read from the module's namespace only: a mirror's ``__getattr__`` is never called.
    """
    ns = vars(module)
    names = set(ns.get("__all__", ()))
    for name, obj in ns.items():
        if name.startswith("_"):
            continue
        if (isinstance(obj, type) or inspect.isroutine(obj)) and getattr(
            obj, "__module__", None
        ) == module.__name__:
            names.add(name)
    return sorted(names)


def _lookup(module: ModuleType, name: str) -> tuple[bool, Any]:
    """``(found, object)`` for a name of the module, without calling its ``__getattr__``."""
    ns = vars(module)
    if name in ns:
        return True, ns[name]
    if "__getattr__" in ns:
        return False, None
    try:
        return True, getattr(module, name)
    except AttributeError:  # named in __all__, defined nowhere
        return False, None


def import_modules() -> dict[str, ModuleType]:
    """The modules of :data:`MODULES`, imported (none of them calls the driver on import)."""
    return {name: importlib.import_module(name) for name in MODULES}


def collect() -> dict[str, Entry]:
    """The public surface of the importable cudriver.

    Returns
    -------
    dict
        Public name (``"cudriver.Stream.synchronize"``) -> its entry, sorted by name;
        ``"cudriver.info()"`` holds the keys of :func:`cudriver.info`.
    """
    modules = import_modules()
    listed = {name: _own_names(m) for name, m in modules.items()}

    # The public classes by their public names (the package's first), to name bases.
    public: dict[type, str] = {}
    for mod_name, names in listed.items():
        for name in names:
            found, obj = _lookup(modules[mod_name], name)
            if found and isinstance(obj, type) and obj not in public:
                public[obj] = f"{mod_name}.{name}"

    surface: dict[str, Entry] = {}
    for mod_name, module in modules.items():
        ns = vars(module)
        all_names = ns.get("__all__")
        surface[mod_name] = {
            "kind": "module",
            "all": sorted(all_names) if all_names is not None else None,
            "module_getattr": "__getattr__" in ns,
        }
        for name in listed[mod_name]:
            key = f"{mod_name}.{name}"
            found, obj = _lookup(module, name)
            if not found:
                # A mirror answers it through its __getattr__ (not called), or it is missing.
                surface[key] = {"kind": "lazy" if "__getattr__" in ns else "missing"}
                continue
            surface.update(describe(key, obj, public))

    info = modules["cudriver"].info
    surface["cudriver.info()"] = {"kind": "dict keys", "keys": sorted(info())}
    return dict(sorted(surface.items()))


# -- the snapshot -----------------------------------------------------------------------


def _dump(value: Any, indent: int, column: int) -> str:
    """JSON of ``value``, starting at ``column`` of a line indented by ``indent``.

    On one line where it fits in :data:`LINE`, else one item a line, indented by 2 more.
    """
    flat = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, (dict, list)) or not value or column + len(flat) <= LINE:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            head = f"{pad}{json.dumps(k, ensure_ascii=False)}: "
            items.append(head + _dump(v, indent + 2, len(head)))
        body = ",\n".join(items)
        return "{\n" + body + "\n" + " " * indent + "}"
    body = ",\n".join(pad + _dump(v, indent + 2, len(pad)) for v in value)
    return "[\n" + body + "\n" + " " * indent + "]"


def render(surface: dict[str, Entry]) -> str:
    """The snapshot's text: sorted by name, one entry per line where it fits.

    Parameters
    ----------
    surface
        What :func:`collect` returns (or the snapshot, loaded).

    Returns
    -------
    str
        JSON, ending with a newline.
    """
    items = []
    for key in sorted(surface):
        head = f"  {json.dumps(key, ensure_ascii=False)}: "
        items.append(head + _dump(surface[key], 2, len(head)))
    return "{\n" + ",\n".join(items) + "\n}\n"


def load(path: Path = SNAPSHOT) -> dict[str, Entry]:
    """The snapshot at ``path``."""
    data: dict[str, Entry] = json.loads(path.read_text(encoding="utf-8"))
    return data


def show_signature(sig: Any) -> str:
    """A recorded signature as Python writes one, ``=...`` for a default."""
    if not isinstance(sig, list):
        return str(sig)
    parts: list[str] = []
    star = False
    for i, p in enumerate(sig):
        kind, name = p["kind"], p["name"]
        if kind == "KEYWORD_ONLY" and not star:
            parts.append("*")
            star = True
        if kind == "VAR_POSITIONAL":
            parts.append(f"*{name}")
            star = True
        elif kind == "VAR_KEYWORD":
            parts.append(f"**{name}")
        else:
            parts.append(name + ("=..." if p["default"] else ""))
        following = sig[i + 1]["kind"] if i + 1 < len(sig) else None
        if kind == "POSITIONAL_ONLY" and following != "POSITIONAL_ONLY":
            parts.append("/")
    return "(" + ", ".join(parts) + ")"


def _show(field: str, value: Any) -> str:
    if field == "signature":
        return show_signature(value)
    return json.dumps(value)


def _show_entry(entry: Entry) -> str:
    return ", ".join(f"{k}={_show(k, v)}" for k, v in entry.items())


_MISSING = object()


def implementation() -> str:
    """``"compiled"`` or ``"pure-python"``: which implementation the importable cudriver runs."""
    info = importlib.import_module("cudriver").info
    return str(info()["implementation"])


def diff(recorded: dict[str, Entry], live: dict[str, Entry], *, pure: bool = False) -> list[str]:
    """What differs between two surfaces, one line per name or field.

    Parameters
    ----------
    recorded
        The snapshot (of the compiled implementation).
    live
        The surface of the importable cudriver.
    pure
        Whether ``live`` is the pure-Python implementation's: then a method that the
        snapshot records with :data:`C_SLOT_SIGNATURE` (a method of the compiled core
        that is a C slot, such as ``DeviceBuffer.__init__``, whose parameters Python
        cannot see) matches whatever signature the Python method has.

    Returns
    -------
    list of str
        ``- removed NAME``, ``+ added NAME`` and ``~ changed NAME FIELD: OLD -> NEW``
        lines (lists of names say which names came and went); empty when equal.
    """
    if pure:
        live = dict(live)
        for key, entry in recorded.items():
            here = live.get(key)
            if entry.get("signature") == C_SLOT_SIGNATURE and here and here["kind"] == "method":
                live[key] = {**here, "signature": C_SLOT_SIGNATURE}
    lines = []
    for key in sorted(recorded.keys() - live.keys()):
        lines.append(f"- removed {key}: {_show_entry(recorded[key])}")
    for key in sorted(live.keys() - recorded.keys()):
        lines.append(f"+ added   {key}: {_show_entry(live[key])}")
    for key in sorted(recorded.keys() & live.keys()):
        old, new = recorded[key], live[key]
        for field in sorted(old.keys() | new.keys()):
            a, b = old.get(field, _MISSING), new.get(field, _MISSING)
            if a == b:
                continue
            if isinstance(a, list) and isinstance(b, list) and field != "signature":
                gone = [x for x in a if x not in b]
                came = [x for x in b if x not in a]
                change = f"removed {json.dumps(gone)}, added {json.dumps(came)}"
                if not gone and not came:
                    change = f"{json.dumps(a)} -> {json.dumps(b)}"
            else:
                change = " -> ".join("(none)" if v is _MISSING else _show(field, v) for v in (a, b))
            lines.append(f"~ changed {key} {field}: {change}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Write the snapshot, or with ``--check`` say whether it is current (1 if not).

    Parameters
    ----------
    argv
        The command line's arguments (``sys.argv[1:]`` when None).

    Returns
    -------
    int
        The exit status.
    """
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the snapshot differs from the live surface"
    )
    parser.add_argument(
        "--output", type=Path, default=SNAPSHOT, help="the snapshot's path (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    path: Path = args.output
    shown = path.resolve()
    shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown
    pure = implementation() != "compiled"
    if pure and not args.check:
        print(
            "the snapshot records the compiled implementation, and this cudriver runs the "
            "pure-Python one: build the compiled core (python setup.py build_ext --inplace) "
            "and unset CUDRIVER_PURE_PYTHON",
            file=sys.stderr,
        )
        return 2
    live = collect()
    if not args.check:
        path.write_text(render(live), encoding="utf-8")
        print(f"wrote {shown} ({len(live)} entries)")
        return 0
    if not path.exists():
        print(f"{shown} does not exist: run python scripts/gen_public_surface.py")
        return 1
    text = path.read_text(encoding="utf-8")
    recorded: dict[str, Entry] = json.loads(text)
    problems = diff(recorded, live, pure=pure)
    if problems:
        print("\n".join(problems))
        print(
            f"the public surface differs from {shown} ({len(problems)} differences): "
            "run python scripts/gen_public_surface.py if the change is intended"
        )
        return 1
    if text != render(recorded):
        print(f"{shown} is not written as generated: run python scripts/gen_public_surface.py")
        return 1
    print(f"{shown} is up to date ({len(live)} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
