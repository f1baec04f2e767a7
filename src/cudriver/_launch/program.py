"""Compile CUDA C++ to PTX or a cubin at run time with NVRTC (an optional dependency).

NVRTC's library comes from the NVRTC wheel of the CUDA major in use (cudriver's
``cu13`` extra, alias ``nvrtc``, brings ``nvidia-cuda-nvrtc`` 13.x; its ``cu12`` extra
``nvidia-cuda-nvrtc-cu12``) or a CUDA toolkit; ``cuda.bindings.nvrtc`` finds it on first
use. Without it, :func:`compile` and :func:`nvrtc_version` raise
:class:`NvrtcNotFoundError`, an ``ImportError``: it is a missing optional dependency,
reported when first needed rather than at import.

PTX needs a driver at least as new as the NVRTC that made it: a CUDA 12 driver cannot
load PTX from NVRTC 13 (nor a 12.4 driver PTX from NVRTC 12.9).
``_compatibility_note`` says so for a given NVRTC and driver (``python -m cudriver
info`` prints it), and :meth:`cudriver.Module.load` explains the load error.
"""

from __future__ import annotations

import re
import sys
import threading
import types
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

from .._context.device import current_or_default
from .._lifetime._coerce import bool_arg
from .._runtime import _bindings
from ..errors import CompileError
from . import _compile_cache

__all__ = ["compile", "nvrtc_version", "NvrtcNotFoundError", "arch_option", "CompiledCode"]


class CompiledCode(bytes):
    """What :func:`compile` returns: the code as ``bytes``, with what NVRTC said of it.

    Usable wherever bytes are (:meth:`cudriver.Module.load`,
    :meth:`cudriver.Library.load`, :func:`cudriver.link`, files, equality with bytes);
    ``bytes(code)`` drops the extra fields. It pickles as itself, fields included.

    Attributes
    ----------
    lowered_names
        Each name expression given to :func:`compile` (``"axpy<float>"``) mapped to
        its lowered (mangled) name (``"_Z4axpyIfEvT_PKS0_PS0_i"``), read with
        ``nvrtcGetLoweredName``. A :class:`~cudriver.Module` or
        :class:`~cudriver.Library` loaded from this code finds kernels and globals by
        either name.
    log
        The compiler's log on success: its warnings and remarks (empty when it said
        nothing).
    target
        ``"ptx"``, ``"cubin"``, ``"ltoir"``, or ``"unknown"`` for code from elsewhere.
    """

    lowered_names: Mapping[str, str]
    log: str
    target: str

    @classmethod
    def _make(
        cls, code: bytes, target: str, lowered_names: Mapping[str, str] | None = None, log: str = ""
    ) -> CompiledCode:
        self = cls(code)
        self.lowered_names = types.MappingProxyType(dict(lowered_names or {}))
        self.log = log
        self.target = target
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (bytes(self), self.target, dict(self.lowered_names), self.log))

    def __repr__(self) -> str:
        names = f" lowered_names={dict(self.lowered_names)!r}" if self.lowered_names else ""
        return f"<cudriver.CompiledCode {self.target}, {len(self)} bytes{names}>"


def _rebuild(code: bytes, target: str, lowered: dict[str, str], log: str) -> CompiledCode:
    return CompiledCode._make(code, target, lowered, log)


class NvrtcNotFoundError(ImportError):
    """NVRTC's library (``libnvrtc``) could not be loaded; the message says what to install."""

    def __init__(self, detail: str = "") -> None:
        msg = (
            "NVRTC (the CUDA runtime compiler library, libnvrtc) could not be loaded: "
            "install the NVRTC wheel of the driver's CUDA major: in a clone of cudriver, "
            '`pip install ".[cu13]"` (the extra cudriver[nvrtc] is its alias) brings the '
            'nvidia-cuda-nvrtc package, and `pip install ".[cu12]"`, for a CUDA 12 '
            "driver, nvidia-cuda-nvrtc-cu12; or put a CUDA toolkit's libnvrtc on the "
            "library path"
        )
        if detail:
            msg = f"{msg} ({detail})"
        super().__init__(msg, name="cuda.bindings.nvrtc")
        self.detail = detail

    def __reduce__(self) -> tuple[Any, ...]:
        return (NvrtcNotFoundError, (self.detail,))


