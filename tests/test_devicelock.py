"""Who may use a GPU across worker processes: timings one at a time, standbys only when idle."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sandbox.devicelock import device_idle, device_lock, lock_dir

ROOT = Path(__file__).resolve().parent.parent

TIMING_PROBE = (
    "from sandbox.devicelock import device_lock\n"
    "with device_lock(timeout_s=0.3) as got:\n"
    "    print('locked' if got else 'busy')\n"
)
# A standby's device step: reports whether (and when) it found the device idle.
STANDBY_PROBE = (
    "import sys, time\n"
    "from sandbox.devicelock import device_idle\n"
    "start = time.monotonic(); patience = float(sys.argv[1])\n"
    "with device_idle(give_up=lambda: time.monotonic() - start > patience) as idle:\n"
    "    print(f'idle {time.time():.3f}' if idle else 'busy', flush=True)\n"
    "    time.sleep(float(sys.argv[2]) if idle else 0)\n"
)
HOLDER = (
    "import sys, time\n"
    "from sandbox.devicelock import device_lock\n"
    "with device_lock() as got:\n"
    "    print('held', flush=True)\n"
    "    time.sleep(float(sys.argv[1]))\n"
)


@pytest.fixture
def gpu3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("KS_LOCK_DIR", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    return dict(os.environ, PYTHONPATH=str(ROOT))


def wait_for_open_file(pid: int, path: Path, timeout_s: float = 120.0) -> None:
    """Until process `pid` holds `path` open: a worker that opened its device's lock file has
    finished its host warm-up and now waits for the device."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if Path(os.readlink(fd)) == path:
                    return
            except OSError:
                continue  # closed meanwhile
        time.sleep(0.02)
    raise AssertionError(f"process {pid} never opened {path}")


def wait_for_flock(pid: int, path: Path, timeout_s: float = 60.0) -> None:
    """Until process `pid` holds a flock on `path` (/proc/locks names holder and inode): the event a
    test waits for instead of sleeping a guess, which a loaded machine outlasts."""
    inode = f":{path.stat().st_ino}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[4] == str(pid) and fields[5].endswith(inode):
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never locked {path}")


def probe(env: dict[str, str], code: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_one_timing_per_device_across_processes(gpu3: dict[str, str]) -> None:
    with device_lock() as held:
        assert held
        assert probe(gpu3, TIMING_PROBE) == "busy"  # same GPU: waits, then gives up after its timeout
        assert probe(dict(gpu3, CUDA_VISIBLE_DEVICES="4"), TIMING_PROBE) == "locked"  # another GPU: free
    assert probe(gpu3, TIMING_PROBE) == "locked"  # released on exit


def test_standby_keeps_off_a_device_in_use(gpu3: dict[str, str]) -> None:
    assert probe(gpu3, STANDBY_PROBE, "0.3", "0").startswith("idle")
    with device_lock():
        assert probe(gpu3, STANDBY_PROBE, "0.3", "0") == "busy"  # gave up: its request came first
    assert probe(dict(gpu3, CUDA_VISIBLE_DEVICES="4"), STANDBY_PROBE, "0.3", "0").startswith("idle")


def test_a_waiting_timing_also_keeps_the_standby_off(gpu3: dict[str, str]) -> None:
    """Between one timing and the next that already waits, there is no gap for a standby."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "1.0"], env=gpu3, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    released: list[float] = []

    def second_timing() -> None:
        with device_lock() as got:
            assert got
            time.sleep(0.8)
            released.append(time.time())

    waiter = threading.Thread(target=second_timing)
    waiter.start()
    wait_for_flock(os.getpid(), lock_dir() / "gpu-3.busy")  # the second timing now wants the device
    standby = probe(gpu3, STANDBY_PROBE, "5", "0")
    waiter.join()
    holder.wait()
    assert standby.startswith("idle")
    assert float(standby.split()[1]) >= released[0] - 0.01  # only after both timings


def test_a_timing_waits_for_a_standby_step_to_end(gpu3: dict[str, str]) -> None:
    standby = subprocess.Popen(
        [sys.executable, "-c", STANDBY_PROBE, "5", "0.6"], env=gpu3, stdout=subprocess.PIPE, text=True
    )
    assert standby.stdout is not None and standby.stdout.readline().startswith("idle")
    start = time.monotonic()
    with device_lock() as got:
        waited = time.monotonic() - start
    standby.wait()
    assert got and waited > 0.3


def test_no_device_no_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with device_lock() as held:
        assert held is False
    with device_idle(give_up=lambda: False) as idle:
        assert idle is False


@pytest.mark.slow
def test_a_standby_worker_leaves_a_busy_device_to_its_request(gpu3: dict[str, str]) -> None:
    """A real standby worker on a device in use: no device step; its request still runs."""
    from sandbox.evaluator import PhaseLimits, _Worker, scrubbed_env
    from sandbox.problem import load_problem

    spec = load_problem("vector_add", "cpu")
    seed = spec.seed_for("cpu", None)
    env = scrubbed_env({"CUDA_VISIBLE_DEVICES": "3", "KS_WARM_PROBLEM": str(spec.path), "KS_WARM_TARGET": "cpu"})
    request = {"problem": str(spec.path), "submission": str(seed), "target": "cpu", "mode": "check"}
    outcomes = []
    with device_lock():
        worker = _Worker.spawn(env)
        wait_for_open_file(worker.proc.pid, lock_dir() / "gpu-3.busy")  # warmed up, waiting for the device
        assert worker.alive()
        runner = threading.Thread(target=lambda: outcomes.append(worker.run(request, PhaseLimits(), None)))
        runner.start()  # the request arrives while the device is still in use
        time.sleep(1.0)
        assert runner.is_alive()  # and waits for the device to be free
    runner.join(timeout=60)
    outcome = outcomes[0]
    log = worker.log_path.read_text()
    worker.cleanup()
    assert outcome.result is not None and outcome.result["status"] == "ok"
    assert "its device step is the request's" in log
