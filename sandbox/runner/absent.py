"""Laid in the place of each package a kernel may not import (sandbox/judge/isolation.py's RUNNER_PACKAGES).

Importing it fails as importing a package that is not installed does. An emptied folder alone would
import as an empty namespace package, and a library that imports an optional dependency inside
`try: ... except ImportError` would take it as present and fail on its first attribute: CuPy, for
one, then failed its own import (`ml_dtypes` has no `bfloat16`) on the lent H100, so no CuPy kernel
could load.
"""

raise ModuleNotFoundError(f"No module named {__name__!r} (not available to kernels in the runner's sandbox)",
                          name=__name__)
