import math

import torch
from task import input_t, output_t
from utils import generator, make_match_reference


def generate_input(m: int, n: int, k: int, seed: int) -> input_t:
    gen = generator(seed)
    a = torch.randn(m, k, dtype=torch.float32, generator=gen).to(torch.bfloat16)
    # b is scaled by 1/sqrt(k) so that every entry of c is about N(0, 1)
    # whatever k is, and one absolute tolerance fits every shape.
    b = (torch.randn(k, n, dtype=torch.float32, generator=gen) / math.sqrt(k)).to(torch.bfloat16)
    return a, b


def ref_kernel(data: input_t) -> output_t:
    a, b = data
    if a.device.type == "cpu":
        # PyTorch's bfloat16 matmul is slow on the CPU; float32 is exact for
        # bfloat16 products and accumulates in float32 too.
        return torch.matmul(a.float(), b.float()).to(torch.bfloat16)
    # On the GPU: a bfloat16 GEMM accumulating in float32, with split-K
    # partial sums kept in float32 as well.
    saved = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    try:
        return torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = saved


check_implementation = make_match_reference(ref_kernel, rtol=2e-2, atol=1e-2)
