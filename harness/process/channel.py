"""The private result channel between the parent and its worker.

A frame is ``MAGIC | u32 header length | u64 payload length | JSON header | payload``. The
header's ``tensors`` list describes each tensor (dtype name, shape, byte count) and the
payload is their raw bytes, back to back. Nested values (tuples of tensors, ints, dicts)
travel as a JSON tree whose tensor leaves are ``{"t": index}``.

Nothing coming from the worker is ever unpickled or ``torch.load``-ed: the worker runs the
candidate's code, and unpickling its bytes would let it run code in the parent. Decoding
only accepts dtype names from an allowlist, checks every size against the announced frame
and caps frame sizes before allocating.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

MAGIC = b"CKH1"
_PREFIX = struct.Struct("<4sIQ")
MAX_HEADER = 16 << 20

_DTYPE_NAMES = [
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
]
DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in _DTYPE_NAMES
    if isinstance(getattr(torch, name, None), torch.dtype)
}
DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}


class ChannelError(Exception):
    """A malformed frame, a frame over the size limit, or a closed channel."""


class ChannelClosed(ChannelError):
    """End of file before a whole frame arrived."""


class ChannelTimeout(ChannelError):
    """No whole frame before the deadline."""


def dtype_name(dtype: torch.dtype) -> str:
    name = DTYPE_NAMES.get(dtype)
    if name is None:
        raise ChannelError(f"dtype {dtype} cannot travel on the channel")
    return name


def tensor_bytes(t: torch.Tensor) -> memoryview:
    """The tensor's logical elements in row-major order, as raw bytes (a CPU copy if needed)."""
    flat = t.detach()
    if flat.device.type != "cpu":
        flat = flat.cpu()
    flat = flat.contiguous().reshape(-1)
    if flat.numel() == 0:
        return memoryview(b"")
    array: Any = flat.view(torch.uint8).numpy()
    return memoryview(array).cast("B")


def tensor_from_bytes(
    data: bytes | bytearray | memoryview, dtype_str: str, shape: Sequence[int]
) -> torch.Tensor:
    dtype = DTYPES.get(dtype_str)
    if dtype is None:
        raise ChannelError(f"unknown dtype {dtype_str!r} on the channel")
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ChannelError(f"negative dimension in shape {dims}")
    numel = 1
    for d in dims:
        numel *= d
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(data) != numel * itemsize:
        raise ChannelError(f"tensor of shape {dims} {dtype_str} announced {len(data)} bytes")
    if numel == 0:
        return torch.empty(dims, dtype=dtype)
    if isinstance(data, memoryview) and not data.readonly and data.contiguous:
        # a slice of a frame's own payload (``recv`` reads it into a fresh buffer that
        # nothing else holds): the tensor keeps it alive instead of a copy of it -- at an
        # upstream size a reply's copies were two more outputs' worth of memory
        shared = torch.frombuffer(data, dtype=torch.uint8)
        if shared.data_ptr() % itemsize == 0:
            return shared.view(dtype).reshape(dims)
    buf = bytearray(data)
    return torch.frombuffer(buf, dtype=torch.uint8).view(dtype).reshape(dims)


@dataclass
class Frame:
    header: dict[str, Any]
    tensors: list[torch.Tensor] = field(default_factory=list)


def encode(
    header: dict[str, Any], tensors: Sequence[torch.Tensor] = ()
) -> list[bytes | memoryview]:
    """The frame as a list of byte chunks (no copy of the tensor bytes where avoidable)."""
    chunks: list[memoryview] = []
    described = []
    for t in tensors:
        data = tensor_bytes(t)
        chunks.append(data)
        described.append(
            {"dtype": dtype_name(t.dtype), "shape": list(t.shape), "nbytes": len(data)}
        )
    full = dict(header)
    full["tensors"] = described
    head = json.dumps(full, allow_nan=True, default=str).encode()
    if len(head) > MAX_HEADER:
        raise ChannelError(f"frame header of {len(head)} bytes is over the limit")
    payload = sum(len(c) for c in chunks)
    return [_PREFIX.pack(MAGIC, len(head), payload), head, *chunks]


