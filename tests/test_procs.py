"""The judge's books on a runner's processes (sandbox/judge/procs.py): work handed to another
process is counted whether or not anybody waits for it, and wherever the process ends up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from sandbox.judge import procs

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def test_a_child_nobody_waited_for_is_counted_alive_and_as_a_zombie() -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import os, time\n"
                               "if os.fork() == 0:\n" + "".join("    " + line + "\n" for line in BURN.format(s=0.4).splitlines())
                               + "    os._exit(0)\ntime.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            below = procs.descendants(parent.pid)
            if below and procs.cpu_seconds(below) >= 0.35 and open(f"/proc/{below[0]}/stat").read().split(") ")[1][0] == "Z":
                break
            time.sleep(0.05)
        assert below, "the child was not found below its parent"
        # The parent never waited: its own figure holds none of the child's work; the books do.
        assert procs.cpu_seconds([parent.pid]) < 0.2
        assert procs.cpu_seconds([parent.pid, *below]) >= 0.35
    finally:
        parent.kill()
        parent.wait()


def test_descendants_lists_parents_before_their_children() -> None:
    chain = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run([sys.executable, '-c', "
                              "'import time; time.sleep(30)'])"])
    try:
        deadline = time.monotonic() + 20
        while len(found := procs.descendants(chain.pid)) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in found:
            parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
            assert parent == chain.pid or parent in found[: found.index(pid)]
    finally:
        for pid in procs.descendants(chain.pid):
            os.kill(pid, 9)
        chain.kill()
        chain.wait()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_an_orphan_in_its_own_session_is_still_on_the_sandboxs_books() -> None:
    from sandbox.judge import isolation

    if not isolation.probe().available:
        pytest.skip("bubblewrap cannot make namespaces here")
    orphan = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() != 0:\n        os._exit(0)\n"
              + "".join("    " + line + "\n" for line in BURN.format(s=0.5).splitlines()) + "    os._exit(0)\n"
              "os.wait()\ntime.sleep(30)")
    top = subprocess.Popen(["bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-pid",
                            "--die-with-parent", "--", sys.executable, "-c", orphan])
    try:
        deadline = time.monotonic() + 20
        total = 0.0
        while time.monotonic() < deadline and total < 0.45:
            total = procs.cpu_seconds([top.pid, *procs.descendants(top.pid)])
            time.sleep(0.05)
        assert total >= 0.45, f"the sandbox's books hold {total:.2f} s of the orphan's 0.5 s"
    finally:
        top.kill()
        top.wait()


# A parent that fills 200 MB, then forks children that only wait: their pages are the parent's, shared.
_SHARED = """
import os, sys, time
block = bytearray(200 << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
for _ in range(5):
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
print("ready", flush=True)
time.sleep(30)
"""


def test_pages_forked_children_share_count_once_at_the_memory_limit() -> None:
    from sandbox.evaluator import tree_pss_mb, tree_rss_mb

    parent = subprocess.Popen([sys.executable, "-c", _SHARED], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        bound, shared = tree_rss_mb(parent.pid), tree_pss_mb(parent.pid)
        assert bound > 1000, bound  # six processes that each map the same 200 MB
        assert 180 < shared < 400, shared  # the 200 MB once, and each interpreter's own pages
    finally:
        os.killpg(parent.pid, 9)
        parent.wait()


def test_the_proportional_sum_is_read_sparingly_and_decides_only_when_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    # Reading it walks each process's page tables under its memory-map lock: read five times a second,
    # it slowed the judge's reference 30x. Between reads, growth of the resident sum counts whole; an
    # estimate over the limit is read again before it stops anything (a pool forked in stages was
    # stopped at 17 GB of estimate under a 16 GB limit).
    from sandbox import evaluator

    rss, reads, clock = [3000.0], [], [100.0]
    pss = [900.0]
    monkeypatch.setattr(evaluator, "tree_rss_mb", lambda root: rss[0])
    monkeypatch.setattr(evaluator, "tree_pss_mb", lambda root: reads.append(root) or pss[0])
    monkeypatch.setattr(evaluator.time, "monotonic", lambda: clock[0])
    memory = evaluator._TreeMemory()
    assert memory.used_mb(1, 2000) == 900.0 and len(reads) == 1
    clock[0] += 0.2
    rss[0] = 3100.0
    assert memory.used_mb(1, 2000) == 1000.0 and len(reads) == 1  # 100 MB more, counted whole
    rss[0] = 5000.0  # a worker forked: its shared pages count whole in the estimate, 3000 MB
    clock[0] += 0.2
    assert memory.used_mb(1, 2000) == 2000.0 and len(reads) == 1  # over only on a fresh reading
    clock[0] += 0.3
    pss[0] = 950.0
    assert memory.used_mb(1, 2000) == 950.0 and len(reads) == 2  # read again: shared once
    clock[0] += 2.0
    assert memory.used_mb(1, 2000) == 950.0 and len(reads) == 3
    rss[0] = 1500.0
    assert memory.used_mb(1, 2000) == 1500.0 and len(reads) == 3  # under the limit: the resident sum
