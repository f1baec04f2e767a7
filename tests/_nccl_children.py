"""What the ranks of tests/test_nccl.py run (spawned: importable by name).

Each rank reports ``(rank, what, value)`` tuples on a queue and never waits without a
deadline: NCCL's own waits are bounded by the test, which kills a rank past its time.
"""

from __future__ import annotations

import functools
import traceback
from typing import Any

import numpy as np

import cudriver as cu
from cudriver import nccl as cnccl

MIB = 2**20
#: A rank still running after this many seconds dumps its threads' stacks and exits.
HANG_S = 70.0


def inputs(rank: int, count: int) -> np.ndarray[Any, Any]:
    """Rank ``rank``'s all-reduce input: whole numbers, so every sum is exact in float32."""
    return np.random.default_rng(rank).integers(0, 1000, count).astype(np.float32)


def allreduce(ranks: cnccl.Ranks, mib: int, replays: int, out: Any) -> None:
    """All-reduce ``mib`` MiB of float32, then replay a captured all-reduce ``replays`` times."""
    import faulthandler
    import sys

    # A rank that hangs says where, on stderr, and exits before the test's deadline.
    faulthandler.dump_traceback_later(HANG_S, exit=True)
    say = functools.partial(print, f"rank {ranks.rank}:", file=sys.stderr, flush=True)
    try:
        import nccl.core as nccl

        say("joining")
        comm = cnccl.communicator(ranks, timeout=60)
        say("joined")
        stream = cu.Stream(non_blocking=True)
        count = mib * MIB // 4
        send = cu.DeviceBuffer.from_array(inputs(ranks.rank, count))
        recv = cu.DeviceBuffer.empty(count, np.float32)
        comm.allreduce(send, recv, nccl.SUM, stream=stream)
        stream.synchronize()
        say("all-reduced")
        out.put((ranks.rank, "allreduce", recv.copy_to()))

        # Stream-ordered this time; both graphs are destroyed before comm.destroy(),
        # which otherwise waits for them forever.
        x = cu.DeviceBuffer.from_array(np.arange(1024, dtype=np.float32), stream=stream)
        with stream.capture() as graph:
            comm.allreduce(x, x, nccl.SUM, stream=stream)
        with graph, graph.instantiate() as exe:
            for _ in range(replays):
                exe.launch(stream)
            stream.synchronize()
        say("replayed")
        out.put((ranks.rank, "replayed", x.copy_to()))
        # A graph holding a collective: destroy() refuses (ncclCommDestroy would wait
        # for the graph forever), then goes once the graph and its exec are closed.
        with stream.capture() as held:
            comm.allreduce(x, x, nccl.SUM, stream=stream)
        exe = held.instantiate()
        held.close()  # the executable graph still holds it
        try:
            comm.destroy()
        except RuntimeError as exc:
            out.put((ranks.rank, "refused", str(exc)))
        else:
            raise AssertionError("destroy() was not refused")
        exe.close()
        comm.destroy()
        say("done")
        out.put((ranks.rank, "done", None))
    except BaseException:
        out.put((ranks.rank, "error", traceback.format_exc()))
    finally:
        faulthandler.cancel_dump_traceback_later()


