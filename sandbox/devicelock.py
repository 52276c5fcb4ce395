"""Who may use a GPU, across the sandbox's worker processes.

Only the worker checking and timing a candidate runs kernels on its GPU; a standby worker
(started ahead of time) only creates its device context, and only while no timing holds or
waits for the device, so it never shares the GPU with a measurement and never delays one by
more than that short step. Two advisory file locks per physical device carry this:

- ``gpu-N.lock``: exclusive, held by the worker that times (one at a time per device);
- ``gpu-N.busy``: shared by every timing worker from the moment it wants the device until it
  is done; a standby takes it exclusively, which succeeds only when no timing holds or wants
  the device.

The kernel releases both when a holder exits or is killed. Standard library only.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

POLL_S = 0.02


def lock_dir() -> Path:
    return Path(os.environ.get("KS_LOCK_DIR") or "/tmp/ks-device-locks")


def device_key() -> str | None:
    """The device this process may use, from its visibility variable; None when it has no GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or visible.strip() == "":
        return None
    return visible.replace(",", "_").replace("/", "_")


@contextmanager
def _flock(name: str, mode: int, deadline: float, give_up: Callable[[], bool] | None = None) -> Iterator[bool]:
    """Hold `name` in `mode` (polling, so a deadline or `give_up` can end the wait)."""
    folder = lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / name, os.O_CREAT | os.O_RDWR, 0o666)
    try:
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline or (give_up is not None and give_up()):
                    yield False
                    return
                time.sleep(POLL_S)
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def device_lock(timeout_s: float = 120.0) -> Iterator[bool]:
    """Hold the device for a check and timing; yields False (and goes on unlocked) when it cannot
    be had within `timeout_s` (a hung holder must not stall every later evaluation) or there is
    no device."""
    key = device_key()
    if key is None:
        yield False
        return
    deadline = time.monotonic() + timeout_s
    with ExitStack() as stack:
        wanted = stack.enter_context(_flock(f"gpu-{key}.busy", fcntl.LOCK_SH, deadline))
        held = wanted and stack.enter_context(_flock(f"gpu-{key}.lock", fcntl.LOCK_EX, deadline))
        yield held


@contextmanager
def device_idle(give_up: Callable[[], bool], timeout_s: float = 600.0) -> Iterator[bool]:
    """For a standby worker's short device step: wait until no timing holds or wants the device.

    Yields True while it may use the device (a timing that arrives meanwhile waits for this
    block to end, so keep it short), or False when `give_up()` turned true first (its own
    request arrived: the request does the step itself), the timeout passed, or there is no device.
    """
    key = device_key()
    if key is None:
        yield False
        return
    with _flock(f"gpu-{key}.busy", fcntl.LOCK_EX, time.monotonic() + timeout_s, give_up) as idle:
        yield idle
