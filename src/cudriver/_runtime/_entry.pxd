# The driver entry points the compiled modules call, their C types, and the checks every
# compiled method makes first (``fast``) and last (``error``).

from libc.stdint cimport uint32_t, uint64_t, uintptr_t

from cudriver._runtime._guard cimport GuardCore

ctypedef int CUresult
ctypedef void (*HostFn)(void*) noexcept nogil

ctypedef CUresult (*f_p)(void*) noexcept nogil
ctypedef CUresult (*f_pp)(void*, void*) noexcept nogil
ctypedef CUresult (*f_ppu)(void*, void*, unsigned int) noexcept nogil
ctypedef CUresult (*f_launch)(void*, unsigned int, unsigned int, unsigned int, unsigned int,
                              unsigned int, unsigned int, unsigned int, void*, void**,
                              void**) noexcept nogil
ctypedef CUresult (*f_value32)(void*, uint64_t, uint32_t, unsigned int) noexcept nogil
ctypedef CUresult (*f_value64)(void*, uint64_t, uint64_t, unsigned int) noexcept nogil
ctypedef CUresult (*f_capturing)(void*, int*) noexcept nogil
ctypedef CUresult (*f_mode)(int*) noexcept nogil
ctypedef CUresult (*f_hostfn)(void*, HostFn, void*) noexcept nogil
ctypedef CUresult (*f_ctx_get)(void**) noexcept nogil
ctypedef CUresult (*f_alloc)(uint64_t*, size_t) noexcept nogil
ctypedef CUresult (*f_free)(uint64_t) noexcept nogil
ctypedef CUresult (*f_alloc_async)(uint64_t*, size_t, void*) noexcept nogil
ctypedef CUresult (*f_alloc_pool)(uint64_t*, size_t, void*, void*) noexcept nogil
ctypedef CUresult (*f_free_async)(uint64_t, void*) noexcept nogil

# CUlaunchConfig (driver ABI since CUDA 11.8); its attributes are a C array of
# CUlaunchAttribute (72 bytes each: the id, padding, a 64-byte value), built once per
# LaunchConfig in Python (LaunchConfig._c_attributes) and read in place.
ctypedef struct LaunchCfg:
    unsigned int gridDimX
    unsigned int gridDimY
    unsigned int gridDimZ
    unsigned int blockDimX
    unsigned int blockDimY
    unsigned int blockDimZ
    unsigned int sharedMemBytes
    void* hStream
    void* attrs
    unsigned int numAttrs
ctypedef CUresult (*f_launch_ex)(const LaunchCfg*, void*, void**, void**) noexcept nogil

cdef enum:
    SUCCESS = 0
    OUT_OF_MEMORY = 2
    NOT_READY = 600
    MAX_PARAM_BYTES = 4096
    MAX_PARAMS = 512
    MAX_PARAM_WORDS = 512  # MAX_PARAM_BYTES / 8
    LAUNCH_ATTR_BYTES = 72  # sizeof(CUlaunchAttribute)

# Looked up once, by load() (fast() calls it), after the driver is initialised.
cdef f_p p_stream_query
cdef f_p p_stream_sync
cdef f_ppu p_stream_wait_event
cdef f_pp p_event_record
cdef f_p p_event_query
cdef f_p p_event_sync
cdef f_launch p_launch
cdef f_launch_ex p_launch_ex
cdef f_pp p_graph_launch
cdef f_pp p_graph_upload
cdef f_value32 p_write32
cdef f_value32 p_wait32
cdef f_value64 p_write64
cdef f_value64 p_wait64
cdef f_capturing p_is_capturing
cdef f_hostfn p_launch_host_func
cdef f_ctx_get p_ctx_get_current
cdef f_p p_ctx_push
cdef f_ctx_get p_ctx_pop
cdef f_alloc p_mem_alloc
cdef f_free p_mem_free
cdef f_alloc_async p_mem_alloc_async
cdef f_free_async p_mem_free_async
cdef f_alloc_pool p_mem_alloc_pool
cdef f_mode p_exchange_capture_mode

# errors.GUARD, typed: its fields are C fields.
cdef GuardCore GUARD

cdef bint fast() except -1
# Look the entry points up if that was not done yet (the driver is initialised).
cdef int ensure_loaded() except -1
cdef object error(CUresult status, str name)
cdef object code(CUresult status)
cdef object done(CUresult st)
cdef CUresult in_context(uintptr_t ctx, bint* pushed) noexcept nogil
cdef void pop_context() noexcept nogil
