# Class 4 (remembering answers), red-team round 16: learning the family the timed inputs come from.
# When every timed call of a shape was a blend of the same two generated sets with one secret weight and
# a secret row rotation, this kernel computed honestly for 6 calls of the 256^3 shape, recovered the two
# sets of a and of b from those blends (FFT over rows and a 6-weight least squares), cached the products
# for every rotation of b (FFT along k), all inside the untimed warm-up batch, and from then on answered
# each call with O(m*n) work: identify the recipe against the recovered sets and combine four cached
# (m, n) slices (`ok`, 2.9x faster than the honest seed on that shape). No matrix-product operator is
# used. The sets are now drawn anew between batches (sandbox/judge/shapes.py's SetRenewal): the sets it
# learnt are gone before it could answer from them, it gives up, and it gains nothing. On the other
# shape it learns in a first attempt it makes the judge throw away (below): a second attempt starts
# on new sets too.
import math
import random as _random
import sys

import torch
from task import input_t, output_t
from sandbox.native import load_cpp

SOURCE = r"""
#include <cstdint>
#include <cstring>
#include <vector>
#include <cmath>

static inline float bf(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; std::memcpy(&f, &u, 4); return f; }
static inline uint16_t to_bf(float f) {
  uint32_t u; std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The honest product, in float32 (its inputs and output converted by torch).
extern "C" void matmul_f32(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
    for (int64_t p = 0; p < k; ++p) {
      const float av = a[i * k + p];
      const float* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
    }
  }
}

// ---- the blend-cache fast path: identify the recipe against recovered bases, combine cached shift products ----
static void ident(const uint16_t* o, const float* P, const float* Q, int64_t R, int64_t C,
                  int64_t* pp, int64_t* qq, double* lam, double* rel) {
  const int64_t J = C < 128 ? C : 128;
  const int ROWS = 4;
  float ov[ROWS][128];
  for (int i = 0; i < ROWS; ++i) for (int64_t j = 0; j < J; ++j) ov[i][j] = bf(o[i * C + j]);
  const float* base[2] = {P, Q};
  int64_t best[2];
  for (int w = 0; w < 2; ++w) {
    std::vector<float> s((size_t)R);
    for (int64_t p = 0; p < R; ++p) {
      float acc = 0.f;
      for (int i = 0; i < ROWS; ++i) {
        const float* row = base[w] + ((p + i) % R) * C;
        #pragma omp simd reduction(+:acc)
        for (int64_t j = 0; j < J; ++j) acc += ov[i][j] * row[j];
      }
      s[p] = acc;
    }
    int64_t bi = 0;
    for (int64_t p = 1; p < R; ++p) if (s[p] > s[bi]) bi = p;
    best[w] = bi;
  }
  *pp = best[0]; *qq = best[1];
  // weight by least squares over the first rows and a few more, residual check
  const int64_t chk[6] = {0, 1, 2, 3, R / 2, R - 1};
  double num = 0, den = 0, oo = 0;
  for (int t = 0; t < 6; ++t) {
    const int64_t i = chk[t];
    const float* x = P + ((i + best[0]) % R) * C;
    const float* z = Q + ((i + best[1]) % R) * C;
    for (int64_t j = 0; j < C; ++j) {
      const double ov_ = bf(o[i * C + j]);
      const double d = x[j] - z[j];
      num += (ov_ - z[j]) * d; den += d * d; oo += ov_ * ov_;
    }
  }
  const double l = den > 0 ? num / den : 0.5;
  double rr = 0;
  for (int t = 0; t < 6; ++t) {
    const int64_t i = chk[t];
    const float* x = P + ((i + best[0]) % R) * C;
    const float* z = Q + ((i + best[1]) % R) * C;
    for (int64_t j = 0; j < C; ++j) {
      const double e = bf(o[i * C + j]) - (l * x[j] + (1 - l) * z[j]);
      rr += e * e;
    }
  }
  *lam = l; *rel = oo > 0 ? std::sqrt(rr / oo) : 1.0;
}

extern "C" void fast(const uint16_t* a, const uint16_t* b, uint16_t* c,
                     const float* X, const float* Z, const float* U, const float* V,
                     const float* TXU, const float* TXV, const float* TZU, const float* TZV,
                     int64_t m, int64_t n, int64_t k, double* info) {
  int64_t p, q, u, v; double lam, mu, ra, rb;
  ident(a, X, Z, m, k, &p, &q, &lam, &ra);
  ident(b, U, V, k, n, &u, &v, &mu, &rb);
  info[1] = ra; info[2] = rb; info[3] = lam; info[4] = mu;
  if (!(ra < 0.01 && rb < 0.01)) { info[0] = 0; return; }
  const float c1 = lam * mu, c2 = lam * (1 - mu), c3 = (1 - lam) * mu, c4 = (1 - lam) * (1 - mu);
  const float* t1 = TXU + u * m * n; const float* t2 = TXV + v * m * n;
  const float* t3 = TZU + u * m * n; const float* t4 = TZV + v * m * n;
  for (int64_t i = 0; i < m; ++i) {
    const int64_t ip = ((i + p) % m) * n, iq = ((i + q) % m) * n;
    for (int64_t j = 0; j < n; ++j)
      c[i * n + j] = to_bf(c1 * t1[ip + j] + c2 * t2[ip + j] + c3 * t3[iq + j] + c4 * t4[iq + j]);
  }
  info[0] = 1;
}
"""

