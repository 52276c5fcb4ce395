import torch
from task import input_t, output_t
from utils import generator, make_match_reference


def generate_input(tokens: int, d_hidden: int, d_expert: int, experts: int, top_k: int, seed: int) -> input_t:
    gen = generator(seed)

    def weights(*shape: int) -> torch.Tensor:
        # Unit-variance outputs: each weight scaled by 1/sqrt(fan-in).
        return torch.randn(*shape, dtype=torch.bfloat16, generator=gen).mul_(shape[-2] ** -0.5)

    x = torch.randn(tokens, d_hidden, dtype=torch.bfloat16, generator=gen)
    router_logits = torch.randn(tokens, experts, dtype=torch.float32, generator=gen)
    w_gate = weights(experts, d_hidden, d_expert)
    w_up = weights(experts, d_hidden, d_expert)
    w_down = weights(experts, d_expert, d_hidden)
    shared_gate = weights(d_hidden, d_expert)
    shared_up = weights(d_hidden, d_expert)
    shared_down = weights(d_expert, d_hidden)
    out = torch.zeros(tokens, d_hidden, dtype=torch.bfloat16)
    return x, router_logits, w_gate, w_up, w_down, shared_gate, shared_up, shared_down, out, top_k


def route(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's top_k experts by logit (equal logits: the lower index first), and their gates:
    sigmoid affinities normalised to sum to 1 over the chosen experts (DeepSeek-V3)."""
    order = torch.sort(router_logits, dim=-1, descending=True, stable=True).indices[:, :top_k]
    affinity = torch.sigmoid(torch.gather(router_logits, 1, order))
    return order, affinity / affinity.sum(dim=-1, keepdim=True)


def swiglu(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    """One expert's feed-forward network in float32: (silu(x gate) * (x up)) down."""
    return (torch.nn.functional.silu(x @ gate.float()) * (x @ up.float())) @ down.float()


def ref_kernel(data: input_t) -> output_t:
    x, router_logits, w_gate, w_up, w_down, shared_gate, shared_up, shared_down, out, top_k = data
    xf = x.float()
    chosen, gates = route(router_logits, top_k)
    total = swiglu(xf, shared_gate, shared_up, shared_down)
    for e in range(w_gate.shape[0]):
        rows, slots = (chosen == e).nonzero(as_tuple=True)
        if rows.numel():
            part = swiglu(xf[rows], w_gate[e], w_up[e], w_down[e]) * gates[rows, slots, None]
            total.index_add_(0, rows, part)
    out.copy_(total)
    return out


check_implementation = make_match_reference(ref_kernel, rtol=2e-2, atol=1e-2)
