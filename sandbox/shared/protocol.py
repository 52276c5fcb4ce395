"""Length-prefixed JSON messages over one Unix socket between the judge and the runner.

The runner is untrusted, so what it sends is parsed as JSON only (no pickle, no code),
bounded in size, and checked by the judge against the one reply it expects next.
File descriptors (the arena's memfd) travel beside a message with SCM_RIGHTS.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

MAX_MESSAGE = 8 << 20  # a message larger than this is a protocol violation, not a buffer to fill
_HEADER = struct.Struct("!I")


class ChannelClosed(ConnectionError):
    """The other side closed the socket (exited or crashed)."""


class ProtocolError(ValueError):
    """A message that is not what the protocol allows at this point."""


def _recv_exact(sock: socket.socket, size: int, fds: list[int] | None = None) -> bytes:
    chunks, got = [], 0
    while got < size:
        if fds is not None and not got:
            data, ancdata, _flags, _addr = sock.recvmsg(size - got, socket.CMSG_LEN(16 * 4))
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(payload) - len(payload) % 4
                    fds.extend(struct.unpack(f"{usable // 4}i", payload[:usable]))
        else:
            data = sock.recv(size - got)
        if not data:
            raise ChannelClosed("the channel was closed")
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    body = json.dumps(message, separators=(",", ":"), default=str).encode()
    frame = _HEADER.pack(len(body)) + body
    if fds:
        sock.sendmsg([frame[:_HEADER.size]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))])
        sock.sendall(frame[_HEADER.size:])
    else:
        sock.sendall(frame)


def receive(sock: socket.socket, fds: list[int] | None = None) -> dict[str, Any]:
    """One message; `fds` collects descriptors sent with it."""
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size, fds))
    if size > MAX_MESSAGE:
        raise ProtocolError(f"a message of {size} bytes (limit {MAX_MESSAGE})")
    try:
        message = json.loads(_recv_exact(sock, size))
    except (ValueError, RecursionError) as exc:  # arrays nested past the parser's depth (red-team round 27)
        raise ProtocolError(f"a message that is not JSON we read: {str(exc)[:200]}") from exc
    if not isinstance(message, dict):
        raise ProtocolError(f"a message that is not an object: {type(message).__name__}")
    return message
