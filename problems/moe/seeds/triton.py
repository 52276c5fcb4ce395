# Naive Triton seed in three kernels, as the CUDA seed: route (one program per
# token: top_k rounds of tl.argmax, whose ties go to the lower index, and the
# normalised sigmoid gates), hidden (one program per (token, slot) and block of
# BLOCK_J columns of d_expert: the gate and up projections as broadcast products
# summed over BLOCK_K-long chunks of d_hidden, SwiGLU, into a float32 workspace;
# slot top_k is the shared expert) and down (one program per token and block of
# BLOCK_C columns of d_hidden: the gated sum over slots, rounded to bfloat16).
# No tl.dot: one token's row is too thin for it, and nothing groups tokens by
# expert, so each (token, slot) reads its expert's weights again.
import torch
import triton
import triton.language as tl
from task import input_t, output_t

MAX_TOP_K = 16
# @tunable BLOCK_J: 32, 64, 128
BLOCK_J = 64
# @tunable BLOCK_C: 32, 64, 128
BLOCK_C = 64
# @tunable BLOCK_K: 16, 32, 64
BLOCK_K = 32
# @tunable NUM_WARPS: 2, 4, 8
NUM_WARPS = 4


@triton.jit
def moe_route_kernel(logits_ptr, chosen_ptr, gates_ptr, experts, top_k,
                     BLOCK_E: tl.constexpr, MAX_TOP_K: tl.constexpr):
    t = tl.program_id(0)
    es = tl.arange(0, BLOCK_E)
    row = tl.load(logits_ptr + t * experts + es, mask=es < experts, other=float("-inf"))
    slots = tl.arange(0, MAX_TOP_K)
    picked = tl.zeros([MAX_TOP_K], tl.int32)
    affinity = tl.zeros([MAX_TOP_K], tl.float32)
    for s in range(0, top_k):
        best = tl.argmax(row, 0, tie_break_left=True)
        value = tl.max(row, 0)
        picked = tl.where(slots == s, best, picked)
        affinity = tl.where(slots == s, 1.0 / (1.0 + tl.exp(-value)), affinity)
        row = tl.where(es == best, float("-inf"), row)
    gates = affinity / tl.sum(affinity, 0)
    tl.store(chosen_ptr + t * top_k + slots, picked, mask=slots < top_k)
    tl.store(gates_ptr + t * top_k + slots, gates, mask=slots < top_k)


@triton.jit
def moe_hidden_kernel(x_ptr, chosen_ptr, w_gate_ptr, w_up_ptr, s_gate_ptr, s_up_ptr, h_ptr,
                      d_hidden, d_expert, top_k, BLOCK_J: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    t = row // (top_k + 1)
    s = row % (top_k + 1)
    js = tl.program_id(1) * BLOCK_J + tl.arange(0, BLOCK_J)
    j_ok = js < d_expert
    if s < top_k:
        offset = tl.load(chosen_ptr + t * top_k + s).to(tl.int64) * d_hidden * d_expert
        gate_ptr = w_gate_ptr + offset
        up_ptr = w_up_ptr + offset
    else:
        gate_ptr = s_gate_ptr
        up_ptr = s_up_ptr
    g = tl.zeros([BLOCK_J], tl.float32)
    u = tl.zeros([BLOCK_J], tl.float32)
    for p0 in range(0, d_hidden, BLOCK_K):
        ps = p0 + tl.arange(0, BLOCK_K)
        p_ok = ps < d_hidden
        xv = tl.load(x_ptr + t.to(tl.int64) * d_hidden + ps, mask=p_ok, other=0.0).to(tl.float32)
        w_offsets = ps[:, None].to(tl.int64) * d_expert + js[None, :]
        mask = p_ok[:, None] & j_ok[None, :]
        g += tl.sum(xv[:, None] * tl.load(gate_ptr + w_offsets, mask=mask, other=0.0).to(tl.float32), 0)
        u += tl.sum(xv[:, None] * tl.load(up_ptr + w_offsets, mask=mask, other=0.0).to(tl.float32), 0)
    h = g / (1.0 + tl.exp(-g)) * u
    tl.store(h_ptr + row.to(tl.int64) * d_expert + js, h, mask=j_ok)


@triton.jit
def moe_down_kernel(h_ptr, chosen_ptr, gates_ptr, w_down_ptr, s_down_ptr, out_ptr,
                    d_hidden, d_expert, top_k, BLOCK_C: tl.constexpr, BLOCK_K: tl.constexpr):
    t = tl.program_id(0)
    cs = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = cs < d_hidden
    total = tl.zeros([BLOCK_C], tl.float32)
    for s in range(0, top_k + 1):
        if s < top_k:
            down_ptr = w_down_ptr + tl.load(chosen_ptr + t * top_k + s).to(tl.int64) * d_expert * d_hidden
            weight = tl.load(gates_ptr + t * top_k + s)
        else:
            down_ptr = s_down_ptr
            weight = 1.0
        y = tl.zeros([BLOCK_C], tl.float32)
        h_row = h_ptr + (t.to(tl.int64) * (top_k + 1) + s) * d_expert
        for j0 in range(0, d_expert, BLOCK_K):
            js = j0 + tl.arange(0, BLOCK_K)
            j_ok = js < d_expert
            hv = tl.load(h_row + js, mask=j_ok, other=0.0)
            wd = tl.load(down_ptr + js[:, None].to(tl.int64) * d_hidden + cs[None, :],
                         mask=j_ok[:, None] & c_ok[None, :], other=0.0).to(tl.float32)
            y += tl.sum(hv[:, None] * wd, 0)
        total += weight * y
    tl.store(out_ptr + t.to(tl.int64) * d_hidden + cs, total.to(tl.bfloat16), mask=c_ok)


def custom_kernel(data: input_t) -> output_t:
    x, logits, w_gate, w_up, w_down, s_gate, s_up, s_down, out, top_k = data
    tokens, d_hidden = x.shape
    experts, _, d_expert = w_gate.shape
    if not 1 <= top_k <= min(MAX_TOP_K, experts):
        raise ValueError(f"top_k={top_k} must be in 1..min({MAX_TOP_K}, experts)")
    if tokens == 0:
        return out
    chosen = torch.empty(tokens, top_k, dtype=torch.int32, device=x.device)
    gates = torch.empty(tokens, top_k, dtype=torch.float32, device=x.device)
    h = torch.empty(tokens * (top_k + 1), d_expert, dtype=torch.float32, device=x.device)
    moe_route_kernel[(tokens,)](logits, chosen, gates, experts, top_k,
                                BLOCK_E=triton.next_power_of_2(experts), MAX_TOP_K=MAX_TOP_K)
    moe_hidden_kernel[(tokens * (top_k + 1), triton.cdiv(d_expert, BLOCK_J))](
        x, chosen, w_gate, w_up, s_gate, s_up, h, d_hidden, d_expert, top_k,
        BLOCK_J=BLOCK_J, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS)
    moe_down_kernel[(tokens, triton.cdiv(d_hidden, BLOCK_C))](
        h, chosen, gates, w_down, s_down, out, d_hidden, d_expert, top_k,
        BLOCK_C=BLOCK_C, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS)
    return out
