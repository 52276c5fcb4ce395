"""A content-addressed cache of compiled kernels, shared by processes.

An entry is keyed by everything that changes the binary: source, language,
flags, target architecture and the compiler's own version string. Entries hold
the library, the build log and a status file; failed builds are cached too, so
a broken candidate is not compiled again by the worker that times it.
Concurrent builders of one key serialise on a lock file; the library is
written under a temporary name and renamed, so readers never see half a file.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "KS_CACHE_DIR"


def cache_root() -> Path:
    """The cache folder: $KS_CACHE_DIR, else ~/.cache/kernel-scientist."""
    root = os.environ.get(CACHE_ENV)
    base = Path(root) if root else Path.home() / ".cache" / "kernel-scientist"
    path = base / "build"
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache
def toolchain_id(compiler: str) -> str:
    """The compiler's version banner, part of every key (a new compiler rebuilds)."""
    try:
        out = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=30
        )
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable: {exc}"


def cache_key(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:32]


@dataclass
class CacheEntry:
    key: str
    path: Path

    @property
    def library(self) -> Path:
        return self.path / "lib.so"

    @property
    def log_file(self) -> Path:
        return self.path / "build.log"

    @property
    def status_file(self) -> Path:
        return self.path / "status.json"

    def status(self) -> dict | None:
        """The recorded outcome, or None while nothing was built."""
        try:
            return json.loads(self.status_file.read_text())
        except (OSError, ValueError):
            return None

    def record(self, ok: bool, log: str, seconds: float, command: list[str]) -> None:
        self.log_file.write_text(log)
        tmp = self.status_file.with_suffix(".tmp")
        digest = _file_sha256(self.library) if ok else None
        tmp.write_text(
            json.dumps({"ok": ok, "seconds": seconds, "command": command, "sha256": digest})
        )
        os.replace(tmp, self.status_file)

    def intact(self) -> bool:
        """The library exists and still has the hash recorded when it was built.

        A library replaced after its build (by anything that could write the cache) is not
        loaded: the caller rebuilds it.
        """
        status = self.status()
        if not status or not self.library.exists():
            return False
        return bool(status.get("sha256")) and _file_sha256(self.library) == status["sha256"]

    @contextmanager
    def locked(self) -> Iterator[None]:
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path.parent / f"{self.key}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def entry(key: str) -> CacheEntry:
    return CacheEntry(key=key, path=cache_root() / key)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
