"""A ROCm device-library folder that an upstream clang can use to compile for gfx942.

A HIP compile links the ROCm device libraries (`ocml.bc`, `ockl.bc`, `oclc_*.bc`), one of them
chosen per target: `oclc_isa_version_<N>.bc`, which only defines the constant
`__oclc_ISA_version`. Debian's `rocm-device-libs` (ROCm 5.2) ships the one for gfx940 (9400)
but not the one for gfx942 (9402), so Debian's clang-19, which knows gfx942, refuses to compile
for it ("cannot find ROCm device library for gfx942").

`gfx942_device_libs()` fills a folder the project owns, under the build cache, with links to
every library of the system's folder plus a gfx942 ISA-version library made from the gfx940 one
(disassembled with `llvm-dis`, the constant changed, assembled with `llvm-as` of the same LLVM
as the compiler). Where the system's folder already holds the gfx942 library (a ROCm 6 host),
that folder is used as it is.

Judge side: the standard library only.
"""

from __future__ import annotations

import functools
import glob
import logging
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

# Where distributions and ROCm put the device libraries (globs, in order).
SYSTEM_BITCODE_DIRS = (
    "/usr/lib/*/amdgcn/bitcode",
    "/usr/lib/amdgcn/bitcode",
    "/opt/rocm/amdgcn/bitcode",
    "/opt/rocm/lib/llvm/lib/clang/*/lib/amdgcn/bitcode",
)

# The library that carries a target's ISA version, and the versions of the two MI300 targets.
ISA_LIBRARY = "oclc_isa_version_{number}.bc"
GFX940_VERSION, GFX942_VERSION = 9400, 9402
_ISA_CONSTANT = re.compile(r"(@__oclc_ISA_version\s*=[^\n]*?constant i32 )(\d+)\b")


class DeviceLibError(RuntimeError):
    """The gfx942 device-library folder cannot be made here; the message says what is missing."""


def system_bitcode_dir() -> Path | None:
    """The first folder of device libraries on this machine that has a gfx940 ISA library."""
    for pattern in SYSTEM_BITCODE_DIRS:
        for folder in sorted(glob.glob(pattern)):
            if (Path(folder) / ISA_LIBRARY.format(number=940)).is_file():
                return Path(folder)
    return None


def llvm_tool(compiler: str, tool: str) -> str | None:
    """`llvm-dis`/`llvm-as` of the compiler's own LLVM: beside its real binary, else `<tool>-<major>`."""
    real = Path(shutil.which(compiler) or compiler).resolve()
    beside = real.parent / tool
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    major = re.search(r"-(\d+)$", Path(compiler).name)
    if major:
        return shutil.which(f"{tool}-{major.group(1)}")
    return None


def retarget_isa_version(ir_text: str, version: int) -> str:
    """The disassembled ISA-version library with its constant set to `version` (exactly one)."""
    new_text, count = _ISA_CONSTANT.subn(lambda m: f"{m.group(1)}{version}", ir_text)
    if count != 1:
        raise DeviceLibError(f"expected one __oclc_ISA_version constant in the gfx940 library, found {count}")
    return new_text


def _run(command: list[str], stdin: str | None = None) -> str:
    try:
        proc = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeviceLibError(f"{command[0]} failed: {exc}") from exc
    if proc.returncode != 0:
        raise DeviceLibError(f"{' '.join(command)} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def _build_folder(source: Path, dest: Path, llvm_dis: str, llvm_as: str) -> None:
    """Links to every library of `source`, and the generated gfx942 one, in a fresh `dest`."""
    for library in sorted(source.glob("*.bc")):
        (dest / library.name).symlink_to(library)
    text = _run([llvm_dis, str(source / ISA_LIBRARY.format(number=940)), "-o", "-"])
    generated = dest / ISA_LIBRARY.format(number=942)
    _run([llvm_as, "-", "-o", str(generated)], stdin=retarget_isa_version(text, GFX942_VERSION))


@functools.cache
def gfx942_device_libs(compiler: str) -> Path:
    """A device-library folder with a gfx942 ISA library, for `--rocm-device-lib-path`.

    The generated folder is keyed by the system folder, the gfx940 library's size and time, and
    the compiler's path, so an upgrade of either makes a new one; concurrent callers race to rename
    a complete folder into place and the loser uses the winner's.
    """
    from sandbox import buildcache  # stdlib-only; late so that importing this module stays cheap

    source = system_bitcode_dir()
    if source is None:
        raise DeviceLibError(
            "no ROCm device libraries (oclc_isa_version_940.bc) found; install rocm-device-libs"
        )
    if (source / ISA_LIBRARY.format(number=942)).is_file():
        return source
    llvm_dis, llvm_as = llvm_tool(compiler, "llvm-dis"), llvm_tool(compiler, "llvm-as")
    if not llvm_dis or not llvm_as:
        raise DeviceLibError(
            f"no llvm-dis/llvm-as of {Path(compiler).name}'s LLVM to make the gfx942 device library"
            " (apt-get install llvm-19)"
        )
    stat = (source / ISA_LIBRARY.format(number=940)).stat()
    key = buildcache.cache_key(str(source), str(stat.st_size), str(stat.st_mtime_ns), llvm_as, compiler)
    root = buildcache.cache_root().parent / "amdgcn-bitcode"
    dest = root / key
    if (dest / ISA_LIBRARY.format(number=942)).is_file():
        return dest
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        _build_folder(source, staging, llvm_dis, llvm_as)
        os.rename(staging, dest)
        log.info("gfx942 device libraries made in %s from %s", dest, source)
    except OSError:
        if not (dest / ISA_LIBRARY.format(number=942)).is_file():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest
