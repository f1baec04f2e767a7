# cython: language_level=3, binding=True, boundscheck=False, wraparound=False
# cython: cdivision=True, auto_pickle=False
"""The compiled launches of :class:`cudriver.Kernel` and :class:`cudriver.LaunchPlan`.

``Kernel.launch`` packs the arguments in C (ints, floats and cudriver device buffers,
each buffer pinned while its address is read) and calls ``cuLaunchKernel``, or
``cuLaunchKernelEx`` for a :class:`~cudriver.LaunchConfig` of attributes. Anything else
(another argument type, a capture begun through cudriver open, a stream other than an
open cudriver ``Stream``, the call guard armed) goes to the slow path,
``Kernel._launch_slow``, before any side effect; ``LaunchPlan.launch`` likewise.
"""

from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.float cimport FLT_MAX
from libc.math cimport fabs, isinf, isnan
from libc.stdint cimport int32_t, int64_t, uint64_t, uintptr_t

from cudriver._lifetime._release cimport HandleRoot, pin as _pin, unpin as _unpin
from cudriver._runtime._entry cimport (
    GUARD, LAUNCH_ATTR_BYTES, MAX_PARAM_BYTES, MAX_PARAM_WORDS, MAX_PARAMS, SUCCESS,
    CUresult, LaunchCfg, code, fast, p_launch, p_launch_ex,
)
from cudriver._work._core cimport int_stream

from cudriver._launch.launch import NO_BLOCK, LaunchConfig as _LaunchConfig
from cudriver._lifetime._coerce import DeviceMemory as _DeviceMemory


cdef inline bint _dim3(object v, unsigned int* out) except -1:
    """An int or a tuple of 1 to 3 ints, each in [1, 2**32 - 1]; False to fall back."""
    cdef Py_ssize_t n, i
    out[0] = 1
    out[1] = 1
    out[2] = 1
    if type(v) is int:
        if not 1 <= v <= 4294967295:
            return False
        out[0] = <unsigned int>v
        return True
    if type(v) is not tuple:
        return False
    n = len(<tuple>v)
    if n < 1 or n > 3:
        return False
    for i in range(n):
        x = (<tuple>v)[i]
        if type(x) is not int or not 1 <= x <= 4294967295:
            return False
        out[i] = <unsigned int>x
    return True


cdef inline int _pack(object items, tuple args, char* buf, void** ptrs, Py_ssize_t total,
                      PyObject** held, Py_ssize_t* nheld) except -1:
    """Pack ``args`` into ``buf`` by ``items`` (index, size, offset).

    Returns 0 when something needs the slow packer, 1 when done, 2 when done and a
    cudriver device buffer is among the arguments. Each such buffer is pinned as its
    address is read (check, read and pin with no Python code between them), its state
    stored with a new reference in ``held`` (``nheld`` counts them, whatever the
    outcome): the caller ends the pins with :func:`_unpin_held`.
    """
    cdef Py_ssize_t i, s, o
    cdef int res = 1
    cdef double d
    cdef int64_t q
    cdef HandleRoot r
    for item in <tuple>items:
        i = (<tuple>item)[0]
        s = (<tuple>item)[1]
        o = (<tuple>item)[2]
        if o + s > total:
            return 0
        v = args[i]
        t = type(v)
        if t is float:
            d = v
            if s == 8:
                (<double*>(buf + o))[0] = d
            elif s == 4:
                if not (isnan(d) or isinf(d) or fabs(d) <= FLT_MAX):
                    return 0
                (<float*>(buf + o))[0] = <float>d
            else:
                return 0
        elif t is int:
            if s == 4:
                if not -2147483648 <= v <= 2147483647:
                    return 0
                (<int32_t*>(buf + o))[0] = <int32_t>v
            elif s == 8:
                if not -9223372036854775808 <= v <= 9223372036854775807:
                    return 0
                q = v
                (<int64_t*>(buf + o))[0] = q
            else:
                return 0
        elif s == 8 and isinstance(v, _DeviceMemory):
            r = <HandleRoot>v
            if r._h is None:
                return 0
            pinned = _pin(v)
            if pinned is not None:
                Py_INCREF(pinned)
                held[nheld[0]] = <PyObject*>pinned
                nheld[0] += 1
            (<uint64_t*>(buf + o))[0] = <uint64_t>r._key
            res = 2
        else:
            return 0
        ptrs[i] = buf + o
    return res


cdef int _unpin_held(PyObject** held, Py_ssize_t n) except -1:
    """End the pins :func:`_pack` took (every one, even if a release raises)."""
    cdef Py_ssize_t i
    err = None
    for i in range(n):
        st = <object>held[i]
        Py_XDECREF(held[i])
        try:
            _unpin(st)
        except BaseException as exc:
            if err is None:
                err = exc
    if err is not None:
        raise err
    return 0


