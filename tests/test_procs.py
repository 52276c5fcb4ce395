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
