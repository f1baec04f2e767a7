"""The ``python`` code blocks of the Markdown docs run, so that a stale example fails.

Which blocks run, and where, is said in the Markdown itself, by MyST comment lines
(lines starting with ``%``, which do not render):

``% doc-test: cpu``, ``% doc-test: gpu``, ``% doc-test: skip REASON``
    On the line just before a block's opening fence: the block needs no GPU (``cpu``),
    needs a driver and a device (``gpu``), or is not run at all (``skip``; the reason is
    required and is shown by ``test_skipped_blocks_say_why``). Keep skips rare.
``% doc-test-page: cpu`` or ``% doc-test-page: gpu``
    Anywhere on a page: the kind of the page's blocks that have no directive of their
    own. Without it, such blocks are ``cpu``, so a GPU block left unmarked fails where
    there is no driver instead of going unnoticed. README.md, which GitHub renders (a
    ``%`` line would show there), takes its default from ``PAGE_DEFAULTS`` below.
``needs=NAME,...`` after ``cpu`` or ``gpu``
    The block needs modules that are not dependencies of cudriver (``torch``,
    ``cupy``), or ``nvrtc`` (NVRTC's library).
``script`` after ``cpu`` or ``gpu``
    The block is a whole program, run alone from a file as ``__main__``: what a block
    that starts processes needs (``multiprocessing``'s ``spawn`` children import the
    main script by its file name). Its run is ``+script@LINE``.

Only fenced blocks whose info string is exactly ``python`` are read (``console``,
``text``, ``c++``... are not run). A ``doc-test`` line that is malformed, has an unknown
kind or option, or is not just before a ``python`` fence is an error
(``test_every_directive_is_known``).

How a page runs: its blocks run in order, in one namespace (later blocks use the names
that earlier ones define), in a child process, one per page and kind:

- the ``cpu`` run holds the page's ``cpu`` blocks and runs everywhere;
- the ``gpu`` run (``@pytest.mark.gpu``, so skipped with the reason where no GPU is
  usable, and needing NVRTC as the examples do) holds its ``cpu`` and ``gpu`` blocks;
- a block with ``needs=`` is left out of those runs; for each set of needs that its
  blocks have, the page gets one more run of that kind holding the blocks whose needs
  the set covers, skipped with the reason when something in it is missing. So a block
  with ``needs=`` must define nothing that the blocks without them use.

A child process rather than ``exec`` in the test process, for both kinds: cudriver
keeps module-level state (contexts, streams, the releasing thread, the call guard), and
each page must start from none, as a reader's script does; a crash or a hang on a GPU
page must fail that page's test, not end the test run. The child runs with
``-X faulthandler`` (a crash prints every thread's stack), dumps the stacks and exits
shortly before ``TIMEOUT_S``, has this interpreter, this environment and the tested
cudriver (the installed package, or ``src`` built in place) first on ``PYTHONPATH``,
turns warnings into errors as the test suite does, and works in a fresh temporary
directory rather than the repository's root, so that the files an example writes
(``Path("kernels.cubin")``) land there; nothing on the pages reads a repository file
by a relative path. A failing block is reported with its page, the line of its
opening fence and the traceback, whose lines are the page's own.

Run the GPU blocks on a machine with a GPU:
``PYTHONPATH=src python -m pytest -q -p no:cacheprovider -m gpu tests/test_docs.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ._support import needs_nvrtc, nvrtc_missing_reason, package_root

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TIMEOUT_S = 120
# The python blocks of docs/*.md and README.md when the runner was written: the parser
# must find at least these, so that a broken parser cannot pass by finding nothing.
MIN_BLOCKS = 70

KINDS = ("cpu", "gpu")
# The default kind of pages that cannot carry a doc-test-page line.
PAGE_DEFAULTS = {"README.md": "gpu"}
_DIRECTIVE = re.compile(r"^%\s*doc-test(?P<page>-page)?\s*:\s*(?P<rest>.*?)\s*$")
_MENTION = re.compile(r"^%\s*doc[-_ ]?test", re.IGNORECASE)
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


class DocTestSyntaxError(ValueError):
    """A malformed ``doc-test`` directive, or a fence that is never closed."""


@dataclass(frozen=True)
class Block:
    """One ``python`` block: where it is, what it needs and its source."""

    page: str  # the page's path relative to the repository, e.g. "docs/memory.md"
    line: int  # 1-based line of the opening fence
    kind: str  # "cpu", "gpu" or "skip"
    needs: frozenset[str]
    reason: str  # why a "skip" block is not run; "" otherwise
    source: str


def _parse_directive(rest: str, where: str, *, page: bool) -> tuple[str, frozenset[str], str]:
    words = rest.split(None, 1)
    kind = words[0] if words else ""
    tail = words[1] if len(words) > 1 else ""
    if kind == "skip" and not page:
        if not tail:
            raise DocTestSyntaxError(f"{where}: 'doc-test: skip' needs a reason")
        return "skip", frozenset(), tail
    allowed = KINDS if page else (*KINDS, "skip")
    if kind not in KINDS:
        raise DocTestSyntaxError(
            f"{where}: unknown doc-test kind {kind!r}; expected one of {', '.join(allowed)}"
        )
    needs: set[str] = set()
    for option in tail.split():
        if option == "script" and not page:
            needs.add(SCRIPT)
            continue
        name, eq, value = option.partition("=")
        names = [v for v in value.split(",") if v]
        if name != "needs" or not eq or not names:
            raise DocTestSyntaxError(
                f"{where}: unknown doc-test option {option!r}; expected needs=NAME,... or script"
            )
        needs.update(names)
    return kind, frozenset(needs), ""


def parse(text: str, page: str) -> list[Block]:
    """The ``python`` blocks of one Markdown page, in order.

    Raises
    ------
    DocTestSyntaxError
        An unknown or malformed directive, a second page directive, a block directive
        that is not just before a ``python`` fence, or a fence never closed.
    """
    lines = text.splitlines()
    default: tuple[str, frozenset[str], str] | None = None
    pending: tuple[int, tuple[str, frozenset[str], str]] | None = None
    raw: list[tuple[int, tuple[str, frozenset[str], str] | None, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        where = f"{page}:{i + 1}"
        fence = _FENCE.match(line)
        if fence:
            marker = fence["fence"]
            info = fence["info"].strip()
            end = i + 1
            close = re.compile(rf"^ {{0,3}}{marker[0]}{{{len(marker)},}}\s*$")
            while end < len(lines) and not close.match(lines[end]):
                end += 1
            if end == len(lines):
                raise DocTestSyntaxError(f"{where}: the fence opened here is never closed")
            if pending is not None and (pending[0] != i - 1 or info != "python"):
                raise DocTestSyntaxError(
                    f"{page}:{pending[0] + 1}: a doc-test directive must be on the line "
                    "just before a ```python fence"
                )
            if info == "python":
                body = [s[len(fence["indent"]) :] for s in lines[i + 1 : end]]
                raw.append((i + 1, pending[1] if pending else None, "\n".join(body) + "\n"))
            pending = None
            i = end + 1
            continue
        if pending is not None:
            raise DocTestSyntaxError(
                f"{page}:{pending[0] + 1}: a doc-test directive must be on the line just "
                "before a ```python fence"
            )
        directive = _DIRECTIVE.match(line)
        if directive:
            parsed = _parse_directive(directive["rest"], where, page=bool(directive["page"]))
            if directive["page"]:
                if default is not None:
                    raise DocTestSyntaxError(f"{where}: a second doc-test-page directive")
                default = parsed
            else:
                pending = (i, parsed)
        elif _MENTION.match(line):
            raise DocTestSyntaxError(f"{where}: malformed doc-test directive {line!r}")
        i += 1
    if pending is not None:
        raise DocTestSyntaxError(
            f"{page}:{pending[0] + 1}: a doc-test directive must be on the line just before "
            "a ```python fence"
        )
    if default is None:
        default = (PAGE_DEFAULTS.get(page, "cpu"), frozenset(), "")
    blocks = []
    for line_no, directive, source in raw:
        kind, needs, reason = directive or default
        blocks.append(Block(page, line_no, kind, needs, reason, source))
    return blocks


def pages() -> list[Path]:
    return [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]


def page_name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def parse_page(path: Path) -> list[Block]:
    return parse(path.read_text(encoding="utf-8"), page_name(path))


# -- runs -------------------------------------------------------------------------------


def in_run(block: Block, kind: str) -> bool:
    """Whether ``block`` runs in the ``kind`` runs of its page (needs aside)."""
    return block.kind == "cpu" or (kind == "gpu" and block.kind == "gpu")


#: The need that marks a ``script`` block (run alone, from a file).
SCRIPT = "@script"


def extra_needs(block: Block, kind: str) -> frozenset[str]:
    # A gpu run needs NVRTC in any case (its test carries needs_nvrtc).
    return block.needs - {"nvrtc"} if kind == "gpu" else block.needs


def runs(blocks: list[Block], kind: str) -> dict[str, tuple[frozenset[str], list[Block]]]:
    """The ``kind`` runs of one page: a suffix for the test id -> (needs, blocks).

    One run per set of needs that a block of the page has (none: the base run), each
    with the blocks whose needs it covers.
    """
    members = [b for b in blocks if in_run(b, kind)]
    scripts = [b for b in members if SCRIPT in b.needs]
    members = [b for b in members if SCRIPT not in b.needs]
    sets = sorted({extra_needs(b, kind) for b in members}, key=lambda n: (len(n), sorted(n)))
    out: dict[str, tuple[frozenset[str], list[Block]]] = {}
    for needs in sets:
        suffix = "+" + ",".join(sorted(needs)) if needs else ""
        out[suffix] = (needs, [b for b in members if extra_needs(b, kind) <= needs])
    for b in scripts:
        out[f"+script@{b.line}"] = (extra_needs(b, kind) - {SCRIPT}, [b])
    return out


def missing(needs: frozenset[str]) -> list[str]:
    """The names in ``needs`` that this machine lacks."""
    out = []
    for name in sorted(needs):
        if name == "nvrtc":
            if nvrtc_missing_reason() is not None:
                out.append(name)
        elif importlib.util.find_spec(name) is None:
            out.append(name)
    return out


# The child: runs the blocks of one page in one namespace; exits 1 with the page, the
# block's line and the traceback when one raises, and after a dump of every thread's
# stack (faulthandler) when it runs past its time.
CHILD = r"""
import faulthandler, gc, importlib, json, linecache, sys, traceback, warnings

