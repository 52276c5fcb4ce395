"""Static report parsers on known compiler output, and CUDA reports with nvcc (skipped without it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sandbox import static_analysis as sa
from sandbox import targets

ROOT = Path(__file__).resolve().parent.parent

REMARKS = """\
k.hip:3:1: remark: Function Name: _Z4gemmPKfPf [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     SGPRs: 40 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     VGPRs: 128 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     AGPRs: 64 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     ScratchSize [bytes/lane]: 16 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     Dynamic Stack: False [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     Occupancy [waves/SIMD]: 2 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     SGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     VGPRs Spill: 4 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     LDS Size [bytes/block]: 32768 [-Rpass-analysis=kernel-resource-usage]
"""

ASM = """\
\t.text
\t.amdgcn_target "amdgcn-amd-amdhsa--gfx942"
\t.protected\t_Z4gemmPKfPf
\t.type\t_Z4gemmPKfPf,@function
_Z4gemmPKfPf:                           ; @_Z4gemmPKfPf
; %bb.0:
\ts_load_dwordx4 s[0:3], s[4:5], 0x0
\tglobal_load_dwordx4 v[0:3], v4, s[0:1]
\tds_read_b128 v[8:11], v5
\tv_mfma_f32_32x32x8_bf16 a[0:15], v[0:1], v[2:3], a[0:15]
\tv_mfma_f32_32x32x8_bf16 a[0:15], v[0:1], v[2:3], a[0:15]
\tv_accvgpr_read_b32 v6, a0
\tscratch_store_dword off, v6, s0
\ts_barrier
\tglobal_store_dword v4, v6, s[2:3]
\ts_endpgm
.Lfunc_end0:
\t.size\t_Z4gemmPKfPf, .Lfunc_end0-_Z4gemmPKfPf
\t.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     64
    .group_segment_fixed_size: 32768
    .max_flat_workgroup_size: 256
    .name:           _Z4gemmPKfPf
    .private_segment_fixed_size: 16
    .sgpr_count:     40
    .sgpr_spill_count: 0
    .symbol:         _Z4gemmPKfPf.kd
    .vgpr_count:     128
    .vgpr_spill_count: 4
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa--gfx942
...

\t.end_amdgpu_metadata
"""

PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3bigPf' for 'sm_90a'
ptxas info    : Function properties for _Z3bigPf
    256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 4096 bytes smem
ptxas info    : Compiling entry function '_Z3addPK6float4PS_i' for 'sm_90a'
ptxas info    : Function properties for _Z3addPK6float4PS_i
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 14 registers, used 0 barriers
"""

SASS = """\
\tcode for sm_90a
\t\tFunction : _Z3addPK6float4PS_i
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R2, SR_TID.X ;
        /*0080*/              @!P0 LDG.E.128 R4, desc[UR6][R2.64] ;
        /*0090*/                   LDG.E.LTC128B.U8 R8, desc[UR6][R2.64] ;
        /*00a0*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ;
        /*00b0*/                   QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR8], R24 ;
        /*00c0*/                   STG.E.64 desc[UR6][R2.64], R4 ;
        /*00d0*/                   EXIT ;
"""


def test_resource_remarks_are_parsed_by_name() -> None:
    found = sa.parse_resource_remarks(REMARKS)["_Z4gemmPKfPf"]
    assert found == {
        "sgprs": 40, "vgprs": 128, "agprs": 64, "scratch_bytes": 16, "dynamic_stack": False,
        "occupancy": 2, "sgpr_spills": 0, "vgpr_spills": 4, "shared_bytes": 32768,
    }


def test_amdgpu_assembly_and_metadata() -> None:
    meta = sa.parse_amdgpu_metadata(ASM)["_Z4gemmPKfPf"]
    assert meta[".max_flat_workgroup_size"] == 256 and meta[".agpr_count"] == 64
    body = sa.split_amdgcn_functions(ASM)["_Z4gemmPKfPf"]
    assert body[0] == "s_load_dwordx4" and body[-1] == "s_endpgm" and len(body) == 10
    cats, ops = sa.classify_amdgcn(body)
    assert cats["mfma"] == 2 and ops["v_mfma_f32_32x32x8_bf16"] == 2
    assert ops["global_load_dwordx4"] == 1 and ops["ds_read_b128"] == 1 and ops["scratch_store_dword"] == 1
    assert cats["barrier"] == 1 and ops["v_accvgpr_read_b32"] == 1
    kernels = sa._amd_kernels(REMARKS, ASM, targets.PROFILES["mi300x"])
    k = kernels[0]
    assert (k.vgprs, k.agprs, k.sgprs, k.shared_bytes, k.max_block_size) == (128, 64, 40, 32768, 256)
    assert k.occupancy == 2  # the compiler's figure
    assert k.occupancy_detail["limits"]["vgpr"] == 2  # (128 + 64) rounded to 8 -> 512 // 192
    assert any("spills" in n for n in k.notes) and any("scratch" in n for n in k.notes)


def test_ptxas_and_sass_are_parsed() -> None:
    info = sa.parse_ptxas_verbose(PTXAS)
    assert info["_Z3bigPf"] == {
        "stack_frame": 256, "spill_store_bytes": 8, "spill_load_bytes": 12, "registers": 32,
        "barriers": 1, "cumulative_stack": 256, "smem": 4096,
    }
    assert info["_Z3addPK6float4PS_i"]["registers"] == 14
    body = sa.split_sass(SASS)["_Z3addPK6float4PS_i"]
    assert body[2] == "LDG.E.128" and len(body) == 8
    cats, ops = sa.classify_sass(body)
    assert ops["LDG.128"] == 1 and ops["LDG.8"] == 1 and ops["STG.64"] == 1
    assert ops["HGMMA.64x128x16.F32.BF16"] == 1 and cats["qgmma"] == 1


def test_kernel_source_is_found_with_its_lines() -> None:
    text = 'import x\n\nKERNELS = r"""\n#include <a.h>\n__global__ void k() {}\n"""\n' \
           'LAUNCH = """\nvoid go() {}\n"""\nCUDA_SRC = KERNELS + LAUNCH\n'
    found = sa.extract_kernel_source(text, ("CUDA_SRC",), file="s.py")
    assert found is not None and found.constant == "CUDA_SRC"
    lines = found.text.splitlines()
    k_line = next(i for i, line in enumerate(lines, 1) if "__global__" in line)
    go_line = next(i for i, line in enumerate(lines, 1) if "void go" in line)
    src = text.splitlines()
    for line in (k_line, go_line):
        file, py_line = found.location(line)
        assert file == "s.py" and src[py_line - 1] == lines[line - 1]
    assert sa.extract_kernel_source("X = 'no kernels here'\n") is None


def test_occupancy_on_hopper() -> None:
    h100 = targets.PROFILES["h100"]
    assert targets.occupancy_nvidia(h100, 32, 0, 256)["warps_per_sm"] == 64
    # 48 registers: 1536 per warp, 8 warps a block -> 65536 // 12288 = 5 blocks.
    occ = targets.occupancy_nvidia(h100, 48, 8320, 256)
    assert occ["warps_per_sm"] == 40 and occ["limited_by"] == ["registers"]
    # 100 KB of shared memory per block (+1 KB reserved): two blocks in 228 KB.
    assert targets.occupancy_nvidia(h100, 32, 100 * 1024, 128)["blocks_per_sm"] == 2


def test_profiles_by_arch_and_name() -> None:
    assert targets.profile_for_arch("gfx942:sramecc+:xnack-").name == "mi300x"
    assert targets.profile_for_arch("90a").name == "h100"
    assert targets.profile_for_device_name("AMD Instinct MI325X").name == "mi325x"
    mi300 = targets.PROFILES["mi300x"]
    assert (mi300.vgprs_per_simd, mi300.max_waves_per_simd, mi300.shared_memory_per_cu_kb) == (512, 8, 64)
    assert "512 VGPRs" in mi300.summary() and "65536 registers" in targets.PROFILES["h100"].summary()


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("problem", ["vector_add", "matmul_bf16", "fp8_blockscale_gemm"])
def test_cuda_seed_report(problem: str) -> None:
    report = sa.analyze_submission(ROOT / "problems" / problem / "seeds" / "cuda.py", "cuda", use_cache=False)
    assert report.status == "ok", report.summary() + report.log[-2000:]
    assert report.arch_used == "sm_90a" and report.source_name == "cuda.py:SOURCE"
    k = report.kernels[0]
    assert k.registers and 0 < k.registers <= 255
    assert k.spill_store_bytes == 0 and k.occupancy and k.occupancy <= 64
    if sa.find_cuobjdump() is None:
        pytest.skip("no cuobjdump: SASS counts not checked")
    assert k.instruction_count > 0 and k.instructions.get("global_load", 0) > 0
    assert any(op.startswith("STG.") for op in k.opcodes)


@pytest.mark.slow
@needs_nvcc
def test_cuda_wgmma_and_errors() -> None:
    source = r"""
#include <cuda_bf16.h>
#include <mma.h>
using namespace nvcuda;
__global__ void tc(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
"""
    report = sa.analyze_cuda(source, "tc", use_cache=False)
    assert report.ok, report.log[-2000:]
    if sa.find_cuobjdump() is not None:
        assert report.kernels[0].instructions.get("hmma", 0) >= 1
    bad = sa.analyze_cuda("__global__ void f(float* x) { x[0] = y; }\n", "bad", use_cache=False)
    assert bad.status == "compile_error"
    assert bad.diagnostics[0]["file"] == "bad.cu" and bad.diagnostics[0]["line"] == 1
