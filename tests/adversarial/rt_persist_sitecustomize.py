"""Trick (class 6, persist): plant start-up code for every later Python process.

Tries to write sitecustomize.py / usercustomize.py and a .pth file into the project root,
the interpreter's site-packages (of the venv and of the base interpreter) and the user site
folder; each planted file would make later candidates' runners (or the judge) import it.
Write errors are caught; the kernel itself is an honest native a + b, so this may pass:
what matters is that nothing is left behind (tests/adversarial/rt_persist_probe.py).
"""
import os
import site
import sys

from sandbox.native import load_cpp

MARK = "ks_rt_persist"
PAYLOAD = f"# {MARK}: planted by a candidate\nimport os\nos.environ['KS_RT_PERSIST_PLANTED'] = '1'\n"

targets = ["/work/main/sitecustomize.py", "/work/main/usercustomize.py"]
for base in {*site.getsitepackages(), site.getusersitepackages(), os.path.join(sys.prefix, "lib"),
             os.path.join(sys.base_prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")}:
    targets += [os.path.join(base, "sitecustomize.py"), os.path.join(base, "usercustomize.py"),
                os.path.join(base, f"zz_{MARK}.pth")]
planted, refused = [], []
for path in targets:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as f:
            f.write(PAYLOAD if path.endswith(".py") else f"import os; os.environ['KS_RT_PERSIST_PLANTED'] = '1'  # {MARK}\n")
        planted.append(path)
    except OSError as exc:
        refused.append(f"{path}: {exc.strerror}")
sys.stderr.write(f"rt_persist_sitecustomize: planted={planted} refused={len(refused)}\n")

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_persist_vadd", openmp=False)


def custom_kernel(data):
    a, b, out = data
    lib.vadd(a, b, out, a.numel())
    return out
