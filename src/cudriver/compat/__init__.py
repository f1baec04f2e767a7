"""Mirrors for existing cuda-python code: change the import line, keep the rest.

``cudriver.compat.driver``, ``cudriver.compat.nvrtc`` and ``cudriver.compat.runtime``
answer every name of ``cuda.bindings.driver``, ``.nvrtc`` and ``.runtime`` with the
same arguments and the **same return shape**, ``(status, *outs)``, and the bindings'
own classes, enums and constants; but a call that fails raises (a
:class:`~cudriver.CudaError`, or a :class:`~cudriver.CompileError` for NVRTC) instead of
returning a status that code may ignore::

    from cudriver.compat import driver as cuda   # was: from cuda.bindings import driver as cuda
    err, = cuda.cuInit(0)                         # err is CUDA_SUCCESS; a failure raises

Statuses that answer a question rather than report a failure (``NOT_READY`` from
``cuStreamQuery``/``cuEventQuery`` and their runtime twins) are returned, as the
bindings return them. See the migration page of the documentation.
"""

from . import driver

__all__ = ["driver"]