#: ``block`` of ``Kernel.launch(stream, config, *args)`` when no argument follows the
#: config (``launch.NO_BLOCK`` is this object in compiled mode).
cdef class KernelCore(HandleRoot):
    """The fields and the compiled launch of :class:`cudriver.Kernel`."""

    cdef public object _layout
    cdef public object _module
    cdef public object _name
    cdef public object _params
    cdef public object _sizes

    def launch(self, stream, grid, block=NO_BLOCK, *args, shared_mem=0, config=None):
        """Launch the kernel on ``stream`` (``cuLaunchKernel``); does not block.

        Written ``launch(stream, grid, block, *args)``, or, with a
        :class:`~cudriver.LaunchConfig` that carries the shape (cuda.core's way),
        ``launch(stream, LaunchConfig(grid=..., block=...), *args)``.

        Parameters
        ----------
        stream
            A :class:`~cudriver.Stream` or any stream-like object. None is refused
            (``TypeError``): for the legacy default stream pass :meth:`Stream.legacy`.
        grid, block
            An int or a tuple of 1 to 3 ints, each >= 1; or, in place of both, a
            ``LaunchConfig`` with ``grid`` and ``block`` (and its ``shared_mem`` and
            attributes).
        *args
            One value per kernel parameter, packed by the rules of :func:`pack_arg`.
        shared_mem
            Dynamic shared memory per block, in bytes.
        config
            A :class:`~cudriver.LaunchConfig` of attributes only (clusters,
            cooperative launch, programmatic dependent launch, priority, memory
            synchronisation domain): the launch then goes through
            ``cuLaunchKernelEx``, and a refusal names the attributes set.

        Notes
        -----
        Packs the arguments on every call (into a reused host buffer: the driver
        copies them at launch); use :meth:`prepare` to pack once and launch many
        times. While the stream is capturing, the
        arguments are kept alive with the captured graph.

        Raises
        ------
        TypeError
            Wrong argument count, or an argument that cannot be packed (the message
            names the argument's index and the kernel); raised before launching.
        ValueError
            A bad grid, block or ``shared_mem``.
        ClosedError
            The kernel, its module or the stream is closed.
        """
        cdef unsigned int g[3]
        cdef unsigned int b[3]
        cdef uintptr_t s = 0
        cdef unsigned int shmem
        cdef CUresult st
        cdef void* f
        cdef uint64_t storage[MAX_PARAM_WORDS]
        cdef void* ptrs[MAX_PARAMS]
        cdef void** params = NULL
        cdef int packed = 1
        cdef Py_ssize_t n
        cdef PyObject* held[MAX_PARAMS]
        cdef Py_ssize_t nheld = 0
        cdef object attrs = None
        if config is not None:
            attrs = _config_attrs(config)
        if (not fast() or self._h is None or p_launch == NULL or GUARD.open
                or (config is not None and (attrs is None or p_launch_ex == NULL))
                or type(shared_mem) is not int or not 0 <= shared_mem <= 4294967295
                or not _dim3(grid, g) or not _dim3(block, b) or not int_stream(stream, &s)):
            return self._launch_slow(stream, grid, block, *args, shared_mem=shared_mem, config=config)
        lay = self._layout
        if lay is None:
            return self._launch_slow(stream, grid, block, *args, shared_mem=shared_mem, config=config)
        n = len(args)
        if n != lay.n:
            return self._launch_slow(stream, grid, block, *args, shared_mem=shared_mem, config=config)
        if n:
            if n > MAX_PARAMS or lay.total > MAX_PARAM_BYTES:
                return self._launch_slow(stream, grid, block, *args, shared_mem=shared_mem, config=config)
            # The buffers among the arguments stay pinned until this launch's use is
            # noted (a close() on another thread then releases after it).
            try:
                packed = _pack(lay.items, args, <char*>storage, ptrs, MAX_PARAM_BYTES,
                               held, &nheld)
            except BaseException:
                _unpin_held(held, nheld)
                raise
            if not packed:
                _unpin_held(held, nheld)
                return self._launch_slow(stream, grid, block, *args, shared_mem=shared_mem, config=config)
            params = ptrs
        shmem = shared_mem
        f = <void*><uintptr_t>self._key
        # The module, not the kernel: unloading the module is what frees the function.
        m = self._module
        pin = _pin(m) if m is not None else None
        pin2 = _pin(stream) if s else None
        if attrs:
            st = _launch_ex(f, g, b, shmem, s, params, <bytes>attrs)
        else:
            with nogil:
                st = p_launch(f, g[0], g[1], g[2], b[0], b[1], b[2], shmem, <void*>s, params, NULL)
        try:
            if st != SUCCESS:
                raise self._launch_error(
                    code(st), (g[0], g[1], g[2]), (b[0], b[1], b[2]), shmem,
                    config if attrs else None
                )
            if packed == 2:
                key = <object>s
                for a in args:
                    if isinstance(a, _DeviceMemory):
                        a._note_use(key)
        finally:
            try:
                _unpin_held(held, nheld)
            finally:
                _unpin(pin2)
                _unpin(pin)


