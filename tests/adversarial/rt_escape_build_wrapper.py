"""Escape (classes 1 and 6) through the build service: the runner's load_cpp is a request to the
judge, which compiles on its own side. g++'s `-wrapper` runs every subcommand under a program of the
caller's choice: here a shell that leaves a marker in the host's /tmp (and could rewrite the
project, the cache or the reference) before running the real subcommand. The kernel is honest.
Expected: the build is refused (its flags are allow-listed), and no marker appears; were a flag to
slip through, the compiler still runs in a sandbox where only its work folder is writable."""
import secrets

from sandbox.native import load_cpp

MARK = "/tmp/ks_rt_escape_marker"
SOURCE = r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""" + f"// {secrets.token_hex(8)}\n"  # a new cache key: the judge compiles again

lib = load_cpp(SOURCE, name="rt_escape", openmp=False,
               flags=["-wrapper", f'/bin/sh,-c,id > {MARK}; exec "$0" "$@"'])


def custom_kernel(data):
    a, b, out = data
    lib.vadd(a, b, out, a.numel())
    return out
