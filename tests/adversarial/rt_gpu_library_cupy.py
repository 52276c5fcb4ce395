"""Trick (class 5, library, GPU): the product is cuBLAS's, reached through CuPy on the tensors' own memory.

No torch operator names a matrix product here, and a GPU host without perf takes no sample of the runner.
The judge still knows cuBLAS ran: its code's pages (host code and the device code it loads) are mapped
into the runner only by running it (sandbox/judge/footprint.py). Expected: `rejected`, forbidden-op.
"""
import cupy
import torch


def custom_kernel(data):
    a, b = data
    out = torch.empty((a.shape[0], b.shape[1]), dtype=torch.float32, device=a.device)
    cupy.matmul(cupy.from_dlpack(a.float().contiguous()), cupy.from_dlpack(b.float().contiguous()),
                out=cupy.from_dlpack(out))
    return out.to(a.dtype)
