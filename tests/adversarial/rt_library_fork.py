"""Trick (class 5, library): the library matmul runs in a forked child process.

Each call forks; the child computes numpy's matmul (OpenBLAS, one thread) on the inputs
(the arena is shared memory, so the child sees them) and writes the float32 result into an
anonymous shared mapping, then _exits. The parent only waits. A sampler attached to the
runner's pid at start might not follow new processes.
"""
import mmap
import os

import numpy as np
import torch


def custom_kernel(data):
    a, b = data
    m, n = a.shape[0], b.shape[1]
    nbytes = max(4, m * n * 4)
    shm = mmap.mmap(-1, nbytes)
    af, bf = a.float().numpy(), b.float().numpy()
    pid = os.fork()
    if pid == 0:
        try:
            os.environ["OPENBLAS_NUM_THREADS"] = "1"
            out = np.frombuffer(shm, dtype=np.float32, count=m * n).reshape(m, n)
            np.matmul(af, bf, out=out)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    c = torch.frombuffer(bytearray(shm[: m * n * 4]), dtype=torch.float32).reshape(m, n).clone()
    shm.close()
    return c.to(torch.bfloat16)
