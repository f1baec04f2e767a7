"""Green contexts: keep a few SMs free for latency-critical work.

A long kernel that fills every SM makes a short kernel on another stream wait until
SMs free up. Split the device's SMs instead:

1. ``SMResource.of(device).split(n)`` gives groups of ``n`` SMs (``n`` is the smallest
   group the device allows); one group becomes the "critical" green context, the
   other groups together the "bulk" one;
2. a long kernel (about 200 ms per block, enough blocks for every SM) runs on a stream
   of the bulk context, and a short kernel on a stream of the critical context;
3. the short kernel finishes while the long one still runs: its latency is reported
   beside the same pair of kernels on two ordinary streams, where the short one waits.

Each kernel records the SM it ran on (``%smid``): the critical kernel's SM is checked to
be none of the bulk kernel's. Run it from the repository's root with
``python examples/green_contexts.py`` (in a checkout, put ``src`` on ``PYTHONPATH``).
Needs a GPU with green contexts (CUDA 12.4+ driver) and NVRTC. The last line is
``green_contexts: OK`` when the short kernel was not held up by the long one.
"""

from __future__ import annotations

import time
from typing import NoReturn

import numpy as np

import cudriver as cu

SOURCE = r"""
extern "C" __global__ void work(unsigned int* smid, unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    if (threadIdx.x == 0) {
        unsigned int id;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
        smid[blockIdx.x] = id;
    }
}
"""

LONG_NS = 200_000_000  # each block of the long kernel spins this long
THREADS = 1024


def fail(message: str) -> NoReturn:
    """Exit with status 1 and a message saying what went wrong."""
    raise SystemExit(f"green_contexts: FAILED: {message}")


def latency(
    work: tuple[cu.Kernel, cu.Kernel], bulk: cu.Stream, critical: cu.Stream, blocks: int
) -> tuple[float, bool, set[int], set[int]]:
    """Start the long kernel on ``bulk``, then time the short one on ``critical``.

    Returns the short kernel's latency (ms), whether the long kernel was still running
    when the short one finished, and the SMs each ran on.
    """
    long_kernel, short_kernel = work
    long_ids = cu.DeviceBuffer.empty(blocks, np.uint32)
    short_id = cu.DeviceBuffer.empty(1, np.uint32)
    long_kernel.launch(bulk, blocks, THREADS, long_ids, np.uint64(LONG_NS))
    time.sleep(0.02)  # let its blocks take the SMs
    t0 = time.perf_counter()
    short_kernel.launch(critical, 1, 32, short_id, np.uint64(0))
    critical.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    overlapped = not bulk.query()
    bulk.synchronize()
    return ms, overlapped, set(long_ids.copy_to().tolist()), set(short_id.copy_to().tolist())


def main() -> None:
    """Run the pair of kernels on ordinary streams, then on two green contexts."""
    device = cu.Device(0)
    ctx = device.primary_context()
    ctx.set_current()
    cubin = cu.compile(SOURCE, name="green_contexts.cu", target="cubin")
    total = device.multiprocessor_count
    blocks = 2 * total  # 2 x 1024 threads: every SM full

    # Ordinary streams: the short kernel competes with the long one for every SM.
    k = cu.Module.load(cubin, context=ctx).kernel("work")
    with cu.Stream(non_blocking=True) as a, cu.Stream(non_blocking=True) as b:
        plain_ms, _, _, _ = latency((k, k), a, b, blocks)
    print(f"ordinary streams: the short kernel took {plain_ms:.1f} ms beside the long one")

    # Green contexts: the smallest group the device allows for the critical work.
    whole = cu.SMResource.of(device)
    n = max(whole.min_partition_size, whole.alignment)
    n += -n % whole.alignment
    groups, rest = whole.split(n)
    critical_ctx = cu.GreenContext(groups[0])
    bulk_ctx = cu.GreenContext(groups[1:])
    print(
        f"{device.name}: {total} SMs split into {len(groups)} groups of {n} "
        f"({rest.sm_count} left over); critical {critical_ctx.sm_count} SMs, "
        f"bulk {bulk_ctx.sm_count} SMs"
    )
    kc = cu.Module.load(cubin, context=critical_ctx).kernel("work")
    kb = cu.Module.load(cubin, context=bulk_ctx).kernel("work")
    with critical_ctx.create_stream() as critical, bulk_ctx.create_stream() as bulk:
        green_ms, overlapped, bulk_sms, critical_sms = latency((kb, kc), bulk, critical, blocks)
    print(f"green contexts: the short kernel took {green_ms:.1f} ms beside the long one")
    print(f"bulk kernel ran on {len(bulk_sms)} SMs, critical kernel on SM {sorted(critical_sms)}")

    if not overlapped:
        fail("the long kernel had finished before the short one: no isolation shown")
    if critical_sms & bulk_sms:
        fail(f"the critical kernel ran on SM {sorted(critical_sms & bulk_sms)}, a bulk SM")
    if len(bulk_sms) > bulk_ctx.sm_count:
        fail(f"the bulk kernel ran on {len(bulk_sms)} SMs, more than its {bulk_ctx.sm_count}")
    if green_ms * 1e6 >= LONG_NS / 2:
        fail(f"the short kernel waited {green_ms:.1f} ms in its green context")
    del kc, kb
    critical_ctx.close()
    bulk_ctx.close()
    print("green_contexts: OK")


if __name__ == "__main__":
    main()
