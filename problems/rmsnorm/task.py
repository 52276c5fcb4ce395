
import torch

input_t = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # x, weight, out
output_t = torch.Tensor