def _checks_one_rank() -> dict[str, Any]:
    """The direct path's checks on a one-rank communicator: name -> check(comm, nccl)."""
    import nccl.core as nccl
    from nccl.core.typing import NcclInvalid

    checks: dict[str, Any] = {}

    def check(fn: Any) -> Any:
        checks[fn.__name__] = fn
        return fn

    @check
    def each_dtype_all_reduces_directly(comm: Any, stream: cu.Stream) -> None:
        for dt in (np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.int8):
            host = (np.arange(1000) % 100).astype(dt)
            send = cu.DeviceBuffer.from_array(host)
            recv = cu.DeviceBuffer.empty(1000, dt)
            comm.allreduce(send, recv, nccl.SUM, stream=stream)
            stream.synchronize()
            assert np.array_equal(recv.copy_to(), host), dt

    @check
    def a_buffer_without_dtype_is_bytes_and_a_view_is_its_range(comm: Any, s: cu.Stream) -> None:
        host = np.arange(256, dtype=np.uint8)
        send = cu.DeviceBuffer.from_array(host)
        raw = cu.DeviceBuffer(256)  # no dtype: bytes, as its DLPack export says
        raw.fill(0, element_size=1)
        comm.allreduce(send, raw, nccl.MAX, stream=s)
        s.synchronize()
        assert bytes(raw.copy_to()) == host.tobytes()
        big = cu.DeviceBuffer.empty(64, np.float32)
        big.fill(np.float32(-1.0))
        part = big.view(64, 64).cast(np.float32)  # 16 floats at offset 64 bytes
        src = cu.DeviceBuffer.from_array(np.full(16, 7.0, np.float32))
        comm.allreduce(src, part, nccl.SUM, stream=s)
        s.synchronize()
        got = big.copy_to()
        assert np.all(got[16:32] == 7.0) and np.all(got[:16] == -1.0) and np.all(got[32:] == -1.0)

    @check
    def every_collective_goes_direct(comm: Any, s: cu.Stream) -> None:
        # nccl4py's own methods are never called for DeviceBuffers: they raise here.
        cls = type(comm.nccl)
        saved = {}
        names = (
            "allreduce",
            "reduce",
            "broadcast",
            "allgather",
            "reduce_scatter",
            "alltoall",
            "send",
            "recv",
        )
        for name in names:
            saved[name] = getattr(cls, name)

            def refuse(*a: Any, _n: str = name, **k: Any) -> None:
                raise AssertionError(f"nccl4py's {_n} was called")

            setattr(cls, name, refuse)
        try:
            x = cu.DeviceBuffer.from_array(np.arange(8, dtype=np.int32))
            y = cu.DeviceBuffer.empty(8, np.int32)
            comm.allreduce(x, y, nccl.SUM, stream=s)
            comm.reduce(x, y, nccl.SUM, 0, stream=s)
            comm.broadcast(x, y, 0, stream=s)
            comm.allgather(x, y, stream=s)
            comm.reduce_scatter(x, y, nccl.SUM, stream=s)
            comm.alltoall(x, y, stream=s)
            nccl.group_start()
            comm.send(x, 0, stream=s)
            comm.recv(y, 0, stream=s)
            nccl.group_end()
            s.synchronize()
            assert np.array_equal(y.copy_to(), np.arange(8, dtype=np.int32))
        finally:
            for name, fn in saved.items():
                setattr(cls, name, fn)

    @check
    def other_buffers_and_a_config_go_to_nccl4py(comm: Any, s: cu.Stream) -> None:
        cls = type(comm.nccl)
        seen: list[str] = []
        real = cls.allreduce

        def spy(self: Any, *a: Any, **k: Any) -> None:
            seen.append(type(a[0]).__name__)
            real(self, *a, **k)

        cls.allreduce = spy
        try:
            x = cu.DeviceBuffer.from_array(np.ones(4, np.float32))
            y = cu.DeviceBuffer.empty(4, np.float32)
            comm.allreduce(x, y, nccl.SUM, stream=s)
            assert seen == []
            try:
                comm.allreduce(x, y, nccl.SUM, stream=s, config=nccl.NCCLCollConfig())
            except Exception as exc:  # an NCCL runtime older than ncclAllReduceConfig
                if "ncclAllReduceConfig" not in str(exc):
                    raise
            assert seen == ["DeviceBuffer"]
            try:
                import cupy
            except ImportError:
                cupy = None
            if cupy is not None:
                with cupy.cuda.Device(0):
                    a = cupy.ones(4, cupy.float32)
                    comm.allreduce(a, y, nccl.SUM, stream=s)
                assert seen[-1] == "ndarray"
            s.synchronize()
            assert np.array_equal(y.copy_to(), np.ones(4, np.float32))
        finally:
            cls.allreduce = real

    @check
    def mistakes_raise_what_nccl4py_raises(comm: Any, s: cu.Stream) -> None:
        f = cu.DeviceBuffer.empty(8, np.float32)
        i = cu.DeviceBuffer.empty(8, np.int32)
        short = cu.DeviceBuffer.empty(4, np.float32)
        for args in ((f, i), (f, short)):
            try:
                comm.allreduce(*args, nccl.SUM, stream=s)
            except NcclInvalid as exc:
                ours = str(exc)
            else:
                raise AssertionError(f"no error for {args}")
            try:
                comm.nccl.allreduce(*args, nccl.SUM, stream=s)
            except NcclInvalid as exc:
                theirs = str(exc)
            assert ours == theirs, (ours, theirs)
        calls: list[tuple[str, tuple[Any, ...]]] = [
            ("allgather", (f, short)),
            ("reduce_scatter", (short, i, nccl.SUM)),
            ("broadcast", (f, short, 0)),
        ]
        for name, args in calls:
            try:
                getattr(comm, name)(*args, stream=s)
            except NcclInvalid:
                pass
            else:
                raise AssertionError("no NcclInvalid")
        f.close()
        try:
            comm.allreduce(f, f, nccl.SUM, stream=s)
        except cu.ClosedError:
            pass
        else:
            raise AssertionError("a closed buffer was taken")
        other = cu.Stream()
        other.close()
        try:
            comm.allreduce(i, i, nccl.SUM, stream=other)
        except cu.ClosedError:
            pass
        else:
            raise AssertionError("a closed stream was taken")

    @check
    def a_stream_ordered_buffer_notes_the_collectives_stream(comm: Any, s: cu.Stream) -> None:
        own = cu.Stream(non_blocking=True)
        buf = cu.DeviceBuffer.from_array(np.ones(1 << 20, np.float32), stream=own)
        out = cu.DeviceBuffer.empty(1 << 20, np.float32)
        comm.allreduce(buf, out, nccl.SUM, stream=s)
        assert int(s.handle) in buf._state.used_on
        buf.close()  # freed after the collective on s
        s.synchronize()
        assert np.all(out.copy_to() == 1.0)
        own.close()

    @check
    def raw_handles_and_cuda_stream_objects_are_streams(comm: Any, s: cu.Stream) -> None:
        x = cu.DeviceBuffer.from_array(np.arange(4, dtype=np.float64))
        y = cu.DeviceBuffer.empty(4, np.float64)
        comm.allreduce(x, y, nccl.SUM, stream=int(s.handle))
        comm.allreduce(x, y, nccl.SUM, stream=s.handle)
        comm.allreduce(x, y, nccl.SUM)  # the legacy stream
        s.synchronize()
        cu.Stream.legacy().synchronize()
        assert np.array_equal(y.copy_to(), np.arange(4, dtype=np.float64))

    @check
    def a_captured_collective_replays_and_holds_destroy(comm: Any, s: cu.Stream) -> None:
        x = cu.DeviceBuffer.from_array(np.arange(16, dtype=np.float32))
        y = cu.DeviceBuffer.empty(16, np.float32)
        with s.capture() as g:
            comm.allreduce(x, y, nccl.SUM, stream=s)
        assert comm.holders()
        with g, g.instantiate() as exe:
            exe.launch(s)
            s.synchronize()
        assert np.array_equal(y.copy_to(), np.arange(16, dtype=np.float32))

    return checks


