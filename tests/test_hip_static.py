"""MI300 static reports from Debian's hipcc (no AMD GPU needed; skipped without hipcc).

CI installs hipcc through scripts/setup.sh, so these run there: every bundled
problem's HIP seed is compiled for the MI300 ISA and its resource report
checked, and a kernel calling an fp8 MFMA builtin must show the instruction in
the assembly and in the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import hip, targets
from sandbox.static_analysis import analyze_hip, analyze_submission, extract_kernel_source

ROOT = Path(__file__).resolve().parent.parent
HIPCC = hip.find_hipcc()
pytestmark = pytest.mark.skipif(HIPCC is None, reason="needs hipcc (scripts/setup.sh installs Debian's)")

# Static LDS of each seed's kernel, from its __shared__ arrays.
SEEDS = {
    "vector_add": 0,
    "softmax": 256 * 4,
    "rmsnorm": 256 * 4,
    "matmul_bf16": 32 * 32 * 4 + 32 * 33 * 4,
    "fp8_blockscale_gemm": 0,
}

FP8_MFMA = r"""
typedef float floatx16 __attribute__((ext_vector_type(16)));
__global__ void mfma_fp8(const long* a, const long* b, float* c) {
  floatx16 acc = {0};
  // One 32x32x16 fp8 x fp8 product: 8 fp8 values of a and of b per lane.
  acc = __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a[threadIdx.x], b[threadIdx.x], acc, 0, 0, 0);
  for (int i = 0; i < 16; ++i) c[threadIdx.x * 16 + i] = acc[i];
}
"""


def test_compiler_picks_an_mi300_target() -> None:
    choice = hip.mi300_arch()
    assert choice is not None and choice.arch in ("gfx942", "gfx940")
    assert choice.requested == "gfx942"
    if not choice.exact:
        assert "gfx942" in choice.note and choice.arch in choice.note
    assert "clang" in hip.hipcc_version()


@pytest.mark.parametrize("problem", sorted(SEEDS))
def test_hip_seed_compiles_for_mi300_with_a_resource_report(problem: str) -> None:
    seed = ROOT / "problems" / problem / "seeds" / "hip.py"
    report = analyze_submission(seed, "hip", use_cache=False)
    assert report.status == "ok", report.summary() + "\n" + report.log[-2000:]
    assert report.vendor == "amd" and report.arch_used in ("gfx942", "gfx940")
    assert report.source_name == "hip.py:HIP_KERNELS"
    assert report.notes and report.arch_used in report.notes[0]
    assert len(report.kernels) == 1
    k = report.kernels[0]
    assert k.vgprs and k.vgprs > 0 and k.sgprs and k.sgprs > 0
    assert k.agprs == 0 and k.scratch_bytes == 0
    assert k.vgpr_spills == 0 and k.sgpr_spills == 0
    assert k.shared_bytes == SEEDS[problem]
    assert k.max_block_size and k.max_block_size <= 1024
    # The compiler's occupancy agrees with the rules in sandbox.targets.
    assert k.occupancy is not None and 1 <= k.occupancy <= 8
    assert k.occupancy == k.occupancy_detail["waves_per_simd"]
    assert k.instructions.get("vmem_load", 0) > 0 and k.instructions.get("vmem_store", 0) > 0
    assert "mfma" not in k.instructions  # naive seeds use no matrix cores
    assert k.instruction_count == sum(k.instructions.values())
    data = report.to_dict()
    assert data["kernels"][0]["name"] == k.name and data["arch_used"] == report.arch_used


def test_fp8_mfma_shows_in_assembly_and_report() -> None:
    built = hip.compile_device_asm(FP8_MFMA, name="mfma_fp8")
    assert built.ok, built.log
    assert "v_mfma_f32_32x32x16_fp8_fp8" in built.asm
    report = analyze_hip(FP8_MFMA, "mfma_fp8", use_cache=False)
    assert report.ok, report.summary()
    k = report.kernel("mfma_fp8")
    assert k is not None
    assert k.opcodes.get("v_mfma_f32_32x32x16_fp8_fp8") == 1
    assert k.instructions["mfma"] == 1
    assert "v_mfma_f32_32x32x16_fp8_fp8" in report.summary()


def test_scratch_use_is_reported() -> None:
    source = r"""
__global__ void spill(const int* idx, float* out) {
  float buf[512];  // indexed at run time: lives in scratch
  for (int i = 0; i < 512; ++i) buf[i] = out[i * blockDim.x + threadIdx.x];
  out[threadIdx.x] = buf[idx[threadIdx.x] & 511];
}
"""
    report = analyze_hip(source, "spill", use_cache=False)
    assert report.ok, report.summary()
    k = report.kernels[0]
    assert k.scratch_bytes and k.scratch_bytes >= 2048
    assert any("scratch" in note for note in k.notes)


def test_compile_errors_point_at_the_submission(tmp_path: Path) -> None:
    seed = ROOT / "problems" / "vector_add" / "seeds" / "hip.py"
    text = seed.read_text().replace("a[i] + b[i]", "a[i] + missing[i]")
    bad = tmp_path / "submission.py"
    bad.write_text(text)
    report = analyze_submission(bad, "hip", use_cache=False)
    assert report.status == "compile_error" and not report.kernels
    errors = [d for d in report.diagnostics if d["severity"] == "error"]
    assert errors, report.log
    first = errors[0]
    assert first["file"] == "submission.py" and "missing" in first["message"]
    assert "missing[i]" in text.splitlines()[first["line"] - 1]


def test_competition_form_source_with_torch_launcher_compiles() -> None:
    # CUDA_SRC holds kernels and the torch launcher, as load_inline gets them.
    text = (ROOT / "problems" / "fp8_blockscale_gemm" / "seeds" / "hip.py").read_text()
    found = extract_kernel_source(text, ("CUDA_SRC",), file="hip.py")
    assert found is not None and "torch::Tensor" in found.text
    report = analyze_hip(found.text, "fp8_full", line_map=found.location, use_cache=False)
    assert report.ok, report.summary()
    assert any("torch" in note for note in report.notes)
    assert [k.demangled.split("(")[0] for k in report.kernels] == ["fp8_gemm_kernel"]


def test_reports_are_cached() -> None:
    seed = ROOT / "problems" / "softmax" / "seeds" / "hip.py"
    first = analyze_submission(seed, "hip")
    again = analyze_submission(seed, "hip")
    assert again.cached and again.kernels[0].vgprs == first.kernels[0].vgprs


def test_occupancy_follows_vgpr_budget() -> None:
    mi300 = targets.PROFILES["mi300x"]
    # 512 VGPRs per lane per SIMD in granules of 8, at most 8 waves.
    assert targets.occupancy_amd(mi300, 64)["waves_per_simd"] == 8
    assert targets.occupancy_amd(mi300, 80)["waves_per_simd"] == 6
    assert targets.occupancy_amd(mi300, 256, agprs=256)["waves_per_simd"] == 1
    big_lds = targets.occupancy_amd(mi300, 32, lds_bytes=40 * 1024, block_size=256)
    assert big_lds["waves_per_simd"] == 1 and big_lds["limited_by"] == ["workgroup_lds"]
