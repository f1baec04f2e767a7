# The device addresses cudriver freed, for the mirrors to refuse before the driver call.

from libc.stdint cimport uint64_t

# Note that [ptr, ptr + size) was freed by cudriver; never raises.
cdef void note(uint64_t ptr, uint64_t size) noexcept
