"""Linking device code: several programs, device libraries and LTO-IR into one cubin.

:func:`link` takes PTX, cubins, fatbins, objects, libraries and LTO-IR (bytes, or the
paths of files holding them) and returns one cubin for :meth:`cudriver.Module.load`
(:meth:`cudriver.Module.link` does both). Code meant for linking is compiled with
``compile(..., relocatable=True)`` (or ``target="ltoir"`` for link-time
optimisation).

Two linkers: NVIDIA's nvJitLink (the ``nvidia-nvjitlink`` package, cudriver's
``nvjitlink`` extra), used when its library loads, and the driver's own
(``cuLinkCreate``, ``cuLinkAddData``, ``cuLinkComplete``, ``cuLinkDestroy``), which
needs no other package. Only nvJitLink links LTO-IR: without it, LTO-IR inputs raise
:class:`~cudriver.NotSupportedError` saying what to install. A failed link raises
:class:`LinkError` with the linker's log.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cuda.bindings import driver as _drv

from .._context.device import Context, context_arg, current_or_default
from .._lifetime._coerce import bool_arg, int_arg
from ..errors import CompileError, NotSupportedError, error_for
from .program import _arch_number

__all__ = ["link", "LinkError", "KINDS"]

#: The kinds of input :func:`link` takes.
KINDS = ("ptx", "cubin", "fatbin", "object", "library", "ltoir")

_SUFFIXES = {
    ".ptx": "ptx",
    ".cubin": "cubin",
    ".fatbin": "fatbin",
    ".o": "object",
    ".obj": "object",
    ".a": "library",
    ".lib": "library",
    ".ltoir": "ltoir",
}
_FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian
_LTOIR_MAGIC = b"\xedCN\x7f"  # 0x7F4E43ED, little-endian
_LOG_BYTES = 1 << 20

_lock = threading.Lock()
_jit: list[Any] = []  # [nvjitlink module or None], once decided


class LinkError(CompileError):
    """A link failed; ``log`` holds the linker's log (a :class:`~cudriver.CompileError`)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (LinkError, (self.args[0].split("\n", 1)[0], self.log))


def _nvjitlink() -> Any:
    """``cuda.bindings.nvjitlink`` when its library loads, else None (decided once)."""
    with _lock:
        if not _jit:
            mod: Any = None
            try:
                from cuda.bindings import nvjitlink

                nvjitlink.version()  # loads the library, or raises
                mod = nvjitlink
            except Exception:  # not installed, or its library is missing
                mod = None
            _jit.append(mod)
        return _jit[0]


def _kind_of(data: bytes, path: str | None) -> str:
    """The kind of ``data``: from a file's suffix, else from its first bytes."""
    if path is not None:
        kind = _SUFFIXES.get(Path(path).suffix.lower())
        if kind is not None:
            return kind
    if data.startswith(b"\x7fELF"):
        return "cubin"
    if data.startswith(_FATBIN_MAGIC):
        return "fatbin"
    if data.startswith(_LTOIR_MAGIC):
        return "ltoir"
    if data.startswith(b"!<arch>\n"):
        return "library"
    head = data[:4096].lstrip()
    if head.startswith(b"//") or b".version" in head:
        return "ptx"
    where = f" in {path!r}" if path else ""
    raise ValueError(
        f"cannot tell what kind of code this is{where} (first bytes {data[:8]!r}): pass "
        f"(data, kind) with kind one of {', '.join(KINDS)}"
    )