def decode(header_bytes: bytes, payload: memoryview) -> Frame:
    try:
        header = json.loads(header_bytes)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ChannelError(f"frame header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ChannelError("frame header is not a JSON object")
    described = header.pop("tensors", [])
    if not isinstance(described, list):
        raise ChannelError("frame header 'tensors' is not a list")
    tensors = []
    offset = 0
    for item in described:
        if not isinstance(item, dict):
            raise ChannelError("bad tensor description")
        nbytes = int(item.get("nbytes", -1))
        if nbytes < 0 or offset + nbytes > len(payload):
            raise ChannelError("tensor bytes run past the end of the frame")
        tensors.append(
            tensor_from_bytes(
                payload[offset : offset + nbytes], str(item.get("dtype")), item.get("shape", [])
            )
        )
        offset += nbytes
    if offset != len(payload):
        raise ChannelError("frame payload has bytes no tensor describes")
    return Frame(header, tensors)


# -- tree encoding ---------------------------------------------------------------------


class Unchanged:
    """In an unpacked tree: a tensor the sender left out because its bytes are the ones the
    receiver sent it (a worker's input after a call that did not write it)."""

    def __repr__(self) -> str:
        return "<unchanged>"


UNCHANGED = Unchanged()


def pack_tree(
    value: Any,
    tensors: list[torch.Tensor],
    describe: Callable[[torch.Tensor], dict[str, Any]] | None = None,
    unchanged: Callable[[torch.Tensor], bool] | None = None,
) -> Any:
    """Encode a nested value; tensors are appended to ``tensors`` and referenced by index.
    A tensor ``unchanged`` says yes to is left out (a ``same`` node, unpacked as
    ``UNCHANGED``)."""
    if isinstance(value, torch.Tensor):
        if unchanged is not None and unchanged(value):
            node: dict[str, Any] = {"same": True}
        else:
            node = {"t": len(tensors)}
            tensors.append(value)
        if describe is not None:
            node.update(describe(value))
        return node
    if isinstance(value, tuple):
        return {"tuple": [pack_tree(v, tensors, describe, unchanged) for v in value]}
    if isinstance(value, list):
        return {"list": [pack_tree(v, tensors, describe, unchanged) for v in value]}
    if isinstance(value, dict):
        return {
            "dict": [[str(k), pack_tree(v, tensors, describe, unchanged)] for k, v in value.items()]
        }
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"v": value}
    if isinstance(value, torch.dtype):
        return {"dtype": dtype_name(value)}
    return {"repr": type(value).__name__}


def unpack_tree(node: Any, tensors: Sequence[Any]) -> Any:
    if not isinstance(node, dict):
        raise ChannelError("bad tree node")
    if "t" in node:
        index = int(node["t"])
        if not 0 <= index < len(tensors):
            raise ChannelError("tree references a missing tensor")
        return tensors[index]
    if node.get("same") is True:
        return UNCHANGED
    if "tuple" in node:
        return tuple(unpack_tree(v, tensors) for v in node["tuple"])
    if "list" in node:
        return [unpack_tree(v, tensors) for v in node["list"]]
    if "dict" in node:
        return {str(k): unpack_tree(v, tensors) for k, v in node["dict"]}
    if "v" in node:
        return node["v"]
    if "dtype" in node:
        dtype = DTYPES.get(str(node["dtype"]))
        if dtype is None:
            raise ChannelError("unknown dtype in tree")
        return dtype
    if "repr" in node:
        return _Opaque(str(node["repr"]))
    raise ChannelError("bad tree node")