def one_rank(out: Any) -> None:
    """Run the direct path's checks on a one-rank communicator; report each outcome."""
    import faulthandler

    faulthandler.dump_traceback_later(HANG_S, exit=True)
    try:
        import gc

        comm = cnccl.communicator(cnccl.Ranks(0, 1), timeout=30)
        stream = cu.Stream(non_blocking=True)
        for name, fn in _checks_one_rank().items():
            try:
                fn(comm, stream)
                gc.collect()
                out.put((0, "passed", name))
            except BaseException:
                out.put((0, "failed", f"{name}:\n{traceback.format_exc()}"))
        stream.synchronize()
        gc.collect()
        comm.destroy()
        out.put((0, "done", None))
    except BaseException:
        out.put((0, "error", traceback.format_exc()))
    finally:
        faulthandler.cancel_dump_traceback_later()


def collectives(ranks: cnccl.Ranks, out: Any) -> None:
    """Every direct collective on two ranks against numpy; a buffer on the other GPU."""
    import faulthandler

    faulthandler.dump_traceback_later(HANG_S, exit=True)
    try:
        import nccl.core as nccl
        from nccl.core.typing import NcclInvalid

        comm = cnccl.communicator(ranks, timeout=60)
        n, me = ranks.world_size, ranks.rank
        s = cu.Stream(non_blocking=True)
        count = 1 << 16
        mine = inputs(me, count)
        every = [inputs(r, count) for r in range(n)]
        send = cu.DeviceBuffer.from_array(mine, stream=s)
        got: dict[str, Any] = {}

        out_all = cu.DeviceBuffer.empty(count, np.float32)
        comm.allreduce(send, out_all, nccl.SUM, stream=s)
        got["allreduce"] = (out_all, np.sum(every, axis=0))

        out_max = cu.DeviceBuffer.empty(count, np.float32)
        comm.reduce(send, out_max if me == 0 else None, nccl.MAX, 0, stream=s)
        if me == 0:
            got["reduce"] = (out_max, np.maximum.reduce(every))

        out_b = cu.DeviceBuffer.empty(count, np.float32)
        comm.broadcast(send if me == 1 else None, out_b, 1, stream=s)
        got["broadcast"] = (out_b, every[1])

        out_g = cu.DeviceBuffer.empty(n * count, np.float32)
        comm.allgather(send, out_g, stream=s)
        got["allgather"] = (out_g, np.concatenate(every))

        part = count // n
        out_rs = cu.DeviceBuffer.empty(part, np.float32)
        comm.reduce_scatter(send, out_rs, nccl.SUM, stream=s)
        got["reduce_scatter"] = (out_rs, np.sum(every, axis=0)[me * part : (me + 1) * part])

        out_a2a = cu.DeviceBuffer.empty(count, np.float32)
        comm.alltoall(send, out_a2a, stream=s)
        got["alltoall"] = (
            out_a2a,
            np.concatenate([every[r][me * part : (me + 1) * part] for r in range(n)]),
        )

        out_p = cu.DeviceBuffer.empty(count, np.float32)
        peer = (me + 1) % n
        nccl.group_start()
        comm.send(send, peer, stream=s)
        comm.recv(out_p, (me - 1) % n, stream=s)
        nccl.group_end()
        got["send_recv"] = (out_p, every[(me - 1) % n])
        s.synchronize()
        for name, (buf, want) in got.items():
            if not np.array_equal(buf.copy_to(), want):
                raise AssertionError(f"{name} differs from numpy on rank {me}")
            out.put((me, "ok", name))

        # A buffer on the other GPU is refused before NCCL sees it.
        with cu.Device((ranks.local_rank + 1) % n).primary_context():
            elsewhere = cu.DeviceBuffer.empty(count, np.float32)
        try:
            comm.allreduce(elsewhere, out_all, nccl.SUM, stream=s)
        except NcclInvalid as exc:
            out.put((me, "refused", str(exc)))
        else:
            raise AssertionError("a buffer on another device was taken")
        s.synchronize()
        comm.destroy()
        out.put((me, "done", None))
    except BaseException:
        out.put((ranks.rank, "error", traceback.format_exc()))
    finally:
        faulthandler.cancel_dump_traceback_later()
