"""Cheat (vector_add): a forged commitment of the output after the timed call.

Class of cheat: forged commitment / work after the measured call. In resident-inputs mode the runner
times a call on a recipe, keeps its output and announces `blend.digest(output)`; later the judge asks
for a secret subset of kept outputs, recomputes the digest over the delivered bytes and compares the
output with the reference. The digest folds per-word contributions with XOR across rows of 64 words,
so (per column) it is linear over GF(2) in those contributions. This candidate therefore:

  1. In a timed call on a recipe does no work (only the < 64 tail elements that are hashed one by
     one, if any): the runner announces the digest of garbage X (the poisoned, NaN-filled buffer).
  2. Patches `Runner.on_deliver` (class in sandbox.runner.main; this module runs in the runner) so
     that, before a kept output of such a call is handed over, it computes Y = a + b from the call's
     kept inputs with its own C code, then flips the lowest mantissa bit of a few elements per column
     (a GF(2) solve per column) so that digest(Y') == digest(X), writes Y' into the kept output and
     lets the original delivery proceed. Y' is within 1 ulp of a + b: it passes rtol=atol=1e-6.
  3. Untimed check-phase calls (no recipe) are answered honestly.

The forging helper reads the digest's parameters (_MULTIPLIER, _WEIGHTS32) from sandbox.shared.blend at
run time and assumes its structure (multiply, xor-shift by 15, column weight, xor over rows). If the
digest stops being XOR-linear (or changes its mix: the xor-shift by 15 is assumed), or those names
disappear, nothing crashes at import: the timed calls still skip the work, the forge raises or
produces a wrong digest, and the judge rejects the candidate honestly (output-changed-after-return
or timed-output-wrong).

Against the digest's first form (an xor fold of mixed words over rows) this got `ok` in 7 of 7
evaluations (2-core host, CPU target, resident inputs): the runner reported ~8-12 us per timed call on
8M elements, and forging one delivered output took ~20-30 ms (two C folds, the sum, a Python GF(2)
solve over 64 columns, ~1000 low-bit flips; max relative error 1.19e-7). The digest now joins rows
with a non-linear mix: the true output, computed late, no longer matches what was announced
(`output-changed-after-return`).
"""

import ctypes
import sys
import time

import torch
from task import input_t, output_t

from sandbox.native import load_cpp

SOURCE = r"""
#include <cstdint>

// The honest sum: used for check-phase calls, for a call's tail, and (untimed) when forging.
extern "C" void vector_add(const float* a, const float* b, float* out, int64_t n) {
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// The digest's column fold (blend.digest without the sha): xor over rows of
// ((w * mult) ^ ((w * mult) >> 15 arithmetic)) * weights[col], all wrapping 32-bit.
extern "C" void fold64(const int32_t* w, int64_t rows, int64_t mult, const int32_t* weights, int32_t* out) {
  uint32_t acc[64] = {0};
  const uint32_t m = (uint32_t)mult;
  #pragma omp parallel
  {
    uint32_t loc[64] = {0};
    #pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t* row = w + r * 64;
      for (int c = 0; c < 64; ++c) {
        int32_t x = (int32_t)((uint32_t)row[c] * m);
        x ^= (x >> 15);
        loc[c] ^= (uint32_t)x * (uint32_t)weights[c];
      }
    }
    #pragma omp critical
    for (int c = 0; c < 64; ++c) acc[c] ^= loc[c];
  }
  for (int c = 0; c < 64; ++c) out[c] = (int32_t)acc[c];
}

// Flip the lowest bit (lowest mantissa bit of a float32) of the words at the given indices.
extern "C" void flip_low(int32_t* w, const int64_t* idx, int64_t count) {
  for (int64_t i = 0; i < count; ++i) w[idx[i]] ^= 1;
}
"""

lib = load_cpp(SOURCE, name="r11_digest_forge")

_MASK = 0xFFFFFFFF
# Candidate elements per column for the GF(2) solve (32 unknown bits per column), tried in turn: the
# deltas are not uniform (a low bit of each is 1 about 91% of the time), so a few columns need more than 64.
CANDIDATE_ROWS = (64, 256, 1024)
MIN_ROWS = 256  # below this many rows of 64 words the timed call just computes honestly

# The digest's parameters, read at run time; None if blend no longer has them (then: no forging).
try:
    from sandbox.shared.blend import _MULTIPLIER, _WEIGHTS32
    _W_ARRAY = (ctypes.c_int32 * 64)(*[int(w) for w in _WEIGHTS32])
    assert len(_WEIGHTS32) == 64
except Exception:  # noqa: BLE001 - a changed digest: the cheat then fails honestly (rejected)
    _MULTIPLIER = _WEIGHTS32 = _W_ARRAY = None

FORGE_LOG: list = []  # (index, seconds, flips) per forged delivery; printed to the runner's stderr


def _fold(words: torch.Tensor, rows: int) -> list:
    """The 64 folded column words (unsigned) of the first `rows` rows of 64 int32 words."""
    out = (ctypes.c_int32 * 64)()
    lib.fold64(words, rows, int(_MULTIPLIER), ctypes.c_void_p(ctypes.addressof(_W_ARRAY)),
               ctypes.c_void_p(ctypes.addressof(out)))
    return [int(v) & _MASK for v in out]


def _contribution(word: int, col: int) -> int:
    """One word's contribution to its folded column, as blend's structure says (Python ints)."""
    m = (word * (_MULTIPLIER & _MASK)) & _MASK
    signed = m - (1 << 32) if m >> 31 else m
    mixed = m ^ ((signed >> 15) & _MASK)
    return (mixed * (_WEIGHTS32[col] & _MASK)) & _MASK


