"""Red-team: a fork bomb. At import the kernel starts children that each hold a process for a few
seconds (`sleep`, so that their number, not their memory, is what grows), up to 6,000 of them (a real bomb does not stop; this one stops so that a host without
a task group survives the test), then adds its vectors. Where the runner has a task group, the
forks past its cap are refused, and the verdict is the limit, not whatever the kernel made of it."""
import os

import torch
from task import input_t, output_t

_started = 0
try:
    for _ in range(6000):
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "3"])  # small children: the bomb is in their number
        _started += 1
except OSError:
    pass  # refused: carry on as if nothing happened


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    torch.add(a, b, out=out)
    return out