class _Opaque:
    """A value the worker could not encode (its type name only)."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


def tree_leaves(node: Any) -> list[dict[str, Any]]:
    """Tensor leaf nodes of an encoded tree, in order."""
    if not isinstance(node, dict):
        return []
    if "t" in node:
        return [node]
    out: list[dict[str, Any]] = []
    for key in ("tuple", "list"):
        if key in node:
            for v in node[key]:
                out.extend(tree_leaves(v))
    if "dict" in node:
        for _, v in node["dict"]:
            out.extend(tree_leaves(v))
    return out


# -- the two ends ------------------------------------------------------------------------


#: what a channel's pipe holds in flight: Linux's default is 64 KiB, so a 6 GB tensor took
#: 100,000 wake-ups each way; a megabyte (the unprivileged maximum by default) moves it in
#: a sixteenth of them (bench/harness/channel_throughput.py)
PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, named in the module from Python 3.10 on Linux only


def pipe() -> tuple[int, int]:
    """``os.pipe()`` with room for ``PIPE_BYTES`` in flight where the system allows it (a
    lower ``fs.pipe-max-size`` or a user over ``fs.pipe-user-pages-soft`` keeps the
    default: the channel works either way, only slower)."""
    read_fd, write_fd = os.pipe()
    try:
        fcntl.fcntl(write_fd, _F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass
    return read_fd, write_fd


#: frames at least this large are read into memory that is not zeroed first
UNZEROED_BYTES = 1 << 20


def receive_buffer(n: int) -> memoryview:
    """A writable buffer of ``n`` bytes for a frame's part, which the read fills whole. A
    large one comes from ``torch.empty`` instead of ``bytearray``, which writes zeros over
    it first: one pass less over a gigabyte-sized output (a 512 MiB round trip 841-885 ->
    997-1,077 MB/s on the 2-core CPU VM, bench/RESULTS.md 2026-12-06)."""
    if n < UNZEROED_BYTES:
        return memoryview(bytearray(n))
    array: Any = torch.empty(n, dtype=torch.uint8).numpy()
    return memoryview(array).cast("B")


class BlockingEnd:
    """The worker's end: blocking reads and writes on inherited pipe fds."""

    def __init__(self, fd_in: int, fd_out: int) -> None:
        self.fd_in = fd_in
        self.fd_out = fd_out

    def send(self, header: dict[str, Any], tensors: Sequence[torch.Tensor] = ()) -> None:
        for chunk in encode(header, tensors):
            view = memoryview(chunk).cast("B")
            while view:
                written = os.write(self.fd_out, view)
                view = view[written:]

    def _read_exact(self, n: int) -> memoryview:
        view = receive_buffer(n)
        got = 0
        while got < n:
            count = os.readv(self.fd_in, [view[got:]])
            if count == 0:
                raise ChannelClosed("parent closed the channel")
            got += count
        return view

    def recv(self, max_payload: int = 1 << 40) -> Frame:
        magic, head_len, payload_len = _PREFIX.unpack(self._read_exact(_PREFIX.size))
        if magic != MAGIC or head_len > MAX_HEADER or payload_len > max_payload:
            raise ChannelError("bad frame from the parent")
        head = bytes(self._read_exact(head_len))
        payload = self._read_exact(payload_len)
        return decode(head, payload)


class ParentEnd:
    """The parent's end: non-blocking I/O with a deadline and a tick callback.

    ``tick`` runs a few times a second while waiting (the runner uses it to notice a dead
    worker and to enforce the memory cap); it raises to abort the wait.
    """

    def __init__(self, fd_to_worker: int, fd_from_worker: int) -> None:
        self.fd_out = fd_to_worker
        self.fd_in = fd_from_worker
        os.set_blocking(self.fd_out, False)
        os.set_blocking(self.fd_in, False)

    def close(self) -> None:
        for fd in (self.fd_out, self.fd_in):
            try:
                os.close(fd)
            except OSError:
                pass

    def send(
        self,
        header: dict[str, Any],
        tensors: Sequence[torch.Tensor],
        deadline: float,
        tick: Callable[[], None],
    ) -> None:
        for chunk in encode(header, tensors):
            view = memoryview(chunk).cast("B")
            while view:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ChannelTimeout("timed out sending to the worker")
                _, writable, _ = select.select([], [self.fd_out], [], min(remaining, 0.2))
                if not writable:
                    tick()
                    continue
                try:
                    written = os.write(self.fd_out, view)
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    raise ChannelClosed("worker closed its end of the channel") from None
                view = view[written:]

    def _read_exact(self, n: int, deadline: float, tick: Callable[[], None]) -> memoryview:
        view = receive_buffer(n)
        got = 0
        while got < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChannelTimeout("timed out waiting for the worker")
            readable, _, _ = select.select([self.fd_in], [], [], min(remaining, 0.2))
            if not readable:
                tick()
                continue
            try:
                count = os.readv(self.fd_in, [view[got:]])
            except BlockingIOError:
                continue
            if count == 0:
                raise ChannelClosed("worker closed the channel")
            got += count
        return view

    def recv(self, deadline: float, tick: Callable[[], None], max_payload: int) -> Frame:
        magic, head_len, payload_len = _PREFIX.unpack(
            self._read_exact(_PREFIX.size, deadline, tick)
        )
        if magic != MAGIC:
            raise ChannelError(
                "bad frame magic from the worker (something else wrote to the channel)"
            )
        if head_len > MAX_HEADER:
            raise ChannelError(f"worker announced a {head_len}-byte header (limit {MAX_HEADER})")
        if payload_len > max_payload:
            raise ChannelError(
                f"worker announced a {payload_len}-byte payload (limit {max_payload})"
            )
        head = bytes(self._read_exact(head_len, deadline, tick))
        payload = self._read_exact(payload_len, deadline, tick)
        return decode(head, payload)

    def pending(self) -> bool:
        """Whether unread bytes wait on the channel (a reply nobody asked for)."""
        readable, _, _ = select.select([self.fd_in], [], [], 0)
        if not readable:
            return False
        try:
            data = os.read(self.fd_in, 1)
        except BlockingIOError:
            return False
        return bool(data)
