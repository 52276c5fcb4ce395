import torch

# q (bs, heads, 576) bf16: queries in the latent space (512) and their rotary part (64);
# kv (bs, sk, 576) bf16: the latent cache, each position's compressed KV (512) and shared rotary key (64);
# out (bs, heads, 512) bf16 preallocated: attention over the cache, in the latent space.
input_t = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
output_t = torch.Tensor