spec = json.loads(open(sys.argv[1], encoding="utf-8").read())
faulthandler.dump_traceback_later(spec["timeout"], exit=True)
page = spec["page"]
lines = spec["text"].splitlines(True)
linecache.cache[page] = (len(spec["text"]), None, lines, page)
warnings.simplefilter("error")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # some libraries warn on import (as in _support)
    for name in spec["imports"]:
        importlib.import_module(name)
unraisable = []
sys.unraisablehook = unraisable.append
namespace = {"__name__": "__main__"}
for block in spec["blocks"]:
    code = "\n" * block["line"] + block["source"]  # the page's own line numbers
    try:
        exec(compile(code, page, "exec"), namespace)
        gc.collect()
    except BaseException:
        print(f"{page}:{block['line']}: the python block at line {block['line']} failed",
              file=sys.stderr)
        kind, exc, tb = sys.exc_info()
        traceback.print_exception(kind, exc, tb.tb_next)  # from the block's own frame
        sys.stderr.flush()
        sys.exit(1)
    if unraisable:
        u = unraisable[0]
        print(f"{page}:{block['line']}: unraisable exception after the python block at "
              f"line {block['line']}: {u.err_msg or ''} {u.object!r}", file=sys.stderr)
        traceback.print_exception(u.exc_type, u.exc_value, u.exc_traceback)
        sys.exit(1)
