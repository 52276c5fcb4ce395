"""Processes below a process, from /proc: for the memory limit and for killing everything a
runner left (its own session, a daemon that double-forked). Standard library only."""

from __future__ import annotations

import os


def descendants(root: int) -> list[int]:
    """Every process below `root` (children, theirs, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found
