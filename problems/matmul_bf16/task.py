
import torch

input_t = tuple[torch.Tensor, torch.Tensor]  # a (m, k), b (k, n): bfloat16, row-major
output_t = torch.Tensor  # c (m, n): bfloat16, a new tensor
