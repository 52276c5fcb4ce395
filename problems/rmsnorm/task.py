from typing import Tuple

import torch

input_t = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # x, weight, out
output_t = torch.Tensor
