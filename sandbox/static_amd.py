"""Static analysis for the MI300 ISA: resource remarks, kernel metadata and assembly."""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from sandbox import buildcache, hip, targets
from sandbox.static_report import (
    _LOG_LIMIT,
    REPORT_VERSION,
    TORCH_STUB_NOTE,
    KernelStatic,
    LineMap,
    StaticReport,
    _cache_load,
    _cache_store,
    _demangle,
    _diagnostics,
    _finish,
    torch_stub,
)

log = logging.getLogger(__name__)

# -- AMD: remarks, metadata, assembly ----------------------------------------------

_REMARK = re.compile(r"remark:\s*(?P<body>.*?)\s*\[-Rpass-analysis=kernel-resource-usage\]")
_REMARK_KEYS = {
    "sgprs": "sgprs",
    "vgprs": "vgprs",
    "agprs": "agprs",
    "scratchsize": "scratch_bytes",
    "occupancy": "occupancy",
    "sgprs spill": "sgpr_spills",
    "vgprs spill": "vgpr_spills",
    "lds size": "shared_bytes",
    "dynamic stack": "dynamic_stack",
}


def parse_resource_remarks(log_text: str) -> dict[str, dict[str, Any]]:
    """`-Rpass-analysis=kernel-resource-usage` remarks, by function symbol."""
    found: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in log_text.splitlines():
        match = _REMARK.search(line)
        if not match:
            continue
        key, _, value = match.group("body").partition(":")
        key, value = key.strip(), value.strip()
        if key == "Function Name":
            current = found.setdefault(value, {})
            continue
        if current is None:
            continue
        norm = re.sub(r"\s*\[.*?\]", "", key).strip().lower()
        field_name = _REMARK_KEYS.get(norm)
        if field_name is None:
            continue
        if value.lower() in ("true", "false"):
            current[field_name] = value.lower() == "true"
        else:
            try:
                current[field_name] = int(value)
            except ValueError:
                current[field_name] = value
    return found


def parse_amdgpu_metadata(asm: str) -> dict[str, dict[str, Any]]:
    """The code object's kernel metadata (YAML in the assembly), by kernel symbol."""
    match = re.search(r"\.amdgpu_metadata\s*\n(.*?)\n\s*\.end_amdgpu_metadata", asm, re.S)
    if not match:
        return {}
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        log.warning("unreadable amdgpu metadata: %s", exc)
        return {}
    kernels = (data or {}).get("amdhsa.kernels") or []
    return {str(k.get(".name")): k for k in kernels if isinstance(k, dict)}


_AMD_MNEMONIC = re.compile(r"^([a-z][a-z0-9_]*)\b")
_AMD_FUNCTION = re.compile(r"^\.type\s+([^,\s]+)\s*,\s*@function")


def split_amdgcn_functions(asm: str) -> dict[str, list[str]]:
    """Instruction mnemonics of each function in AMDGPU assembly."""
    functions: dict[str, list[str]] = {}
    declared: set[str] = set()
    current: list[str] | None = None
    for raw in asm.splitlines():
        line = raw.split(";", 1)[0].strip()
        if not line:
            continue
        typed = _AMD_FUNCTION.match(line)
        if typed:
            declared.add(typed.group(1))
            continue
        if line.endswith(":"):
            label = line[:-1]
            if label in declared:
                current = functions.setdefault(label, [])
            elif label.startswith(".Lfunc_end"):
                current = None
            continue
        if current is None or line.startswith("."):
            continue
        match = _AMD_MNEMONIC.match(line)
        if match:
            current.append(match.group(1))
    return functions


