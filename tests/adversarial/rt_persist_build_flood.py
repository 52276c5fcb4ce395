"""Trick (class 6, persisting): fill the build cache. Every distinct source the judge's build service
compiles becomes a cache entry that later runners can read, so a candidate that builds many
libraries (or large ones) writes what it likes, for as long as the disk holds, where the next
candidates look. Expected: refused once it has added its share of new libraries to the cache."""
import secrets

from sandbox.native import load_cpp

# A different source each time it is imported, so that no build is a cache hit.
_salt = secrets.token_hex(8)
for i in range(24):
    lib = load_cpp(f'extern "C" int part_{i}() {{ return {i}; }} // {_salt}\n', name=f"flood{i}", openmp=False)

adder = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_flood_vadd", openmp=False)


def custom_kernel(data):
    a, b, out = data
    adder.vadd(a, b, out, a.numel())
    return out
