import torch
from task import input_t, output_t
from utils import generator, make_match_reference

# DeepSeek-V2/V3 widths: the compressed KV (kv_lora_rank) and the decoupled rotary key.
D_LATENT = 512
D_ROPE = 64
# Softmax scale of the un-absorbed head: 1/sqrt(qk_nope_head_dim + qk_rope_head_dim) = 1/sqrt(128 + 64).
SCALE = 192 ** -0.5


def generate_input(bs: int, heads: int, sk: int, seed: int) -> input_t:
    gen = generator(seed)
    q = torch.randn(bs, heads, D_LATENT + D_ROPE, dtype=torch.bfloat16, generator=gen)
    kv = torch.randn(bs, sk, D_LATENT + D_ROPE, dtype=torch.bfloat16, generator=gen)
    out = torch.zeros(bs, heads, D_LATENT, dtype=torch.bfloat16)
    return q, kv, out


def ref_kernel(data: input_t) -> output_t:
    q, kv, out = data
    cache = kv.float()
    # Keys are the whole cache row (latent and rotary); values are its latent part.
    scores = (q.float() @ cache.transpose(1, 2)) * SCALE  # (bs, heads, sk)
    weights = torch.softmax(scores, dim=-1)
    out.copy_(weights @ cache[..., :D_LATENT])
    return out


check_implementation = make_match_reference(ref_kernel, rtol=2e-2, atol=2e-3)
