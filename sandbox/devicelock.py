"""One user of a GPU at a time among the sandbox's workers, across processes.

A standby worker warms up (runs the reference on its device) while another worker may be
checking and timing a candidate on the same device; the two would share the GPU and disturb
the timing. Both take this lock: an advisory file lock per physical device, released by the
kernel when its holder exits or is killed. Standard library only.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def lock_dir() -> Path:
    return Path(os.environ.get("KS_LOCK_DIR") or "/tmp/ks-device-locks")


def device_key() -> str | None:
    """The device this process may use, from its visibility variable; None when it has no GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or visible.strip() == "":
        return None
    return visible.replace(",", "_").replace("/", "_")


@contextmanager
def device_lock(timeout_s: float = 120.0) -> Iterator[bool]:
    """Hold the device's lock; yields False (and goes on unlocked) when it cannot be had within
    `timeout_s` (a hung holder must not stall every later evaluation) or there is no device."""
    key = device_key()
    if key is None:
        yield False
        return
    folder = lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"gpu-{key}.lock", os.O_CREAT | os.O_RDWR, 0o666)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(0.02)
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
