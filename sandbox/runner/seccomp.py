"""System calls no candidate needs and that reach past every namespace or limit: refused before it loads.

The kernel's keyrings are not namespaced the way files, processes and the network are. A red-team
kernel whose user namespace mapped it to root read the host root's keyrings in /proc/keys, linked
a key of its own into them by serial number (KEYCTL_LINK checks no namespace) and read that key
back in the next evaluation: a channel from one candidate to the next, and between a candidate and
the base it is timed beside. A seccomp filter that answers `add_key`, `request_key` and `keyctl`
with EPERM closes the class: no keyring can be made, read or linked, whatever the sandbox looks
like (bubblewrap or none, as on a GPU host without it).

Kernel work a stopped sandbox can leave armed goes too, where the runner is on the CPU. The judge
stops a sandbox while it times something else beside it (the other kernel of a pair, the
reference), and what the kernel does for the sandbox meanwhile is charged to whatever it interrupts.
A timer's expiry runs the wake-up of every epoll entry that watches its descriptor, in the timer's
interrupt: a red-team kernel (round 14) armed timerfds watched by 100,000 entries each and stalled
a core for 9-10 ms per expiry, at about 1 µs a call of its own time, while it was stopped. The same
multiplication works for any event the kernel raises on its own later: a timer (timerfd), a signal
from a POSIX timer or an alarm read through a signalfd, a completion of Linux's asynchronous I/O.
`timerfd_create`, `timerfd_settime`, `signalfd`, `signalfd4`, `io_setup` and `io_submit` are
refused, and so is `timer_create`: a POSIX timer's process-wide signal, expiring while every thread
of the stopped process blocks it, makes the kernel walk all of its threads in the timer's interrupt
(round 15: 64 timers and 4,000 idle threads, 13-23 ms per batch of expiries on the base's clock).
What stays is one alarm per process (`alarm`, `setitimer`), whose walk covers at most the sandbox's
task limit once. A GPU runner keeps these calls until it is checked on a GPU host that its driver
needs none of them.

Memory made executable after it was written goes too, on the CPU (`mprotect` or `pkey_mprotect` with
PROT_EXEC, `mmap` writable and executable at once). Library code is recognised by the bytes of the file
a sample's code was mapped from (`judge/libcode.py`); a runner that could write into its code's pages
would run bytes no file holds (copy a library's kernel over a placeholder of its own build, then make
the page executable again). The loader maps libraries executable as they are and needs neither call;
a JIT that writes code into anonymous memory fails here, as it is refused `hidden-code` anyway on every
problem that forbids anything.

So does the advice to `madvise` that takes a mapped file's pages out of a process's page tables: the
judge tells a forbidden library's use by the pages of it the runner has mapped (`judge/footprint.py`),
and a kernel could otherwise run the library and drop those pages again before the judge reads them.

Sockets other than Unix ones go the same way. The runner has no network, but its namespace has a
loopback: a red-team kernel parked 1.1 GB in TCP buffers there, memory that no process maps and
that cgroup v1 charges to no group unless its TCP accounting is on, past the memory limit. A kernel
needs no socket but the runner's own, which is a Unix one.

The filter is classic BPF, written out here (no libseccomp in the runner's reach). It is installed
by the runner itself before any candidate code runs, with no_new_privs set (the kernel requires
it); a filter cannot be removed, and every process the candidate starts inherits it. The other
ABIs of the machine are filtered too, since native code can enter through them: i386's `int 0x80`
by its own numbers, and x32 on x86-64 refused whole (its calls set bit 30, and some have numbers of
their own that no list here names: its `io_setup` is 543).
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
from dataclasses import dataclass

@dataclass(frozen=True)
class _Abi:
    """One way into the kernel on a machine: its audit architecture, the bits a call's number may
    have (x86-64's x32 ABI sets bit 30: such calls are refused whole), the calls refused outright,
    and `socket`'s number (only Unix sockets are allowed)."""

    arch: int
    mask: int
    refused: tuple[int, ...]
    socket: int
    # timerfd_create, timerfd_settime(64), signalfd(4), io_setup, io_submit, timer_create; then the CPU runner's
    # other refusals (ptrace, process_vm_writev, userfaultfd). userfaultfd: the judge reads a CPU kernel's outputs
    # from the runner's memory while its sandbox is stopped (sandbox/judge/remote.py), and a range registered with
    # a fault handler that is stopped would hold that read for good, where the host lets unprivileged processes
    # handle the kernel's own faults (vm.unprivileged_userfaultfd).
    deferred: tuple[int, ...] = ()
    # mprotect and pkey_mprotect (refused with PROT_EXEC), mmap (refused with PROT_WRITE and PROT_EXEC)
    protect: tuple[int, ...] = ()
    mmap: tuple[int, ...] = ()
    # clone, clone3 and mremap: a process sharing the runner's memory that is neither a thread nor a
    # vfork child, and pages moved to a chosen place, emit no record perf's samples are read against
    spaces: tuple[int, int, int] | None = None
    # sched_setaffinity: a GPU runner stays on the cores the judge chose and calibrated it on
    affinity: tuple[int, ...] = ()
    # madvise (allowed with the advice that keeps a file's pages in the page tables: `_KEEPING`)
    advise: tuple[int, ...] = ()


# io_uring's setup, enter and register (425-427 on every ABI here): its requests reach the kernel
# without passing this filter again, a socket among them (IORING_OP_SOCKET), so it is refused whole.
_IO_URING = (425, 426, 427)
_ABIS: dict[str, list[_Abi]] = {
    # add_key, request_key, keyctl; then i386's, where `socketcall` (102) multiplexes every socket call
    # behind a pointer no filter can read, and is refused whole.
    # perf_event_open (298, 336, 241, 364): a perf ring buffer's pages are charged to no memory group
    # and lie in no resident set; 400 lean children held 3.2 GB of them under a 1 GB limit.
    # i386's old mmap (90) takes its arguments through a pointer no filter can read: refused whole.
    # ptrace (101; i386 26) and process_vm_writev (311; i386 348) on the CPU: a forked child that attaches to
    # the runner writes its code pages whatever their protection (round 19, PTRACE_POKEDATA).
    "x86_64": [_Abi(0xC000003E, 0xBFFFFFFF, (248, 249, 250, 298, *_IO_URING), 41,
                    (283, 286, 282, 289, 206, 209, 222, 101, 311, 323), (10, 329), (9,), (56, 435, 25), (203,), (28,)),
               _Abi(0x40000003, 0xFFFFFFFF, (286, 287, 288, 102, 336, *_IO_URING), 359,
                    (322, 325, 411, 321, 327, 245, 248, 259, 90, 26, 348, 374), (125, 380), (192,), (120, 435, 163), (241,),
                    (219,))],
    "aarch64": [_Abi(0xC00000B7, 0xFFFFFFFF, (217, 218, 219, 241, *_IO_URING), 198, (85, 86, 74, 0, 2, 107, 117, 271, 282),
                     (226, 288), (222,), (220, 435, 216), (122,), (233,)),
                _Abi(0x40000028, 0xFFFFFFFF, (309, 310, 311, 364, *_IO_URING), 281,  # arm32 compat
                     (350, 353, 411, 349, 355, 243, 246, 257, 26, 377, 388), (125, 394), (192,), (120, 435, 163), (241,),
                     (220,))],
}

_LD_W_ABS, _JEQ_K, _JSET_K, _RET_K, _AND_K = 0x20, 0x15, 0x45, 0x06, 0x54
_ARCH_AT, _NR_AT, _ARG0_AT, _ARG2_AT = 4, 0, 16, 32  # offsets in struct seccomp_data (arguments' low words)
_PROT_WRITE, _PROT_EXEC = 2, 4
_ARG3_AT = 40
_CLONE_VM, _CLONE_VFORK, _CLONE_THREAD = 0x100, 0x4000, 0x10000
_MREMAP_FIXED, _MREMAP_DONTUNMAP = 2, 4
# madvise's advice a runner may give: none that takes pages of a mapped file out of the page tables
# (DONTNEED, REMOVE, PAGEOUT, DONTNEED_LOCKED, and the guard regions of 6.13, whose removal drops them too:
# red-team round 24), since a kernel could run a forbidden library and drop the pages the judge reads it
# by (sandbox/judge/footprint.py). An allow-list, so advice a later kernel adds is refused until read.
# Memory allocators that give memory back with DONTNEED ignore the refusal and keep it.
# NORMAL, RANDOM, SEQUENTIAL, WILLNEED, FREE (anonymous memory only), DONTFORK, DOFORK, MERGEABLE,
# UNMERGEABLE, HUGEPAGE, NOHUGEPAGE, DONTDUMP, DODUMP, WIPEONFORK, KEEPONFORK, COLD, POPULATE_READ,
# POPULATE_WRITE, COLLAPSE.
_KEEPING = (0, 1, 2, 3, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 23, 25)
# process_madvise (440 on every ABI here) gives the same advice to a process's memory, its own included.
_PROCESS_MADVISE = 440
_NO_CALL = 0x00050000 | errno.ENOSYS  # clone3: the C library then takes clone, whose flags can be read
_AF_UNIX = 1
_ALLOW = 0x7FFF0000
_DENY = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def program(machine: str | None = None, deferred_work: bool = True, keep_cores: bool = False
            ) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; empty where the machine's numbers are not known.

    Per ABI: compare the architecture (another: the next ABI's block), load the call's number, refuse
    it if it has bits the ABI's numbers never have (x32's), refuse the listed calls (with `deferred_work`, the calls
    that arm kernel work for later too; with `keep_cores`, a change of the cores a thread may run on) and
    `process_madvise`, and `madvise` with advice other than `_KEEPING`'s;
    `socket` goes on to its first argument, the domain, which must be AF_UNIX. Jumps are written to
    labels and resolved to the forward offsets BPF takes."""
    abis = _ABIS.get(machine or platform.machine(), [])
    if not abis:
        return []
    code: list[tuple[int, int | str, int | str, int]] = []
    labels: dict[str, int] = {}
    for i, abi in enumerate(abis):
        labels[f"abi{i}"] = len(code)
        code += [(_LD_W_ABS, 0, 0, _ARCH_AT), (_JEQ_K, 0, f"abi{i + 1}", abi.arch), (_LD_W_ABS, 0, 0, _NR_AT)]
        if abi.mask != 0xFFFFFFFF:
            code.append((_JSET_K, "deny", 0, ~abi.mask & 0xFFFFFFFF))
        refused = abi.refused + (_PROCESS_MADVISE,) + (abi.deferred if deferred_work else ()) + \
            (abi.affinity if keep_cores else ())
        code += [(_JEQ_K, "deny", 0, n) for n in refused]
        if deferred_work:
            code += [(_JEQ_K, f"protect{i}", 0, n) for n in abi.protect]
            code += [(_JEQ_K, f"mmap{i}", 0, n) for n in abi.mmap]
            if abi.spaces is not None:
                clone, clone3, mremap = abi.spaces
                code += [(_JEQ_K, f"clone{i}", 0, clone), (_JEQ_K, "nocall", 0, clone3), (_JEQ_K, f"mremap{i}", 0, mremap)]
        code += [(_JEQ_K, f"advise{i}", 0, n) for n in abi.advise]
        code += [(_JEQ_K, f"socket{i}", 0, abi.socket), (_RET_K, 0, 0, _ALLOW)]
        labels[f"socket{i}"] = len(code)
        code += [(_LD_W_ABS, 0, 0, _ARG0_AT), (_JEQ_K, "allow", "deny", _AF_UNIX)]
        labels[f"advise{i}"] = len(code)
        code += [(_LD_W_ABS, 0, 0, _ARG2_AT), *[(_JEQ_K, "allow", 0, a) for a in _KEEPING], (_RET_K, 0, 0, _DENY)]
        if deferred_work:
            labels[f"protect{i}"] = len(code)
            code += [(_LD_W_ABS, 0, 0, _ARG2_AT), (_JSET_K, "deny", "allow", _PROT_EXEC)]
            labels[f"mmap{i}"] = len(code)
            code += [(_LD_W_ABS, 0, 0, _ARG2_AT), (_AND_K, 0, 0, _PROT_WRITE | _PROT_EXEC),
                     (_JEQ_K, "deny", "allow", _PROT_WRITE | _PROT_EXEC)]
            if abi.spaces is not None:
                labels[f"clone{i}"] = len(code)
                code += [(_LD_W_ABS, 0, 0, _ARG0_AT), (_JSET_K, 0, "allow", _CLONE_VM),
                         (_JSET_K, "allow", "deny", _CLONE_THREAD | _CLONE_VFORK)]
                labels[f"mremap{i}"] = len(code)
                code += [(_LD_W_ABS, 0, 0, _ARG3_AT), (_JSET_K, "deny", "allow", _MREMAP_FIXED | _MREMAP_DONTUNMAP)]
    labels[f"abi{len(abis)}"] = labels["allow"] = len(code)  # an architecture not listed: nothing to filter
    code.append((_RET_K, 0, 0, _ALLOW))
    labels["deny"] = len(code)
    code.append((_RET_K, 0, 0, _DENY))
    labels["nocall"] = len(code)
    code.append((_RET_K, 0, 0, _NO_CALL))

    def offset(at: int, target: int | str) -> int:
        return labels[target] - at - 1 if isinstance(target, str) else target

    return [(c, offset(i, jt), offset(i, jf), k) for i, (c, jt, jf, k) in enumerate(code)]


def install(deferred_work: bool = True, keep_cores: bool = False) -> str:
    """Install the filter in this process (and all it starts later); what was done, in words.
    `deferred_work`: refuse the calls that arm kernel work for later (timers, signalfds, AIO).
    `keep_cores`: refuse changing the cores a thread may run on (a GPU runner is kept on the one its
    judge calibrated it on: `envinfo.quickest_cores`)."""
    instructions = program(deferred_work=deferred_work, keep_cores=keep_cores)
    if not instructions:
        return f"no system-call filter: the numbers of {platform.machine()} are not known here"
    raw = b"".join(struct.pack("HBBI", *ins) for ins in instructions)
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Prog(len(instructions), ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"no system-call filter: the kernel refused it ({errno.errorcode.get(ctypes.get_errno(), '?')})"
    timers = (", timers, signalfds, asynchronous I/O, memory made executable after it was written, tracing, "
              "shared address spaces but threads'") if deferred_work else ""
    core = ", a change of cores" if keep_cores else ""
    return (f"key calls, io_uring, perf events{timers}{core}, advice that drops mapped pages and sockets other than "
            "Unix ones refused (seccomp)")