print(f"{page}: {len(spec['blocks'])} blocks ran")
"""


def run_blocks(
    page: str, text: str, blocks: list[Block], workdir: Path, timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run ``blocks`` of ``page`` (whose Markdown is ``text``) in a child process."""
    spec = {
        "page": page,
        "text": text,
        "timeout": max(timeout - 5, 1),
        "imports": sorted({n for b in blocks for n in b.needs} - {"nvrtc"}),
        "blocks": [{"line": b.line, "source": b.source} for b in blocks],
    }
    run_dir = workdir / "cwd"
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path = workdir / "doc-test-spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    cmd = [sys.executable, "-X", "faulthandler", "-c", CHILD, str(spec_path)]
    return run_child(cmd, run_dir, page, timeout)


def run_child(
    cmd: list[str], run_dir: Path, where: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in ``run_dir`` with the tested cudriver first on ``PYTHONPATH``.

    Fails the test, with what the child printed, when it runs past ``timeout``.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root(), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    env["PYTHONUNBUFFERED"] = "1"
    try:
        return subprocess.run(
            cmd, cwd=run_dir, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        pytest.fail(f"{where} ran past {timeout} s\n--- stdout\n{out}\n--- stderr\n{err}")


# The first line of a script block's file (the block keeps its page's line numbers).
SCRIPT_HEAD = (
    "import faulthandler, warnings; faulthandler.dump_traceback_later({timeout}, exit=True); "
    "warnings.simplefilter('error')"
)


def run_script(
    page: str, block: Block, workdir: Path, timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run a ``script`` block alone, from a file, as ``__main__``."""
    run_dir = workdir / "cwd"
    run_dir.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"\W", "_", page.rsplit(".", 1)[0])
    script = run_dir / f"{stem}_{block.line}.py"
    head = SCRIPT_HEAD.format(timeout=max(timeout - 5, 1))
    script.write_text(head + "\n" * block.line + block.source, encoding="utf-8")
    cmd = [sys.executable, "-X", "faulthandler", script.name]
    return run_child(cmd, run_dir, f"{page}:{block.line}", timeout)


def check_page(path: Path, kind: str, suffix: str, tmp_path: Path) -> None:
    name = page_name(path)
    text = path.read_text(encoding="utf-8")
    all_runs = runs(parse(text, name), kind)
    assert suffix in all_runs, f"{name} has no {kind} run {suffix!r} any more"
    needs, blocks = all_runs[suffix]
    lacking = missing(needs)
    if lacking:
        pytest.skip(f"{name}: its {kind} blocks need {', '.join(lacking)}, not installed here")
    if suffix.startswith("+script@"):
        r = run_script(name, blocks[0], tmp_path)
    else:
        r = run_blocks(name, text, blocks, tmp_path)
    assert r.returncode == 0, (
        f"{name}: the {kind} run exited with status {r.returncode}\n"
        f"--- stderr\n{r.stderr}\n--- stdout\n{r.stdout}"
    )


def run_params(kind: str) -> list[object]:
    """One pytest parameter per run of ``kind``: (path, suffix), id "page[+needs,...]"."""
    params: list[object] = []
    for path in pages():
        try:
            suffixes = list(runs(parse_page(path), kind))
        except DocTestSyntaxError:
            suffixes = [""]  # the test then fails with the parser's message
        params += [pytest.param(path, s, id=page_name(path) + s) for s in suffixes]
    return params


# -- the tests --------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "suffix"), run_params("cpu"))
def test_cpu_blocks(path: Path, suffix: str, tmp_path: Path) -> None:
    check_page(path, "cpu", suffix, tmp_path)


@pytest.mark.gpu
@needs_nvrtc
@pytest.mark.parametrize(("path", "suffix"), run_params("gpu"))
def test_gpu_blocks(path: Path, suffix: str, tmp_path: Path) -> None:
    check_page(path, "gpu", suffix, tmp_path)


def test_every_directive_is_known() -> None:
    errors = []
    for path in pages():
        try:
            parse_page(path)
        except DocTestSyntaxError as exc:
            errors.append(str(exc))
    assert not errors, "\n".join(errors)


def test_the_parser_finds_every_block() -> None:
    blocks = [b for path in pages() for b in parse_page(path)]
    assert len(blocks) >= MIN_BLOCKS, f"found only {len(blocks)} python blocks"
    fences = sum(
        1
        for path in pages()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() == "```python"
    )
    assert len(blocks) == fences
    assert {b.kind for b in blocks} <= {"cpu", "gpu", "skip"}
    assert any(b.kind == "cpu" for b in blocks)
    assert any(b.kind == "gpu" for b in blocks)


def test_every_block_compiles() -> None:
    """Every block, GPU and skipped ones included, is valid Python (checked in CI)."""
    for path in pages():
        for b in parse_page(path):
            compile("\n" * b.line + b.source, b.page, "exec")


def laid_out(text: str, blocks: list[Block]) -> str:
    """``blocks`` as one Python source, each on the lines it has on its page."""
    lines = [""] * (len(text.splitlines()) + 1)
    for b in blocks:
        for i, line in enumerate(b.source.splitlines()):
            lines[b.line + i] = line
    return "\n".join(lines) + "\n"


def test_gpu_blocks_use_only_names_defined_before_them(tmp_path: Path) -> None:
    """What CI can check of the GPU runs without a GPU: no undefined name (ruff's F821)."""
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed")
    files = {}
    for path in pages():
        text = path.read_text(encoding="utf-8")
        for suffix, (_needs, blocks) in runs(parse_page(path), "gpu").items():
            name = page_name(path) + suffix
            f = tmp_path / f"run{len(files)}.py"
            f.write_text(laid_out(text, blocks), encoding="utf-8")
            files[f.name] = name
    if not files:
        pytest.skip("no gpu blocks")
    cmd = [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select"]
    cmd += ["F821", "--output-format", "concise", *sorted(files)]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S)
    found = re.findall(r"^(run\d+\.py):(\d+):\d+: (.*)$", r.stdout, re.M)
    assert not found, "\n".join(f"{files[f]}:{line}: {msg}" for f, line, msg in found)
    assert r.returncode == 0, r.stdout + r.stderr


def test_skipped_blocks_say_why() -> None:
    skipped = [b for path in pages() for b in parse_page(path) if b.kind == "skip"]
    for b in skipped:
        assert b.reason.strip(), f"{b.page}:{b.line}"
    print("\n".join(f"{b.page}:{b.line}: skipped: {b.reason}" for b in skipped))


# -- the runner's own tests -------------------------------------------------------------

SAMPLE = """\
# A page

% doc-test-page: gpu

```python
x = 1
```

Text, and a block of another language:

```console
$ not python
```

% doc-test: cpu
```python
import math
y = math.sqrt(4)
```

% doc-test: skip needs two GPUs
```python
two_gpus()
```

% doc-test: cpu needs=nvrtc,numpy
```python
z = 3
```
"""


def test_missing_needs_are_named() -> None:
    assert missing(frozenset({"json", "no_such_module_for_doc_tests"})) == [
        "no_such_module_for_doc_tests"
    ]


def test_the_parser_reads_directives() -> None:
    blocks = parse(SAMPLE, "sample.md")
    assert [(b.line, b.kind) for b in blocks] == [
        (5, "gpu"),
        (16, "cpu"),
        (22, "skip"),
        (27, "cpu"),
    ]
    assert blocks[0].source == "x = 1\n"
    assert blocks[2].reason == "needs two GPUs"
    assert blocks[3].needs == {"nvrtc", "numpy"}
    assert list(runs(blocks, "cpu")) == ["", "+numpy,nvrtc"]
    assert [b.line for b in runs(blocks, "cpu")["+numpy,nvrtc"][1]] == [16, 27]
    assert list(runs(blocks, "gpu")) == ["", "+numpy"]  # a gpu run has nvrtc
    assert [b.line for b in runs(blocks, "gpu")[""][1]] == [5, 16]
    assert [b.line for b in runs(blocks, "gpu")["+numpy"][1]] == [5, 16, 27]


BAD = {
    "unknown-kind": ("% doc-test: gpus\n```python\nx\n```\n", "unknown doc-test kind 'gpus'"),
    "skip-without-reason": ("% doc-test: skip\n```python\nx\n```\n", "needs a reason"),
    "unknown-option": ("% doc-test: cpu fast\n```python\nx\n```\n", "unknown doc-test option"),
    "blank-line-between": ("% doc-test: cpu\n\n```python\nx\n```\n", "just before a ```python"),
    "not-python": ("% doc-test: cpu\n```console\nx\n```\n", "just before a ```python"),
    "at-the-end": ("text\n% doc-test: cpu\n", "just before a ```python"),
    "page-skip": ("% doc-test-page: skip why\n", "unknown doc-test kind 'skip'"),
    "two-page-lines": ("% doc-test-page: gpu\n% doc-test-page: cpu\n", "a second doc-test-page"),
    "misspelt": ("% doctest: gpu\n", "malformed doc-test directive"),
    "unclosed-fence": ("```python\nx = 1\n", "never closed"),
}


@pytest.mark.parametrize(("text", "message"), list(BAD.values()), ids=list(BAD))
def test_the_parser_refuses(text: str, message: str) -> None:
    with pytest.raises(DocTestSyntaxError, match=re.escape(message)):
        parse(text, "bad.md")


def test_a_failing_block_names_its_page_and_line(tmp_path: Path) -> None:
    text = (
        "# Page\n\n```python\nvalue = 41\n```\n\n```python\nvalue += 1\nassert value == 43\n```\n"
    )
    blocks = parse(text, "docs/sample.md")
    r = run_blocks("docs/sample.md", text, blocks, tmp_path)
    assert r.returncode == 1, r.stderr
    assert "docs/sample.md:7: the python block at line 7 failed" in r.stderr
    assert 'File "docs/sample.md", line 9' in r.stderr  # the page's own line number
    assert "assert value == 43" in r.stderr  # the source line, in the traceback
    assert "AssertionError" in r.stderr


def test_blocks_share_a_namespace_and_a_scratch_directory(tmp_path: Path) -> None:
    text = (
        "```python\nfrom pathlib import Path\nPath('out.txt').write_text('hi')\n```\n"
        "```python\nassert Path('out.txt').read_text() == 'hi'\n```\n"
    )
    r = run_blocks("docs/sample.md", text, parse(text, "docs/sample.md"), tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "cwd" / "out.txt").read_text() == "hi"


def test_warnings_and_hangs_fail(tmp_path: Path) -> None:
    warn = "```python\nimport warnings\nwarnings.warn('stale')\n```\n"
    r = run_blocks("docs/w.md", warn, parse(warn, "docs/w.md"), tmp_path / "w")
    assert r.returncode == 1
    assert "UserWarning: stale" in r.stderr
    hang = "```python\nimport time\ntime.sleep(60)\n```\n"
    r = run_blocks("docs/h.md", hang, parse(hang, "docs/h.md"), tmp_path / "h", timeout=7)
    assert r.returncode != 0
    assert "Timeout" in r.stderr
    assert 'File "docs/h.md", line 3' in r.stderr
