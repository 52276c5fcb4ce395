"""Library code recognised by its bytes, whatever its names say.

In code the candidate controls, names prove nothing: a red-team kernel ran numpy's OpenBLAS from a
copy under /tmp whose symbol names it had rewritten (`sgemm` became `sgxmm`), another pasted
OpenBLAS's machine code as `.byte` lines into the C++ the judge built, under labels of its choosing.
What such code cannot change without being rewritten is its bytes. So for each set of forbidden name
patterns the judge indexes the host's libraries: every function those patterns name, cut into
overlapping runs of SHINGLE bytes, of which a content-chosen 1 in KEEP is kept (chosen by the run's
own hash, so the same run is kept wherever the code is placed, at any alignment). Runs that ordinary
compiled code also holds (padding, prologues, the C and C++ runtimes' code) are dropped.

A sample of the runner in code the candidate controls is then looked up: the bytes around it are cut
the same way, and where at least MATCH distinct runs of forbidden library code lie within WINDOW
bytes of it, the sample ran that library's code. A kernel compiled from the candidate's own source
shares no such stretch with a library's hand-tuned kernels; one that pastes or copies them shares
hundreds. Code re-encoded instruction by instruction (padding inserted every few bytes, registers
renamed) is not recognised: that is assembly written from the library's, no longer its bytes.

The index is built once per host and pattern set (tens of seconds for the BLAS and torch libraries)
and kept under the cache folder, rebuilt when any indexed library changes.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import mmap
import os
import re
import stat
import sys
import sysconfig
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from sandbox.judge.elfsyms import NotElf, SymbolTable, function_ranges

log = logging.getLogger(__name__)

SHINGLE = 24  # bytes per run: three or four vector instructions
KEEP = 8  # one run in KEEP is kept, by its hash
MATCH = 16  # distinct kept runs of forbidden library code that make a window that library's code
WINDOW = 2048  # bytes on each side of a sample that are looked at
MIN_FUNCTION = 256  # library functions shorter than this are not indexed: too generic to tell apart
_MUL = 0x100000001B3  # FNV-1a 64's prime: spreads each byte over the hash
_CHUNK = 1 << 18  # bytes hashed at once while indexing
FORMAT = 1  # the index files' layout; a new one rebuilds

# Where installed libraries live; all are read-only to a runner.
_SYSTEM_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/opt/conda/lib")
# Code every compiled program shares: runs found here are compiler idioms, not a library's own.
_COMMON = re.compile(r"^lib(c|m|stdc\+\+|gcc_s|gomp|pthread|python3[.\d]*)[-.]")


def shingles(code: bytes | bytearray | memoryview) -> torch.Tensor:
    """The kept runs of `code`, as sorted distinct 64-bit hashes."""
    return torch.unique(_kept(code, torch.ones(max(len(code) - SHINGLE + 1, 0), dtype=torch.bool))[0])


def _kept(code: bytes | bytearray | memoryview, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Hashes of the kept runs and where they start, among the runs whose start `valid` marks."""
    n = len(code) - SHINGLE + 1
    if n <= 0:
        empty = torch.empty(0, dtype=torch.int64)
        return empty, empty
    words = _words(code)
    h = torch.zeros(n, dtype=torch.int64)
    for at in range(0, SHINGLE, 8):  # a run is three 8-byte words; integer arithmetic wraps (modulo 2**64)
        h = _mix(h * _MUL + words[at:at + n])
    keep = ((h & (KEEP - 1)) == 0) & valid[:n]
    return h[keep], torch.nonzero(keep).flatten()


