"""Red-team: memory parked in pipe buffers, which no process maps and no file holds. At import the
kernel opens 1,400 pipes, grows each to 1 MB and fills it (1.4 GB), then adds its vectors. It gains
nothing: the sandbox's user may not grow pipes past the kernel's per-user allowance (the resize is
refused), and what pipes do hold is charged to the runner's memory group."""
import fcntl
import os

import torch
from task import input_t, output_t

_pipes = []
for _ in range(1400):
    _read, _write = os.pipe()
    fcntl.fcntl(_write, fcntl.F_SETPIPE_SZ, 1 << 20)
    os.set_blocking(_write, False)
    try:
        while True:
            os.write(_write, b"x" * (1 << 16))
    except BlockingIOError:
        pass
    _pipes.append((_read, _write))


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    torch.add(a, b, out=out)
    return out
