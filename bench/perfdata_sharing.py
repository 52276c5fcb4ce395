"""How long `sandbox/judge/perfdata.py` takes to read a perf file with many children that may share their
parent's memory: each writes a mapping and exits, then the parent makes many mappings and is sampled.

    python bench/perfdata_sharing.py [children] [mappings]

The records are written by the tests' recorder (`tests/test_perfdata.py`), as perf lays them out.
"""
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sandbox.judge.perfdata import PerfData  # noqa: E402
from tests.test_perfdata import _EXIT, PARENT, _Recorder  # noqa: E402


def recorded(children: int, mappings: int) -> _Recorder:
    recorder, at = _Recorder(), 10
    recorder.mmap(PARENT, 0x400000, "/build/lib.so", time=1)
    for child in range(children):  # forking thread never sampled meanwhile: each child may share
        pid = 1000 + child
        recorder.fork(pid, PARENT, time=at)
        recorder.mmap(pid, 0x500000 + child * 0x10000, "/x.so", time=at + 1)
        recorder.fork(pid, PARENT, time=at + 2, kind=_EXIT)
        at += 3
    for k in range(mappings):
        recorder.mmap(PARENT, 0x900000 + k * 0x10000, "/y.so", time=at + k)
    for k in range(mappings):
        recorder.sample(PARENT, 0x400100, time=at + mappings + k)
    return recorder


def main() -> None:
    children, mappings = (int(a) for a in (sys.argv[1:] or ["3000", "20000"]))
    with TemporaryDirectory() as folder:
        path = recorded(children, mappings).write(Path(folder) / "perf.data")
        started = time.perf_counter()
        hits = sum(1 for _ in PerfData(path).hits())
        print(f"{children} children, {mappings} mappings, {hits} samples: {time.perf_counter() - started:.2f} s")


if __name__ == "__main__":
    main()
