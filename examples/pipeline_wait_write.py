"""A producer/consumer pipeline between two streams, ordered through flags in memory.

No events: the streams order each other with stream memory operations on 32-bit flags
in device memory. The producer fills a ring of ``SLOTS`` buffers; the consumer turns
each item into a row of the output:

* producer, item ``i`` in slot ``i % SLOTS``: wait until the consumer has released
  the slot (``wait_value32(free[slot], ...)``), run the ``produce`` kernel, then
  ``write_value32(ready[slot], ...)``;
* consumer: ``wait_value32(ready[slot], ...)``, run the ``consume`` kernel, then
  ``write_value32(free[slot], ...)``.

The flags count how often a slot was filled (or released), so they never need to be
reset, and each wait asks for a count with ``WaitCondition.GEQ``.

Nothing can hang forever: every wait is enqueued only after the write that releases it
(the producer's write of item ``i`` precedes the consumer's wait for it, and the
consumer's release of item ``i - SLOTS`` precedes the producer's wait for the slot),
so any prefix of the work, even one cut short by an exception, completes. The host
also waits with a deadline; past it, a third stream writes every flag, so that both
streams drain, and the script fails with a message.

Run it from the repository's root with ``python examples/pipeline_wait_write.py`` (in a
checkout, put ``src`` on ``PYTHONPATH``). Needs a GPU and NVRTC. The last line is
``pipeline_wait_write: OK`` when every item went through the pipeline intact.
"""

from __future__ import annotations

import time
from typing import NoReturn

import numpy as np

import cudriver as cu

SOURCE = r"""
// Fill a slot with item `item`; spin first, so that the consumer really has to wait.
extern "C" __global__ void produce(float* slot, int item, int n, long long spin) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) slot[i] = (float)(item * n + i);
}

extern "C" __global__ void consume(float* row, const float* slot, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) row[i] = 2.0f * slot[i] + 1.0f;
}
"""

ITEMS = 16
SLOTS = 4
N = 4096  # floats per item
BLOCK = 256
GRID = (N + BLOCK - 1) // BLOCK
SPIN = 1_000_000  # clock cycles per item in the producer, well under a millisecond
DEADLINE_S = 30.0


def fail(message: str) -> NoReturn:
    """Exit with status 1 and a message saying what went wrong."""
    raise SystemExit(f"pipeline_wait_write: FAILED: {message}")


def release_everything(flags: cu.DeviceBuffer) -> None:
    """Write every flag to a count no wait asks for more than: every wait ends."""
    rescue = cu.Stream(non_blocking=True)
    for k in range(flags.nbytes // 4):
        rescue.write_value32((flags, 4 * k), ITEMS + 1)
    rescue.synchronize()
    rescue.close()


def wait_until_done(streams: list[cu.Stream], flags: cu.DeviceBuffer) -> float:
    """Poll ``streams`` (never blocking in the driver) until done; fail past the deadline."""
    start = time.monotonic()
    while not all(s.query() for s in streams):
        if time.monotonic() - start > DEADLINE_S:
            release_everything(flags)
            fail(f"the pipeline did not finish within {DEADLINE_S} s; every flag was released")
        time.sleep(0.0005)
    return time.monotonic() - start


def main() -> None:
    """Run ``ITEMS`` items through a ring of ``SLOTS`` slots and check the output."""
    module = cu.Module.load(cu.compile(SOURCE, name="pipeline.cu", target="cubin"))
    produce, consume = module.kernel("produce"), module.kernel("consume")

    # Non-blocking streams: the synchronous buffer operations below (on the legacy
    # default stream) are not ordered with them, and never wait behind a flag.
    producer = cu.Stream(non_blocking=True)
    consumer = cu.Stream(non_blocking=True)

    slots = [cu.DeviceBuffer.empty(N, np.float32) for _ in range(SLOTS)]
    out = cu.DeviceBuffer.empty((ITEMS, N), np.float32)
    rows = [out.view(item * N * 4, N * 4) for item in range(ITEMS)]  # one row per item
    flags = cu.DeviceBuffer.empty(2 * SLOTS, np.uint32)  # ready[0:SLOTS], free[SLOTS:]
    flags.fill(0)  # synchronous: zero before any stream looks at them
    out.fill(0xFF)  # NaN everywhere: a row the consumer skipped cannot pass the check

    def ready(slot: int) -> tuple[cu.DeviceBuffer, int]:
        return (flags, 4 * slot)

    def free(slot: int) -> tuple[cu.DeviceBuffer, int]:
        return (flags, 4 * (SLOTS + slot))

    try:
        for item in range(ITEMS):
            slot, fills = item % SLOTS, item // SLOTS  # `fills`: earlier uses of the slot
            # Producer: wait for the consumer to release the slot's previous item.
            if fills:
                producer.wait_value32(free(slot), fills, cu.WaitCondition.GEQ)
            produce.launch(producer, GRID, BLOCK, slots[slot], item, N, SPIN)
            producer.write_value32(ready(slot), fills + 1)  # after the kernel's writes
            # Consumer: wait for the item, turn it into a row, release the slot.
            consumer.wait_value32(ready(slot), fills + 1, cu.WaitCondition.GEQ)
            consume.launch(consumer, GRID, BLOCK, rows[item], slots[slot], N)
            consumer.write_value32(free(slot), fills + 1)
    except BaseException:
        release_everything(flags)  # let whatever was enqueued drain
        raise
    elapsed = wait_until_done([producer, consumer], flags)
    producer.synchronize()
    consumer.synchronize()

    got = out.copy_to()
    expected = 2 * np.arange(ITEMS * N, dtype=np.float32).reshape(ITEMS, N) + 1
    if not np.array_equal(got, expected):
        bad_rows = sorted({int(r) for r in np.nonzero(got != expected)[0]})
        fail(f"rows {bad_rows} differ: a consumer read a slot before (or after) its item")
    counts = flags.copy_to()
    if counts.tolist() != [ITEMS // SLOTS] * (2 * SLOTS):
        fail(f"the flags end at {counts.tolist()}, expected {ITEMS // SLOTS} everywhere")
    print(
        f"pipeline_wait_write: {ITEMS} items through {SLOTS} slots in {elapsed * 1e3:.1f} ms, "
        f"flags {counts.tolist()}"
    )
    print("pipeline_wait_write: OK")


if __name__ == "__main__":
    main()
