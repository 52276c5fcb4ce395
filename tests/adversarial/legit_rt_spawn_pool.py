"""Legitimate (expected ok): softmax rows split over a pool of two processes started with multiprocessing's
"spawn" method (the safe choice once threads exist; "forkserver" is Python 3.14's default), made on the first
call large enough to share. The workers run a function of this module, so each re-imports the submission by
name: the runner keeps its folder importable (red-team round 27 saw such a pool wait for ever, `timeout`)."""
import multiprocessing

import numpy as np
import torch
from task import input_t, output_t

_pool = None


def softmax_rows(block: np.ndarray) -> np.ndarray:
    shifted = block - block.max(axis=1, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=1, keepdims=True)


def custom_kernel(data: input_t) -> output_t:
    global _pool
    rows = data[0].contiguous().numpy()
    if rows.shape[0] < 64:
        return torch.from_numpy(softmax_rows(rows))
    if _pool is None:
        _pool = multiprocessing.get_context("spawn").Pool(2)
    halves = _pool.map(softmax_rows, np.array_split(rows, 2))
    return torch.from_numpy(np.concatenate(halves))