def classify_amdgcn(mnemonics: Sequence[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Counts by category, and counts of the opcodes worth naming."""
    cats: dict[str, int] = {}
    ops: dict[str, int] = {}

    def bump(table: dict[str, int], key: str) -> None:
        table[key] = table.get(key, 0) + 1

    for m in mnemonics:
        notable = False
        if m.startswith(("v_mfma", "v_smfmac")):
            cat, notable = "mfma", True
        elif m.startswith(("global_load", "buffer_load", "flat_load")):
            cat, notable = "vmem_load", True
        elif m.startswith(("global_store", "buffer_store", "flat_store")):
            cat, notable = "vmem_store", True
        elif m.startswith(("global_atomic", "buffer_atomic", "flat_atomic")):
            cat, notable = "atomic", True
        elif m.startswith("scratch_"):
            cat, notable = "scratch", True
        elif m.startswith("ds_"):
            cat, notable = "lds", True
        elif m.startswith(("s_load", "s_buffer_load", "s_store", "s_buffer_store")):
            cat = "smem"
        elif m.startswith("s_waitcnt"):
            cat = "waitcnt"
        elif m == "s_barrier":
            cat, notable = "barrier", True
        elif m.startswith(("s_branch", "s_cbranch", "s_setpc", "s_swappc")):
            cat = "branch"
        elif m.startswith("v_accvgpr"):
            cat, notable = "accvgpr_move", True
        elif m.startswith("v_"):
            cat = "valu"
            notable = ("fp8" in m or "bf8" in m or m.startswith("v_dot"))
        elif m.startswith("s_"):
            cat = "salu"
        else:
            cat = "other"
        bump(cats, cat)
        if notable:
            bump(ops, m)
    return cats, ops


def analyze_hip(
    source: str,
    name: str = "kernel",
    *,
    toolchain: hip.Toolchain | None = None,
    arch: str | None = None,
    flags: Sequence[str] = (),
    profile: str = "mi300x",
    line_map: LineMap | None = None,
    source_name: str = "",
    use_cache: bool = True,
) -> StaticReport:
    """Compile HIP device code for the MI300 ISA and report each kernel's resources.

    `toolchain` defaults to `hip.mi300_toolchain()` (clang for gfx942, else hipcc); `arch`
    overrides its target. The report names both the target and the compiler.
    """
    target = targets.PROFILES[profile]
    toolchain = toolchain or hip.mi300_toolchain()
    if toolchain is None:
        return StaticReport(
            vendor="amd", status="unavailable", arch_requested=target.arch, source_name=source_name,
            notes=[f"no MI300 static report: {hip.toolchain_problem() or 'no HIP compiler'}"],
        )
    arch = arch or toolchain.arch
    note = toolchain.note if arch == toolchain.arch else f"compiled for {arch} with {toolchain.label}"
    key = buildcache.cache_key(
        "static-hip", REPORT_VERSION, source, arch, " ".join(flags), toolchain.compiler, toolchain.version,
        " ".join(toolchain.flags), profile, name,
    )
    if use_cache and (hit := _cache_load(key)) is not None:
        return _finish(hit, f"{name}.hip", line_map, source_name)
    with tempfile.TemporaryDirectory(prefix="ks-stub-") as stub_dir:
        includes, extra = torch_stub(source, Path(stub_dir))
        built = hip.compile_device_asm(
            source, name=name, toolchain=toolchain, arch=arch, flags=[*extra, *flags], include_dirs=includes
        )
    report = StaticReport(
        vendor="amd",
        status="ok" if built.ok else "compile_error",
        arch_requested=toolchain.requested,
        arch_used=built.arch,
        compiler=toolchain.label,
        command=built.command,
        log=built.log[-_LOG_LIMIT:],
        seconds=round(built.seconds, 3),
        source_name=source_name,
        notes=[note],
    )
    if includes:
        report.notes.append(TORCH_STUB_NOTE)
    report.diagnostics = _diagnostics(built.log)
    if built.ok:
        report.kernels = _amd_kernels(built.log, built.asm, target)
        written_for = amdgcn_target(built.asm)
        if written_for.split("--")[-1].split(":")[0] != built.arch:
            report.notes.append(f"the assembly's target is {written_for or 'not stated'}, not {built.arch}")
    if use_cache:
        _cache_store(key, report)
    return _finish(report, built.source_file, line_map, source_name)


def amdgcn_target(asm: str) -> str:
    """The target the assembly was written for: 'amdgcn-amd-amdhsa--gfx942' (its `.amdgcn_target`)."""
    match = re.search(r'^\s*\.amdgcn_target\s+"([^"]+)"', asm, re.M)
    return match.group(1) if match else ""


def _amd_kernels(log_text: str, asm: str, target: targets.TargetProfile) -> list[KernelStatic]:
    remarks = parse_resource_remarks(log_text)
    meta = parse_amdgpu_metadata(asm)
    bodies = split_amdgcn_functions(asm)
    names = list(meta) or list(remarks)
    demangled = _demangle(names)
    kernels = []
    for sym in names:
        rem, md = remarks.get(sym, {}), meta.get(sym, {})
        k = KernelStatic(name=sym, demangled=demangled.get(sym, ""))
        k.sgprs = rem.get("sgprs", md.get(".sgpr_count"))
        k.vgprs = rem.get("vgprs", md.get(".vgpr_count"))
        k.agprs = rem.get("agprs", md.get(".agpr_count", 0))
        k.sgpr_spills = rem.get("sgpr_spills", md.get(".sgpr_spill_count"))
        k.vgpr_spills = rem.get("vgpr_spills", md.get(".vgpr_spill_count"))
        k.scratch_bytes = rem.get("scratch_bytes", md.get(".private_segment_fixed_size"))
        k.shared_bytes = rem.get("shared_bytes", md.get(".group_segment_fixed_size"))
        k.max_block_size = md.get(".max_flat_workgroup_size")
        k.occupancy = rem.get("occupancy")
        k.occupancy_unit = "waves/SIMD"
        if k.vgprs is not None:
            k.occupancy_detail = targets.occupancy_amd(
                target, k.vgprs, k.agprs or 0, k.sgprs or 0, k.shared_bytes or 0, k.max_block_size or 1024
            )
            if k.occupancy is None:
                k.occupancy = k.occupancy_detail["waves_per_simd"]
        body = bodies.get(sym, [])
        k.instruction_count = len(body)
        k.instructions, k.opcodes = classify_amdgcn(body)
        if k.vgpr_spills or k.sgpr_spills:
            k.notes.append(f"spills: {k.vgpr_spills or 0} VGPRs, {k.sgpr_spills or 0} SGPRs to scratch")
        if k.scratch_bytes:
            k.notes.append(f"uses {k.scratch_bytes} bytes/lane of scratch (slow private memory)")
        if rem.get("dynamic_stack") or md.get(".uses_dynamic_stack"):
            k.notes.append("dynamic stack (recursion or variable-size alloca)")
        if "s_swappc" in " ".join(body) or "s_setpc_b64" in body:
            k.notes.append("calls other functions: their instructions are not counted here")
        kernels.append(k)
    return kernels


