import torch
from task import input_t, output_t
from utils import generator, make_match_reference

BLOCK = 128  # scale granularity: 1x128 for a, 128x128 for b


def fp8_dtype() -> torch.dtype:
    """e4m3fnuz on AMD GPUs (as in the competition), e4m3fn elsewhere (NVIDIA, CPU)."""
    if torch.version.hip and torch.get_default_device().type == "cuda":
        return torch.float8_e4m3fnuz
    return torch.float8_e4m3fn


def generate_input(m: int, n: int, k: int, seed: int) -> input_t:
    gen = generator(seed)
    fp8 = fp8_dtype()
    scale_k = (k + BLOCK - 1) // BLOCK
    scale_n = (n + BLOCK - 1) // BLOCK
    # Drawn transposed and returned as views: every input is column-major.
    a = torch.randn(k, m, dtype=torch.float32, generator=gen).to(fp8).T
    b = torch.randn(k, n, dtype=torch.float32, generator=gen).to(fp8).T
    a_scale = torch.randn(scale_k, m, dtype=torch.float32, generator=gen).T
    b_scale = torch.randn(scale_k, scale_n, dtype=torch.float32, generator=gen).T
    c = torch.zeros(m, n, dtype=torch.bfloat16)
    return a, b, a_scale, b_scale, c


def ref_kernel(data: input_t) -> output_t:
    a, b, a_scale, b_scale, c = data
    m, k = a.shape
    n = b.shape[0]
    # Expand the scales to one per element: a_scale[i, kb] covers a[i, kb*128:(kb+1)*128],
    # b_scale[nb, kb] covers the 128x128 block b[nb*128:, kb*128:].
    a_scale_full = a_scale.repeat_interleave(BLOCK, dim=1)[:, :k]
    b_scale_full = b_scale.repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)[:n, :k]
    a_deq = a.to(torch.float32) * a_scale_full
    b_deq = b.to(torch.float32) * b_scale_full
    c.copy_(a_deq @ b_deq.T)
    return c


check_implementation = make_match_reference(ref_kernel, rtol=2e-2, atol=1e-3)
