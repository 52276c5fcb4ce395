"""Legitimate (expected ok): softmax split across a process pool created lazily on the first call.
Two worker interpreters (subprocess, so no fork of an OpenMP runtime) map one shared file in /dev/shm;
each call copies x there, each worker computes its half of the rows with plain numpy (max, exp, sum,
divide: nothing the problem forbids), the caller waits for both and returns a new tensor. Workers block
on a pipe between calls (no CPU while idle)."""
import mmap
import os
import struct
import subprocess
import sys

import torch

CAP = 64 << 20
PATH = "/dev/shm/legit_pool.bin"
WORKER = r"""
import mmap, os, struct, sys
import numpy as np
rfd, wfd = int(sys.argv[2]), int(sys.argv[3])
fd = os.open(sys.argv[1], os.O_RDWR)
buf = mmap.mmap(fd, os.fstat(fd).st_size)
half = len(buf) // 2
while True:
    head = os.read(rfd, 32)
    if len(head) < 32:
        break
    rows, cols, lo, hi = struct.unpack("<qqqq", head)
    x = np.frombuffer(buf, dtype=np.float32, count=rows * cols).reshape(rows, cols)[lo:hi]
    y = np.frombuffer(buf, dtype=np.float32, count=rows * cols, offset=half).reshape(rows, cols)[lo:hi]
    np.subtract(x, x.max(axis=1, keepdims=True), out=y)
    np.exp(y, out=y)
    y /= y.sum(axis=1, keepdims=True)
    os.write(wfd, b"k")
"""
_pool = None


def _start():
    with open(PATH, "wb") as f:
        f.truncate(CAP)
    fd = os.open(PATH, os.O_RDWR)
    buf = mmap.mmap(fd, CAP)
    workers = []
    for _ in range(2):
        to_r, to_w = os.pipe()
        back_r, back_w = os.pipe()
        subprocess.Popen([sys.executable, "-I", "-c", WORKER, PATH, str(to_r), str(back_w)], pass_fds=(to_r, back_w),
                         stdin=subprocess.DEVNULL)
        os.close(to_r)
        os.close(back_w)
        workers.append((to_w, back_r))
    return torch.frombuffer(buf, dtype=torch.uint8), workers


def custom_kernel(data):
    global _pool
    if _pool is None:
        _pool = _start()
    base, workers = _pool
    (x,) = data
    rows, cols = x.shape
    n = rows * cols
    base[:4 * n].view(torch.float32).view(rows, cols).copy_(x)
    cut = rows // 2
    for (to_w, _), (lo, hi) in zip(workers, ((0, cut), (cut, rows))):
        os.write(to_w, struct.pack("<qqqq", rows, cols, lo, hi))
    for _, back_r in workers:
        if os.read(back_r, 1) != b"k":
            raise RuntimeError("worker gone")
    return base[CAP // 2:CAP // 2 + 4 * n].view(torch.float32).view(rows, cols).clone()