def _words(code: bytes | bytearray | memoryview) -> torch.Tensor:
    """The 8-byte little-endian word starting at each byte of `code` (zeros past its end)."""
    count = -(-len(code) // 8)
    raw = torch.zeros(8 * count + 8, dtype=torch.uint8)
    raw[:len(code)] = torch.frombuffer(bytearray(code), dtype=torch.uint8)
    shifted = [raw[s:s + 8 * count].clone().view(torch.int64) for s in range(8)]
    return torch.stack(shifted, dim=1).flatten()


def _mix(h: torch.Tensor) -> torch.Tensor:
    """Spreads every bit of `h` over the low bits that choose which runs are kept."""
    h = h ^ (h >> 31)
    h = h * 0x2545F4914F6CDD1D
    return h ^ (h >> 29)


@dataclass
class Index:
    """Kept runs of forbidden library functions (sorted), the function each came from, and which runs
    the rest of the library holds too.

    Code a library's templates and inlined helpers share with its other functions is no evidence of
    the forbidden one (torch compiles one vectorised reduction into matmul's kernels and into many
    others). Finding such runs means reading all of a library's other code (torch's CPU library: 280 MB,
    about 20 s here), so it is done for a library only when a window first matches enough of its runs
    to count, and kept with the index: most evaluations never pay it."""

    hashes: torch.Tensor
    owners: torch.Tensor
    names: list[str]  # "function (library file name)"
    libraries: list[str]  # per function: the library's path
    patterns: list[re.Pattern[str]]
    shared: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.bool))
    verified: set[str] = field(default_factory=set)  # libraries whose other functions were read
    stored: Path | None = None

    def __post_init__(self) -> None:
        if len(self.shared) != len(self.hashes):
            self.shared, self.verified = torch.zeros(len(self.hashes), dtype=torch.bool), set()

    def matches(self, code: bytes | bytearray | memoryview) -> tuple[int, str | None]:
        """How many distinct runs of `code` are forbidden library code of no other function, and the
        function most of them come from."""
        found = shingles(code)
        if not len(found) or not len(self.hashes):
            return 0, None
        at = torch.searchsorted(self.hashes, found).clamp(max=len(self.hashes) - 1)
        places = at[self.hashes[at] == found]
        places = places[~self.shared[places]]
        if len(places) >= MATCH:
            unread = {self.libraries[int(o)] for o in torch.unique(self.owners[places])} - self.verified
            if unread:
                started = time.monotonic()
                for library in sorted(unread):
                    self._read_rest(library)
                log.info("read the rest of %s in %.1f s: code shared with allowed functions is no evidence",
                         ", ".join(sorted(unread)), time.monotonic() - started)
                self._keep()
                places = places[~self.shared[places]]
        if not len(places):
            return 0, None
        return len(places), self.names[int(torch.mode(self.owners[places]).values)]

    def _read_rest(self, library: str, every: bool = False) -> None:
        """Mark the runs that `library`'s other functions hold too (all places of each such run); with
        `every`, the runs any of its functions holds (a runtime's code is all "other" code)."""
        started = time.monotonic()
        try:
            table = SymbolTable(Path(library))
            for h, _which, _names in _runs(_functions(Path(library), table, False, [] if every else self.patterns)):
                at = torch.searchsorted(self.hashes, h).clamp(max=len(self.hashes) - 1)
                self.shared[at[self.hashes[at] == h]] = True
        except (NotElf, OSError, ValueError, RuntimeError) as exc:
            log.warning("could not read the rest of %s: %s", library, exc)
        first_of = torch.searchsorted(self.hashes, self.hashes)  # equal hashes lie side by side
        self.shared |= self.shared[first_of]
        self.verified.add(library)
        log.debug("read the other functions of %s in %.1f s", library, time.monotonic() - started)

    def _keep(self) -> None:
        if self.stored is not None:
            _write_file(self.stored.with_suffix(".shared"), _raw(self.shared.to(torch.uint8)))
            _write_file(self.stored.with_suffix(".verified"), "\n".join([*sorted(self.verified), "end"]).encode())


def library_files() -> Iterator[Path]:
    """Every shared library a runner could read: the interpreter's packages and the system's."""
    files, _ = _walk(_roots())
    return iter(files)


def _roots() -> list[tuple[str, str]]:
    """The folders walked, as (real path, path), each once and before any folder inside it: /lib is /usr/lib
    on most systems, and the packages lie in the prefix."""
    named = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], sys.prefix, sys.base_prefix,
             *(p for p in sys.path if p.startswith(sys.prefix)), *_SYSTEM_DIRS]
    walked: list[str] = []
    roots: list[tuple[str, str]] = []
    for real, root in sorted({(os.path.realpath(p), p) for p in named if os.path.isdir(p)}):
        if not any(real == done or real.startswith(done.rstrip("/") + "/") for done in walked):
            walked.append(real)
            roots.append((real, root))
    return roots


