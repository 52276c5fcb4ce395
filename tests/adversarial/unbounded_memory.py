"""Trick (or bug): allocate without end."""
import torch

_hoard = []


def custom_kernel(data):
    while True:
        _hoard.append(torch.ones(64 * 1024 * 1024 // 4))  # 64 MB a step, written so it is resident
