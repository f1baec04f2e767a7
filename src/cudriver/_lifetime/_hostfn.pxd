# The C host-function trampoline, which every cudriver host function goes through.

cdef void trampoline(void* data) noexcept nogil
