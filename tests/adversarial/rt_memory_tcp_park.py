"""Red-team: memory parked in TCP buffers on the sandbox's own loopback. At import the kernel
connects to itself 300 times and fills each connection's buffers (1.1 GB here): no process maps
that memory, and cgroup v1 charges a group for it only when the group's TCP accounting is on. The
runner may open Unix sockets only, so the first TCP socket is refused and the import fails."""
import socket

import torch
from task import input_t, output_t

_server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
_server.bind(("127.0.0.1", 0))
_server.listen(1024)
_kept = []
for _ in range(300):
    _client = socket.create_connection(_server.getsockname())
    _peer, _ = _server.accept()
    _client.setblocking(False)
    try:
        while True:
            _client.send(b"x" * (1 << 20))
    except BlockingIOError:
        pass
    _kept.append((_client, _peer))


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    torch.add(a, b, out=out)
    return out