_lock = threading.Lock()
_nvrtc_mod: Any = None
_version: tuple[int, int] | None = None


def _is_missing_library(exc: BaseException) -> bool:
    return type(exc).__name__ == "DynamicLibNotFoundError" or (
        isinstance(exc, (OSError, RuntimeError)) and "nvrtc" in str(exc).lower()
    )


def _nvrtc() -> Any:
    """The ``cuda.bindings.nvrtc`` module, with its library loaded (once)."""
    global _nvrtc_mod, _version
    mod = _nvrtc_mod
    if mod is not None:
        return mod
    with _lock:
        if _nvrtc_mod is not None:
            return _nvrtc_mod
        try:
            from cuda.bindings import nvrtc
        except ImportError as exc:
            raise NvrtcNotFoundError(f"cannot import cuda.bindings.nvrtc: {exc}") from None
        try:
            r = nvrtc.nvrtcVersion()
        except Exception as exc:
            if _is_missing_library(exc):
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise NvrtcNotFoundError(first) from None
            raise
        if r[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(f"nvrtcVersion failed: {_result_name(nvrtc, r[0])}")
        _version = (int(r[1]), int(r[2]))
        _nvrtc_mod = nvrtc
        return nvrtc


def nvrtc_version() -> tuple[int, int]:
    """The loaded NVRTC's version, e.g. ``(13, 0)`` (``nvrtcVersion``).

    PTX that NVRTC makes loads only on a driver at least this new
    (:func:`cudriver.driver_version`); a cubin is not held to that within one CUDA
    major (CUDA's minor version compatibility).

    Raises
    ------
    NvrtcNotFoundError
        NVRTC's library is not installed.
    """
    _nvrtc()
    assert _version is not None
    return _version


def _nvrtc_wheel(major: int) -> str:
    """The PyPI name of CUDA ``major``'s NVRTC wheel."""
    return "nvidia-cuda-nvrtc-cu12" if major == 12 else "nvidia-cuda-nvrtc"


def _compatibility_note(
    nvrtc: tuple[int, int], *, driver: tuple[int, int] | None, bindings_major: int
) -> str | None:
    """Why the PTX this NVRTC makes would not load, or None when nothing is wrong.

    ``driver`` is the driver's CUDA version (None when no driver is present): PTX
    loads only on a driver at least as new as the NVRTC that made it. Without a driver,
    an NVRTC of a newer major than the bindings' is reported: a driver of the bindings'
    major cannot load its PTX.
    """
    n = f"{nvrtc[0]}.{nvrtc[1]}"
    if driver is not None:
        if nvrtc <= driver:
            return None
        d = f"{driver[0]}.{driver[1]}"
        head = (
            f"NVRTC {n} is newer than the CUDA {d} driver, which cannot load the PTX it "
            "makes (CUDA_ERROR_UNSUPPORTED_PTX_VERSION)"
        )
        if nvrtc[0] != driver[0]:
            if driver[0] in (12, 13):
                fix = (
                    f"install CUDA {driver[0]}'s NVRTC instead (cudriver's cu{driver[0]} "
                    f'extra, `pip install ".[cu{driver[0]}]"`, after `pip uninstall '
                    f"{_nvrtc_wheel(nvrtc[0])}`), or update the driver"
                )
            else:
                fix = f"install an NVRTC of CUDA {driver[0]}, or update the driver"
        else:
            fix = (
                "compile to a cubin (target='cubin'), install an NVRTC no newer than the "
                f'driver (`pip install "{_nvrtc_wheel(driver[0])}=={d}.*"`), or update the '
                "driver"
            )
        return f"{head}: {fix}"
    if nvrtc[0] > bindings_major:
        return (
            f"NVRTC {n} beside cuda-bindings {bindings_major}.x: a CUDA {bindings_major} "
            f"driver cannot load the PTX it makes; for a CUDA {bindings_major} driver "
            f"install cudriver's cu{bindings_major} extra (`pip install "
            f'".[cu{bindings_major}]"`, after `pip uninstall {_nvrtc_wheel(nvrtc[0])}`)'
        )
    return None


def _result_name(nvrtc: Any, code: Any) -> str:
    try:
        return f"{nvrtc.nvrtcResult(int(code)).name} ({int(code)})"
    except ValueError:
        return f"NVRTC error {int(code)}"


_ARCH_RE = re.compile(r"^(?:(?:sm|compute|lto)_)?(\d{2,4})([af]?)$")
_DOTTED_RE = re.compile(r"^(\d+)\.(\d)$")


def _arch_number(arch: Any) -> str:
    """The architecture's number and suffix: ``"90"``, ``"90a"``, ``"100f"``."""
    cc = getattr(arch, "compute_capability", None)  # a Device
    if cc is not None:
        arch = cc
    if isinstance(arch, str):
        s = arch.strip().lower()
        m = _ARCH_RE.match(s)
        if m:
            return m.group(1) + m.group(2)
        d = _DOTTED_RE.match(s)
        if d:
            return f"{int(d.group(1))}{d.group(2)}"
        raise ValueError(
            f"unknown GPU architecture {arch!r}: pass e.g. 'sm_90', 'compute_90', 'sm_90a' "
            "or (9, 0)"
        )
    if isinstance(arch, tuple):
        major, minor = arch if len(arch) == 2 else (None, None)
        if (
            isinstance(major, int)
            and isinstance(minor, int)
            and not isinstance(major, bool)
            and not isinstance(minor, bool)
            and major >= 1
            and 0 <= minor <= 9
        ):
            return f"{major}{minor}"
        raise ValueError(f"a compute capability is (major >= 1, 0 <= minor <= 9), not {arch!r}")
    raise TypeError(
        "arch must be a str like 'sm_90', a (major, minor) tuple, a ComputeCapability or a "
        f"Device, not {type(arch).__name__}"
    )


def arch_option(arch: Any, target: str = "ptx") -> str:
    """The NVRTC option selecting ``arch`` for ``target``.

    A virtual architecture for PTX (``--gpu-architecture=compute_90``), a real one
    for a cubin (``--gpu-architecture=sm_90``), whichever prefix ``arch`` came with:
    it names only the GPU generation.
    """
    n = _arch_number(arch)
    prefix = "compute" if _target(target) == "ptx" else "sm"
    return f"--gpu-architecture={prefix}_{n}"


def _target(target: Any) -> str:
    if target not in ("ptx", "cubin", "ltoir"):
        raise ValueError(f"target must be 'ptx', 'cubin' or 'ltoir', not {target!r}")
    return str(target)


def _options(options: Iterable[str | bytes]) -> list[bytes]:
    if isinstance(options, (str, bytes)):
        raise TypeError(
            "options must be a sequence of strings (e.g. ['--use_fast_math']), not a single "
            f"{type(options).__name__}"
        )
    out: list[bytes] = []
    for o in options:
        if isinstance(o, str):
            out.append(o.encode())
        elif isinstance(o, bytes):
            out.append(o)
        else:
            raise TypeError(f"each option must be a str, not {type(o).__name__}: {o!r}")
    return out


def _has_arch(opts: list[bytes]) -> bool:
    return any(o.startswith((b"--gpu-architecture", b"-arch", b"--gpu-name")) for o in opts)


def _out_buffer(size: int) -> bytes:
    """A new bytes object for the bindings to fill in place (their documented idiom).

    ``bytes(n)`` always makes a fresh object for ``n >= 1``, unlike ``b" " * 1``, which
    returns the interpreter's shared one-byte constant.
    """
    return bytes(size)


def _log(nvrtc: Any, prog: Any) -> str:
    r = nvrtc.nvrtcGetProgramLogSize(prog)
    if r[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS or int(r[1]) <= 1:  # 1: just the NUL
        return ""
    buf = _out_buffer(int(r[1]))
    r2 = nvrtc.nvrtcGetProgramLog(prog, buf)
    if r2[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return ""
    return buf.rstrip(b"\0").decode(errors="replace").strip()


def compile(
    source: str | bytes,
    *,
    name: str = "kernel.cu",
    options: Iterable[str | bytes] = (),
    arch: Any = None,
    target: Literal["ptx", "cubin", "ltoir"] = "ptx",
    headers: Mapping[str, str | bytes] | None = None,
    cache: bool = True,
    relocatable: bool = False,
    name_expressions: Iterable[str] = (),
) -> CompiledCode:
    """Compile CUDA C++ ``source`` with NVRTC; return PTX text or a cubin as bytes.

    Calls ``nvrtcCreateProgram``, ``nvrtcAddNameExpression`` (once per name
    expression), ``nvrtcCompileProgram``, ``nvrtcGetProgramLog``,
    ``nvrtcGetLoweredName`` (per name expression), ``nvrtcGetPTX`` or
    ``nvrtcGetCUBIN``, and ``nvrtcDestroyProgram`` (always). Runs on the host only;
    the result goes to :meth:`cudriver.Module.load`. A result already in the compile
    cache (in memory, then on disk; see :func:`compile_cache_info`) is returned
    without running NVRTC.

    Parameters
    ----------
    source
        The CUDA C++ source. Declare kernels ``extern "C"`` to find them by name, or
        name them in ``name_expressions`` (templates, namespaces, overloads).
    name
        The program's file name, used in the compiler's messages.
    options
        NVRTC options, e.g. ``["--use_fast_math", "-lineinfo", "-I/path"]``.
    arch
        The GPU architecture: ``"sm_90"``, ``"compute_90"``, ``"sm_90a"``, ``(9, 0)``,
        a :class:`~cudriver.ComputeCapability` or a :class:`~cudriver.Device`. The
        target decides the prefix: ``compute_XX`` for PTX, ``sm_XX`` for a cubin.
        Default: the current context's device (else device 0). Leave it None when
        ``options`` already select an architecture.
    target
        ``"ptx"`` (portable to newer GPUs; JIT-compiled by the driver at load, and
        needs a driver at least as new as NVRTC), ``"cubin"`` (machine code for one
        architecture; no JIT at load) or ``"ltoir"`` (NVVM IR for link-time
        optimisation by :func:`cudriver.link`, which needs nvJitLink; ``-dlto``,
        ``nvrtcGetLTOIR``).
    headers
        In-memory headers, ``{"include name": source}``, for ``#include``.
    cache
        Look the result up in the compile cache and keep it there (the default).
        Compilations that read headers from disk (``-I``, ``--include-path``,
        ``--pre-include`` options) are never cached: their contents are not in the
        key. ``CUDRIVER_CACHE=off`` turns the cache off for the process.
    relocatable
        Relocatable device code (``--relocatable-device-code=true``): ``extern
        __device__`` functions and variables may live in another program, and the
        result must go through :func:`cudriver.link` before it loads.
    name_expressions
        C++ expressions naming kernels (``"axpy<float>"``, ``"ns::scale"``) or the
        address of ``__device__``/``__constant__`` variables (``"&ns::factor"``), as
        NVRTC takes them: each template named is instantiated, and the lowered
        (mangled) name is kept in the result's ``lowered_names``, under the
        expression exactly as given. They are part of the compile cache's key.

    Returns
    -------
    CompiledCode
        A ``bytes`` subclass: PTX text (without a trailing NUL), the cubin image or
        the LTO-IR, with ``lowered_names`` (name expression -> lowered name), ``log``
        (the compiler's warnings; empty when none) and ``target``. A cache hit gives
        back the lowered names and the log of the compilation that filled it.

    Raises
    ------
    CompileError
        NVRTC failed; ``.log`` holds the compiler's log.
    NvrtcNotFoundError
        NVRTC's library is not installed (an ``ImportError``).
    ValueError, TypeError
        A bad ``target``, ``arch``, ``options``, ``headers`` or ``name_expressions``,
        before NVRTC runs.
    """
    tgt = _target(target)
    use_cache = bool_arg(cache, "cache")
    opts = _options(options)
    if bool_arg(relocatable, "relocatable") and not any(
        o.startswith((b"-rdc", b"--relocatable-device-code")) for o in opts
    ):
        opts.append(b"--relocatable-device-code=true")
    if tgt == "ltoir" and b"-dlto" not in opts:
        opts.append(b"-dlto")
    user_arch = _has_arch(opts)
    if arch is not None and user_arch:
        raise ValueError("pass the architecture either as arch= or in options, not both")
    arch_opt = arch_option(arch, tgt) if arch is not None else None
    if isinstance(source, str):
        src = source.encode()
    elif isinstance(source, bytes):
        src = source
    else:
        raise TypeError(f"source must be a str or bytes, not {type(source).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    inc_names: list[bytes] = []
    inc_srcs: list[bytes] = []
    if headers is not None:
        if not isinstance(headers, Mapping):
            raise TypeError("headers must be a mapping of include name to source")
        for hname, hsrc in headers.items():
            if not isinstance(hname, str) or not isinstance(hsrc, (str, bytes)):
                raise TypeError("headers must map str include names to str or bytes sources")
            inc_names.append(hname.encode())
            inc_srcs.append(hsrc.encode() if isinstance(hsrc, str) else hsrc)

    names = _name_expressions(name_expressions)

    nvrtc = _nvrtc()
    if arch_opt is None and not user_arch:
        arch_opt = arch_option(current_or_default().device.compute_capability, tgt)
    if arch_opt is not None:
        opts.append(arch_opt.encode())

    job = _Job(src, name, opts, tgt, inc_names, inc_srcs, names)
    k = None
    if use_cache and _compile_cache.enabled() and _compile_cache.cacheable(opts):
        k = _cache_key(job)
        hit = _from_cache(k, job)
        if hit is not None:
            return hit
    out = _run_nvrtc(nvrtc, job)
    if k is not None:
        meta = {"lowered_names": dict(out.lowered_names), "log": out.log}
        _compile_cache.store(k, _compile_cache.pack_entry(out, meta))
    return out


def _name_expressions(name_expressions: Iterable[str]) -> tuple[str, ...]:
    """The name expressions, checked, each once, in order."""
    if isinstance(name_expressions, (str, bytes)):
        raise TypeError(
            "name_expressions must be a sequence of strings (e.g. ['axpy<float>']), not a "
            f"single {type(name_expressions).__name__}"
        )
    try:
        items = list(name_expressions)
    except TypeError:
        raise TypeError(
            f"name_expressions must be a sequence of strings, not {type(name_expressions).__name__}"
        ) from None
    out: dict[str, None] = {}
    for e in items:
        if not isinstance(e, str):
            raise TypeError(f"each name expression must be a str, not {type(e).__name__}: {e!r}")
        if not e.strip() or "\0" in e:
            raise ValueError(f"a name expression must be a non-empty C++ name, not {e!r}")
        out[e] = None
    return tuple(out)


def _from_cache(k: str, job: _Job) -> CompiledCode | None:
    """The cached result for key ``k``, or None (a payload that does not decode: a miss)."""
    payload = _compile_cache.lookup(k)
    if payload is None:
        return None
    entry = _compile_cache.unpack_entry(payload)
    if entry is None:
        return None
    code, meta = entry
    lowered = meta.get("lowered_names", {})
    log = meta.get("log", "")
    if (
        not isinstance(lowered, dict)
        or set(lowered) != set(job.names)
        or not all(isinstance(v, str) for v in lowered.values())
        or not isinstance(log, str)
    ):
        return None
    return CompiledCode._make(code, job.tgt, lowered, log)


class _Job(NamedTuple):
    """One compilation: what NVRTC is given, and so what the cache key covers."""

    src: bytes
    name: str
    opts: list[bytes]
    tgt: str  # "ptx", "cubin" or "ltoir"
    inc_names: list[bytes]  # the headers' include names
    inc_srcs: list[bytes]  # and their sources, in the same order
    names: tuple[str, ...] = ()  # the name expressions


def _cache_key(job: _Job) -> str:
    """The compile cache's key: everything that changes NVRTC's output."""
    src, name, opts, tgt, inc_names, inc_srcs, names = job
    major, minor = nvrtc_version()
    version = str(getattr(sys.modules.get("cudriver"), "__version__", ""))
    parts = [
        f"cudriver {version}".encode(),
        f"cuda-bindings {_bindings.version_string()}".encode(),
        f"nvrtc {major}.{minor}".encode(),
        tgt.encode(),
        name.encode(),
        src,
        b"options",
        *opts,
        b"headers",
    ]
    for hname, hsrc in zip(inc_names, inc_srcs, strict=True):
        parts += [hname, hsrc]
    # The entry holds the code with its lowered names and log (pack_entry).
    parts += [b"name expressions", *(e.encode() for e in names), b"entry/2"]
    return _compile_cache.key(parts)


def _run_nvrtc(nvrtc: Any, job: _Job) -> CompiledCode:
    """Compile with NVRTC; the output (PTX without its NUL, or the cubin) and its names."""
    src, name, opts, tgt, inc_names, inc_srcs, names = job
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    r = nvrtc.nvrtcCreateProgram(src, name.encode(), len(inc_srcs), inc_srcs, inc_names)
    if r[0] != ok:
        raise CompileError(f"nvrtcCreateProgram failed for {name!r}: {_result_name(nvrtc, r[0])}")
    prog = r[1]
    try:
        for e in names:
            r = nvrtc.nvrtcAddNameExpression(prog, e.encode())
            if r[0] != ok:
                raise CompileError(
                    f"nvrtcAddNameExpression failed for {e!r}: {_result_name(nvrtc, r[0])}"
                )
        r = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if r[0] != ok:
            raise CompileError(
                f"NVRTC failed to compile {name!r}: {_result_name(nvrtc, r[0])}",
                _log(nvrtc, prog),
            )
        log = _log(nvrtc, prog)
        lowered: dict[str, str] = {}
        for e in names:
            r = nvrtc.nvrtcGetLoweredName(prog, e.encode())
            if r[0] != ok or not r[1]:
                raise CompileError(
                    f"nvrtcGetLoweredName failed for {e!r} in {name!r}: "
                    f"{_result_name(nvrtc, r[0])} (is it the name of a __global__ function "
                    "or a __device__/__constant__ variable?)",
                    log,
                )
            raw = r[1]
            lowered[e] = raw.decode() if isinstance(raw, bytes) else str(raw)
        if tgt == "ptx":
            get_size, get, what = nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, "nvrtcGetPTX"
        elif tgt == "ltoir":
            get_size, get, what = nvrtc.nvrtcGetLTOIRSize, nvrtc.nvrtcGetLTOIR, "nvrtcGetLTOIR"
        else:
            get_size, get, what = nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, "nvrtcGetCUBIN"
        r = get_size(prog)
        if r[0] != ok:
            raise CompileError(f"{what}Size failed: {_result_name(nvrtc, r[0])}", _log(nvrtc, prog))
        size = int(r[1])
        if size <= 1:
            raise CompileError(f"{what} returned nothing for {name!r}", _log(nvrtc, prog))
        buf = _out_buffer(size)
        r = get(prog, buf)
        if r[0] != ok:
            raise CompileError(f"{what} failed: {_result_name(nvrtc, r[0])}", _log(nvrtc, prog))
        code = buf.rstrip(b"\0") if tgt == "ptx" else bytes(buf)
        return CompiledCode._make(code, tgt, lowered, log)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
