
import torch

input_t = tuple[torch.Tensor]  # (x,): float32 (rows, cols)
output_t = torch.Tensor  # float32 (rows, cols), a new tensor
