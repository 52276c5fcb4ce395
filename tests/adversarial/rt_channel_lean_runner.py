# Cheat (vector_add, recipe path; red-team round 12): an honest sum, but the runner's own work per call
# (the digest of the output) is replaced, for the candidate's calls only (never the no-op's), by an exact,
# fused OpenMP C++ copy of the judge's tree, and each call reports 1 us. The judge's floor is the round trip
# less the no-op's calibrated overhead, so what the copy saves came off the figure. The floor under the
# runner's own work (`overhead-shortened`) catches it about 3 runs in 4 on a quiet host, which is why no
# test evaluates it end to end: the recipe path on the CPU exists only so that tests exercise the GPU's
# protocol, and its verdicts say that their figures are not bounded (sandbox/judge/evaluation.py,
# RECIPE_ON_CPU). Kept as the reproducer for the GPU's remedy (docs/INTEGRITY.md, "A leaner runner").
import hashlib, os, sys
import torch
from task import input_t, output_t
from sandbox.native import load_cpp

SOURCE = r"""
#include <cstdint>
#include <cstring>
#include <cstdlib>
extern "C" void vector_add(const float* a, const float* b, float* out, int64_t n) {
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
static const uint64_t K1 = 0x9E3779B97F4A7C15ULL, K2 = 0xBF58476D1CE4E5B9ULL;
static inline void node(const uint64_t* l, const uint64_t* r, uint64_t* o, int level) {
  int s = 1 << (level % 5);
  uint64_t x[32];
  for (int j = 0; j < 32; ++j) {
    uint64_t v = l[j] * K1 ^ r[(j - s) & 31];
    v ^= v >> 29; v *= K2; v ^= v >> 32; x[j] = v;
  }
  for (int j = 0; j < 32; ++j) o[j] = x[j] ^ x[(j - s) & 31];
}
// rows of 32 words at `in`, joined as the judge's tree does (row 2i with 2i + 1, an odd last row passed
// up), between two scratch buffers; the rows left (<= 64) end in `out`, their count in *left
extern "C" void dtree(const uint64_t* in, int64_t rows, uint64_t* ping, uint64_t* pong, uint64_t* out, int64_t* left) {
  const uint64_t* src = in; uint64_t* dst = ping; int level = 0;
  while (rows > 64) {
    int64_t half = rows / 2;
    #pragma omp parallel for schedule(static) if(half > 4096)
    for (int64_t i = 0; i < half; ++i) node(src + 32 * (2 * i), src + 32 * (2 * i + 1), dst + 32 * i, level);
    if (rows % 2) memcpy(dst + 32 * half, src + 32 * (rows - 1), 256);
    rows = half + rows % 2; src = dst; dst = (dst == ping) ? pong : ping; ++level;
  }
  memcpy(out, src, rows * 256);
  *left = rows;
}
"""
lib = load_cpp(SOURCE, name="r12_lean_digest")

def fast_digest(ts):
    parts = []
    for t in ts:
        raw = t.detach().contiguous().reshape(-1).view(torch.uint8)
        full = raw.numel() // 256 * 256
        head = b""
        if full:
            words = raw[:full]
            if words.data_ptr() % 8:
                words = words.clone()
            rows = full // 256
            ping = torch.empty((rows // 2 + 1) * 32, dtype=torch.int64)
            pong = torch.empty_like(ping)
            out = torch.empty(64 * 32, dtype=torch.int64)
            left = torch.zeros(1, dtype=torch.int64)
            lib.dtree(words, rows, ping, pong, out, left)
            head = out[: int(left[0]) * 32].numpy().tobytes()
        tail = raw[full:].numpy().tobytes()
        parts.append(hashlib.sha256(head + tail + raw.numel().to_bytes(8, "little")).hexdigest()[:32])
    return "/".join(parts)

def _install():
    import sandbox.runner.main as rm
    import sandbox.shared.blend as bl
    if getattr(rm.Runner, "_r12", False):
        return
    slow, orig = bl.digest, rm.Runner.on_call
    def on_call(self, request, fds):
        if request.get("kernel") == "noop" or "recipe" not in request:
            return orig(self, request, fds)
        bl.digest = fast_digest
        try:
            answer = orig(self, request, fds)
        finally:
            bl.digest = slow
        if os.environ.get("R12_CHECK"):
            assert answer.get("digest") == slow([t for t in [self.kept[request["i"]][2]]]), "mismatch"
        if answer.get("op") == "done" and os.environ.get("R12_HONEST_US") is None:
            answer["us"] = 1.0
        return answer
    rm.Runner.on_call = on_call
    rm.Runner._r12 = True

try:
    _install()
except Exception as exc:  # outside a runner (unit test)
    print("[r12] install failed", exc, file=sys.stderr)

def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    lib.vector_add(a, b, out, a.numel())
    return out