def _walk(roots: list[tuple[str, str]]) -> tuple[list[Path], dict[str, int]]:
    """The libraries under `roots` (`_roots`), and every folder walked with its modification time. Walked with
    `os.scandir`, whose entries know their type: a path object per file walked had cost a second before
    every evaluation."""
    seen: set[tuple[int, int]] = set()
    files: list[Path] = []
    folders_seen: dict[str, int] = {}
    for _, root in roots:
        folders = [root]
        while folders:
            folder = folders.pop()
            try:
                folders_seen[folder] = os.stat(folder).st_mtime_ns
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                        continue
                    if ".so" not in entry.name or entry.is_symlink():
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    files.append(Path(entry.path))
    return files, folders_seen


def _remembered_walk(folder: Path) -> list[Path]:
    """The host's libraries as a walk found them, kept in `folder` and trusted while no folder walked has
    changed: an entry added, removed or renamed changes its folder's modification time. Reading those times
    is a tenth of the walk (which read every entry of some 20,000 folders before every evaluation); a
    library changed in place keeps its folder's time but not its own, which `_identity` reads."""
    roots = _roots()
    stored = folder / f"libraries-{hashlib.sha256(repr(roots).encode()).hexdigest()[:16]}.json"
    try:
        kept = json.loads(stored.read_text())
        walked: dict[str, int] = kept["folders"]
        if all(root in walked for _, root in roots) and all(os.stat(path).st_mtime_ns == mtime
                                                            for path, mtime in walked.items()):
            return [Path(p) for p in kept["files"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    files, folders = _walk(roots)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _write_file(stored, json.dumps({"folders": folders, "files": [str(p) for p in files]}).encode())
    except OSError:
        pass  # a read-only cache: walked again next time
    return files


def _identity(paths: Iterable[Path]) -> str:
    """A digest of the libraries' identities: any change, addition or removal gives another."""
    digest = hashlib.sha256()
    for path in paths:
        st = path.stat()
        digest.update(f"{path}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _pattern_key(patterns: list[re.Pattern[str]]) -> str:
    text = "\n".join(sorted(p.pattern for p in patterns))
    return hashlib.sha256(f"{FORMAT}:{SHINGLE}:{KEEP}:{MIN_FUNCTION}\n{text}".encode()).hexdigest()[:20]


def _functions(path: Path, table: SymbolTable, forbidden: bool,
               patterns: list[re.Pattern[str]]) -> Iterator[tuple[str, bytes]]:
    """The code of each function of `path`, MIN_FUNCTION bytes or longer, that the patterns name
    (`forbidden`) or do not."""
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        for name, offset, size in function_ranges(table):
            if MIN_FUNCTION <= size <= 1 << 24 and any(p.search(name) for p in patterns) == forbidden:
                yield name, data[offset:offset + size]


def _runs(parts: Iterable[tuple[str, bytes]]) -> Iterator[tuple[torch.Tensor, torch.Tensor, list[str]]]:
    """Kept runs of each function, chunk by chunk (_CHUNK bytes: small enough for the processor's
    caches), with the number of the function in the chunk's list of names; runs that cross from one
    function into the next are left out."""
    buffer, starts, names = bytearray(), [], []
    for name, code in parts:
        starts.append(len(buffer))
        names.append(name)
        buffer += code
        if len(buffer) >= _CHUNK:
            yield _chunk(buffer, starts, names)
            buffer, starts, names = bytearray(), [], []
    if buffer:
        yield _chunk(buffer, starts, names)


def _chunk(buffer: bytearray, starts: list[int], names: list[str]) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    valid = torch.ones(len(buffer), dtype=torch.bool)
    for end in [*starts[1:], len(buffer)]:  # a run starting within SHINGLE-1 bytes of a function's end crosses it
        valid[max(end - SHINGLE + 1, 0):end] = False
    hashes, where = _kept(buffer, valid)
    return hashes, torch.searchsorted(torch.tensor(starts, dtype=torch.int64), where, right=True) - 1, names


def _tables(files: list[Path]) -> Iterator[tuple[Path, SymbolTable]]:
    for path in files:
        try:
            yield path, SymbolTable(path)
        except (NotElf, OSError, ValueError, RuntimeError):
            continue


def build(patterns: list[re.Pattern[str]], files: list[Path]) -> Index:
    """Index the functions `patterns` name in `files`, less every run the C and C++ runtimes' code holds
    (compiler idioms: padding, prologues, the runtime's inlined helpers)."""
    hashes: list[torch.Tensor] = []
    owners: list[torch.Tensor] = []
    names: list[str] = []
    libraries: list[str] = []
    for path, table in _tables(files):
        for h, which, chunk_names in _runs(_functions(path, table, True, patterns)):
            hashes.append(h)
            owners.append((which + len(names)).to(torch.int32))
            names += [f"{name} ({path.name})" for name in chunk_names]
            libraries += [str(path)] * len(chunk_names)
    if not hashes:
        return Index(torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int32), names, libraries, patterns)
    all_hashes, all_owners = torch.cat(hashes), torch.cat(owners)
    order = torch.argsort(all_hashes)
    index = Index(all_hashes[order], all_owners[order], names, libraries, patterns)
    for path, _table in _tables([path for path in files if _COMMON.match(path.name)]):
        index._read_rest(str(path), every=True)
    keep = ~index.shared
    return Index(index.hashes[keep], index.owners[keep], names, libraries, patterns)


_LOADED: dict[str, Index] = {}
_LOCK = threading.Lock()


_HOST: list[tuple[list[Path], str]] = []  # the libraries and their identity, found while standing by


def preload(folder: Path | None = None) -> None:
    """Find the host's libraries ahead of a request: walked (half a second), or, with `folder`, as a walk
    kept there found them while none of the folders it walked has changed."""
    files = sorted(_remembered_walk(folder) if folder is not None else library_files())
    _HOST[:] = [(files, _identity(files))]


def index_for(patterns: list[re.Pattern[str]], folder: Path) -> Index:
    """The index for these patterns: from memory, from `folder` while the libraries are unchanged,
    else built and stored there."""
    if not _HOST:
        preload()
    files, identity = _HOST[0]
    key = f"{_pattern_key(patterns)}-{identity[:20]}"
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
        stored = folder / key
        index = _read(stored, patterns)
        if index is None:
            started = time.monotonic()
            index = build(patterns, files)
            log.info("indexed %d runs of %d library functions in %.1f s", len(index.hashes), len(index.names),
                     time.monotonic() - started)
            _write(stored, index)
        _LOADED[key] = index
        return index


def _read(path: Path, patterns: list[re.Pattern[str]]) -> Index | None:
    """The index stored at `path`: the runs' hashes and owners as raw arrays, the functions (name and
    library, with an end mark), and what is known of the runs the libraries' other functions hold."""
    try:
        lines = path.with_suffix(".names").read_text().split("\n")
        count = path.with_suffix(".hashes").stat().st_size // 8
        if path.with_suffix(".owners").stat().st_size != 4 * count or lines[-1] != "end":
            return None
        hashes = torch.from_file(str(path.with_suffix(".hashes")), shared=False, size=count, dtype=torch.int64)
        owners = torch.from_file(str(path.with_suffix(".owners")), shared=False, size=count, dtype=torch.int32)
        names, libraries = zip(*(line.split("\t", 1) for line in lines[:-1]), strict=True) if lines[:-1] else ((), ())
        index = Index(hashes, owners, list(names), list(libraries), patterns, stored=path)
    except (OSError, RuntimeError, ValueError):
        return None
    try:
        verified = path.with_suffix(".verified").read_text().split("\n")
        if verified[-1] == "end" and path.with_suffix(".shared").stat().st_size == count:
            index.shared = torch.from_file(str(path.with_suffix(".shared")), shared=False, size=count,
                                           dtype=torch.uint8).bool()
            index.verified = set(verified[:-1])
    except (OSError, RuntimeError):
        pass
    return index


def _write(path: Path, index: Index) -> None:
    """The names last (with an end mark): a reader sees a whole index or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_file(path.with_suffix(".hashes"), _raw(index.hashes))
    _write_file(path.with_suffix(".owners"), _raw(index.owners))
    lines = [f"{name}\t{library}" for name, library in zip(index.names, index.libraries, strict=True)]
    _write_file(path.with_suffix(".names"), "\n".join([*lines, "end"]).encode())
    index.stored = path


def _write_file(path: Path, data: bytes) -> None:
    """Written beside and renamed into place."""
    partial = path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")
    partial.write_bytes(data)
    os.replace(partial, path)


def _raw(tensor: torch.Tensor) -> bytes:
    tensor = tensor.contiguous()
    return ctypes.string_at(tensor.data_ptr(), tensor.numel() * tensor.element_size())
