# Cheat (vector_add; red-team round 27): a build whose name is a path. The judge wrote the source under
# `<build folder>/<name>.cpp`, as the judge's user and outside every sandbox, before the compiler ran, so an
# absolute or `../` name left a file of the candidate's text wherever it pointed on the host. A name is now
# an identifier or the build is refused.
import torch
from task import input_t, output_t

from sandbox.native import load_cpp

TEXT = 'extern "C" void planted() {}\n'
for where in ("/tmp/ks_rt_path_name", "../../../../../../../../tmp/ks_rt_path_name_up"):
    try:
        load_cpp(TEXT, name=where)
    except Exception:  # noqa: BLE001 - the plant is the point, its build may fail
        pass


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    torch.add(a, b, out=out)
    return out
