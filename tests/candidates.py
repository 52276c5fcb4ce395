"""Write candidate submissions for tests: correct seeds and broken variants.

Broken variants wrap a problem's seed (loaded by path) and spoil its result
in one specific way, so the same kinds of failure can be tried on every
bundled problem.
"""

from __future__ import annotations

from pathlib import Path

_PRELUDE = '''
import importlib.util
import torch

_spec = importlib.util.spec_from_file_location("_seed_impl", {seed!r})
_seed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_seed)


def _scratch(data):
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in data)


def _output_buffer(data, scratch, res):
    """The input the seed wrote its result into, if the problem preallocates one."""
    for real, copy in zip(data, scratch):
        if isinstance(copy, torch.Tensor) and copy.data_ptr() == res.data_ptr():
            return real
    return None
'''

BODIES = {
    # One element far off: the check must name it.
    "wrong_values": '''
def custom_kernel(data):
    res = _seed.custom_kernel(data)
    flat = res.view(-1)
    i = flat.numel() // 2
    flat[i] = float(flat[i]) * 3 + 7  # Python arithmetic: no library operator the problem forbids
    return res
''',
    # Only the first half of the output is written.
    "unwritten_output": '''
def custom_kernel(data):
    scratch = _scratch(data)
    res = _seed.custom_kernel(scratch)
    out = _output_buffer(data, scratch, res)
    if out is None:
        out = torch.empty_like(res)
    half = res.numel() // 2
    out.view(-1)[:half].copy_(res.reshape(-1)[:half])
    return out
''',
    "wrong_shape": '''
def custom_kernel(data):
    res = _seed.custom_kernel(data)
    return res.reshape(-1)[: res.numel() - 1]
''',
    "raises": '''
def custom_kernel(data):
    raise RuntimeError("candidate gave up")
''',
    # A segmentation fault in native code kills the worker.
    "segfault": '''
import ctypes

def custom_kernel(data):
    ctypes.string_at(0)
''',
    "hangs": '''
def custom_kernel(data):
    while True:
        pass
''',
}

BUILD_ERROR_CPP = '''
from sandbox.native import load_cpp

lib = load_cpp("extern \\"C\\" void f(float* x) {\\n  x[0] = undefined_name;\\n}\\n", name="broken")


def custom_kernel(data):
    lib.f(data[0])
    return data[0]
'''


def write_broken(tmp: Path, seed: Path, kind: str) -> Path:
    path = tmp / f"{kind}.py"
    path.write_text(_PRELUDE.format(seed=str(seed)) + BODIES[kind])
    return path


def write_build_error(tmp: Path) -> Path:
    path = tmp / "build_error.py"
    path.write_text(BUILD_ERROR_CPP)
    return path


def write_spy(folder: Path, name: str, seed: Path, check_tmp: bool = True) -> Path:
    """The seed's kernel behind a prelude that fails the import if an earlier candidate's traces are
    visible: a module it left in this process, or (`check_tmp`: runners have a private /tmp) a file
    it left in /tmp."""
    path = folder / f"{name}.py"
    path.write_text(
        "import os, sys\n"
        "if 'ks_spy_was_here' in sys.modules: raise RuntimeError('an earlier candidate ran in this process')\n"
        "sys.modules['ks_spy_was_here'] = sys\n"
        f"if {check_tmp!r} and os.path.exists('/tmp/ks-spy-marker'):\n"
        "    raise RuntimeError('an earlier candidate left a file in /tmp')\n"
        "open('/tmp/ks-spy-marker', 'w').write('here')\n"
        "import importlib.util as _u\n"
        f"_s = _u.spec_from_file_location('_seed', {str(seed)!r})\n"
        "_m = _u.module_from_spec(_s)\n_s.loader.exec_module(_m)\ncustom_kernel = _m.custom_kernel\n"
    )
    return path
