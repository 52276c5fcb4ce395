# Naive Triton seed: one program per BM x BN tile of c (64x64). Along k it
# steps one scale block (128) at a time: the fp8 tiles are widened to bfloat16
# (exact: every e4m3 value is a bfloat16 value) and multiplied with tl.dot into
# a float32 partial product, which is scaled by the rows' a_scale and the
# tile's b_scale and added to the float32 accumulator. Works from the inputs'
# strides (column-major here). Tile sizes, warps and stages are declared
# tunable but left at plain values; no grouping of programs for L2 reuse.
#
# Why not tl.dot on the fp8 tiles directly: on an H100 the fp8 tensor cores do
# not accumulate in full float32, and the results miss atol = 1e-3 on about
# 0.1-0.3% of the elements (those near zero), even when promoting to float32
# after every 32 values of k (max_num_imprecise_acc=32).
import triton
import triton.language as tl
from task import input_t, output_t

# @tunable BM: 32, 64, 128
BM = 64
# @tunable BN: 32, 64, 128  # must divide BK
BN = 64
BK = 128  # the scale block
# @tunable NUM_WARPS: 2, 4, 8
NUM_WARPS = 4
# @tunable NUM_STAGES: 2, 3, 4
NUM_STAGES = 3


@triton.jit
def fp8_gemm_kernel(a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr, m, n, k,
                    sa_m, sa_k, sb_n, sb_k, sas_m, sas_k, sbs_n, sbs_k, sc_m, sc_n,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    row_ok = rows < m
    col_ok = cols < n
    nb = (pid_n * BN) // BK  # b_scale row of this tile (BN divides 128)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for kb in range(0, tl.cdiv(k, BK)):
        k_ok = kb * BK + ks < k
        a_tile = tl.load(a_ptr + rows[:, None] * sa_m + (kb * BK + ks[None, :]) * sa_k,
                         mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b_tile = tl.load(b_ptr + (kb * BK + ks[:, None]) * sb_k + cols[None, :] * sb_n,
                         mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        part = tl.dot(a_tile.to(tl.bfloat16), b_tile.to(tl.bfloat16))
        a_s = tl.load(as_ptr + rows * sas_m + kb * sas_k, mask=row_ok, other=0.0)
        b_s = tl.load(bs_ptr + nb * sbs_n + kb * sbs_k)
        acc += part * (a_s[:, None] * b_s)
    tl.store(c_ptr + rows[:, None] * sc_m + cols[None, :] * sc_n, acc.to(tl.bfloat16),
             mask=row_ok[:, None] & col_ok[None, :])


def custom_kernel(data: input_t) -> output_t:
    a, b, a_scale, b_scale, c = data
    m, k = a.shape
    n = b.shape[0]
    grid = (triton.cdiv(n, BN), triton.cdiv(m, BM))
    fp8_gemm_kernel[grid](a, b, a_scale, b_scale, c, m, n, k,
                          a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                          a_scale.stride(0), a_scale.stride(1),
                          b_scale.stride(0), b_scale.stride(1),
                          c.stride(0), c.stride(1), BM=BM, BN=BN, BK=BK,
                          num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return c
