"""Red-team: memory on both sides of the runner's limit. The kernel parks 1.4 GB in memfds (its
memory group is charged, no process's resident set shows it), then asks the judge to build a
source whose constexpr table makes the compiler hold about 1 GB. Under a 2 GB limit it must be
stopped: the compiler runs in the runner's memory group, so both count against one limit."""
import os

import torch
from task import input_t, output_t

from sandbox.native import load_cpp

_parked = [os.memfd_create("park") for _ in range(8)]  # 8 x 192 MB: each file under the 256 MB limit
for _fd in _parked:
    os.posix_fallocate(_fd, 0, 192 << 20)
_TABLE = r"""
struct A { long d[3600013]; };
constexpr A make() { A a{}; for (int i = 0; i < 3600013; ++i) a.d[i] = i * 7; return a; }
constexpr A tab = make();
extern "C" long table_at(int i) { return tab.d[i & 1023]; }
"""
try:
    load_cpp(_TABLE, name="table", openmp=False,
             flags=["-fconstexpr-loop-limit=100000000", "-fconstexpr-ops-limit=100000000000"])
except Exception:  # noqa: BLE001 - refused or killed: the compiler's memory was asked for either way
    pass


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    torch.add(a, b, out=out)
    return out