def _inputs(objects: object) -> list[tuple[bytes, str, str]]:
    """``(data, kind, name)`` for each input, checked before any linker runs."""
    if isinstance(objects, (str, bytes, os.PathLike)) or not isinstance(objects, Iterable):
        raise TypeError(
            "objects must be a list of inputs (bytes, paths, or (data, kind) pairs), "
            f"not {type(objects).__name__}"
        )
    out: list[tuple[bytes, str, str]] = []
    for i, obj in enumerate(objects):
        kind: str | None = None
        if isinstance(obj, tuple):
            if len(obj) != 2 or not isinstance(obj[1], str):
                raise TypeError(f"input {i}: a pair must be (data, kind), not {obj!r:.80}")
            obj, kind = obj
            if kind not in KINDS:
                raise ValueError(f"input {i}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
        path: str | None = None
        if isinstance(obj, (bytes, bytearray, memoryview)):
            data = bytes(obj)
        elif isinstance(obj, os.PathLike) or (isinstance(obj, str) and "\n" not in obj):
            path = os.fspath(obj)
            with open(path, "rb") as f:
                data = f.read()
        elif isinstance(obj, str):  # PTX text
            data = obj.encode()
            kind = kind or "ptx"
        else:
            raise TypeError(f"input {i}: not code: {type(obj).__name__}")
        if not data.strip(b"\0 \t\r\n"):
            raise ValueError(f"input {i} is empty")
        kind = kind or _kind_of(data, path)
        name = os.path.basename(path) if path else f"input{i}.{kind}"
        out.append((data, kind, name))
    if not out:
        raise ValueError("nothing to link: objects is empty")
    return out


def link(
    objects: Iterable[Any],
    *,
    arch: Any = None,
    lto: bool | None = None,
    max_registers: int | None = None,
    optimization_level: int | None = None,
    debug: bool = False,
    lineinfo: bool = False,
    verbose: bool = False,
    context: Context | None = None,
) -> bytes:
    """Link device code into one cubin.

    With nvJitLink: ``nvJitLinkCreate``, ``nvJitLinkAddData`` for each input,
    ``nvJitLinkComplete``, ``nvJitLinkGetLinkedCubin``; runs on the host only. Else the
    driver's linker: ``cuLinkCreate``, ``cuLinkAddData``, ``cuLinkComplete`` and
    ``cuLinkDestroy`` in ``context`` (default: the current one); synchronous, no device
    memory.

    Parameters
    ----------
    objects
        The inputs, in order: ``bytes`` (the kind told from the first bytes: a cubin's
        ELF header, a fatbin's or LTO-IR's magic number, an archive, PTX text), a path
        (the kind from its suffix: ``.ptx``, ``.cubin``, ``.fatbin``, ``.o``, ``.a``,
        ``.ltoir``), PTX as a ``str``, or a ``(data_or_path, kind)`` pair, the kind one of
        ``"ptx"``, ``"cubin"``, ``"fatbin"``, ``"object"``, ``"library"``, ``"ltoir"``.
    arch
        The architecture to link for, in any form :func:`cudriver.compile` takes.
        Default: ``context``'s device (nvJitLink needs one; the driver's linker uses
        the context's).
    lto
        Link-time optimisation (nvJitLink's ``-lto``). Default: on when an input is
        LTO-IR.
    max_registers, optimization_level
        Registers per thread at most; the optimisation level (nvJitLink takes 0 or 3,
        the driver 0 to 4).
    debug, lineinfo, verbose
        Debug information; line information; a verbose log.
    context
        The driver linker's context, and the default architecture's device.

    Returns
    -------
    bytes
        The linked cubin.

    Raises
    ------
    LinkError
        The linker failed (an undefined symbol, a wrong architecture...); ``log`` holds
        its log, which is also part of the message.
    NotSupportedError
        An LTO-IR input (or ``lto=True``) without nvJitLink.
    ValueError, TypeError, FileNotFoundError
        A bad input or option, before any linker runs.
    """
    inputs = _inputs(objects)
    has_lto = any(kind == "ltoir" for _, kind, _ in inputs)
    use_lto = has_lto if lto is None else bool_arg(lto, "lto")
    regs = None if max_registers is None else int_arg(max_registers, "max_registers")
    if regs is not None and not 1 <= regs <= 255:
        raise ValueError(f"max_registers must be 1 to 255, not {regs}")
    opt = None if optimization_level is None else int_arg(optimization_level, "optimization_level")
    if opt is not None and not 0 <= opt <= 4:
        raise ValueError(f"optimization_level must be 0 to 4, not {opt}")
    flags = [bool_arg(debug, "debug"), bool_arg(lineinfo, "lineinfo"), bool_arg(verbose, "verbose")]
    ctx = context_arg(context)
    number = _arch_number(arch) if arch is not None else None
    jit = _nvjitlink()
    if jit is not None:
        if number is None:
            number = _arch_number((ctx or current_or_default()).device)
        return _with_nvjitlink(jit, inputs, number, use_lto, regs, opt, flags)
    if use_lto:
        raise NotSupportedError(
            _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED,
            "cuLinkAddData",
            "linking LTO-IR needs nvJitLink, which is not installed: pip install "
            "nvidia-nvjitlink (cudriver's nvjitlink extra), of the CUDA major of the driver",
        )
    return _with_driver(inputs, number, regs, opt, flags, ctx or current_or_default())


def _with_nvjitlink(
    jit: Any,
    inputs: list[tuple[bytes, str, str]],
    number: str,
    lto: bool,
    regs: int | None,
    opt: int | None,
    flags: list[bool],
) -> bytes:
    options = [f"-arch=sm_{number}"]
    if lto:
        options.append("-lto")
    if regs is not None:
        options.append(f"-maxrregcount={regs}")
    if opt is not None:
        if opt not in (0, 3):
            raise ValueError(f"nvJitLink takes optimization_level 0 or 3, not {opt}")
        options.append(f"-O{opt}")
    for on, flag in zip(flags, ("-g", "-lineinfo", "-verbose"), strict=True):
        if on:
            options.append(flag)
    types = {
        "ptx": jit.InputType.PTX,
        "cubin": jit.InputType.CUBIN,
        "fatbin": jit.InputType.FATBIN,
        "object": jit.InputType.OBJECT,
        "library": jit.InputType.LIBRARY,
        "ltoir": jit.InputType.LTOIR,
    }
    handle = jit.create(len(options), options)
    try:
        try:
            for data, kind, name in inputs:
                jit.add_data(handle, types[kind], data, len(data), name)
            jit.complete(handle)
        except Exception as exc:
            raise LinkError(f"nvJitLink failed: {exc}", _jit_log(jit, handle)) from None
        size = jit.get_linked_cubin_size(handle)
        out = bytearray(size)
        jit.get_linked_cubin(handle, out)
        return bytes(out)
    finally:
        jit.destroy(handle)


def _jit_log(jit: Any, handle: Any) -> str:
    try:
        size = jit.get_error_log_size(handle)
        log = bytearray(size)
        jit.get_error_log(handle, log)
    except Exception:  # the failure itself is reported; the log is a bonus
        return ""
    return log.rstrip(b"\0").decode(errors="replace").strip()


def _with_driver(
    inputs: list[tuple[bytes, str, str]],
    number: str | None,
    regs: int | None,
    opt: int | None,
    flags: list[bool],
    ctx: Context,
) -> bytes:
    o = _drv.CUjit_option
    info, error = bytearray(_LOG_BYTES), bytearray(_LOG_BYTES)
    keys: list[Any] = [
        o.CU_JIT_INFO_LOG_BUFFER,
        o.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        o.CU_JIT_ERROR_LOG_BUFFER,
        o.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ]
    values: list[Any] = [info, _LOG_BYTES, error, _LOG_BYTES]
    if number is not None:
        target = getattr(_drv.CUjit_target, f"CU_TARGET_COMPUTE_{number.upper()}", None)
        if target is None:
            raise ValueError(f"the driver's linker has no target sm_{number}")
        keys.append(o.CU_JIT_TARGET)
        values.append(target)
    if regs is not None:
        keys.append(o.CU_JIT_MAX_REGISTERS)
        values.append(regs)
    if opt is not None:
        keys.append(o.CU_JIT_OPTIMIZATION_LEVEL)
        values.append(opt)
    for on, key in zip(
        flags,
        (o.CU_JIT_GENERATE_DEBUG_INFO, o.CU_JIT_GENERATE_LINE_INFO, o.CU_JIT_LOG_VERBOSE),
        strict=True,
    ):
        if on:
            keys.append(key)
            values.append(1)
    types = {
        "ptx": _drv.CUjitInputType.CU_JIT_INPUT_PTX,
        "cubin": _drv.CUjitInputType.CU_JIT_INPUT_CUBIN,
        "fatbin": _drv.CUjitInputType.CU_JIT_INPUT_FATBINARY,
        "object": _drv.CUjitInputType.CU_JIT_INPUT_OBJECT,
        "library": _drv.CUjitInputType.CU_JIT_INPUT_LIBRARY,
    }

    def log() -> str:
        return error.split(b"\0", 1)[0].decode(errors="replace").strip()

    with ctx._scope():
        r = _drv.cuLinkCreate(len(keys), keys, values)
        if r[0] != _drv.CUresult.CUDA_SUCCESS:
            raise error_for(r[0], _drv.cuLinkCreate, log() or None)
        state = r[1]
        try:
            for data, kind, name in inputs:
                buf = data + b"\0" if kind == "ptx" else data  # PTX ends with a NUL
                r = _drv.cuLinkAddData(
                    state, types[kind], buf, len(buf), name.encode(), 0, None, None
                )
                if r[0] != _drv.CUresult.CUDA_SUCCESS:
                    err = error_for(r[0], _drv.cuLinkAddData)
                    raise LinkError(f"the driver's linker refused {name!r}: {err}", log())
            r = _drv.cuLinkComplete(state)
            if r[0] != _drv.CUresult.CUDA_SUCCESS:
                err = error_for(r[0], _drv.cuLinkComplete)
                raise LinkError(f"the driver's linker failed: {err}", log())
            addr, size = int(r[1]), int(r[2])
            return ctypes.string_at(addr, size)  # copied before cuLinkDestroy frees it
        finally:
            _drv.cuLinkDestroy(state)
