"""Laid in the place of each package a kernel may not import (sandbox/judge/isolation.py's RUNNER_PACKAGES).

Importing it does what the import would do had the package never been installed here: the name is looked
up further along the import path, and where nothing else has it the import fails as for a package not
installed. Neither an emptied folder alone nor a module that always fails will do:
- an empty folder imports as an empty namespace package where no other copy exists, and a library that
  imports an optional dependency inside `try: ... except ImportError` takes it as present and fails on
  its first attribute (CuPy's own import failed so on the lent H100: `ml_dtypes` has no `bfloat16`);
- a module that always fails hides a copy further along the path, which the empty folder let through
  (`torch.compile`'s C++ path imports `packaging`, which setuptools carries a copy of for itself).
"""

import importlib.machinery
import importlib.util
import os
import sys


def _further_along() -> importlib.machinery.ModuleSpec | None:
    """The spec the import path's later entries give this name, if a module or a regular package."""
    here = os.path.realpath(__file__)
    folder = os.path.dirname(os.path.dirname(here) if os.path.basename(here) == "__init__.py" else here)
    entries = [os.path.realpath(entry or ".") for entry in sys.path]
    later = sys.path[entries.index(folder) + 1:] if folder in entries else \
        [entry for entry, real in zip(sys.path, entries) if real != folder]
    spec = importlib.machinery.PathFinder.find_spec(__name__, later)
    if spec is None or spec.loader is None or spec.origin is None:  # nothing, or only a namespace package
        return None
    return spec


_spec = _further_along()
if _spec is None:
    raise ModuleNotFoundError(f"No module named {__name__!r} (not available to kernels in the runner's sandbox)",
                              name=__name__)
_module = importlib.util.module_from_spec(_spec)
sys.modules[__name__] = _module  # the import statement hands out what sys.modules holds once this ran
_spec.loader.exec_module(_module)  # type: ignore[union-attr]
