"""Escape (classes 1 and 6) through the build service, by other options of the compiler driver:
`-B` makes g++ look for its own programs (cc1plus, as, ld) in a folder of the caller's choice, and
`-specs=` rewrites how it calls them. The kernel writes a fake `as` into its private /tmp first; on
the judge's side that folder is not its /tmp, but a driver told where to find its tools runs what
it finds. Expected: the build is refused by the flag allow-list, and no marker appears."""
import os
import secrets

from sandbox.native import load_cpp

MARK = "/tmp/ks_rt_escape_marker"
os.makedirs("/tmp/ks_tools", exist_ok=True)
with open("/tmp/ks_tools/as", "w") as tool:
    tool.write(f"#!/bin/sh\nid > {MARK}\nexec /usr/bin/as \"$@\"\n")
os.chmod("/tmp/ks_tools/as", 0o755)

SOURCE = r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""" + f"// {secrets.token_hex(8)}\n"

lib = load_cpp(SOURCE, name="rt_escape_specs", openmp=False, flags=["-B/tmp/ks_tools/"])


def custom_kernel(data):
    a, b, out = data
    lib.vadd(a, b, out, a.numel())
    return out
