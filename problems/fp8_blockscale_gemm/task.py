
import torch

# a (m, k) fp8, b (n, k) fp8, a_scale (m, k/128) fp32, b_scale (n/128, k/128) fp32,
# c (m, n) bf16 preallocated; a, b, a_scale and b_scale are column-major.
input_t = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
output_t = torch.Tensor
