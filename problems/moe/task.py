import torch

# x (tokens, d_hidden) bf16; router_logits (tokens, experts) fp32;
# w_gate, w_up (experts, d_hidden, d_expert) bf16; w_down (experts, d_expert, d_hidden) bf16;
# shared_gate, shared_up (d_hidden, d_expert) bf16; shared_down (d_expert, d_hidden) bf16;
# out (tokens, d_hidden) bf16 preallocated; top_k an int.
input_t = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]
output_t = torch.Tensor
