"""Red-team: a burst of threads past the runner's task limit, refused and then forgotten. At import
the kernel asks for 4,200 threads that only wait, catches the refusal, lets them all go, and then
adds its vectors. As a candidate it is held to the limit (`resource_limit`); as the base of a
paired evaluation it is no yardstick, and the candidate's verdict stands, unpaired."""
import threading

import torch
from task import input_t, output_t

_stop = threading.Event()
_threads = []
try:
    for _ in range(4200):
        _thread = threading.Thread(target=_stop.wait, daemon=True)
        _thread.start()
        _threads.append(_thread)
except RuntimeError:
    pass  # refused: carry on as if nothing happened
_stop.set()
for _thread in _threads:
    _thread.join()
del _threads


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    torch.add(a, b, out=out)
    return out
