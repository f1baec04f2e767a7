"""The package's imports run one way: down the layer table below.

Every module of ``src/cudriver`` (the ``.py`` files, and the compiled core's ``.pyx`` and
any ``.pxd``) is parsed, not imported, by ``tests/_imports.py``, which finds each import
of a module of the package and when it runs: at import (``top``: module level, class
bodies, module-level ``if``/``try``; every ``cimport``), when a function is called
(``function``), or never (``type``: under ``if TYPE_CHECKING:``).

The rule:

- ``LAYERS`` is the order of the modules, bottom first: a list of layers, each a list of
  modules in order. A module imports at run time only modules before it, so no ``top``
  imports form a cycle (checked directly too, with the cycle printed).
- A ``function`` import of a module after the importer (a cold path that needs a higher
  layer) is allowed only with an entry in ``UPWARD``, which says why; an entry no import
  needs any more is an error.
- ``type`` imports (for annotations) may name a later module of the importer's own layer;
  one that names a higher layer needs an ``UPWARD`` entry too (the cold paths' return
  types).
- Every module is in ``LAYERS`` exactly once, and every entry of ``LAYERS`` is a module:
  a new module is placed deliberately, where its imports say it belongs.

Each layer subpackage is one inner list of ``LAYERS``; the public modules at the top are
placed in the layer their imports give them.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ._imports import FUNCTION, TOP, TYPE, Import, check, find_cycle, package_imports, top_graph

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS: list[list[str]] = [
    # L0, the runtime: bindings and versions, enums, the call guard, the errors, the freed
    # addresses, the mirror.
    [
        "_runtime",
        "_runtime._hooks",
        "_runtime._enums",
        "_runtime._guard",
        "errors",
        "_runtime._entry",
        "_runtime._bindings",
        "_runtime._freed",
        "_runtime._gates",
        "_runtime._mirror",
        "_runtime._calls",
        "_runtime._init",
    ],
    # L1, lifetimes: the owning handle, pins, argument checks and the protocol bases,
    # capture sessions, host functions, the checked mirror, the current context.
    [
        "_lifetime",
        "_lifetime._release",
        "_lifetime._handle",
        "_lifetime._pins",
        "_lifetime._coerce",
        "_lifetime.capture",
        "_lifetime._hostfn",
        "driver",
        "_lifetime._current",
    ],
    # L2, contexts: devices, contexts, green contexts, what travels between processes.
    ["_context", "_context.device", "_context._share", "_context.green"],
    # L3, work: memory operations, the await machinery, events, streams.
    ["_work", "_work._core", "_work.memops", "_work._wakeup", "aio", "_work.event", "_work.stream"],
    # L4, memory: buffers, pools, virtual memory, copies, DLPack, tensor maps.
    [
        "_memory",
        "_memory.accounting",
        "_memory._default_resource",
        "_memory._copy",
        "_memory._ordered",
        "_memory._core",
        "_memory._dlpack_core",
        "_memory._dlpack",
        "_memory.strided",
        "_memory.memory",
        "_memory.managed",
        "_memory.pinned",
        "_memory.registered",
        "_memory.resource",
        "_memory.pool",
        "_memory._vmm",
        "_memory.vmm",
        "_memory.copies",
        "_memory.tensormap",
        "_memory.arrays",
        "_memory.texture",
    ],
    # L5, launches: argument packing, configuration, launch plans, kernels, compiling,
    # linking, modules.
    [
        "_launch",
        "_launch._packing",
        "_launch.launch",
        "_launch._core",
        "_launch.plan",
        "_launch.kernel",
        "_launch._compile_cache",
        "_launch.program",
        "_launch.linker",
        "_launch.module",
        "_launch.library",
    ],
    # L6, graphs: nodes, graphs (built or captured) and executable graphs.
    ["_graph", "_graph._core", "_graph.graphnode", "_graph.graph"],
    # L7, observing: what the layers below recorded, drawn (a memory snapshot's picture).
    [
        "_observe",
        "_observe.memory_picture",
        "_observe.system",
        "_observe.timing",
        "_observe.sync_debug",
        "_observe.nvtx",
    ],
    # The public face: process-level modules, the drop-in mirrors, the package, the CLI.
    [
        "checkpoint",
        "nccl",
        "compat.driver",
        "compat.nvrtc",
        "compat.runtime",
        "compat",  # after its members: it imports compat.driver
        "__init__",
        "_selftest",
        "__main__",
    ],
]

_CAPTURE = "Stream's capture methods return a Graph (a cold path)"

# (importer, imported): why a function of the importer imports a module after it. A
# subpackage's own __init__, which such an import runs first, needs no entry.
UPWARD: dict[tuple[str, str], str] = {
    ("_work.stream", "_graph.graph"): _CAPTURE,
    ("_context.green", "_work.stream"): "GreenContext.create_stream returns a Stream",
}


def test_package_imports_follow_the_layer_table() -> None:
    violations = check(SRC, "cudriver", LAYERS, UPWARD)
    assert violations == [], "\n".join(violations)


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return package_imports(SRC, "cudriver")[1]


def test_package_top_level_imports_form_no_cycle(imports: list[Import]) -> None:
    cycle = find_cycle(top_graph(imports))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_the_reader_sees_every_kind_in_the_package(imports: list[Import]) -> None:
    # The checks above are only as good as the reader: it must find the imports inside
    # functions, the cimports, the annotation-only ones and the compat subpackage's.
    found = {(i.importer, i.imported, i.kind) for i in imports}
    assert ("_work.stream", "_graph.graph", FUNCTION) in found  # a capture method's
    assert ("_work._core", "_lifetime._release", TOP) in found  # a cimport
    assert ("_launch.kernel", "_launch.module", TYPE) in found
    assert ("compat", "compat.driver", TOP) in found
    assert ("compat.driver", "_runtime._mirror", TOP) in found


# -- the checker, on small packages written for each test ----------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (name: source) as package ``pkg`` under ``tmp_path``; returns that."""
    for name, text in {"__init__.py": "", **files}.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