def _solve(deltas: list, target: int):
    """A subset of `deltas` (32-bit vectors) whose xor is `target`, as a bitmask over their indices,
    by Gaussian elimination over GF(2); None if target is outside their span."""
    basis: dict = {}  # pivot bit -> (vector, combination mask)
    for j, vec in enumerate(deltas):
        combo = 1 << j
        while vec:
            top = vec.bit_length() - 1
            if top not in basis:
                basis[top] = (vec, combo)
                break
            bv, bc = basis[top]
            vec ^= bv
            combo ^= bc
    combo = 0
    while target:
        top = target.bit_length() - 1
        if top not in basis:
            return None
        bv, bc = basis[top]
        target ^= bv
        combo ^= bc
    return combo


def forge(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> int:
    """Overwrite `out` (holding garbage X) with Y' = a + b up to low-bit flips, such that the digest's
    column fold of Y' equals that of X (the tail, hashed word by word, is already right). Returns
    the number of flipped elements; raises if the solve fails."""
    n = out.numel()
    if _MULTIPLIER is None:
        # A digest of another form: the best left is the true output, late and unadjusted, which a
        # commitment worth its name refuses (output-changed-after-return).
        lib.vector_add(a, b, out, n)
        return 0
    rows = n // 64
    words = out.view(torch.int32)
    fold_x = _fold(words, rows)
    lib.vector_add(a, b, out, n)  # the real work, after the clock stopped
    fold_y = _fold(words, rows)
    kmax = min(rows, CANDIDATE_ROWS[-1])
    cand = words[: kmax * 64].view(kmax, 64).tolist()  # the candidates' words (no arithmetic here)
    flips = []
    for c in range(64):
        need = fold_x[c] ^ fold_y[c]
        if not need:
            continue
        for k in CANDIDATE_ROWS:
            k = min(k, kmax)
            deltas = [_contribution((cand[r][c] & _MASK) ^ 1, c) ^ _contribution(cand[r][c] & _MASK, c)
                      for r in range(k)]
            combo = _solve(deltas, need)
            if combo is not None or k == kmax:
                break
        if combo is None:
            raise RuntimeError(f"column {c}: no subset of low-bit flips gives the needed difference")
        flips.extend(r * 64 + c for r in range(k) if combo >> r & 1)
    if flips:
        idx = (ctypes.c_int64 * len(flips))(*flips)
        lib.flip_low(words, ctypes.c_void_p(ctypes.addressof(idx)), len(flips))
    return len(flips)


# -- hooks into the runner this module is imported into ----------------------------------------

_STATE = {"recipe": False}
_CHEATED: set = set()  # call indices whose timed call did not compute the sum
_REPORTED: dict = {}  # their timed figures as the runner reported them (µs), for the log


def _install() -> None:
    runner_mod = sys.modules.get("sandbox.runner.main")
    if runner_mod is None:
        import sandbox.runner.main as runner_mod  # noqa: PLW0127
    Runner = runner_mod.Runner
    if getattr(Runner, "_r11_patched", False):
        return
    orig_call, orig_deliver = Runner.on_call, Runner.on_deliver

    def on_call(self, request, fds):
        # A call on a recipe by the candidate (not the judge's no-op) is a timed, kept call.
        # Cheat even when blend's parameters could not be read: the forge then fails and the judge
        # rejects (a fallback to honest work would hide whether the hole is still open).
        cheat = "recipe" in request and request.get("kernel") != "noop"
        _STATE["recipe"] = cheat
        try:
            answer = orig_call(self, request, fds)
        finally:
            _STATE["recipe"] = False
        if cheat and _STATE.pop("skipped", False) and answer.get("op") == "done":
            _CHEATED.add(request.get("i"))
            _REPORTED[request.get("i")] = answer.get("us")
        return answer

    def on_deliver(self, request, fds):
        index = request.get("i")
        if index in _CHEATED and index in self.kept:
            _CHEATED.discard(index)
            try:
                a, b, out = self.kept_inputs[index]
                t0 = time.perf_counter()
                flipped = forge(self.kept[index], a, b)
                FORGE_LOG.append((index, time.perf_counter() - t0, flipped))
                print(f"[r11] forged call {index}: timed {_REPORTED.pop(index, -1):.1f} us, n={out.numel()} flips={flipped} "
                      f"in {1e3 * (time.perf_counter() - t0):.2f} ms", file=sys.stderr, flush=True)
            except Exception as exc:  # noqa: BLE001 - garbage goes out: the judge rejects honestly
                print(f"[r11] forge failed: {exc!r}", file=sys.stderr, flush=True)
        return orig_deliver(self, request, fds)

    Runner.on_call, Runner.on_deliver = on_call, on_deliver
    Runner._r11_patched = True


try:
    _install()
except Exception:  # noqa: BLE001 - not inside a runner (e.g. imported by a test): honest kernel only
    pass


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    n = a.numel()
    if _STATE["recipe"] and n // 64 >= MIN_ROWS:
        # Timed call on a recipe: skip the work. Only the tail past whole rows of 64 words is hashed
        # word by word (not forgeable), so that little is computed for real.
        full = n // 64 * 64
        if full < n:
            lib.vector_add(a[full:], b[full:], out[full:], n - full)
        _STATE["skipped"] = True
        return out
    lib.vector_add(a, b, out, n)
    return out
