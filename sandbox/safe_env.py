"""The environment every process started on a candidate's behalf gets: an allow-list of names,
never a secret. Judges, compilers of candidate source and static reports run with it, so no key
or token can be read back through a build log (`#include "/proc/self/environ"`), a static report
or a candidate's own process. Standard library only."""

from __future__ import annotations

import os
import re

ALLOWED = frozenset({
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "TMPDIR", "TERM",
    "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH", "HIP_PLATFORM",
    "CXX", "CC", "NVCC", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TRITON_CACHE_DIR",
    "TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH", "HSA_OVERRIDE_GFX_VERSION",
    "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
})
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)


def safe_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment cut to the allowed names and the project's own (KS_*) settings,
    less anything named like a secret; then `extra`."""
    env = {k: v for k, v in os.environ.items() if (k in ALLOWED or k.startswith("KS_")) and not SECRET_NAME.search(k)}
    env.update(extra or {})
    return env
