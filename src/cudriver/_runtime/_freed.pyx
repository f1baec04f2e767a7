# cython: language_level=3, binding=True, boundscheck=False, wraparound=False
# cython: cdivision=True, auto_pickle=False
"""The device address ranges cudriver freed, so that raw calls on them are refused.

Under unified addressing the driver takes an address it does not know for host memory:
``cuMemcpy(p, p, n)`` through a mirror, with ``p`` a device allocation already freed,
reads and writes host memory at that address and kills the process. Every free of
device memory that cudriver makes (``cuMemFree``, ``cuMemFreeAsync``,
``cuMemAddressFree``) notes its range here (:func:`note`, in C, or :func:`noted`).
The mirrors (:mod:`cudriver._runtime._mirror`) look the pointer arguments of copies,
sets, prefetches, frees and memory operations up here (:func:`freed_range`) and refuse
the call before the driver sees it when an address lies in such a range and the driver
no longer knows it (``cuMemGetAddressRange``): an address handed out again, by cudriver
or by anyone else, is allowed, and forgotten here. Device address ranges are reserved by the
driver, so no host allocation can take them over.

The record keeps the newest :data:`CAP` ranges (one per start address; a re-freed start
is moved to the newest end). Noting costs one dict update; checking, a dict lookup for
a base address and a bisection otherwise, and one driver call only for an address in a
freed range.
"""

from bisect import bisect_right

from libc.stdint cimport uint64_t

#: How many freed ranges are remembered (the oldest are forgotten first).
CAP = 1 << 16

cdef dict _ranges = {}  # start -> end, oldest first
cdef object _starts = None  # sorted starts; None after a change


cdef void note(uint64_t ptr, uint64_t size) noexcept:
    global _starts
    try:
        key = ptr
        if key in _ranges:
            del _ranges[key]  # moved to the newest end
        _ranges[key] = ptr + size
        _starts = None
        if len(_ranges) > CAP:
            _trim()
    except BaseException:  # a record we could not keep refuses less; never fail a free
        pass


cdef void _trim() except *:
    cdef Py_ssize_t drop = len(_ranges) - CAP // 2
    for key in list(_ranges)[:drop]:
        del _ranges[key]


def noted(ptr, size):
    """Note that ``[ptr, ptr + size)`` was freed by cudriver (from Python releases)."""
    note(<uint64_t>int(ptr), <uint64_t>int(size))


def forget(start):
    """Forget the freed range that starts at ``start`` (its address was handed out again)."""
    global _starts
    if _ranges.pop(int(start), None) is not None:
        _starts = None


def clear():
    """Forget every freed range."""
    global _starts
    _ranges.clear()
    _starts = None


def count():
    """How many freed ranges are remembered."""
    return len(_ranges)


def freed_range(addr):
    """The ``(start, end)`` of a freed range holding ``addr``, or None."""
    global _starts
    if not _ranges:
        return None
    end = _ranges.get(addr)
    if end is not None:
        return (addr, end) if end > addr else None
    starts = _starts
    if starts is None:
        starts = _starts = sorted(_ranges)
    i = bisect_right(starts, addr) - 1
    if i < 0:
        return None
    start = starts[i]
    end = _ranges.get(start)
    if end is None or addr >= end:
        return None
    return (start, end)


def any_freed():
    """Whether any freed range is remembered (the mirrors' cheap first test)."""
    return bool(_ranges)
