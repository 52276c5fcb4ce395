"""Red-team: hold memory where no resident set shows it. At import the kernel parks 2.4 GB in
twelve memfds it never maps (each under the sandbox's file-size limit), then adds its vectors as
the seed does. Under a 1.5 GB limit it must be stopped: the runner's memory group is charged for
every page it faults in, files in memory included."""
import os

import torch
from task import input_t, output_t

_parked = []
for _ in range(12):
    _fd = os.memfd_create("park")
    os.posix_fallocate(_fd, 0, 200 << 20)
    _parked.append(_fd)


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    torch.add(a, b, out=out)
    return out