def _check(
    tmp_path: Path,
    files: dict[str, str],
    order: list[str],
    allowed: dict[tuple[str, str], str] | None = None,
) -> list[str]:
    """The violations of ``files``, with the modules of ``order`` (then __init__) one layer."""
    return check(_package(tmp_path, files), "pkg", [[*order, "__init__"]], allowed or {})


def test_a_package_that_follows_the_rule_passes(tmp_path: Path) -> None:
    files = {
        "a.py": "X = 1\n",
        "b.py": "from . import a\nfrom .a import X\nimport pkg.a\n",
        "c.pyx": "from pkg cimport a\nfrom pkg.b import X\n",
    }
    assert _check(tmp_path, files, ["a", "b", "c"]) == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param({"a.py": "from . import b\n"}, "a imports b (top)", id="relative"),
        pytest.param({"a.py": "from .b import X\n"}, "a imports b (top)", id="from-module"),
        pytest.param({"a.py": "import pkg.b\n"}, "a imports b (top)", id="absolute"),
        pytest.param({"a.py": "from pkg import b\n"}, "a imports b (top)", id="absolute-from"),
        pytest.param(
            {"a.py": "class A:\n    from . import b\n"}, "a imports b (top)", id="class-body"
        ),
        pytest.param(
            {"a.py": "try:\n    from . import b\nexcept ImportError:\n    pass\n"},
            "a imports b (top)",
            id="try",
        ),
        pytest.param(
            {
                "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\n"
                "else:\n    from . import b\n"
            },
            "a imports b (top)",
            id="type-checking-else",
        ),
        pytest.param({"a.pyx": "from pkg.b cimport X\n"}, "a imports b (top)", id="cimport"),
        pytest.param({"a.pyx": "cimport pkg.b\n"}, "a imports b (top)", id="cimport-module"),
        pytest.param(
            {"a.pyx": "def f():\n    from pkg cimport b\n"},
            "a imports b (top)",
            id="cimport-in-def",
        ),
        pytest.param(
            {"a.pyx": "from pkg import (\n    c,\n    b,\n)\n"},
            "a.pyx:1: a imports b (top)",
            id="pyx-parenthesised",
        ),
    ],
)
def test_an_upward_top_level_import_is_caught(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    violations = _check(tmp_path, {"b.py": "", "c.py": "", **files}, ["a", "b", "c"])
    assert any(expected in v and "b is not before a" in v for v in violations), violations


@pytest.mark.parametrize(
    "source",
    [
        pytest.param({"a.py": "def f():\n    from . import b\n"}, id="def"),
        pytest.param(
            {"a.py": "class A:\n    async def f(self):\n        import pkg.b\n"}, id="async-method"
        ),
        pytest.param({"a.pyx": "def f():\n    from pkg import b\n"}, id="pyx-def"),
        pytest.param(
            {
                "a.pyx": "cdef inline int f(int x) except -1:\n"
                "    if x:\n        from pkg import b\n"
            },
            id="pyx-cdef",
        ),
        pytest.param({"a.pyx": "cpdef f():\n    import pkg.b as m\n"}, id="pyx-cpdef"),
    ],
)
def test_an_upward_function_import_needs_the_allow_list(
    tmp_path: Path, source: dict[str, str]
) -> None:
    files = {"b.py": "", **source}
    violations = _check(tmp_path, files, ["a", "b"])
    assert len(violations) == 1 and "a imports b (function)" in violations[0], violations
    assert "not in the allow-list" in violations[0]
    assert _check(tmp_path, files, ["a", "b"], {("a", "b"): "why"}) == []


def test_a_stale_allow_list_entry_is_caught(tmp_path: Path) -> None:
    files = {"a.py": "", "b.py": "def f():\n    from . import a\n"}  # downward: no entry needed
    violations = _check(tmp_path, files, ["a", "b"], {("a", "b"): "why", ("b", "a"): "why"})
    assert len(violations) == 2, violations
    assert all("stale allow-list entry" in v for v in violations)


def test_a_cycle_is_caught(tmp_path: Path) -> None:
    files = {"a.py": "from . import b\n", "b.py": "from . import c\n", "c.py": "from . import a\n"}
    violations = _check(tmp_path, files, ["a", "b", "c"])
    assert "import cycle: a -> b -> c -> a" in violations
    _, imports = package_imports(tmp_path, "pkg")
    assert find_cycle(top_graph(imports)) == ["a", "b", "c", "a"]


def test_type_checking_imports_reach_a_higher_layer_only_when_allowed(tmp_path: Path) -> None:
    files = {
        "low.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .high import H\n",
        "high.py": "class H:\n    pass\n",
    }
    table = [["low"], ["high", "__init__"]]
    root = _package(tmp_path, files)
    assert any("upward" in v for v in check(root, "pkg", table, {}))
    assert check(root, "pkg", table, {("low", "high"): "a cold path's return type"}) == []


def test_type_checking_imports_may_point_anywhere_in_their_layer(tmp_path: Path) -> None:
    files = {
        "a.py": "from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
        "import typing\nif TYPE_CHECKING:\n    from .b import B\nif typing.TYPE_CHECKING:\n"
        "    from . import b\n\ndef f() -> B:\n    ...\n",
        "b.py": "from . import a\nclass B:\n    pass\n",
        "c.pyx": "if TYPE_CHECKING:\n    from pkg import d\n",
        "d.py": "",
    }
    assert _check(tmp_path, files, ["a", "b", "c", "d"]) == []
    _, imports = package_imports(tmp_path, "pkg")
    assert {(i.importer, i.imported, i.kind) for i in imports} == {
        ("a", "b", TYPE),
        ("b", "a", TOP),
        ("c", "d", TYPE),
    }


def test_imports_in_strings_and_comments_are_ignored(tmp_path: Path) -> None:
    files = {
        "a.py": '"""Use it so::\n\n    from pkg import b\n"""\n# from . import b\n'
        'X = "import pkg.b"\n',
        "c.pyx": '"""The core.\n\nfrom pkg cimport b\n"""\n'
        "cdef extern from *:\n"
        '    """\n    /* from pkg cimport b */\n    import pkg.b\n    """\n'
        "    int cudriver_flag\n"
        "def f():\n    '''from pkg import b'''\n    s = 'import pkg.b'  # from . import b\n",
        "b.py": "",
    }
    assert _check(tmp_path, files, ["a", "c", "b"]) == []


def test_the_table_must_hold_every_module_once(tmp_path: Path) -> None:
    files = {"a.py": "", "b.py": "", "c.pxd": ""}
    violations = _check(tmp_path, files, ["a", "a", "gone"])
    assert violations == [
        "a is in the table 2 times",
        "b is not in the table: place it in its layer",
        "c is not in the table: place it in its layer",
        "the table's gone is no module of the package",
    ]


def test_imports_resolve_in_subpackages(tmp_path: Path) -> None:
    files = {
        "a.py": "",
        "sub/__init__.py": "from . import x\n",
        "sub/x.py": "from .. import a\nfrom ..a import Y\nfrom . import y\n"
        "from pkg import __version__\n",
        "sub/y.py": "",
        "b.py": "from .sub import x\nfrom . import sub\n",
        "c.py": "from .sub.y import Z\n",
    }
    _, imports = package_imports(_package(tmp_path, files), "pkg")
    assert {(i.importer, i.imported) for i in imports} == {
        ("sub", "sub.x"),
        ("sub.x", "a"),
        ("sub.x", "sub.y"),  # sub's __init__ has run before any of its members
        ("b", "sub"),
        ("b", "sub.x"),
        ("c", "sub"),  # importing sub.y runs sub's __init__ first
        ("c", "sub.y"),
    }
    order = ["a", "sub.y", "sub.x", "sub", "b", "c"]
    assert check(tmp_path, "pkg", [order[:4], [*order[4:], "__init__"]], {}) == []


def test_an_import_of_a_missing_module_is_caught(tmp_path: Path) -> None:
    files = {
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._gone import X\n"
    }
    assert _check(tmp_path, files, ["a"]) == ["a.py:3: a imports _gone (type): no such module"]