lib = load_cpp(SOURCE, name="rt_memo_blend_family")



def _nelder_mead(f, x0, step=0.1, iters=3000, tol=1e-14, lo=0.05, hi=0.95):
    n = len(x0)
    clip = lambda x: [min(hi, max(lo, v)) for v in x]
    pts = [clip(list(x0))]
    for i in range(n):
        x = list(x0); x[i] += step; pts.append(clip(x))
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = sorted(range(n + 1), key=lambda i: vals[i])
        pts = [pts[i] for i in order]; vals = [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < tol:
            break
        cen = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        xr = clip([cen[j] + (cen[j] - pts[-1][j]) for j in range(n)]); fr = f(xr)
        if fr < vals[0]:
            xe = clip([cen[j] + 2 * (cen[j] - pts[-1][j]) for j in range(n)]); fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = clip([cen[j] + 0.5 * (pts[-1][j] - cen[j]) for j in range(n)]); fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                for i in range(1, n + 1):
                    pts[i] = clip([pts[0][j] + 0.5 * (pts[i][j] - pts[0][j]) for j in range(n)]); vals[i] = f(pts[i])
    i = min(range(n + 1), key=lambda i: vals[i])
    return pts[i], vals[i]


def _peaks(corr, n=2):
    c = corr.clone()
    R = c.numel()
    out = []
    for _ in range(n):
        i = int(torch.argmax(c))
        out.append((i, float(c[i])))
        for d in (-1, 0, 1):
            c[(i + d) % R] = -float("inf")
    return out


def _noise(corr, peaks):
    c = corr.clone()
    for i, _ in peaks:
        c[i] = 0.0
    return float(c.std())


def lagcorr(F1, F2, R):
    # F: rfft over rows (R/2+1, C) complex. corr(d) = sum_m sum_c o1[m,c] o2[m+d,c]
    g = (F1.conj() * F2).sum(-1)
    return torch.fft.irfft(g, n=R)


def strong(o1, o2, ratio=8.0):
    R = o1.shape[0]
    F1, F2 = torch.fft.rfft(o1.double(), dim=0), torch.fft.rfft(o2.double(), dim=0)
    c = lagcorr(F1, F2, R)
    pk = _peaks(c)
    nz = _noise(c, pk) + 1e-30
    return pk[1][1] / nz > ratio, pk, nz


def recover(obs):
    """obs: list of (R, C) float tensors. Returns (X, Z, lams, p, q, resid_rel) or None."""
    T = len(obs)
    R, C = obs[0].shape
    D = torch.stack([o.double() for o in obs])  # T,R,C
    F = torch.fft.rfft(D, dim=1)  # T, W, C
    W = F.shape[1]
    # lags vs obs 0 and obs 1
    P, Q = [0], [0]
    pk1 = []
    for t in range(1, T):
        c = lagcorr(F[0], F[t], R)
        pk = _peaks(c)
        nz = _noise(c, pk)
        if pk[1][1] < 8 * nz:
            return None
        pk1.append(((-pk[0][0]) % R, (-pk[1][0]) % R))
    P.append(pk1[0][0]); Q.append(pk1[0][1])
    for t in range(2, T):
        c = lagcorr(F[1], F[t], R)
        pk = _peaks(c)
        got = {pk[0][0], pk[1][0]}
        da, db = pk1[t - 1]
        h1 = {(P[1] - da) % R, (Q[1] - db) % R}
        h2 = {(P[1] - db) % R, (Q[1] - da) % R}
        if got == h1 and got != h2:
            P.append(da); Q.append(db)
        elif got == h2 and got != h1:
            P.append(db); Q.append(da)
        else:
            return None
    Pt = torch.tensor(P, dtype=torch.float64)
    Qt = torch.tensor(Q, dtype=torch.float64)
    w = torch.arange(W, dtype=torch.float64)
    th = 2 * math.pi * w / R
    eP = torch.exp(1j * th[:, None] * Pt[None, :])  # W,T
    eQ = torch.exp(1j * th[:, None] * Qt[None, :])
    # Gram G[w] = D D^H : (W,T,T)
    Fw = F.permute(1, 0, 2)  # W,T,C
    G = (Fw[:, :, None, :] * Fw[:, None, :, :].conj()).sum(-1)
    wt = torch.full((W,), 2.0, dtype=torch.float64)
    wt[0] = 1.0
    if R % 2 == 0:
        wt[-1] = 1.0
    trG = (G.diagonal(dim1=1, dim2=2).real.sum(-1) * wt).sum()

    def cmat(lam):
        l = torch.tensor(lam, dtype=torch.float64)
        a = eP * l[None, :]
        b = eQ * (1 - l)[None, :]
        return torch.stack([a, b], dim=-1)  # W,T,2

    def resid(lam):
        Cm = cmat(lam)
        CH = Cm.conj().transpose(1, 2)  # W,2,T
        CHC = (CH[:, :, :, None] * Cm[:, None, :, :]).sum(2)  # W,2,2
        # C^H G C
        GC = (G[:, :, :, None] * Cm[:, None, :, :]).sum(2)  # W,T,2
        CGC = (CH[:, :, :, None] * GC[:, None, :, :]).sum(2)  # W,2,2
        a, b, c, d = CHC[:, 0, 0], CHC[:, 0, 1], CHC[:, 1, 0], CHC[:, 1, 1]
        det = a * d - b * c
        inv = torch.stack([torch.stack([d, -b], -1), torch.stack([-c, a], -1)], -2) / det[:, None, None]
        tr = (inv[:, :, :, None] * CGC[:, None, :, :]).sum(2).diagonal(dim1=1, dim2=2).sum(-1).real
        v = float(1.0 - (tr * wt).sum() / trG)
        return v if math.isfinite(v) else 1e30

    best = None
    rng = _random.Random(0)
    for _ in range(3):
        x0 = [rng.uniform(0.3, 0.7) for _ in range(T)]
        x, v = _nelder_mead(resid, x0)
        x, v = _nelder_mead(resid, x, step=0.01)
        if best is None or v < best[1]:
            best = (x, v)
    lam = best[0]
    Cm = cmat(lam)
    CH = Cm.conj().transpose(1, 2)
    CHC = (CH[:, :, :, None] * Cm[:, None, :, :]).sum(2)
    a, b, c, d = CHC[:, 0, 0], CHC[:, 0, 1], CHC[:, 1, 0], CHC[:, 1, 1]
    det = a * d - b * c
    inv = torch.stack([torch.stack([d, -b], -1), torch.stack([-c, a], -1)], -2) / det[:, None, None]
    CHD = (CH[:, :, :, None] * Fw[:, None, :, :]).sum(2)  # W,2,C
    XZ = (inv[:, :, :, None] * CHD[:, None, :, :]).sum(2)  # W,2,C
    X = torch.fft.irfft(XZ[:, 0, :], n=R, dim=0)
    Z = torch.fft.irfft(XZ[:, 1, :], n=R, dim=0)
    # snap to bf16 (the generator's values are bf16)
    X = X.float().to(torch.bfloat16).float()
    Z = Z.float().to(torch.bfloat16).float()
    err = 0.0
    for t in range(T):
        rec = lam[t] * torch.roll(X, -P[t], 0) + (1 - lam[t]) * torch.roll(Z, -Q[t], 0)
        err = max(err, float((rec - obs[t].float()).abs().max()))
    return X, Z, lam, P, Q, err


def shift_tensor(Pm, Qm, out_dtype=torch.float32, chunk=16):
    """T[r, m, n] = sum_j P[m, j] Q[(j + r) % K, n], for all r (P: M x K, Q: K x N)."""
    M, K = Pm.shape
    N = Qm.shape[1]
    Ph = torch.fft.rfft(Pm.double(), dim=1).conj()  # M, W
    Qh = torch.fft.rfft(Qm.double(), dim=0)  # W, N
    out = torch.empty((K, M, N), dtype=out_dtype)
    for m0 in range(0, M, chunk):
        m1 = min(M, m0 + chunk)
        prod = Ph[m0:m1, None, :] * Qh.t()[None, :, :]  # m, N, W
        t = torch.fft.irfft(prod, n=K, dim=-1)  # m, N, K
        out[:, m0:m1, :] = t.permute(2, 0, 1).to(out_dtype)
    return out


STATE = {}
WINDOW = 6
TRIES = 3  # windows of calls it learns from before it gives up
LEARNED = (256, 256, 256)  # learnt in its warm-up batch (round 16)
RETRIED = (128, 512, 1024)  # learnt in a first attempt it makes the judge throw away (round 17)


def _honest(a, b, c, m, n, k):
    out = torch.empty((m, n), dtype=torch.float32)
    lib.matmul_f32(a.float(), b.float(), out, m, n, k)
    c.copy_(out)


def _learn(st):
    obs = st["obs"]
    ra = recover([o[0] for o in obs])
    if ra is None or ra[-1] > 0.05:
        return False
    rb = recover([o[1] for o in obs])
    if rb is None or rb[-1] > 0.01:
        return False
    X, Z = ra[0].contiguous(), ra[1].contiguous()
    U, V = rb[0].contiguous(), rb[1].contiguous()
    st["bases"] = (X, Z, U, V)
    st["T"] = tuple(shift_tensor(P, Q).contiguous() for P, Q in ((X, U), (X, V), (Z, U), (Z, V)))
    return True


def _cached(st, a, b, c, m, n, k):
    """The call answered from the learnt sets' products; False where the inputs are not theirs."""
    info = torch.zeros(8, dtype=torch.float64)
    X, Z, U, V = st["bases"]
    lib.fast(a, b, c, X, Z, U, V, *st["T"], m, n, k, info)
    return bool(info[0] == 1)


def _watch(st, a, b, keep_trying):
    st["obs"].append((a.float(), b.float()))
    if len(st["obs"]) < WINDOW:
        return
    st["tries"] += 1
    try:
        learnt = _learn(st)
    except Exception:
        learnt = False
    st["state"] = "ready" if learnt else ("watching" if keep_trying or st["tries"] < TRIES else "honest")
    st["obs"] = []


# Round 17: a timing the judge's clock contradicts is measured again. This kernel under-reports its
# calls tenfold in the first attempt, so that it is thrown away, learns the sets from the last calls of
# that attempt, and answers the second attempt from its cache. It tells the attempts apart by the
# no-op calls of each attempt's second calibration, counted through the runner's own module.
NOOPS = [0]
UNDER = [False]
_runner = sys.modules.get("sandbox.runner.main")
if _runner is not None:
    _noop, _timed = _runner._noop, _runner.Runner._timed

    def _counted_noop(*args, **kwargs):
        NOOPS[0] += 1
        return _noop(*args, **kwargs)

    def _under_reported(self, fn, data):
        UNDER[0] = False
        us, out = _timed(self, fn, data)
        return (us / 10.0 if UNDER[0] else us), out

    _runner._noop, _runner.Runner._timed = _counted_noop, _under_reported


def _retried(st, a, b, c, m, n, k):
    if st.get("epoch") is None:
        st["epoch"] = NOOPS[0]  # the first attempt's second calibration
    if NOOPS[0] == st["epoch"]:  # the first attempt: under-report, and learn from its last batches
        UNDER[0] = True
        st["calls"] = st.get("calls", 0) + 1
        if st["state"] == "ready" and _cached(st, a, b, c, m, n, k):
            return
        _honest(a, b, c, m, n, k)
        if st["calls"] > 12 * 16:
            st["state"] = "watching"
            _watch(st, a, b, keep_trying=True)
        return
    if st["state"] == "ready" and _cached(st, a, b, c, m, n, k):
        return
    _honest(a, b, c, m, n, k)


def custom_kernel(data: input_t) -> output_t:
    a, b = (t.contiguous() for t in data)
    (m, k), n = a.shape, b.shape[1]
    c = torch.empty(m, n, dtype=torch.bfloat16)
    shape = (m, n, k)
    st = STATE.setdefault(shape, {"obs": [], "tries": 0, "state": "watching" if shape == LEARNED else "honest"})
    if shape == RETRIED and NOOPS[0]:
        _retried(st, a, b, c, m, n, k)
        return c
    if st["state"] == "ready" and _cached(st, a, b, c, m, n, k):
        return c
    _honest(a, b, c, m, n, k)
    if st["state"] == "watching":  # the check phase's calls come first: a window of them teaches nothing
        _watch(st, a, b, keep_trying=False)
    return c
