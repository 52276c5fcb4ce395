"""System calls no candidate needs and that reach past every namespace: refused before it loads.

The kernel's keyrings are not namespaced the way files, processes and the network are. A red-team
kernel whose user namespace mapped it to root read the host root's keyrings in /proc/keys, linked
a key of its own into them by serial number (KEYCTL_LINK checks no namespace) and read that key
back in the next evaluation: a channel from one candidate to the next, and between a candidate and
the base it is timed beside. A seccomp filter that answers `add_key`, `request_key` and `keyctl`
with EPERM closes the class: no keyring can be made, read or linked, whatever the sandbox looks
like (bubblewrap or none, as on a GPU host without it).

The filter is classic BPF, written out here (no libseccomp in the runner's reach). It is installed
by the runner itself before any candidate code runs, with no_new_privs set (the kernel requires
it); a filter cannot be removed, and every process the candidate starts inherits it. The other
ABIs of the machine are filtered too (i386's `int 0x80` and x32 on x86-64), since native code can
enter through them.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

# Per machine: (audit architecture, the key system calls' numbers, mask applied to the number first).
# x86-64's x32 ABI sets bit 30 of the number; the mask folds it onto the 64-bit numbers.
_ABIS: dict[str, list[tuple[int, tuple[int, ...], int]]] = {
    "x86_64": [(0xC000003E, (248, 249, 250), 0xBFFFFFFF),  # add_key, request_key, keyctl
               (0x40000003, (286, 287, 288), 0xFFFFFFFF)],  # the same through i386's ABI
    "aarch64": [(0xC00000B7, (217, 218, 219), 0xFFFFFFFF),
                (0x40000028, (309, 310, 311), 0xFFFFFFFF)],  # arm32 compat
}

_LD_W_ABS, _JEQ_K, _AND_K, _RET_K = 0x20, 0x15, 0x54, 0x06
_ARCH_AT, _NR_AT = 4, 0  # offsets in struct seccomp_data
_ALLOW = 0x7FFF0000
_DENY = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; empty where the machine's numbers are not known."""
    abis = _ABIS.get(machine or platform.machine(), [])
    if not abis:
        return []
    # Each ABI: compare the architecture, load the number, mask it, compare with each key call.
    blocks = []
    for arch, numbers, mask in abis:
        body = [(_LD_W_ABS, 0, 0, _NR_AT), (_AND_K, 0, 0, mask)] + [(_JEQ_K, -1, 0, n) for n in numbers]
        body.append((_RET_K, 0, 0, _ALLOW))  # this ABI, another call
        blocks.append([(_JEQ_K, 0, len(body), arch), *body])
    code = [(_LD_W_ABS, 0, 0, _ARCH_AT)]
    for block in blocks:
        code += block
        code.append((_LD_W_ABS, 0, 0, _ARCH_AT))  # the next block compares the architecture again
    code[-1] = (_RET_K, 0, 0, _ALLOW)  # an architecture not listed: nothing to filter
    deny_at = len(code)
    code.append((_RET_K, 0, 0, _DENY))
    return [(c, deny_at - i - 1 if jt == -1 else jt, jf, k) for i, (c, jt, jf, k) in enumerate(code)]


def install() -> str:
    """Install the filter in this process (and all it starts later); what was done, in words."""
    instructions = program()
    if not instructions:
        return f"no key-call filter: the numbers of {platform.machine()} are not known here"
    raw = b"".join(struct.pack("HBBI", *ins) for ins in instructions)
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Prog(len(instructions), ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"no key-call filter: the kernel refused it ({errno.errorcode.get(ctypes.get_errno(), '?')})"
    return "key calls refused (seccomp)"