cdef object _config_attrs(config):
    """A LaunchConfig's C attribute array (empty: none set), or None for another type."""
    if type(config) is not _LaunchConfig or config.grid is not None:
        return None  # the slow path checks it (a config with a shape goes in its place)
    c = config.__dict__.get("_cattrs")
    if c is None:
        c = config._c_attributes()
    return c


cdef CUresult _launch_ex(void* f, unsigned int* g, unsigned int* b, unsigned int shmem,
                         uintptr_t s, void** params, bytes attrs):
    """``cuLaunchKernelEx`` with the attributes ``attrs`` (the GIL released around it)."""
    cdef LaunchCfg cfg
    cdef CUresult st
    cfg.gridDimX = g[0]
    cfg.gridDimY = g[1]
    cfg.gridDimZ = g[2]
    cfg.blockDimX = b[0]
    cfg.blockDimY = b[1]
    cfg.blockDimZ = b[2]
    cfg.sharedMemBytes = shmem
    cfg.hStream = <void*>s
    cfg.attrs = <void*><char*>attrs
    cfg.numAttrs = <unsigned int>(len(attrs) // LAUNCH_ATTR_BYTES)
    with nogil:
        st = p_launch_ex(&cfg, f, params, NULL)
    return st


cdef class PlanCore:
    """C fields and the compiled launch of :class:`cudriver.LaunchPlan`.

    ``_core_set`` (called whenever the plan is (re)packed) copies what a launch needs
    into C fields: the function, the dimensions, the parameter array's address.
    """

    cdef object _c_kernel
    cdef object _c_used
    cdef void* _c_func
    cdef void** _c_params
    cdef unsigned int _c_dims[6]
    cdef unsigned int _c_shmem
    # The launch attributes as a C array (LaunchConfig._c_attributes); empty: cuLaunchKernel.
    cdef bytes _c_attrs
    # The virtual-memory spaces of the arguments: a plan with any launches through the
    # Python method, which refuses an offloaded one.
    cdef tuple _c_spaces

    def _core_set(self, kernel, func, grid, block, shmem, params, used, attrs=b"", spaces=()):
        self._c_attrs = attrs
        self._c_spaces = tuple(spaces)
        self._c_kernel = kernel
        self._c_used = tuple(used)
        self._c_func = <void*><uintptr_t>func
        self._c_params = <void**><uintptr_t>params
        for i in range(3):
            self._c_dims[i] = grid[i]
            self._c_dims[3 + i] = block[i]
        self._c_shmem = shmem

    def launch(self, stream):
        """Launch on ``stream`` (``cuLaunchKernel``) with the packed arguments.

        Does not block or allocate. ``stream`` is required: None is refused
        (``TypeError``; :meth:`Stream.legacy` is the legacy default stream). While the
        stream is capturing, the kernel and the current arguments are kept alive with
        the captured graph.

        Raises
        ------
        ClosedError
            The kernel, its module or the stream is closed, or a
            :class:`~cudriver.VirtualBuffer` argument is offloaded.
        """
        cdef uintptr_t s = 0
        cdef CUresult st
        cdef void* f = self._c_func
        cdef void** params = self._c_params
        cdef unsigned int* d = self._c_dims
        cdef unsigned int shmem = self._c_shmem
        k = self._c_kernel
        attrs = self._c_attrs
        if (not fast() or k is None or (<HandleRoot>k)._h is None or p_launch == NULL
                or GUARD.open or (attrs and p_launch_ex == NULL) or self._c_spaces
                or not int_stream(stream, &s)):
            return self._launch_slow(stream)
        m = k._module
        pin = _pin(m) if m is not None else None
        pin2 = _pin(stream) if s else None
        if attrs:
            st = _launch_ex(f, d, d + 3, shmem, s, params, attrs)
        else:
            with nogil:
                st = p_launch(f, d[0], d[1], d[2], d[3], d[4], d[5], shmem, <void*>s, params, NULL)
        _unpin(pin2)
        _unpin(pin)
        if st != SUCCESS:
            raise k._launch_error(code(st), self.grid, self.block, shmem, self._config)
        used = self._c_used
        if used:
            key = <object>s
            for a in <tuple>used:
                a._note_use(key)
