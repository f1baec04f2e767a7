# cython: language_level=3, binding=True, boundscheck=False, wraparound=False
# cython: cdivision=True, auto_pickle=False
"""The driver entry points of the compiled modules, and the checks they all make.

No CUDA header is needed: the few entry points the compiled methods call are looked up
once, through ``cuda.bindings.driver.cuGetProcAddress`` (ABI version 12.0, the legacy or
per-thread default stream as cuda.bindings chooses), and called as C function pointers,
so one build serves every cuda-bindings 12.x and 13.x.

Every compiled method first asks :func:`fast` whether it may run (the call guard not
armed for this thread); otherwise it calls its slow path, a plainly named Python method
of the public class, before any side effect. Its errors are built by :func:`error`, as
the slow paths build theirs (``errors.error_for``).
"""

import os

from cuda.bindings import driver as _drv

from cudriver._runtime._guard cimport in_hostfn
from cudriver.errors import GUARD as _GUARD_OBJ, error_for as _error_for

GUARD = <GuardCore?>_GUARD_OBJ

cdef object _CUresult = _drv.CUresult
cdef bint _loaded = False

p_stream_query = NULL
p_stream_sync = NULL
p_stream_wait_event = NULL
p_event_record = NULL
p_event_query = NULL
p_event_sync = NULL
p_launch = NULL
p_launch_ex = NULL
p_graph_launch = NULL
p_graph_upload = NULL
p_write32 = NULL
p_wait32 = NULL
p_write64 = NULL
p_wait64 = NULL
p_is_capturing = NULL
p_launch_host_func = NULL
p_ctx_get_current = NULL
p_ctx_push = NULL
p_ctx_pop = NULL
p_mem_alloc = NULL
p_mem_free = NULL
p_mem_alloc_async = NULL
p_mem_free_async = NULL
p_mem_alloc_pool = NULL
p_exchange_capture_mode = NULL

# The ABI version asked for: every entry point here has kept its CUDA 12.0 signature.
cdef int _ABI = 12000


cdef uintptr_t _proc(str name, int flags) except? 0:
    try:
        r = _drv.cuGetProcAddress(name.encode(), _ABI, flags)
    except Exception:
        return 0
    if int(r[0]) != SUCCESS:
        return 0
    return <uintptr_t>int(r[1] or 0)


cdef int _load() except -1:
    """Look the entry points up (once, after the driver was initialised)."""
    global _loaded, p_stream_query, p_stream_sync, p_stream_wait_event, p_event_record
    global p_event_query, p_event_sync, p_launch, p_launch_ex, p_graph_launch, p_graph_upload
    global p_write32, p_wait32, p_write64, p_wait64, p_is_capturing, p_launch_host_func
    global p_ctx_get_current, p_ctx_push, p_ctx_pop, p_mem_alloc, p_mem_free
    global p_mem_alloc_async, p_mem_free_async, p_mem_alloc_pool, p_exchange_capture_mode
    # The default stream means what it means to cuda.bindings (which reads the same variable).
    per_thread = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0")
    flags = 2 if per_thread not in ("", "0") else 1
    p_stream_query = <f_p>_proc("cuStreamQuery", flags)
    p_stream_sync = <f_p>_proc("cuStreamSynchronize", flags)
    p_stream_wait_event = <f_ppu>_proc("cuStreamWaitEvent", flags)
    p_event_record = <f_pp>_proc("cuEventRecord", flags)
    p_event_query = <f_p>_proc("cuEventQuery", flags)
    p_event_sync = <f_p>_proc("cuEventSynchronize", flags)
    p_launch = <f_launch>_proc("cuLaunchKernel", flags)
    p_launch_ex = <f_launch_ex>_proc("cuLaunchKernelEx", flags)
    p_graph_launch = <f_pp>_proc("cuGraphLaunch", flags)
    p_graph_upload = <f_pp>_proc("cuGraphUpload", flags)
    p_write32 = <f_value32>_proc("cuStreamWriteValue32", flags)
    p_wait32 = <f_value32>_proc("cuStreamWaitValue32", flags)
    p_write64 = <f_value64>_proc("cuStreamWriteValue64", flags)
    p_wait64 = <f_value64>_proc("cuStreamWaitValue64", flags)
    p_is_capturing = <f_capturing>_proc("cuStreamIsCapturing", flags)
    p_launch_host_func = <f_hostfn>_proc("cuLaunchHostFunc", flags)
    p_ctx_get_current = <f_ctx_get>_proc("cuCtxGetCurrent", flags)
    p_ctx_push = <f_p>_proc("cuCtxPushCurrent", flags)
    p_ctx_pop = <f_ctx_get>_proc("cuCtxPopCurrent", flags)
    p_mem_alloc = <f_alloc>_proc("cuMemAlloc", flags)
    p_mem_free = <f_free>_proc("cuMemFree", flags)
    p_mem_alloc_async = <f_alloc_async>_proc("cuMemAllocAsync", flags)
    p_mem_free_async = <f_free_async>_proc("cuMemFreeAsync", flags)
    p_mem_alloc_pool = <f_alloc_pool>_proc("cuMemAllocFromPoolAsync", flags)
    p_exchange_capture_mode = <f_mode>_proc("cuThreadExchangeStreamCaptureMode", flags)
    _loaded = True
    return 0


cdef bint fast() except -1:
    """Whether the compiled path may run: loaded, on a thread that is not running a host
    function, with the driver initialised, not in a forked child.

    The guard is armed while any thread runs a host function; only that thread is
    refused (its C flag), so other threads keep the compiled paths meanwhile."""
    # Armed whenever a host function runs on any thread (its count is raised, with the
    # GIL held, before the thread's flag is set): the thread-local flag, which costs a
    # call in a shared library, is read only then.
    if GUARD.armed and (in_hostfn() or GUARD.forked or not GUARD.initialized):
        return False
    if not _loaded:
        _load()
    return True


cdef int ensure_loaded() except -1:
    if not _loaded:
        _load()
    return 0


cdef object code(CUresult status):
    """``status`` as a ``CUresult`` member (an int when the bindings do not know it)."""
    try:
        return _CUresult(status)
    except ValueError:
        return status


cdef object error(CUresult status, str name):
    """The exception for ``status`` from driver function ``name`` (as the slow paths build it)."""
    return _error_for(code(status), getattr(_drv, name))


cdef object done(CUresult st):
    """A query's status as ``_done_now`` answers: True, False (not ready) or None."""
    if st == SUCCESS:
        return True
    if st == NOT_READY:
        return False
    return None


cdef CUresult in_context(uintptr_t ctx, bint* pushed) noexcept nogil:
    """Make ``ctx`` current unless it is; ``pushed`` says whether to pop afterwards."""
    cdef void* cur = NULL
    cdef CUresult st = p_ctx_get_current(&cur)
    pushed[0] = False
    if st == SUCCESS and <uintptr_t>cur == ctx:
        return SUCCESS
    st = p_ctx_push(<void*>ctx)
    if st == SUCCESS:
        pushed[0] = True
    return st


cdef void pop_context() noexcept nogil:
    cdef void* ignored = NULL
    p_ctx_pop(&ignored)
