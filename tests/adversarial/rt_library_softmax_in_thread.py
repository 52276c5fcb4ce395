"""Trick (class 5, library): torch.nn.functional.softmax from a worker thread, with the
Python-level recorders switched off first (sys/threading setprofile and settrace set to
None, torch's profiler hooks cleared where they exist) and the op name hidden in a
codecs-rot13 string."""
import codecs
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F

for off in (sys.setprofile, sys.settrace, threading.setprofile, threading.settrace):
    try:
        off(None)
    except Exception:
        pass
try:
    torch._C._set_profiler_node_id = lambda *a, **k: None  # harmless if absent
except Exception:
    pass

_name = codecs.decode("fbsgznk", "rot13")  # "softmax"
_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loader")


def custom_kernel(data):
    (x,) = data
    return _pool.submit(getattr(F, _name), x, -1).result()
