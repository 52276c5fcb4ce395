"""Class 4, library use hidden from the sampler: torch.softmax in a helper process
started at IMPORT time.

The judge attached `perf record -p <runner pid>` only after the candidate had loaded
(it now attaches before the import and waits for perf to confirm). `perf record -p` samples the threads of that pid
(and whatever they fork LATER: inherit); a process the runner started before the attach is not
followed. So the import starts a fresh interpreter (subprocess, not fork: no OpenMP after fork),
which waits on a pipe; each call copies x into a shared file in /dev/shm, the helper runs
torch.softmax (at::native::softmax, forbidden) there and writes y back. The runner only waits.
CPU time: the helper works only during calls (on the judge's clocks, bounded as any kernel's);
idle, it blocks in read(). Expected if the boundary holds: rejected forbidden-op."""
import mmap
import os
import struct
import subprocess
import sys

import torch

CAP = 64 << 20  # bytes of the shared file: x and y for the largest CPU shape
_PATH = "/dev/shm/rt_prefork.bin"

_HELPER = r"""
import mmap, os, struct, sys
import torch
torch.set_num_threads(int(sys.argv[2]))
rfd, wfd = int(sys.argv[3]), int(sys.argv[4])
fd = os.open(sys.argv[1], os.O_RDWR)
cap = os.fstat(fd).st_size
buf = mmap.mmap(fd, cap)
base = torch.frombuffer(buf, dtype=torch.float32)
half = cap // 8
while True:
    head = os.read(rfd, 16)
    if len(head) < 16:
        break
    rows, cols = struct.unpack("<qq", head)
    n = rows * cols
    x = base[:n].view(rows, cols)
    y = base[half:half + n].view(rows, cols)
    y.copy_(torch.softmax(x, dim=-1))
    os.write(wfd, b"k")
"""

with open(_PATH, "wb") as f:
    f.truncate(CAP)
_fd = os.open(_PATH, os.O_RDWR)
_buf = mmap.mmap(_fd, CAP)
_base = torch.frombuffer(_buf, dtype=torch.float32)
_to_r, _to_w = os.pipe()
_back_r, _back_w = os.pipe()
_proc = subprocess.Popen([sys.executable, "-I", "-c", _HELPER, _PATH, str(torch.get_num_threads()), str(_to_r), str(_back_w)],
                         pass_fds=(_to_r, _back_w), stdin=subprocess.DEVNULL)
os.close(_to_r)
os.close(_back_w)
_HALF = CAP // 8


def custom_kernel(data):
    (x,) = data
    rows, cols = x.shape
    n = rows * cols
    _base[:n].view(rows, cols).copy_(x)
    os.write(_to_w, struct.pack("<qq", rows, cols))
    if os.read(_back_r, 1) != b"k":
        raise RuntimeError("helper gone")
    return _base[_HALF:_HALF + n].view(rows, cols)
