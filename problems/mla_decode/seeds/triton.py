# Naive Triton seed: one program per (batch, block of BLOCK_H heads), so the heads
# of a block share each tile of the cache they load. Along the cache it steps
# BLOCK_N positions at a time: scores with tl.dot (bf16 inputs, float32
# accumulation) over the latent and the rotary parts, an online softmax in float32
# with the maximum subtracted, and tl.dot of the weights (split into two bf16
# parts) with the latent tile into a float32 (BLOCK_H, 512) accumulator. Heads beyond BLOCK_H
# take more programs, each re-reading the cache; no split of long caches over
# programs (few programs at small batch), no pipelining tuned.
import triton
import triton.language as tl
from task import input_t, output_t

D_LATENT = 512
D_ROPE = 64
SCALE = 192 ** -0.5  # 1/sqrt(qk_nope_head_dim + qk_rope_head_dim)
# @tunable BLOCK_H: 16, 32, 64
BLOCK_H = 16
# @tunable BLOCK_N: 16, 32, 64
BLOCK_N = 32
# @tunable NUM_WARPS: 4, 8
NUM_WARPS = 4
# @tunable NUM_STAGES: 1, 2, 3
NUM_STAGES = 2


@triton.jit
def mla_decode_kernel(q_ptr, kv_ptr, out_ptr, heads, sk, scale,
                      D_LATENT: tl.constexpr, D_ROPE: tl.constexpr,
                      BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    hs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = hs < heads
    lat = tl.arange(0, D_LATENT)
    rope = tl.arange(0, D_ROPE)
    row = D_LATENT + D_ROPE
    q_rows = q_ptr + (b * heads + hs)[:, None] * row
    q_lat = tl.load(q_rows + lat[None, :], mask=h_ok[:, None], other=0.0)
    q_rope = tl.load(q_rows + D_LATENT + rope[None, :], mask=h_ok[:, None], other=0.0)
    top = tl.full([BLOCK_H], float("-inf"), tl.float32)
    total = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D_LATENT], tl.float32)
    for n0 in range(0, sk, BLOCK_N):
        ns = n0 + tl.arange(0, BLOCK_N)
        n_ok = ns < sk
        kv_rows = kv_ptr + (b * sk + ns)[:, None] * row
        k_lat = tl.load(kv_rows + lat[None, :], mask=n_ok[:, None], other=0.0)
        k_rope = tl.load(kv_rows + D_LATENT + rope[None, :], mask=n_ok[:, None], other=0.0)
        s = (tl.dot(q_lat, tl.trans(k_lat)) + tl.dot(q_rope, tl.trans(k_rope))) * scale
        s = tl.where(n_ok[None, :], s, float("-inf"))
        new_top = tl.maximum(top, tl.max(s, 1))
        p = tl.exp(s - new_top[:, None])
        correction = tl.exp(top - new_top)
        total = total * correction + tl.sum(p, 1)
        # The weights as two bfloat16 parts (p = hi + lo to about 16 bits): a single bfloat16
        # rounding of a dominant weight (peaked scores) is off by more than the tolerance.
        p_hi = p.to(tl.bfloat16)
        p_lo = (p - p_hi.to(tl.float32)).to(tl.bfloat16)
        acc = acc * correction[:, None] + tl.dot(p_hi, k_lat) + tl.dot(p_lo, k_lat)
        top = new_top
    out = acc / total[:, None]
    tl.store(out_ptr + (b * heads + hs)[:, None] * D_LATENT + lat[None, :], out.to(tl.bfloat16),
             mask=h_ok[:, None])


def custom_kernel(data: input_t) -> output_t:
    q, kv, out = data
    bs, heads, _ = q.shape
    grid = (bs, triton.cdiv(heads, BLOCK_H))
    mla_decode_kernel[grid](q.contiguous(), kv.contiguous(), out, heads, kv.shape[1], SCALE,
                            D_LATENT=D_LATENT, D_ROPE=D_ROPE, BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N,
                            num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return out
