"""MI300 static reports from Debian's clang-19 (gfx942) and hipcc (gfx940); no AMD GPU needed.

CI installs both through scripts/setup.sh, so these run there: every bundled problem's HIP seed
is compiled for the MI300 ISA and its resource report checked, with each compiler; a kernel
calling an fp8 MFMA builtin must show the instruction in the assembly and in the report.
Skipped where neither compiler is installed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sandbox import amdgcn_libs, hip, targets
from sandbox.static_amd import amdgcn_target
from sandbox.static_analysis import analyze_hip, analyze_submission, extract_kernel_source

ROOT = Path(__file__).resolve().parent.parent
TOOLCHAIN = hip.mi300_toolchain()
CLANG, WHY_NO_CLANG = hip.clang_toolchain()
HIPCC, WHY_NO_HIPCC = hip.hipcc_toolchain()
pytestmark = pytest.mark.skipif(TOOLCHAIN is None, reason="needs clang-19 or hipcc (scripts/setup.sh installs them)")
needs_clang = pytest.mark.skipif(CLANG is None, reason=f"gfx942 needs clang-19: {WHY_NO_CLANG}")
needs_both = pytest.mark.skipif(CLANG is None or HIPCC is None, reason=f"{WHY_NO_CLANG} {WHY_NO_HIPCC}")

# Static LDS of each seed's kernel, from its __shared__ arrays.
SEEDS = {
    "vector_add": 0,
    "softmax": 256 * 4,
    "rmsnorm": 256 * 4,
    "matmul_bf16": 32 * 32 * 4 + 32 * 33 * 4,
    "fp8_blockscale_gemm": 0,
    "mla_decode": (576 + 2 * 256) * 4,  # the query, the chunk's weights, the reduction buffer
    "moe": 0,
}
# Kernels per seed (MoE: routing, gate-up, down).
KERNELS = {name: 3 if name == "moe" else 1 for name in SEEDS}

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
    assert TOOLCHAIN is not None and TOOLCHAIN.arch in ("gfx942", "gfx940")
    assert TOOLCHAIN.requested == "gfx942"
    assert "clang" in TOOLCHAIN.version and TOOLCHAIN.arch in TOOLCHAIN.note
    if not TOOLCHAIN.exact:
        assert "gfx942" in TOOLCHAIN.note
    if CLANG is not None:  # clang-19 comes first where it works
        assert TOOLCHAIN == CLANG


@needs_clang
@pytest.mark.slow  # starts a compiler
def test_clang_compiles_for_gfx942_itself() -> None:
    assert CLANG is not None and CLANG.exact and CLANG.kind == "clang"
    built = hip.compile_device_asm(FP8_MFMA, name="mfma_fp8", toolchain=CLANG)
    assert built.ok, built.log
    assert amdgcn_target(built.asm) == "amdgcn-amd-amdhsa--gfx942"
    # 16x16x32 is the other fp8 MFMA shape of gfx940/942.
    built = hip.compile_device_asm(FP8_MFMA.replace("32x32x16", "16x16x32").replace("floatx16", "floatx4")
                                   .replace("i < 16", "i < 4").replace("* 16", "* 4")
                                   .replace("ext_vector_type(16)", "ext_vector_type(4)"),
                                   name="mfma_fp8_16", toolchain=CLANG)
    assert built.ok, built.log
    assert "v_mfma_f32_16x16x32_fp8_fp8" in built.asm


@needs_clang
def test_generated_isa_library_says_gfx942() -> None:
    assert CLANG is not None
    folder = amdgcn_libs.gfx942_device_libs(CLANG.compiler)
    library = folder / "oclc_isa_version_942.bc"
    assert library.is_file() and f"--rocm-device-lib-path={folder}" in CLANG.flags
    llvm_dis = amdgcn_libs.llvm_tool(CLANG.compiler, "llvm-dis")
    if llvm_dis and folder != amdgcn_libs.system_bitcode_dir():
        text = subprocess.run([llvm_dis, str(library), "-o", "-"], capture_output=True, text=True).stdout
        assert "constant i32 9402" in text and "9400" not in text
        # Every other library is the system's own.
        assert (folder / "ocml.bc").resolve() == (amdgcn_libs.system_bitcode_dir() / "ocml.bc").resolve()


def test_isa_version_retargeting_changes_the_constant_only() -> None:
    text = "@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 9400, align 4\n"
    assert amdgcn_libs.retarget_isa_version(text, 9402) == text.replace("9400", "9402")
    with pytest.raises(amdgcn_libs.DeviceLibError):
        amdgcn_libs.retarget_isa_version("no constant here", 9402)


@pytest.mark.slow  # starts a compiler
def test_without_clang_hipcc_takes_over_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    if HIPCC is None:
        pytest.skip(WHY_NO_HIPCC)
    monkeypatch.setenv(hip.CLANG_ENV, "/nonexistent/clang++")
    hip.mi300_toolchain.cache_clear()
    try:
        chosen = hip.mi300_toolchain()
        assert chosen is not None and chosen.kind == "hipcc"
        assert "clang not used" in chosen.note
        report = analyze_hip(FP8_MFMA, "mfma_fp8", use_cache=False)
        assert report.ok and report.arch_used == chosen.arch and report.compiler.startswith("hipcc")
    finally:
        monkeypatch.undo()
        hip.mi300_toolchain.cache_clear()


@pytest.mark.slow  # starts a compiler
@pytest.mark.parametrize("problem", sorted(SEEDS))
def test_hip_seed_compiles_for_mi300_with_a_resource_report(problem: str) -> None:
    assert TOOLCHAIN is not None
    seed = ROOT / "problems" / problem / "seeds" / "hip.py"
    report = analyze_submission(seed, "hip", use_cache=False)
    assert report.status == "ok", report.summary() + "\n" + report.log[-2000:]
    assert report.vendor == "amd" and report.arch_used == TOOLCHAIN.arch
    assert report.source_name == "hip.py:HIP_KERNELS"
    # The report names the chip and the compiler.
    assert report.notes and report.arch_used in report.notes[0] and report.compiler == TOOLCHAIN.label
    assert len(report.kernels) == KERNELS[problem]
    for k in report.kernels:
        assert k.vgprs and k.vgprs > 0 and k.sgprs and k.sgprs > 0
        assert k.agprs == 0 and k.scratch_bytes == 0
        assert k.vgpr_spills == 0 and k.sgpr_spills == 0
        assert k.max_block_size and k.max_block_size <= 1024
        # The compiler's occupancy agrees with the rules in sandbox.targets.
        assert k.occupancy is not None and 1 <= k.occupancy <= 8
        assert k.occupancy == k.occupancy_detail["waves_per_simd"]
        assert k.instructions.get("vmem_load", 0) > 0 and k.instructions.get("vmem_store", 0) > 0
        assert "mfma" not in k.instructions  # naive seeds use no matrix cores
        assert k.instruction_count == sum(k.instructions.values())
    assert sum(k.shared_bytes or 0 for k in report.kernels) == SEEDS[problem]
    data = report.to_dict()
    assert data["kernels"][0]["name"] == report.kernels[0].name and data["arch_used"] == report.arch_used


@pytest.mark.slow
@needs_both
@pytest.mark.parametrize("problem", sorted(SEEDS))
def test_gfx942_and_gfx940_reports_agree_on_what_the_source_fixes(problem: str) -> None:
    """Both compilers see the same kernels, LDS and workgroup size; registers may differ (docs/MI300.md)."""
    seed = ROOT / "problems" / problem / "seeds" / "hip.py"
    new, old = (analyze_submission(seed, "hip", toolchain=t, use_cache=False) for t in (CLANG, HIPCC))
    assert new.ok and old.ok, new.summary() + old.summary()
    # hipcc's target is gfx940 with Debian's 5.2, gfx942 with a ROCm 6 hipcc on an MI300 host.
    assert (new.arch_used, old.arch_used) == ("gfx942", HIPCC.arch if HIPCC else "")
    assert new.compiler.startswith("clang++") and old.compiler.startswith("hipcc")
    assert [k.name for k in new.kernels] == [k.name for k in old.kernels]
    for a, b in zip(new.kernels, old.kernels, strict=True):
        assert (a.shared_bytes, a.max_block_size, a.scratch_bytes) == (b.shared_bytes, b.max_block_size, b.scratch_bytes)


@pytest.mark.slow  # starts a compiler
def test_fp8_mfma_shows_in_assembly_and_report() -> None:
    assert TOOLCHAIN is not None
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


@pytest.mark.slow  # starts a compiler
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


@pytest.mark.slow  # starts a compiler
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


@pytest.mark.parametrize(  # one compile stays in the fast loop: its smoke test of the toolchain
    "problem", [p if p == "fp8_blockscale_gemm" else pytest.param(p, marks=pytest.mark.slow) for p in sorted(SEEDS)]
)
def test_competition_form_source_with_torch_launcher_compiles(problem: str) -> None:
    # CUDA_SRC holds kernels and the torch launcher, as load_inline gets them.
    text = (ROOT / "problems" / problem / "seeds" / "hip.py").read_text()
    found = extract_kernel_source(text, ("CUDA_SRC",), file="hip.py")
    assert found is not None and "torch::Tensor" in found.text
    report = analyze_hip(found.text, f"{problem}_full", line_map=found.location, use_cache=False)
    assert report.ok, report.summary() + report.log[-2000:]
    assert any("torch" in note for note in report.notes)
    assert len(report.kernels) == KERNELS[problem]


@pytest.mark.slow  # starts a compiler
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
