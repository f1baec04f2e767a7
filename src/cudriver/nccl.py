"""NCCL collectives with cudriver objects: where the ranks come from, and the unique id.

NCCL's official Python bindings, ``nccl4py`` (``pip install ".[nccl]"``), do the
collectives; cudriver objects fit them as they are. A :class:`~cudriver.DeviceBuffer`
made with a dtype (``DeviceBuffer.empty(n, np.float32)``, ``from_array``) describes
itself through ``__cuda_array_interface__``, so NCCL reads its count and element type
from it; a :class:`~cudriver.Stream` gives its handle through ``__cuda_stream__``::

    import nccl.core as nccl
    comm.allreduce(buf, out, nccl.SUM, stream=stream)

What this module adds is what nccl4py leaves to the user: which rank this process is
(:func:`from_environment`, reading what ``torchrun``, ``mpirun`` or Slurm set), and
getting the unique id that rank 0 makes to every other rank (:func:`share_bytes`, over
one TCP connection per rank, as two machines would), then the communicator
(:func:`communicator`). nccl4py is imported only when a function needs it.

The unique id travels in clear text to whoever connects first with a valid rank: run
the ranks inside a network you trust, as with ``torchrun``'s own rendezvous.
"""

from __future__ import annotations

import dataclasses
import errno
import importlib
import inspect
import os
import socket
import struct
import time
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._context.device import Device
from ._lifetime import _release, capture
from ._lifetime._coerce import raw_stream_handle
from ._memory.memory import DeviceBuffer
from ._work.stream import Stream

__all__ = [
    "Communicator",
    "Ranks",
    "from_environment",
    "share_bytes",
    "unique_id",
    "communicator",
    "DEFAULT_PORT",
]

#: The port rank 0 listens on when the environment names an address but no port
#: (``MASTER_PORT``'s default under ``torchrun``).
DEFAULT_PORT = 29500

_MAGIC = b"cudriver-nccl/2\n"
_HELLO = struct.Struct("!16sII")  # magic, rank, world size
_REPLY = struct.Struct("!2sI")  # b"OK" or b"NO", then the length of what follows
_ACK = b"K"  # a rank's last word: it has the whole payload
_HELLO_WAIT_S = 5.0
_LAUNCHERS: tuple[tuple[str, str, str, str | None], ...] = (
    # launcher, rank, world size, local rank
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
)


@dataclasses.dataclass(frozen=True)
class Ranks:
    """Where this process stands among the ranks of one job.

    Attributes
    ----------
    rank, world_size
        This process's rank and how many ranks there are.
    local_rank
        This process's rank among those of its machine: the GPU ordinal it uses.
    address, port
        Where rank 0 serves the unique id (``MASTER_ADDR``/``MASTER_PORT``); ``None``
        for a job of one rank.
    launcher
        What set the variables (``"torchrun"``, ``"Open MPI"``, ``"MPICH"``,
        ``"Slurm"``), or ``"arguments"``.
    """

    rank: int
    world_size: int
    local_rank: int = 0
    address: str | None = None
    port: int | None = None
    launcher: str = "arguments"

    def __post_init__(self) -> None:
        for name in ("rank", "world_size", "local_rank"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name} must be an int, not {type(v).__name__}")
        if self.world_size < 1:
            raise ValueError(f"world_size must be >= 1, not {self.world_size}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank must be in [0, {self.world_size}), not {self.rank}")
        if self.local_rank < 0:
            raise ValueError(f"local_rank must be >= 0, not {self.local_rank}")
        if self.address is not None and not isinstance(self.address, str):
            raise TypeError(f"address must be a str, not {type(self.address).__name__}")
        if self.port is not None and (
            isinstance(self.port, bool) or not isinstance(self.port, int)
        ):
            raise TypeError(f"port must be an int, not {type(self.port).__name__}")
        if self.port is not None and not 0 < self.port < 65536:
            raise ValueError(f"port must be in [1, 65535], not {self.port}")
        if self.world_size > 1 and not self.address:
            raise ValueError(
                f"{self.world_size} ranks need the address of rank 0's machine (MASTER_ADDR)"
            )


def _int_var(env: Mapping[str, str], name: str) -> int:
    text = env[name]
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"environment variable {name}={text!r} is not an integer") from None


