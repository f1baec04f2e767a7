"""Code written for cuda.bindings, with its import changed: mypy --strict accepts it."""

from __future__ import annotations

from cudriver.compat import driver as cuda


def allocate(n: int) -> int:
    err, ptr = cuda.cuMemAlloc(n)
    if err != cuda.CUresult.CUDA_SUCCESS:
        raise RuntimeError(err)
    (status,) = cuda.cuMemFree(ptr)
    assert status == cuda.CUresult.CUDA_SUCCESS
    return int(ptr)


def idle(stream: cuda.CUstream) -> bool:
    (err,) = cuda.cuStreamQuery(stream)
    return bool(err == cuda.CUresult.CUDA_SUCCESS)


def info() -> tuple[int, int]:
    _err, free, total = cuda.cuMemGetInfo()
    return free, total
