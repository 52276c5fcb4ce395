"""The MLA decode and mixture-of-experts problems: their references against independent
formulations, their routing rule, their sizes, and their CPU seeds right and caught when wrong.

The full judge path (every test shape, the adversarial cases, broken variants) runs for them in
tests/test_evaluation_cpu.py like for every bundled problem; the CUDA and Triton seeds need a GPU
(tests/test_gpu.py), the HIP seeds an MI300 (their device code compiles in tests/test_hip_static.py).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from sandbox.problem import Problem, load_problem

ROOT = Path(__file__).resolve().parent.parent


def _bound(name: str) -> Problem:
    spec = load_problem(name, "cpu")
    spec.bind()
    return spec


def _clone(data: Any) -> Any:
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in data)


def test_mla_reference_is_attention_over_the_latent_cache() -> None:
    spec = _bound("mla_decode")
    data = spec.generate_input({"bs": 2, "heads": 4, "sk": 37, "seed": 11}, "cpu")
    q, kv, _ = data
    assert q.shape == (2, 4, 576) and kv.shape == (2, 37, 576) and q.dtype == torch.bfloat16
    got = spec.reference(_clone(data)).double()
    # The same attention in float64, written per head: keys are whole cache rows, values their latent part.
    for b in range(2):
        for h in range(4):
            scores = [float(q[b, h].double() @ kv[b, j].double()) / math.sqrt(192) for j in range(37)]
            top = max(scores)
            weights = torch.tensor([math.exp(s - top) for s in scores], dtype=torch.float64)
            expected = (weights / weights.sum()) @ kv[b, :, :512].double()
            assert torch.allclose(got[b, h], expected, rtol=1e-2, atol=1e-2)


def test_moe_routing_takes_the_lower_index_on_ties_and_normalises_gates() -> None:
    _bound("moe")
    import reference  # the problem's own module, bound above

    logits = torch.tensor([[0.5, 2.0, 0.5, 0.5, -1.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    chosen, gates = reference.route(logits, 3)
    assert chosen.tolist() == [[1, 0, 2], [0, 1, 2]]
    assert torch.allclose(gates.sum(-1), torch.ones(2))
    sig = torch.sigmoid(torch.tensor([2.0, 0.5, 0.5]))
    assert torch.allclose(gates[0], sig / sig.sum())


def test_moe_reference_matches_a_token_by_token_layer() -> None:
    spec = _bound("moe")
    params = {"tokens": 7, "d_hidden": 32, "d_expert": 16, "experts": 5, "top_k": 2, "seed": 12}
    data = spec.generate_input(params, "cpu")
    x, logits, wg, wu, wd, sg, su, sd, _, top_k = data
    got = spec.reference(_clone(data)).double()

    def ffn(v: torch.Tensor, g: torch.Tensor, u: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        a, b = v @ g.double(), v @ u.double()
        return (a / (1 + torch.exp(-a)) * b) @ d.double()

    for t in range(7):
        row = logits[t].tolist()
        picked = sorted(range(5), key=lambda e: (-row[e], e))[:top_k]
        affinity = [1 / (1 + math.exp(-row[e])) for e in picked]
        v = x[t].double()
        expected = ffn(v, sg, su, sd)
        for e, a in zip(picked, affinity, strict=True):
            expected = expected + a / sum(affinity) * ffn(v, wg[e], wu[e], wd[e])
        assert torch.allclose(got[t], expected, rtol=2e-2, atol=1e-2), t


@pytest.mark.slow  # builds the C++ seeds
@pytest.mark.parametrize("name", ["mla_decode", "moe"])
def test_cpu_seed_matches_the_reference_and_a_wrong_output_fails(name: str) -> None:
    spec = _bound(name)
    kernel = spec.load_submission(spec.seed_for("cpu"))
    for params in spec.tests:
        data = spec.generate_input(params, "cpu")
        for case in [None, *spec.adversarial]:
            if case is not None:
                index = case["inputs"][0]
                tensor = data[index]
                tensor.fill_(case["constant"]) if "constant" in case else tensor.mul_(case["scale"])
            out = kernel(_clone(data)).clone()
            ok, message = spec.check_implementation(data, out)
            assert ok, (params, case, message)
            out.view(-1)[out.numel() // 3] += 0.5 + abs(float(out.view(-1)[out.numel() // 3]))
            ok, message = spec.check_implementation(data, out)
            assert not ok and "worst" in message, (params, case, message)


def test_competition_scale_rooflines() -> None:
    """The speed of light of the MI300X-scale shapes, from the FLOPs and bytes in task.yml."""
    mla = load_problem("mla_decode", "cuda")
    params = {"bs": 128, "heads": 128, "sk": 6144}
    flops, nbytes = mla.roofline.at(params)
    assert nbytes == pytest.approx(2 * 128 * 6144 * 576 + 2 * 128 * 128 * (576 + 512))
    assert flops == pytest.approx(2 * 128 * 128 * 6144 * (576 + 512))
    assert {"bs": 128, "heads": 128, "sk": 1024} in [{k: v for k, v in b.items() if k != "seed"} for b in mla.benchmarks]
    moe = load_problem("moe", "cuda")
    for shape in moe.benchmarks:
        assert (shape["d_hidden"], shape["d_expert"]) == (7168, 2048)  # DeepSeek-V3's widths
        flops, nbytes = moe.roofline.at(shape)
        weights = 6 * 33 * 7168 * 2048  # 32 routed experts and the shared one, bf16, read once
        assert flops == 6 * shape["tokens"] * 9 * 7168 * 2048 and nbytes and nbytes > weights


@pytest.mark.parametrize("name", ["mla_decode", "moe"])
def test_hip_seed_carries_the_cuda_seeds_device_code(name: str) -> None:
    """The HIP seed cannot run here; its kernels are the CUDA seed's, which the GPU tests run."""
    seeds = ROOT / "problems" / name / "seeds"

    def kernels(path: Path) -> str:
        text = path.read_text()
        body = re.search(r'(?:SOURCE|HIP_KERNELS) = r"""(.*?)"""', text, re.S)
        assert body is not None
        code = body.group(1).replace("#include <hip/hip_runtime.h>\n", "")
        return code.split('extern "C"')[0].strip()

    assert kernels(seeds / "hip.py") == kernels(seeds / "cuda.py")