def from_environment(environ: Mapping[str, str] | None = None) -> Ranks:
    """The ranks as a launcher described them in environment variables.

    Reads, in this order, the first set that is there: ``torchrun``'s ``RANK``,
    ``WORLD_SIZE``, ``LOCAL_RANK``; Open MPI's ``OMPI_COMM_WORLD_RANK``, ``_SIZE``,
    ``_LOCAL_RANK``; MPICH's ``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``; Slurm's
    ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``; without a local rank,
    the rank (one machine). Rank 0's address is
    ``MASTER_ADDR`` and its port ``MASTER_PORT`` (default :data:`DEFAULT_PORT`); an
    MPI launcher passes them on with ``-x MASTER_ADDR`` (Open MPI) or ``-genv``
    (MPICH). Makes no call to the driver or the network.

    Raises
    ------
    LookupError
        No launcher's variables are set; the message names them.
    ValueError
        A variable is not an integer, a rank is out of range, or several ranks have
        no ``MASTER_ADDR``.
    """
    env = os.environ if environ is None else environ
    for launcher, rank_var, size_var, local_var in _LAUNCHERS:
        if rank_var in env and size_var in env:
            rank = _int_var(env, rank_var)
            size = _int_var(env, size_var)
            local = _int_var(env, local_var) if local_var and local_var in env else rank
            addr = env.get("MASTER_ADDR") or None
            port = _int_var(env, "MASTER_PORT") if env.get("MASTER_PORT") else None
            if addr is not None and port is None:
                port = DEFAULT_PORT
            return Ranks(rank, size, local, addr, port, launcher)
    names = ", ".join(f"{r}/{s}" for _, r, s, _ in _LAUNCHERS)
    raise LookupError(
        f"no launcher's rank variables are set (looked for {names}); start the ranks "
        "with torchrun, mpirun or srun, or set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR "
        "and MASTER_PORT yourself"
    )


def _recv_exactly(sock: socket.socket, n: int, deadline: float, peer: str) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{peer} sent {len(chunks)} of {n} bytes before the deadline")
        sock.settimeout(left)
        try:
            chunk = sock.recv(n - len(chunks))
        except TimeoutError:
            continue
        if not chunk:
            raise ConnectionError(f"{peer} closed the connection after {len(chunks)} bytes")
        chunks += chunk
    return bytes(chunks)


