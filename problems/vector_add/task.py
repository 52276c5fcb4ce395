
import torch

input_t = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # a, b, out
output_t = torch.Tensor