def _listen(address: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    srv = socket.socket(family, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        try:
            srv.bind((address, port))
        except OSError as exc:
            if exc.errno != errno.EADDRNOTAVAIL:
                raise
            srv.bind(("", port))  # a name of this machine that is not one of its addresses
        srv.listen()
    except OSError as exc:
        srv.close()
        raise OSError(
            exc.errno,
            f"rank 0 cannot listen on {address}:{port} for the other ranks ({exc.strerror}); "
            "is another job using MASTER_PORT? Choose another port",
        ) from exc
    except BaseException:
        srv.close()
        raise
    return srv


def _alive(conn: socket.socket) -> bool:
    """Whether the peer of ``conn`` is still connected (it sends nothing more)."""
    try:
        conn.setblocking(False)
        try:
            return conn.recv(1) != b""
        finally:
            conn.setblocking(True)
    except BlockingIOError:
        return True
    except OSError:
        return False


def _tell_all(held: dict[int, socket.socket], status: bytes, msg: bytes) -> None:
    for conn in held.values():
        try:
            conn.sendall(_REPLY.pack(status, len(msg)) + msg)
        except OSError:
            pass  # that rank is gone; nothing to tell it
        conn.close()
    held.clear()


def _serve(ranks: Ranks, payload: bytes, deadline: float) -> None:
    assert ranks.address is not None
    assert ranks.port is not None
    waiting = set(range(1, ranks.world_size))
    # The ranks served so far, each connection held open until every rank is served:
    # then each is told to go on (b"GO"), or, at the deadline, which ranks never came.
    held: dict[int, socket.socket] = {}
    try:
        with _listen(ranks.address, ranks.port) as srv:
            while True:
                if not waiting:
                    for gone in [r for r, c in held.items() if not _alive(c)]:
                        held.pop(gone).close()  # gone since: it may connect again
                        waiting.add(gone)
                    if not waiting:
                        break
                left = deadline - time.monotonic()
                if left <= 0:
                    why = (
                        f"rank 0 waited on {ranks.address}:{ranks.port} for ranks "
                        f"{sorted(waiting)}, which did not connect before the deadline"
                    )
                    _tell_all(held, b"NO", why.encode())
                    raise TimeoutError(why)
                srv.settimeout(left)
                try:
                    conn, peer_addr = srv.accept()
                except TimeoutError:
                    continue
                joined = _greet(ranks, conn, peer_addr, payload, deadline, waiting)
                if joined is None:
                    conn.close()
                    continue
                waiting.discard(joined)
                held[joined] = conn
            _tell_all(held, b"GO", b"")
    finally:
        for conn in held.values():
            conn.close()


def _greet(
    ranks: Ranks,
    conn: socket.socket,
    peer_addr: Any,
    payload: bytes,
    deadline: float,
    waiting: set[int],
) -> int | None:
    """Serve one connection the payload: the rank, once it says it has it all; else None."""
    peer = f"a process at {peer_addr[0]}"
    try:
        # A connection that says nothing holds rank 0 up for a few seconds at most,
        # never until the deadline.
        soon = min(deadline, time.monotonic() + _HELLO_WAIT_S)
        hello = _recv_exactly(conn, _HELLO.size, soon, peer)
    except (OSError, TimeoutError):
        return None  # not one of ours, or gone: keep serving the ranks
    magic, rank, size = _HELLO.unpack(hello)
    if magic != _MAGIC:
        return None
    if size != ranks.world_size:
        why = f"rank 0 has {ranks.world_size} ranks, rank {rank} says {size}"
    elif rank not in waiting:
        why = f"rank {rank} is not awaited (awaited: {sorted(waiting)})"
    else:
        why = ""
    try:
        if why:
            msg = why.encode()
            conn.sendall(_REPLY.pack(b"NO", len(msg)) + msg)
            return None
        conn.sendall(_REPLY.pack(b"OK", len(payload)) + payload)
        # Served only once it says it has it all: a rank that went away meanwhile may
        # connect again.
        soon = min(deadline, time.monotonic() + _HELLO_WAIT_S)
        if _recv_exactly(conn, len(_ACK), soon, peer) != _ACK:
            return None
    except (OSError, TimeoutError):
        return None  # that rank is gone (or timed out); it may connect again
    return int(rank)


def _fetch(ranks: Ranks, deadline: float) -> bytes:
    assert ranks.address is not None
    assert ranks.port is not None
    where = f"rank 0 at {ranks.address}:{ranks.port}"
    last: BaseException | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(
                f"rank {ranks.rank} could not reach {where} before the deadline (last "
                f"error: {last!r}); is rank 0 running, and MASTER_ADDR/MASTER_PORT right?"
            )
        try:
            sock = socket.create_connection((ranks.address, ranks.port), timeout=min(left, 5.0))
        except OSError as exc:  # refused (not listening yet), unreachable, timed out
            last = exc
            time.sleep(min(0.1, max(left, 0)))
            continue
        with sock:
            try:
                sock.sendall(_HELLO.pack(_MAGIC, ranks.rank, ranks.world_size))
                status, n = _REPLY.unpack(_recv_exactly(sock, _REPLY.size, deadline, where))
                body = _recv_exactly(sock, n, deadline, where)
            except (TimeoutError, ConnectionError) as exc:
                last = exc
                continue
            if status != b"OK":
                raise ValueError(
                    f"{where} refused rank {ranks.rank}: {body.decode(errors='replace')}"
                )
            try:
                sock.sendall(_ACK)
            except OSError as exc:  # rank 0 did not wait for it: ask again
                last = exc
                continue
            # Then wait until every rank has it: no rank goes on to NCCL's own
            # rendezvous (which has no deadline) while another never came. Rank 0 says
            # which ranks are missing at its own deadline: a little longer here.
            verdict = deadline + _HELLO_WAIT_S
            try:
                status, n = _REPLY.unpack(_recv_exactly(sock, _REPLY.size, verdict, where))
                why = _recv_exactly(sock, n, verdict, where)
            except TimeoutError:
                raise TimeoutError(
                    f"rank {ranks.rank} has the payload, but {where} did not say that every "
                    "rank joined before the deadline"
                ) from None
            except ConnectionError as exc:
                raise ConnectionError(
                    f"{where} closed the connection before every rank joined ({exc!r}); "
                    "did rank 0 fail?"
                ) from None
            if status == b"GO":
                return body
            raise TimeoutError(f"rank {ranks.rank}: {why.decode(errors='replace')}")


def share_bytes(ranks: Ranks, payload: bytes | None = None, *, timeout: float = 120.0) -> bytes:
    """Give ``payload`` from rank 0 to every rank, over TCP; return it on every rank.

    Rank 0 listens on ``ranks.address``:``ranks.port`` (every address of its machine
    if that one is not its own) until each other rank has connected and confirmed
    that it received ``payload``; the others connect, retrying while rank 0 is not
    listening yet. No rank returns before every rank has the payload: a rank that
    never comes makes every rank raise at the deadline, with the ranks missing and
    rank 0's address. No call to the driver. Blocks up to ``timeout`` seconds.

    Raises
    ------
    ValueError
        ``payload`` is missing on rank 0 or given on another rank; rank 0 refused this
        rank (another world size, or its rank already joined).
    TimeoutError
        Not every rank joined before ``timeout`` (on every rank that came, naming
        those missing and rank 0's address), or rank 0 could not be reached.
    ConnectionError
        Rank 0 went away before every rank joined.
    """
    if not isinstance(ranks, Ranks):
        raise TypeError(f"ranks must be a cudriver.nccl.Ranks, not {type(ranks).__name__}")
    if (ranks.rank == 0) != (payload is not None):
        raise ValueError("rank 0 gives the payload; the other ranks pass none")
    if payload is not None and not isinstance(payload, bytes | bytearray):
        raise TypeError(f"payload must be bytes, not {type(payload).__name__}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0, not {timeout!r}")
    deadline = time.monotonic() + timeout
    if ranks.world_size == 1:
        assert payload is not None
        return bytes(payload)
    if ranks.port is None:
        ranks = dataclasses.replace(ranks, port=DEFAULT_PORT)
    if payload is not None:
        _serve(ranks, bytes(payload), deadline)
        return bytes(payload)
    return _fetch(ranks, deadline)


def _nccl() -> Any:
    """``nccl.core`` from nccl4py, or ImportError naming the extra that brings it."""
    try:
        return importlib.import_module("nccl.core")
    except ImportError as exc:
        raise ImportError(
            "NCCL collectives need nccl4py and the NCCL runtime: pip install "
            "'.[nccl]' in a clone of cudriver (CUDA 13; '.[nccl-cu12]' for CUDA 12)"
            f" ({exc})"
        ) from exc


def unique_id(ranks: Ranks | None = None, *, timeout: float = 120.0) -> Any:
    """The job's NCCL unique id: made on rank 0 (``ncclGetUniqueId``), given to all.

    ``ranks`` defaults to :func:`from_environment`. Goes through :func:`share_bytes`.
    Returns an ``nccl.core.UniqueId``.
    """
    nc = _nccl()
    r = from_environment() if ranks is None else ranks
    if r.rank == 0:
        uid = nc.get_unique_id()
        share_bytes(r, bytes(uid), timeout=timeout)
        return uid
    return nc.UniqueId.from_bytes(share_bytes(r, None, timeout=timeout))


class _Collective:
    """What a graph keeps for a collective captured into it (its communicator counts them)."""

    __slots__ = ("__weakref__", "stream")

    def __init__(self, stream: str) -> None:
        self.stream = stream


#: The dtype of a DeviceBuffer made without one: bytes, as its DLPack export says.
_BYTES = np.dtype(np.uint8)


def _nccl_dtype(dt: Any) -> int | None:
    """``ncclDataType_t`` of numpy dtype ``dt`` as nccl4py maps it, or None."""
    try:
        from nccl.core import NcclDataType
    except ImportError:
        return None
    try:
        return int(NcclDataType.from_numpy_dtype(dt))
    except Exception:
        return None


def _invalid(msg: str) -> Exception:
    """nccl4py's ``NcclInvalid(msg)``: what its own methods raise for the same mistake."""
    from nccl.core.typing import NcclInvalid

    exc: Exception = NcclInvalid(msg)
    return exc


def _at_least(r: tuple[int, int, int], want: int, why: str = "") -> None:
    """NcclInvalid unless the receive buffer ``r`` holds ``want`` elements."""
    if r[1] < want:
        raise _invalid(
            f"Buffer count mismatch: recvbuf must have at least {want} elements{why}, got {r[1]}"
        )


def _part(s: tuple[int, int, int], nranks: int) -> int:
    """The count each rank's part of ``s`` holds; NcclInvalid when it is empty."""
    part = s[1] // nranks
    if part < 1:
        raise _invalid(
            f"Buffer count mismatch: sendbuf must have at least {nranks} elements "
            f"(nranks), got {s[1]}"
        )
    return part


def _same(s: tuple[int, int, int], r: tuple[int, int, int]) -> None:
    if s[2] != r[2]:
        from nccl.core import NcclDataType

        raise _invalid(
            f"Dtype mismatch: sendbuf has dtype {NcclDataType(s[2])}, recvbuf has dtype "
            f"{NcclDataType(r[2])}"
        )


class _Direct:
    """What the direct path reads of an nccl4py communicator, once.

    ``call``: nccl4py's bindings module (``nccl.bindings.nccl``), whose functions take
    the pointers, count, ``ncclDataType_t``, op and stream as ints and call NCCL with
    the GIL released. ``device``: the communicator's CUDA ordinal; ``nranks``, ``rank``.
    """

    __slots__ = ("call", "codes", "contexts", "device", "nranks", "rank")

    def __init__(self, call: Any, device: int, nranks: int, rank: int) -> None:
        self.call = call
        self.device = device
        self.nranks = nranks
        self.rank = rank
        #: numpy dtype -> ncclDataType_t, as nccl4py maps it (NcclDataType); None: none.
        self.codes: dict[Any, int | None] = {}
        #: Contexts whose buffers were found on ``device``.
        self.contexts: weakref.WeakSet[Any] = weakref.WeakSet()


def _direct_of(comm: Any) -> _Direct | None:
    """The direct path to ``comm``, an ``nccl.core.Communicator``; None for anything else."""
    try:
        call = importlib.import_module("nccl.bindings.nccl")
        from nccl.core import Communicator as _NcclCommunicator
    except ImportError:
        return None
    if type(comm) is not _NcclCommunicator or not isinstance(
        getattr(comm, "_comm", None), call.Comm
    ):
        return None
    if not comm._comm:
        return None  # destroyed: nccl4py's own methods say so
    return _Direct(call, int(comm.device.device_id), int(comm.nranks), int(comm.rank))


class Communicator:
    """An ``nccl.core.Communicator`` with a direct path, whose :meth:`destroy` cannot hang.

    Every attribute and method is nccl4py's (``comm.allreduce(..., stream=s)``,
    ``comm.rank``, ``comm.nranks``...), called as nccl4py documents it.

    **The direct path.** The collectives :meth:`allreduce`, :meth:`reduce`,
    :meth:`broadcast`, :meth:`allgather`, :meth:`reduce_scatter`, :meth:`alltoall`,
    :meth:`send` and :meth:`recv`, given :class:`~cudriver.DeviceBuffer` objects and no
    ``config``, read each buffer's address, element count and dtype from its fields
    and call NCCL through nccl4py's bindings (``ncclAllReduce`` and the others, with
    the GIL released), with the checks nccl4py makes (the buffers on the
    communicator's device, equal dtypes, the counts each collective needs), raising
    nccl4py's ``NcclInvalid`` as it does. Other buffers (CuPy and PyTorch arrays,
    nccl4py buffers), a ``config``, or a dtype NCCL lacks go to nccl4py's own method.
    Either way the collective is ordered on ``stream`` only (None: the legacy default
    stream), as with nccl4py; a stream-ordered buffer used on another stream has that
    use noted, so its ``close()`` frees it after the collective.

    **Graphs.** A collective enqueued on a stream that captures into a cudriver graph
    (``with stream.capture() as g``) is noted in that graph: it keeps the
    communicator's resources, and ``ncclCommDestroy`` waits for such a graph (and
    every executable graph made from it) to be destroyed, forever if one stays alive
    (measured with NCCL 2.28). So :meth:`destroy` refuses while one lives, naming what
    to close. A capture begun outside cudriver is not seen.
    """

    def __init__(self, comm: Any) -> None:
        self._comm = comm
        self._held: weakref.WeakSet[_Collective] = weakref.WeakSet()
        self._fast: _Direct | bool | None = False  # False: not looked at yet

    @property
    def nccl(self) -> Any:
        """The ``nccl.core.Communicator`` itself."""
        return self._comm

    def __getattr__(self, name: str) -> Any:
        # Only for names not found on this object: a method found once is kept in the
        # instance's dict, so later calls cost what nccl4py's own do, plus the note.
        attr = getattr(self._comm, name)
        if not callable(attr) or name.startswith("_"):
            return attr
        try:
            takes_stream = "stream" in inspect.signature(attr).parameters
        except (TypeError, ValueError):
            takes_stream = False
        if not takes_stream:
            self.__dict__[name] = attr
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            stream = kwargs.get("stream")
            if stream is not None and capture.ACTIVE:
                self._note(stream)
            return attr(*args, **kwargs)

        call.__name__ = name
        call.__doc__ = attr.__doc__
        self.__dict__[name] = call
        return call

    # -- the direct path ---------------------------------------------------------------------
    def _direct(self) -> _Direct | None:
        fast = self._fast
        if fast is False:
            fast = self._fast = _direct_of(self._comm)
        if fast is not None and not self._comm._comm:
            return None  # destroyed or aborted since: nccl4py's method says so
        return fast  # type: ignore[return-value]

    def _slow(self, name: str, *args: Any, **kwargs: Any) -> None:
        """nccl4py's own method ``name``, with the capture note (and ``config`` if given)."""
        if kwargs.get("config", 0) is None:
            del kwargs["config"]
        stream = kwargs.get("stream")
        if stream is not None and capture.ACTIVE:
            self._note(stream)
        getattr(self._comm, name)(*args, **kwargs)

    def _buffer(self, d: _Direct | None, buf: Any, role: str) -> tuple[int, int, int] | None:
        """``(address, count, ncclDataType_t)`` of a DeviceBuffer; None for the slow path."""
        if d is None or type(buf) is not DeviceBuffer:
            return None
        if buf._h is None:
            buf._raise_closed()
        dt = buf._dtype
        if dt is None:
            dt = _BYTES
        codes = d.codes
        code = codes.get(dt, -1)
        if code == -1:
            code = codes[dt] = _nccl_dtype(dt)
        if code is None:
            return None  # nccl4py names the dtype it cannot take
        ctx = buf._context
        if ctx not in d.contexts:
            if ctx is None:
                return None
            ordinal = ctx.device.ordinal
            if ordinal != d.device:
                raise _invalid(
                    f"{role} is on device {ordinal}, but communicator is on device "
                    f"{d.device}. Buffers must be on the same device as the communicator."
                )
            d.contexts.add(ctx)
        return buf._key, buf._nbytes // dt.itemsize, code

    def _stream(self, stream: Any, bufs: tuple[Any, ...]) -> int:
        """The stream's handle as an int (None: 0, the legacy stream); notes uses."""
        if type(stream) is Stream:
            h = stream._key
            if stream._h is None:
                stream._raise_closed()
        elif stream is None:
            h = 0
        else:
            h = int(raw_stream_handle(stream))
        if capture.ACTIVE and stream is not None:
            self._note(stream)
        if h != 2:  # the per-thread stream of whichever thread frees: no use to note
            for b in bufs:
                if b._stream is not None and b._stream_int != h:
                    b._note_use(h)
        return h

    def allreduce(
        self, sendbuf: Any, recvbuf: Any, op: Any, *, stream: Any = None, config: Any = None
    ) -> None:
        """``ncclAllReduce``: reduce ``sendbuf`` over the ranks into each ``recvbuf``.

        nccl4py's ``allreduce``; direct for DeviceBuffers (see the class). The count is
        ``sendbuf``'s; ``recvbuf`` has at least as many elements of the same dtype.
        Enqueues on ``stream`` and returns; allocates nothing.
        """
        d = self._direct() if config is None else None
        s = self._buffer(d, sendbuf, "sendbuf")
        r = self._buffer(d, recvbuf, "recvbuf") if s is not None else None
        if d is None or s is None or r is None:
            return self._slow("allreduce", sendbuf, recvbuf, op, stream=stream, config=config)
        _same(s, r)
        _at_least(r, s[1])
        h = self._stream(stream, (sendbuf, recvbuf))
        d.call.all_reduce(s[0], r[0], s[1], s[2], int(op), self._comm._comm, h)

    def reduce(
        self,
        sendbuf: Any,
        recvbuf: Any,
        op: Any,
        root: int | None = None,
        *,
        stream: Any = None,
        config: Any = None,
    ) -> None:
        """``ncclReduce`` to ``root`` (``ncclAllReduce`` when ``root`` is None).

        nccl4py's ``reduce``; direct for DeviceBuffers (see the class). ``recvbuf`` is
        read on the root only. Enqueues on ``stream`` and returns; allocates nothing.
        """
        if root is None:
            return self.allreduce(sendbuf, recvbuf, op, stream=stream, config=config)
        d = self._direct() if config is None else None
        s = self._buffer(d, sendbuf, "sendbuf")
        on_root = d is not None and root == d.rank
        r = self._buffer(d, recvbuf, "recvbuf") if s is not None and on_root else None
        if d is None or s is None or (on_root and r is None):
            return self._slow("reduce", sendbuf, recvbuf, op, root, stream=stream, config=config)
        if r is not None:
            _same(s, r)
            if r[1] < s[1]:
                raise _invalid(
                    f"Buffer count mismatch: recvbuf must have at least {s[1]} elements, got {r[1]}"
                )
        h = self._stream(stream, (sendbuf, recvbuf) if r is not None else (sendbuf,))
        rptr = r[0] if r is not None else 0
        d.call.reduce(s[0], rptr, s[1], s[2], int(op), int(root), self._comm._comm, h)

    def broadcast(
        self, sendbuf: Any, recvbuf: Any, root: int, *, stream: Any = None, config: Any = None
    ) -> None:
        """``ncclBroadcast`` from ``root``'s ``sendbuf`` into every ``recvbuf``.

        nccl4py's ``broadcast``; direct for DeviceBuffers (see the class). ``sendbuf``
        is read on the root only, where both have the same count and dtype. Enqueues
        on ``stream`` and returns; allocates nothing.
        """
        d = self._direct() if config is None else None
        r = self._buffer(d, recvbuf, "recvbuf")
        on_root = d is not None and root == d.rank
        s = self._buffer(d, sendbuf, "sendbuf") if r is not None and on_root else None
        if d is None or r is None or (on_root and s is None):
            return self._slow("broadcast", sendbuf, recvbuf, root, stream=stream, config=config)
        if s is not None:
            _same(s, r)
            if r[1] != s[1]:
                raise _invalid(
                    f"Buffer count mismatch: recvbuf must have exactly {s[1]} elements, got {r[1]}"
                )
        h = self._stream(stream, (sendbuf, recvbuf) if s is not None else (recvbuf,))
        sptr = s[0] if s is not None else 0
        d.call.broadcast(sptr, r[0], r[1], r[2], int(root), self._comm._comm, h)

    def allgather(
        self, sendbuf: Any, recvbuf: Any, *, stream: Any = None, config: Any = None
    ) -> None:
        """``ncclAllGather``: every rank's ``sendbuf``, in rank order, into each ``recvbuf``.

        nccl4py's ``allgather``; direct for DeviceBuffers (see the class). ``recvbuf``
        holds at least ``nranks`` times ``sendbuf``'s count. Enqueues on ``stream`` and
        returns; allocates nothing.
        """
        d = self._direct() if config is None else None
        s = self._buffer(d, sendbuf, "sendbuf")
        r = self._buffer(d, recvbuf, "recvbuf") if s is not None else None
        if d is None or s is None or r is None:
            return self._slow("allgather", sendbuf, recvbuf, stream=stream, config=config)
        _same(s, r)
        _at_least(r, d.nranks * s[1], " (nranks * sendcount)")
        h = self._stream(stream, (sendbuf, recvbuf))
        d.call.all_gather(s[0], r[0], s[1], s[2], self._comm._comm, h)

    def reduce_scatter(
        self, sendbuf: Any, recvbuf: Any, op: Any, *, stream: Any = None, config: Any = None
    ) -> None:
        """``ncclReduceScatter``: the reduction, rank ``i`` receiving its ``i``-th part.

        nccl4py's ``reduce_scatter``; direct for DeviceBuffers (see the class). Each
        part is ``sendbuf``'s count over ``nranks``; ``recvbuf`` holds at least one.
        Enqueues on ``stream`` and returns; allocates nothing.
        """
        d = self._direct() if config is None else None
        s = self._buffer(d, sendbuf, "sendbuf")
        r = self._buffer(d, recvbuf, "recvbuf") if s is not None else None
        if d is None or s is None or r is None:
            return self._slow("reduce_scatter", sendbuf, recvbuf, op, stream=stream, config=config)
        _same(s, r)
        part = _part(s, d.nranks)
        _at_least(r, part, " (sendcount / nranks)")
        h = self._stream(stream, (sendbuf, recvbuf))
        d.call.reduce_scatter(s[0], r[0], part, s[2], int(op), self._comm._comm, h)

    def alltoall(
        self, sendbuf: Any, recvbuf: Any, *, stream: Any = None, config: Any = None
    ) -> None:
        """``ncclAlltoAll``: part ``j`` of each rank's ``sendbuf`` to rank ``j``.

        nccl4py's ``alltoall``; direct for DeviceBuffers (see the class). Each part is
        ``sendbuf``'s count over ``nranks``; ``recvbuf`` holds at least ``sendbuf``'s
        count. Enqueues on ``stream`` and returns; allocates nothing.
        """
        d = self._direct() if config is None else None
        s = self._buffer(d, sendbuf, "sendbuf")
        r = self._buffer(d, recvbuf, "recvbuf") if s is not None else None
        if d is None or s is None or r is None:
            return self._slow("alltoall", sendbuf, recvbuf, stream=stream, config=config)
        _same(s, r)
        part = _part(s, d.nranks)
        _at_least(r, s[1], " (nranks * count)")
        h = self._stream(stream, (sendbuf, recvbuf))
        d.call.allto_all(s[0], r[0], part, s[2], self._comm._comm, h)

    def send(self, sendbuf: Any, peer: int, *, stream: Any = None) -> None:
        """``ncclSend`` of ``sendbuf`` to rank ``peer`` (which calls :meth:`recv`).

        nccl4py's ``send``; direct for a DeviceBuffer (see the class). Enqueues on
        ``stream`` and returns; allocates nothing.
        """
        self._p2p("send", sendbuf, "sendbuf", peer, stream)

    def recv(self, recvbuf: Any, peer: int, *, stream: Any = None) -> None:
        """``ncclRecv`` into ``recvbuf`` from rank ``peer`` (which calls :meth:`send`).

        nccl4py's ``recv``; direct for a DeviceBuffer (see the class). Enqueues on
        ``stream`` and returns; allocates nothing.
        """
        self._p2p("recv", recvbuf, "recvbuf", peer, stream)

    def _p2p(self, name: str, buf: Any, role: str, peer: int, stream: Any) -> None:
        d = self._direct()
        b = self._buffer(d, buf, role)
        if d is None or b is None:
            return self._slow(name, buf, peer, stream=stream)
        h = self._stream(stream, (buf,))
        getattr(d.call, name)(b[0], b[1], b[2], int(peer), self._comm._comm, h)
        return None

    # -- graphs ------------------------------------------------------------------------------
    def _note(self, stream: Any) -> None:
        """Keep a mark in the cudriver graph that ``stream`` captures into, if any."""
        try:
            h = raw_stream_handle(stream)
        except TypeError:
            return
        cid = capture.capture_id(h)
        session = capture.ACTIVE.get(cid) if cid is not None else None
        if session is None:
            return
        mark = _Collective(repr(stream))
        session.add((mark,))
        self._held.add(mark)

    def holders(self) -> list[str]:
        """The streams whose captured graphs still hold a collective of this communicator."""
        return sorted({m.stream for m in self._held})

    def destroy(self) -> None:
        """``ncclCommDestroy``, once no cudriver graph holds one of its collectives.

        Raises
        ------
        RuntimeError
            A :class:`~cudriver.Graph` or :class:`~cudriver.GraphExec` captured with a
            collective of this communicator is still alive (the message names the
            capturing streams); close them first. The communicator is left as it was.
        """
        if self._held:
            _release.settle()  # executable graphs closed just now release their keep
        held = self.holders()
        if held:
            raise RuntimeError(
                f"{len(self._held)} collective(s) of this communicator are held by graphs "
                f"captured on {', '.join(held)}: close those Graph and GraphExec objects "
                "first (ncclCommDestroy would wait for them forever)"
            )
        self._comm.destroy()

    def __repr__(self) -> str:
        return f"<cudriver.nccl.Communicator of {self._comm!r}>"


def communicator(
    ranks: Ranks | None = None,
    *,
    device: Device | int | None = None,
    timeout: float = 120.0,
) -> Communicator:
    """Make ``device`` current and join the job's NCCL communicator on it.

    ``ranks`` defaults to :func:`from_environment`; ``device`` to
    ``Device(ranks.local_rank)``, made current on this thread (``cuCtxSetCurrent`` of
    its primary context, which NCCL uses). Shares the unique id (:func:`unique_id`,
    which returns on no rank before every rank has it: a rank that never comes makes
    each rank raise ``TimeoutError`` naming it, after ``timeout`` seconds), then calls
    ``nccl.core.Communicator.init`` (``ncclCommInitRank``), which blocks until every
    rank has joined: a rank that dies between the two still holds the others there.
    Returns a :class:`Communicator`; destroy it with ``comm.destroy()`` when done,
    which refuses while a graph holds one of its collectives.
    """
    nc = _nccl()
    r = from_environment() if ranks is None else ranks
    if device is None:
        dev = Device(r.local_rank)
    elif isinstance(device, Device):
        dev = device
    elif isinstance(device, int) and not isinstance(device, bool):
        dev = Device(device)
    else:
        raise TypeError(f"device must be a Device or an ordinal, not {type(device).__name__}")
    dev.set_current()
    uid = unique_id(r, timeout=timeout)
    return Communicator(nc.Communicator.init(nranks=r.world_size, rank=r.rank, unique_id=uid))
