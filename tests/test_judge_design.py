"""The boundary between the judge and the runner, piece by piece, without starting an evaluation."""

from __future__ import annotations

import ast
import dataclasses
import errno
import json
import os
import platform
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from sandbox.integrity import IntegrityViolation
from sandbox.judge import bound, isolation, libwatch, shapes, timed
from sandbox.judge.bound import Calibration, bound_by_judge, runner_steps
from sandbox.problem import ProblemError, load_gpumode
from sandbox.shared import protocol
from sandbox.shared.arena import Arena, ArenaError, Layout, decode, encode, tensors
from sandbox.shared.blend import apply_recipe, blend_into, digest

ROOT = Path(__file__).resolve().parent.parent
# What the runner process may import of the project: nothing that decides a verdict or holds a secret.
JUDGE_ONLY = ("sandbox.judge", "sandbox.evaluator", "sandbox.compare", "sandbox.verdict", "sandbox.pool",
              "sandbox.summary", "sandbox.timing", "sandbox.integrity", "sandbox.targets")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_runner_modules_import_nothing_of_the_judge() -> None:
    files = [*(ROOT / "sandbox" / "runner").glob("*.py"), *(ROOT / "sandbox" / "shared").glob("*.py")]
    assert files
    for path in files:
        private = sorted(m for m in _imports(path) if m.startswith(JUDGE_ONLY))
        assert not private, (path.name, private)


def test_a_started_runner_has_loaded_no_judge_module() -> None:
    # What the runner imports at start and to load a candidate (the native loader, the problem loader).
    script = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "import sandbox.runner.main, sandbox.native, sandbox.problem, sandbox.shared.blend\n"
        f"print([m for m in sys.modules if m.startswith({JUDGE_ONLY!r})])\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_the_runner_limits_its_files_and_timers_before_any_candidate_runs() -> None:
    # A red-team kernel printed 512 MB into the runner's log on the host's disk, and another armed 5000
    # POSIX timers to expire beside the base of a pair while its own sandbox was stopped.
    probe = ("import ctypes, resource, sys; sys.path.insert(0, %r); from sandbox.runner.main import _limit_resources\n"
             "_limit_resources()\nlibc = ctypes.CDLL(None)\ntimer = ctypes.c_void_p()\nmade = 0\n"
             "while made < 1000 and libc.timer_create(1, None, ctypes.byref(timer)) == 0:\n    made += 1\n"
             "print(made, resource.getrlimit(resource.RLIMIT_FSIZE)[1])" % str(ROOT))
    made, fsize = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                                 check=True).stdout.split()
    from sandbox.runner.main import MAX_FILE_BYTES, MAX_PENDING_SIGNALS

    assert 0 < int(made) <= MAX_PENDING_SIGNALS and int(fsize) == MAX_FILE_BYTES


def test_the_runner_gets_one_descriptor_and_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.judge.session import _secret_free_env

    monkeypatch.setenv("OPENAI_API_KEY", "sk-no")
    monkeypatch.setenv("KS_EVENT_FD", "7")
    env = _secret_free_env(gpu=False)
    assert "OPENAI_API_KEY" not in env and "KS_EVENT_FD" not in env
    assert env["HOME"] == "/tmp" and env["CUDA_VISIBLE_DEVICES"] == "" and env["OMP_WAIT_POLICY"] == "PASSIVE"


# -- the channel ---------------------------------------------------------------------------------


def _pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def test_messages_are_json_objects_and_descriptors_travel_beside_them() -> None:
    a, b = _pair()
    r, w = os.pipe()
    protocol.send(a, {"op": "setup", "n": 1}, fds=[r])
    fds: list[int] = []
    assert protocol.receive(b, fds) == {"op": "setup", "n": 1}
    assert len(fds) == 1
    os.write(w, b"x")
    assert os.read(fds[0], 1) == b"x"


@pytest.mark.parametrize(
    "frame, words",
    [
        (struct.pack("!I", 5) + b"hello", "not JSON"),
        (struct.pack("!I", 2) + b"[]", "not an object"),
        (struct.pack("!I", protocol.MAX_MESSAGE + 1), "limit"),
        (struct.pack("!I", 200_000) + b"[" * 100_000 + b"]" * 100_000, "not JSON"),  # past the parser's depth
    ],
    ids=["not-json", "not-object", "too-large", "too-deep"],
)
def test_a_forged_frame_is_a_protocol_error(frame: bytes, words: str) -> None:
    a, b = _pair()
    a.sendall(frame)
    with pytest.raises(protocol.ProtocolError, match=words):
        protocol.receive(b)


def test_a_closed_channel_is_reported_as_such() -> None:
    a, b = _pair()
    a.close()
    with pytest.raises(protocol.ChannelClosed):
        protocol.receive(b)


# -- the arena ------------------------------------------------------------------------------------


def test_the_runner_cannot_resize_the_arena_under_the_judge() -> None:
    # A runner shrank the memfd it was handed, and the judge's next read of its mapping was a SIGBUS.
    arena = Arena.create(1 << 16)
    theirs = os.dup(arena.fd)  # the runner's descriptor
    for size in (0, 1 << 12, 1 << 20):
        with pytest.raises(PermissionError):
            os.ftruncate(theirs, size)
    arena.view({"dtype": "float32", "shape": [4], "stride": [1], "offset": (1 << 16) - 16}).fill_(1.0)  # still mapped
    os.close(theirs)
    arena.close()


def test_arena_views_are_shared_and_specs_are_bounded() -> None:
    arena = Arena.create(1 << 16)
    other = Arena.attach(os.dup(arena.fd))  # as the runner attaches it
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4).T  # column-major
    layout = Layout()
    tree = encode((x, 3), layout.place)
    for (spec_x, _) in [(tree["tuple"][0]["tensor"], None)]:
        arena.view(spec_x).copy_(x)
    seen, n = decode(tree, other.view)
    assert n == 3 and torch.equal(seen, x) and seen.stride() == x.stride()
    with pytest.raises(ArenaError, match="outside the arena"):
        arena.view({"dtype": "float32", "shape": [1 << 20], "stride": [1], "offset": 0})
    with pytest.raises(ArenaError):
        arena.view({"dtype": "float32", "shape": [4], "stride": [-1], "offset": 64})
    with pytest.raises(ArenaError):
        decode({"pickle": "..."}, arena.view)
    # Whatever a runner writes is the runner's error, never one torch raises on the judge's side.
    for forged in ({"dict": [5]}, {"dict": [[1, 2, 3]]},
                   {"tensor": {"dtype": "float32", "shape": [0, 2**70], "stride": [1, 1], "offset": 0}},
                   {"tensor": {"dtype": "float32", "shape": [2**40, 2**40], "stride": [0, 0], "offset": 0}},
                   {"tensor": {"dtype": "float32", "shape": [2**64], "stride": [1], "offset": 0}},
                   {"tensor": {"dtype": "float32", "shape": [1] * 65, "stride": [1] * 65, "offset": 0}}):
        with pytest.raises(ArenaError):
            decode(forged, arena.view)


# -- inputs and outputs -----------------------------------------------------------------------------


def test_a_recipe_gives_both_sides_the_same_inputs_inside_the_sets_bounds() -> None:
    bases = [{"[0]": torch.rand(64, 33)}, {"[0]": torch.rand(64, 33)}]
    recipe = {"first": 1, "mix": {"[0]": [33 * 5, 0.3]}}
    one, two = {"[0]": torch.empty(64, 33)}, {"[0]": torch.empty(64, 33)}
    apply_recipe(one, bases, recipe, [])
    apply_recipe(two, bases, recipe, [])
    assert torch.equal(one["[0]"], two["[0]"])
    assert not torch.equal(one["[0]"], bases[0]["[0]"]) and not torch.equal(one["[0]"], bases[1]["[0]"])
    assert 0.0 <= float(one["[0]"].min()) and float(one["[0]"].max()) <= 1.0  # a convex blend stays in [0, 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn])
def test_a_blend_is_the_rotated_convex_mix_in_every_dtype(dtype: torch.dtype) -> None:
    # fp8 has no arithmetic (and CUDA no roll for it): it is blended in float32 and rounded once.
    a, b = torch.randn(40, 7).to(dtype), torch.randn(40, 7).to(dtype)
    out = torch.empty(40, 7, dtype=dtype)
    blend_into(out, a, b, 7 * 3, 0.25)
    expected = torch.lerp(torch.roll(b.float().reshape(-1), -21), a.float().reshape(-1), 0.25).to(dtype)
    assert torch.equal(out.reshape(-1).float(), expected.float())


def test_inputs_blended_in_the_arena_are_those_the_judge_blends_for_its_check() -> None:
    """The CPU judge blends a call's inputs straight into the arena and, for a checked call, blends them
    again in its own memory: both must hold the same bits, laid out where `place` would put them, with
    the preallocated output poisoned and the inputs that are not blended copied from the first set."""
    from sandbox.judge.checks import Judge

    def generated() -> dict[str, object]:
        return {"x": torch.randn(48, 33), "t": torch.randn(33, 48).t(), "n": torch.arange(12),
                "e": torch.randn(1, 9).expand(5, 9), "out": torch.empty(48, 33), "scale": 0.5}

    bases, buffers = [generated(), generated()], ["['out']"]
    judge = Judge(problem=SimpleNamespace(), device="cpu", session=SimpleNamespace(), policy=SimpleNamespace(),
                  arena=Arena.create(1 << 20))
    recipe = judge.recipe(bases[0], buffers)
    assert set(recipe["mix"]) == {"['x']", "['t']"}  # floating and dense: the ints and the expanded rows are copied
    tree, region = judge.place_recipe(bases, buffers, recipe, out_bytes=48 * 33 * 4, start=4096)
    pristine = judge.blend(bases, buffers, recipe)
    arena = judge.arena
    assert arena is not None
    mine = dict(tensors(pristine))
    for path, view in tensors(decode(tree, arena.view)):
        if path in buffers:
            assert bool(view.isnan().all()), path
        else:
            assert view.stride() == mine[path].stride() and torch.equal(view, mine[path]), path
    judge.inputs_unchanged(tree, pristine, buffers)  # what the check compares after the call
    # Laid out as the judge's own copy would be placed (which now overwrites the arena's).
    assert judge.place(pristine, buffers, 48 * 33 * 4, start=4096) == (tree, region)
    arena.close()


def test_a_shapes_sets_are_drawn_anew_between_batches_within_their_share_of_the_time() -> None:
    """A kernel that learnt the two sets a shape's calls are blended from (red-team round 16) finds new
    ones after the batch it learnt them in, for every kernel timed on the shape, as long as drawing
    them costs at most RENEWAL_SHARE of the shape's timing so far."""
    drawn: list[int] = []

    def fresh(params: dict[str, int]) -> dict[str, torch.Tensor]:
        drawn.append(params["n"])
        return {"x": torch.randn(params["n"])}

    judge = SimpleNamespace(fresh=fresh, resident_inputs=False)
    first = shapes.Shape("n=8", {"n": 8}, [fresh({"n": 8}), fresh({"n": 8})], [], 32, 32, 1, drawn_s=0.001)
    base = dataclasses.replace(first)  # the base of a pair shares the shape's sets
    before = first.bases
    renewal = shapes.SetRenewal([(judge, first), (judge, base)], started=time.perf_counter() - 1.0)
    renewal.after_batch()
    assert renewal.renewals == 1 and len(drawn) == 4 and first.bases is base.bases and first.bases is not before
    assert not any(torch.equal(new["x"], old["x"]) for new, old in zip(first.bases, before, strict=True))
    renewal.spent_s = 0.5  # half of the second the shape has been timed: more than its share
    renewal.after_batch()
    assert renewal.renewals == 1 and len(drawn) == 4
    assert renewal.noted({"judge": {}}) == {"judge": {"set_renewals": 1}}
    # Sets a batch has used (the second calibration's, or a first attempt's before a retry) are not
    # the next attempt's: it starts on new ones, and only its own draws count against its share.
    first.seen = True
    again = shapes.SetRenewal([(judge, first), (judge, base)])
    assert again.renewals == 1 and len(drawn) == 6 and not first.seen and first.bases is base.bases
    assert again.spent_s < 0.5


def test_the_digest_commits_to_every_bit() -> None:
    x = torch.randn(1000, 7)
    y = x.clone()
    y.view(torch.int32)[123, 4] ^= 1
    assert digest([x]) == digest([x.clone()]) and digest([x]) != digest([y])
    assert digest([x]) != digest([x.flip(0)])  # position-sensitive
    for numel in (1, 63, 64 * 1024 + 3, 5 << 16):  # a tail only, and trees with odd levels
        z = torch.randn(numel)
        flipped = z.clone()
        flipped.view(torch.int32)[numel // 2] ^= 1
        assert digest([z]) == digest([z.clone()]) and digest([z]) != digest([flipped]), numel


def test_the_digest_is_not_linear_over_the_rows() -> None:
    # A commitment that combines rows linearly (by xor) can be met by a late output: flip low bits of a
    # few elements chosen by solving a linear system. For such a fold, the effects of two flips in
    # different rows add up: f(x) ^ f(x+a) ^ f(x+b) ^ f(x+a+b) is zero. Here it is not, for any two
    # words of one subtree (a run of 64 rows here, one of the 64 rows SHA-256 reads), whatever their lanes.
    from sandbox.shared.blend import LANES, _tree

    rows = torch.randint(-(1 << 62), 1 << 62, (4096, LANES), dtype=torch.int64)
    for i, j in [(0, 63), (5, 60), (100, 120), (4032, 4095), (2000, 2047)]:
        a, b, both = rows.clone(), rows.clone(), rows.clone()
        a[i, 3] ^= 1
        b[j, 9] ^= 1
        both[i, 3] ^= 1
        both[j, 9] ^= 1
        combined = _tree(rows) ^ _tree(a) ^ _tree(b) ^ _tree(both)
        assert bool(combined.ne(0).any()), (i, j)


# -- library use ----------------------------------------------------------------------------------


TORCH = "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"
SAMPLES = [
    (TORCH, "_ZN2at6native12_GLOBAL__N_120_vec_softmax_lastdimIfEEvPKfPfll"),
    ("/tmp/copy/libtorch_cpu.so", "_ZN2at6native12_GLOBAL__N_120_vec_softmax_lastdimIfEEvPKfPfll"),
    ("/cache/build/abc/lib.so", "softmax_rows"),
    (TORCH, "mkl_blas_def_sgemm_kernel_0_zen"),
    ("/cache/build/def/lib.so", "sgemm_tile"),
    ("/usr/lib/libgomp.so.1", None),
]


def test_library_samples_count_torch_and_blas_but_not_the_candidates_own_code() -> None:
    watch = libwatch.LibraryWatch(Path("/nowhere"), own_code=["/cache/build"])
    softmax = watch.classify(SAMPLES, libwatch.patterns_for(["softmax", "_softmax"], []))
    assert softmax.samples == 6
    assert sum(softmax.forbidden.values()) == 2  # torch's, and torch's copied under /tmp; not softmax_rows
    gemm = watch.classify(SAMPLES, libwatch.patterns_for(["mm"], ["(?i)gemm"]))
    assert [sym for (_, sym) in gemm.forbidden] == ["mkl_blas_def_sgemm_kernel_0_zen"]  # not the own sgemm_tile


def test_the_candidates_own_kernels_may_have_a_librarys_name() -> None:
    """What the judge built from the candidate's source is its own code when the source names the
    function: the matmul seed renamed `bf16_gemm_kernel`, and a softmax in `namespace native`, were
    refused `forbidden-op` for their names alone (red-team round 17). The same names in a copy under
    /tmp, or a library's name the source never wrote, still count."""
    source = "extern \"C\" void bf16_gemm_kernel(...) {} namespace native { void softmax_row(...) {} }"
    watch = libwatch.LibraryWatch(Path("/nowhere"), own_code=["/cache/build"], own_names=libwatch.identifiers(source))
    samples = [
        ("/cache/build/abc/lib.so", "bf16_gemm_kernel._omp_fn.1"),
        ("/cache/build/abc/lib.so", "_ZN6native11softmax_rowEPKfPfl"),
        ("/tmp/x/lib.so", "bf16_gemm_kernel._omp_fn.1"),  # a file the runner wrote: no build of the judge's
        ("/cache/build/abc/lib.so", "sgemm_kernel_HASWELL"),  # a name the source never wrote
        (TORCH, "_ZN2at6native12_GLOBAL__N_120_vec_softmax_lastdimIfEEvPKfPfll"),
    ]
    gemm = watch.classify(samples, libwatch.patterns_for(["mm"], ["(?i)gemm"]))
    assert sorted(f"{dso}:{sym}" for dso, sym in gemm.forbidden) == [
        "/cache/build/abc/lib.so:sgemm_kernel_HASWELL", "/tmp/x/lib.so:bf16_gemm_kernel._omp_fn.1"]
    softmax = watch.classify(samples, libwatch.patterns_for(["softmax"], []))
    assert [sym for _, sym in softmax.forbidden] == ["_ZN2at6native12_GLOBAL__N_120_vec_softmax_lastdimIfEEvPKfPfll"]
    assert libwatch.name_parts("_ZN2at6native12_GLOBAL__N_120_vec_softmax_lastdimIfEEvPKfPfll")[:2] == ["at", "native"]
    assert libwatch.name_parts("_ZNK3Foo3barEv") == ["Foo", "bar"] and libwatch.name_parts("gemm.cold") == ["gemm"]


# -- problems ---------------------------------------------------------------------------------------


def _problem(tmp_path: Path, block: str) -> Path:
    src = ROOT / "problems" / "vector_add"
    for name in ("reference.py", "task.py"):
        (tmp_path / name).write_text((src / name).read_text())
    (tmp_path / "utils.py").write_text((ROOT / "problems" / "utils.py").read_text())
    task = (src / "task.yml").read_text().split("kernel_scientist:")[0]
    (tmp_path / "task.yml").write_text(task + "kernel_scientist:\n" + block)
    return tmp_path


def test_a_problem_cannot_forbid_what_the_runner_itself_runs(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="the sandbox's runner uses itself"):
        load_gpumode(_problem(tmp_path, "  integrity:\n    forbidden_ops: [\"add\", \"copy_\"]\n"))


def test_adversarial_cases_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="adversarial case"):
        load_gpumode(_problem(tmp_path, "  adversarial:\n    - {name: x, squash: 3}\n"))
    ok = load_gpumode(_problem(tmp_path, "  adversarial:\n    - {name: wide, scale: 50}\n"))
    assert ok.adversarial == [{"name": "wide", "scale": 50}]
    with pytest.raises(ProblemError, match="same length"):
        load_gpumode(_problem(tmp_path, "  adversarial:\n    - {name: x, scale: [2, 3], inputs: [0]}\n"))


def test_value_cases_reach_eight_bit_floats_only_where_named() -> None:
    # fp8 data drawn from randn never leaves +-5 of e4m3fn's +-448: a case that names it scales it (in
    # float32, saturated), each named input by its own value; one that does not name it leaves it be.
    from sandbox.judge.checks import apply_values

    data = (torch.randn(4096).to(torch.float8_e4m3fn), torch.ones(4), torch.ones(4))
    untouched = data[0].view(torch.uint8).clone()
    apply_values(data, {"name": "constant", "constant": 0.25})
    assert torch.equal(data[0].view(torch.uint8), untouched) and data[1].eq(0.25).all()
    apply_values(data, {"name": "range", "scale": [1000.0, 0.5], "inputs": [0, 1]})
    wide = data[0].float().abs()
    assert wide.max() == 448.0 and (wide >= 8).float().mean() > 0.9  # saturated, not overflowed to NaN
    assert data[1].eq(0.125).all() and data[2].eq(0.25).all()


def test_every_bundled_problem_states_adversarial_values() -> None:
    from sandbox.problem import bundled_problems

    for name, path in bundled_problems().items():
        assert load_gpumode(path).adversarial, name


# -- the OS sandbox ---------------------------------------------------------------------------------


def test_the_runner_starts_inside_bubblewrap_with_the_reference_hidden(tmp_path: Path) -> None:
    if not isolation.probe().available:
        pytest.skip(f"no isolation here: {isolation.probe().reason}")
    reference = tmp_path / "reference.py"
    reference.write_text("SECRET = 1\n")
    # The project is readable wherever it was cloned (under /tmp too, where it is bound back in).
    command = isolation.command(["python3"], env={"PATH": "/usr/bin"}, readable=[tmp_path, ROOT], hidden=[reference],
                                gpu=False)
    joined = " ".join(command)
    for flag in ("--ro-bind / /", "--tmpfs /tmp", "--unshare-pid", "--unshare-net", "--die-with-parent", "--cap-drop ALL"):
        assert flag in joined, flag
    assert f"--ro-bind /dev/null {reference}" in joined
    seen = subprocess.run([*command[:-1], "sh", "-c", f"cat {reference}; touch {ROOT}/x 2>&1; echo $$"],
                          capture_output=True, text=True, timeout=60)
    assert "SECRET" not in seen.stdout and "Read-only" in seen.stdout
    assert seen.stdout.strip().splitlines()[-1] in ("1", "2")  # its own PID namespace


def test_the_runner_sees_no_home_folder_or_password_hash_but_what_it_needs(tmp_path: Path) -> None:
    # Outside its namespace the runner's user is the judge's (often root): a read-only view of the
    # whole system would show every key in a home folder, and /etc/shadow.
    if not isolation.probe().available:
        pytest.skip(f"no isolation here: {isolation.probe().reason}")
    command = isolation.command(["sh"], env={"PATH": "/usr/bin:/bin"}, readable=[ROOT], hidden=[], gpu=False)
    probe = (f"echo SHADOW; cat /etc/shadow 2>/dev/null | head -c 40; echo; echo HOMES; ls -A /root /home 2>/dev/null | "
             f"grep -v ':$'; echo PROJECT; test -f {ROOT}/pyproject.toml && echo there")
    seen = subprocess.run([*command[:-1], "sh", "-c", probe], capture_output=True, text=True, timeout=60).stdout
    shadow, rest = seen.split("HOMES", 1)
    homes, project = rest.split("PROJECT", 1)
    assert "root:" not in shadow
    assert "there" in project  # the project is still there, wherever it was cloned
    under_home = [p for p in ("/root/", "/home/") if str(ROOT).startswith(p)]
    entries = [e for e in homes.split() if e]
    # Only the way down to the project, where it was cloned under a home folder.
    assert not entries or (under_home and set(entries) <= set(str(ROOT).split("/"))), entries


def test_the_runner_sees_of_the_host_only_the_system_and_what_it_runs() -> None:
    # A red-team kernel read a root-only file under /work, a folder the owner-only search did not
    # cover: every top-level folder that is not the system's is emptied, and only what the runner
    # needs is brought back. Of the project, that is the sandbox package and the problems.
    if not isolation.probe().available:
        pytest.skip(f"no isolation here: {isolation.probe().reason}")
    from sandbox.judge.session import RUNNER_SOURCES

    command = isolation.command(["sh"], env={"PATH": "/usr/bin:/bin"}, readable=list(RUNNER_SOURCES), hidden=[],
                                gpu=False)
    host_folders, _ = isolation._host_top_level()
    probe = "".join(f"echo '== {f}'; ls -A '{f}' 2>/dev/null; " for f in host_folders)
    probe += f"echo '== project'; ls -A {ROOT}; echo '== runner'; test -f {ROOT}/sandbox/runner/main.py && echo there"
    seen = subprocess.run([*command[:-1], "sh", "-c", probe], capture_output=True, text=True, timeout=60).stdout
    listed = {block.split("\n", 1)[0]: block.split("\n", 1)[1].split() for block in seen.split("== ")[1:]}
    assert sorted(listed.pop("project")) == ["problems", "sandbox"]  # no README, runs, tests or configuration
    assert listed.pop("runner") == ["there"]
    on_the_way = set(str(ROOT).split("/"))
    for folder, entries in listed.items():  # only the way down to the project, where it was cloned
        assert set(entries) <= on_the_way, (folder, entries)
    assert isolation._host_top_level()[0], "a host has folders of its own (home folders at least)"


def test_what_the_runner_writes_into_its_own_folders_is_capped() -> None:
    # Files in the sandbox's in-memory folders belong to no process, so the memory limit (resident
    # pages of the tree) never sees them: a red-team kernel parked 3 GB there under a 2 GB limit.
    found = isolation.probe()
    if not found.available or not found.sized_tmpfs:
        pytest.skip("no bubblewrap here, or one too old to cap a tmpfs")
    command = isolation.command(["sh"], env={"PATH": "/usr/bin:/bin"}, readable=[ROOT], hidden=[], gpu=False)
    emptied = isolation._host_top_level()[0][0]
    probe = ("python3 -c \"import sys\nfor path, mib in (('/var/tmp/x', 80), ('%s/x', 2), ('/tmp/x', 8)):\n"
             "    try:\n        open(path, 'wb').write(bytes(mib << 20)); print(path, 'written')\n"
             "    except OSError as e:\n        print(path, 'refused', e.errno)\"" % emptied)
    seen = subprocess.run([*command[:-1], "sh", "-c", probe], capture_output=True, text=True, timeout=60).stdout
    assert "/var/tmp/x refused 28" in seen, seen  # ENOSPC: over its 64 MiB
    assert f"{emptied}/x refused 28" in seen, seen
    assert "/tmp/x written" in seen, seen  # what a kernel's JIT or compiler needs still fits
    assert "capped" not in found.describe() and "MiB" in found.describe()


def test_the_runner_cannot_read_what_only_the_systems_owner_may() -> None:
    # Run as root, the judge's runner maps to root outside its namespace: TLS and SSH keys, service
    # configurations and login logs readable only by their owner would all be open to a candidate.
    if not isolation.probe().available:
        pytest.skip(f"no isolation here: {isolation.probe().reason}")
    if os.geteuid() != 0:
        pytest.skip("the judge is not root here: the kernel itself keeps owner-only files from its runner")
    folders, files = isolation._owner_only()
    regular = [f for f in files if os.path.isfile(f) and os.path.getsize(f) > 0][:20]
    if not folders and not regular:
        pytest.skip("this host has no owner-only files to hide")
    command = isolation.command(["sh"], env={"PATH": "/usr/bin:/bin"}, readable=[ROOT], hidden=[], gpu=False)
    probe = "".join(f"echo F; head -c 1 '{f}' 2>/dev/null | wc -c; " for f in regular)
    probe += "".join(f"echo D; ls -A '{d}' 2>/dev/null | wc -l; " for d in folders[:20])
    probe += "echo P; head -c 5 /etc/passwd"
    seen = subprocess.run([*command[:-1], "sh", "-c", probe], capture_output=True, text=True, timeout=60).stdout
    counts, passwd = seen.split("P\n", 1)
    assert [line for line in counts.split() if line not in ("F", "D")] == ["0"] * (len(regular) + len(folders[:20]))
    assert passwd == "root:"  # what everyone may read stays readable


# -- the bound ----------------------------------------------------------------------------------------


def test_the_judges_clock_bounds_what_the_runner_reports() -> None:
    calibration = Calibration(batch=4, overhead_us=1000.0, spread_us=80.0, samples_us=[1000.0] * 7)
    honest = bound_by_judge([400.0, 410.0, 405.0], [430.0, 470.0, 440.0], [4, 4, 4], calibration, "gpu")
    assert honest["judge_median_us"] == pytest.approx(110.0)
    with pytest.raises(IntegrityViolation) as caught:
        bound_by_judge([40.0, 41.0, 40.0], [4000.0, 4100.0, 4050.0], [4, 4, 4], calibration, "gpu")
    assert caught.value.rule == "timing-contradicted" and "outside the measured region" in caught.value.reason


def test_a_runner_path_cheaper_than_its_calibration_is_refused_on_the_cpu() -> None:
    # The no-op's path cost 8 ms a batch of 4 (2 ms a call). An honest batch costs that and the kernel;
    # one whose runner skipped half its own work saw its round trips fall 1 ms a call below it.
    from sandbox.judge.bound import overhead_floor

    calibration = Calibration(batch=4, overhead_us=8000.0, spread_us=200.0, samples_us=[8000.0] * 5)
    overhead_floor([400.0] * 3, [600.0, 300.0, 500.0], [4] * 3, calibration, "cpu")  # at or above: honest
    overhead_floor([400.0] * 3, [-1200.0, -1000.0, -1500.0], [4] * 3, calibration, "cpu")  # noise: a fifth below
    with pytest.raises(IntegrityViolation) as caught:
        overhead_floor([4.0] * 3, [-4000.0, -3800.0, -4200.0], [4] * 3, calibration, "cpu")
    assert caught.value.rule == "overhead-shortened" and caught.value.detail is not None
    # Figures recorded on vector_add's 1M shape (recipe path, batches of 4): the honest seed's batches ran
    # 1.0 ms a call under the no-op's path, the round-12 cheat's 4.0 ms (its digest swapped for a C++ copy).
    measured = Calibration(batch=4, overhead_us=26875.0, spread_us=2869.0, samples_us=[26875.0] * 5)
    assert overhead_floor([1721.0] * 3, [1721.0 - 4000.0] * 3, [4] * 3, measured, "cpu")["runner_path"]
    with pytest.raises(IntegrityViolation):
        overhead_floor([4.0] * 3, [4.0 - 4 * 4002.7] * 3, [4] * 3, measured, "cpu")
    # A GPU's calibration has not been measured against honest kernels: no floor there yet.
    overhead_floor([4.0] * 3, [-4000.0] * 3, [4] * 3, calibration, "gpu")


def test_on_the_cpu_a_round_trip_delayed_by_the_host_is_not_blamed_on_the_runner() -> None:
    # The round trips grow by 2 ms per call while the runner's processes used no more CPU than the
    # no-op: other work on the host held the cores. Work hidden from the runner's clock costs CPU.
    calibration = Calibration(batch=4, overhead_us=1000.0, spread_us=80.0, samples_us=[1000.0] * 5,
                              cpu_overhead_us=900.0, cpu_spread_us=40.0)
    delayed = bound_by_judge([400.0] * 3, [8400.0] * 3, [4] * 3, calibration, "cpu", cpu_judged=[440.0] * 3, cores=2)
    assert delayed["judge"]["host_delay"] and delayed["judge"]["cpu_per_call_us"] == [110.0] * 3
    with pytest.raises(IntegrityViolation) as caught:
        bound_by_judge([400.0] * 3, [8400.0] * 3, [4] * 3, calibration, "cpu", cpu_judged=[8000.0] * 3, cores=2)
    assert "of CPU per call beyond the no-op's" in caught.value.reason
    # Each core the runner may use may spend the allowance: a kernel on two threads uses twice its time.
    threads = bound_by_judge([400.0] * 3, [8400.0] * 3, [4] * 3, calibration, "cpu", cpu_judged=[2000.0] * 3, cores=2)
    assert "host_delay" in threads["judge"]
    # Without the CPU's view (unreadable, or a GPU's events), the round trip alone decides.
    with pytest.raises(IntegrityViolation):
        bound_by_judge([400.0] * 3, [8400.0] * 3, [4] * 3, calibration, "cpu")


def test_the_no_op_timed_again_beside_the_candidate_keeps_the_smaller_overhead(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.judge.checks import CandidateFailure

    inflated = Calibration(batch=4, overhead_us=13000.0, spread_us=9000.0, samples_us=[13000.0] * 5,
                           cpu_overhead_us=900.0, cpu_spread_us=40.0)
    fresh = Calibration(batch=4, overhead_us=1400.0, spread_us=100.0, samples_us=[1400.0] * 5,
                        cpu_overhead_us=1200.0, cpu_spread_us=60.0)
    monkeypatch.setattr(timed, "calibrate", lambda judge, shape, when: fresh)
    kept = timed.recalibrated(None, None, inflated)  # type: ignore[arg-type]
    # Each clock keeps its smaller overhead: the first calibration's burst is gone, and a no-op the
    # candidate slowed (here the CPU's) cannot widen the allowance.
    assert (kept.overhead_us, kept.spread_us) == (1400.0, 100.0)
    assert (kept.cpu_overhead_us, kept.cpu_spread_us) == (900.0, 40.0)

    def broken(judge: object, shape: object, when: str) -> Calibration:
        raise CandidateFailure(f"the runner's no-op failed {when}")

    # A no-op broken beside the candidate (its code patched the runner's) would have kept the burst's
    # overhead, 13 ms a batch subtracted from the judge's clock: the kernel's timing fails instead.
    monkeypatch.setattr(timed, "calibrate", broken)
    with pytest.raises(CandidateFailure, match="beside the candidate's code"):
        timed.recalibrated(None, None, inflated)  # type: ignore[arg-type]


def test_a_calibration_made_beside_the_candidate_only_ever_tightens_the_bound() -> None:
    trusted = Calibration(batch=4, overhead_us=1000.0, spread_us=80.0, samples_us=[1000.0] * 5,
                          cpu_overhead_us=900.0, cpu_spread_us=40.0)
    # Shaped by the candidate's runner: no overhead at all (over-reported no-ops) and a spread of 300 ms
    # (no-ops delayed by a burn), on both clocks. Kept whole for its overhead, its spread widened both
    # the figure's floor and the allowance by 1.5 x 300 ms a batch.
    shaped = Calibration(batch=4, overhead_us=0.0, spread_us=300000.0, samples_us=[0.0, 0.0, 0.0, 3e5, 3e5],
                         cpu_overhead_us=0.0, cpu_spread_us=300000.0)
    for first, later in ((trusted, shaped), (shaped, trusted)):
        kept = timed.tightest(first, later)
        assert (kept.overhead_us, kept.spread_us) == (0.0, 80.0)
        assert (kept.cpu_overhead_us, kept.cpu_spread_us) == (0.0, 40.0)
    # With the kept figures a 50x under-report is contradicted; with the shaped ones whole it was not.
    reported, judged = [100.0] * 3, [5000.0 * 4] * 3
    with pytest.raises(IntegrityViolation):
        bound_by_judge(reported, judged, [4] * 3, timed.tightest(trusted, shaped), "cpu", cpu_judged=judged, cores=1)
    assert bound_by_judge(reported, judged, [4] * 3, shaped, "cpu", cpu_judged=judged, cores=1)
    # Where one clock is unreadable in one calibration, the other's figures stand for it.
    blind = Calibration(batch=4, overhead_us=1200.0, spread_us=60.0, samples_us=[1200.0] * 5)
    assert timed.tightest(blind, trusted).cpu_overhead_us == 900.0


def test_a_refusal_shows_the_no_ops_steps_before_the_candidate_loaded_and_beside_it() -> None:
    # On a GPU host the same no-op batch was seen 20-45% dearer beside the candidate than seconds before it
    # loaded; the bound takes the cheaper, so a refusal shows both, step by step, to say where time moved.
    before = Calibration(batch=4, overhead_us=900.0, spread_us=10.0, samples_us=[900.0] * 5,
                         steps_us=[1.0, 100.0, 40.0], batch_us=[[200.0, 400.0, 110.0, 800.0]])
    beside = Calibration(batch=4, overhead_us=1300.0, spread_us=10.0, samples_us=[1300.0] * 5,
                         steps_us=[2.0, 140.0, 55.0], batch_us=[[300.0, 560.0, 150.0, 1150.0]])
    kept = timed.tightest(before, beside)
    assert kept.overhead_us == 900.0
    shown = runner_steps(kept, [], [])["runner_steps_us"]
    assert shown["no-op"] == [2.0, 140.0, 55.0] and shown["no-op_before_load"] == [1.0, 100.0, 40.0]
    assert shown["no-op_batches"] == [[300.0, 560.0, 150.0, 1150.0]]
    assert shown["no-op_batches_before_load"] == [[200.0, 400.0, 110.0, 800.0]]


def test_a_runner_cannot_report_more_time_than_its_batch_took() -> None:
    from sandbox.judge.session import Call, ImpossibleTiming, _within_round_trip

    honest = [Call(True, 480.0, 1000.0), Call(True, 490.0, 1000.0), Call(False, 0.0, 1000.0)]
    _within_round_trip(honest, 1000.0)
    _within_round_trip([Call(True, 1005.0, 1000.0)], 1000.0)  # the clocks' own slack
    with pytest.raises(ImpossibleTiming) as caught:
        _within_round_trip([Call(True, 1e6, 15000.0)] * 16, 15000.0)
    assert caught.value.rule == "timing-impossible" and "more time than passed" in str(caught.value)


def test_a_batchs_figure_on_the_cpu_is_never_below_what_its_cpu_time_shows() -> None:
    # A runner reporting 1 ms for a batch whose processes used 9 ms of CPU beyond the no-op's, on
    # two cores, while the round trip's noise hid it: the figure is at least 4.5 ms less the noise.
    calibration = Calibration(batch=1, overhead_us=6000.0, spread_us=20000.0, samples_us=[6000.0] * 5,
                              cpu_overhead_us=800.0, cpu_spread_us=100.0)
    figure = bound.batch_figure(1000.0, 0.0, calibration, "cpu", cpu_judged=9000.0)
    assert figure == pytest.approx(9000.0 / bound.cores() - 150.0)
    assert bound.batch_figure(1000.0, 0.0, calibration, "cuda", cpu_judged=9000.0) == 1000.0


@pytest.mark.parametrize("spread_us", [0.0, 30.0, 1600.0, 20000.0])
def test_a_batchs_figure_on_the_cpu_is_the_work_its_runner_did_however_noisy_the_round_trips(spread_us: float) -> None:
    # A runner reporting a fifth of a 2 ms batch whose processes used 1.9 ms of CPU beyond the no-op's: a
    # calibration whose round trips spread widely (a noisy host, as CI's, 1.6 ms a batch) takes nothing off
    # the CPU time, whose own spread stays small; one thread's work is not shared by the other cores.
    calibration = Calibration(batch=4, overhead_us=1400.0, spread_us=spread_us, samples_us=[1400.0] * 5,
                              cpu_overhead_us=1200.0, cpu_spread_us=20.0)
    assert bound.batch_figure(400.0, 2000.0, calibration, "cpu", cpu_judged=1900.0) == pytest.approx(
        max(1900.0 - 30.0, 2000.0 - 1.5 * spread_us))
    # A kernel on two cores: its CPU time twice its round trip, whose time stands.
    figure = bound.batch_figure(400.0, 2000.0, calibration, "cpu", cpu_judged=4000.0)
    assert figure == pytest.approx(max(2000.0 - 30.0, 4000.0 / bound.cores() - 30.0, 2000.0 - 1.5 * spread_us))
    # One thread's work in a batch that also waited for a core: its CPU time, whole, not shared by the cores.
    assert bound.batch_figure(400.0, 2500.0, calibration, "cpu", cpu_judged=1900.0) == pytest.approx(
        max(1900.0 - 30.0, 2500.0 - 1.5 * spread_us))
    # More CPU time than round trip (several cores): the round trip less the CPU time's spread.
    assert bound.batch_figure(400.0, 1500.0, calibration, "cpu", cpu_judged=1900.0) == pytest.approx(
        max(1500.0 - 30.0, 1500.0 - 1.5 * spread_us))
    assert bound.batch_figure(2100.0, 2000.0, calibration, "cpu", cpu_judged=1900.0) == 2100.0  # the runner says more
    assert bound.batch_figure(400.0, 2000.0, calibration, "cpu") == 2000.0  # no CPU time read: the round trip, whole
    assert bound.batch_figure(400.0, 2000.0, calibration, "cuda", cpu_judged=1900.0) == 400.0  # a GPU's: its events


def test_the_cpu_time_of_a_process_is_read_to_the_microsecond() -> None:
    # Ticks (10 ms) would round a batch of calls to nothing or to a whole tick.
    from sandbox.judge import procs

    before = procs.cpu_seconds([os.getpid()])
    spin = time.perf_counter() + 0.003
    while time.perf_counter() < spin:
        pass
    used = procs.cpu_seconds([os.getpid()]) - before
    assert 0.002 < used < 0.5 and abs(used * 100 - round(used * 100)) > 1e-6  # not whole ticks


def _track(reported: list[float], judged: list[float]) -> timed.Track:
    judge = SimpleNamespace(device="cuda")
    calibration = Calibration(batch=4, overhead_us=1000.0, spread_us=80.0, samples_us=[1000.0] * 7)
    return timed.Track(judge, None, calibration, warmup=0, reported=list(reported), beyond=list(judged),  # type: ignore[arg-type]
                       sizes=[4] * len(reported))


def test_a_contradiction_is_measured_on_more_batches_before_it_stands() -> None:
    # Two of three round trips caught in a burst of host work: not settled, so more batches are timed;
    # once the median of them agrees, the track is settled.
    noisy = _track([400.0] * 3, [2400.0, 2600.0, 420.0])
    assert not noisy.settled()
    noisy.reported += [400.0] * 4
    noisy.beyond += [430.0, 410.0, 440.0, 425.0]
    noisy.sizes += [4] * 4
    assert noisy.settled()
    # Work hidden from the runner's clock delays every batch: after the most batches, it stands.
    forger = _track([40.0] * 3, [4000.0] * 3)
    while not forger.settled():
        forger.reported.append(40.0)
        forger.beyond.append(4000.0)
        forger.sizes.append(4)
    assert len(forger.sizes) == timed.BOUND_MAX_BATCHES
    with pytest.raises(IntegrityViolation) as caught:
        forger.result()
    assert caught.value.rule == "timing-contradicted" and caught.value.detail is not None
    assert caught.value.detail["judge"]["reported_per_call_us"] == [10.0] * timed.BOUND_MAX_BATCHES


def test_verdict_records_what_the_judge_saw() -> None:
    from sandbox.verdict import BenchmarkResult

    entry = BenchmarkResult(params={}, shape="s", reps=10, median_us=1, mean_us=1, std_us=0, stderr_us=0, min_us=1,
                            max_us=1, p25_us=1, p75_us=1, judge_median_us=1.2, judge={"batch": 4})
    assert json.loads(entry.model_dump_json())["judge"] == {"batch": 4}


def test_the_key_system_calls_are_refused_to_the_runner_and_all_it_starts() -> None:
    # Keyrings are not namespaced: a red-team kernel linked a key into the host root's keyring and read
    # it back in the next evaluation. The runner's filter answers every key call with EPERM, in the
    # process that installs it and in the programs it starts (the filter is inherited and stays).
    from sandbox.runner import seccomp

    if not seccomp.program():
        pytest.skip(f"no key-call filter for {platform.machine()}")
    probe = (
        "import ctypes, subprocess, sys\n"
        "from sandbox.runner import seccomp\n"
        "print(seccomp.install())\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "nr = {'x86_64': (248, 250), 'aarch64': (217, 219)}[__import__('platform').machine()]\n"
        "print('keyctl', libc.syscall(nr[1], 0, -3, 0), ctypes.get_errno())\n"
        "print('add_key', libc.syscall(nr[0], b'user', b'ks-probe', b'x', 1, -3), ctypes.get_errno())\n"
        "print('getpid', libc.syscall({'x86_64': 39, 'aarch64': 172}[__import__('platform').machine()]) > 0)\n"
        "child = subprocess.run(['grep', '-c', '^Seccomp:.*2', '/proc/self/status'], capture_output=True, text=True)\n"
        "print('child', child.stdout.strip())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    assert "key calls, io_uring, perf events, timers, signalfds, asynchronous I/O, memory made executable after " \
        "it was written, tracing, shared address spaces but threads', advice that drops mapped pages and sockets other " \
        "than Unix ones refused (seccomp)" in out, out
    assert f"keyctl -1 {errno.EPERM}" in out and f"add_key -1 {errno.EPERM}" in out, out
    assert "getpid True" in out and "child 1" in out, out


@pytest.mark.parametrize("where", ["cpu", "device"])
def test_a_cpu_runner_cannot_arm_kernel_work_for_after_its_stop(where: str) -> None:
    # Red-team round 14: timerfds watched by 100,000 epoll entries each stalled a core for 9-10 ms per
    # expiry while the sandbox was stopped, charged to whatever the judge timed then. A CPU runner may
    # make no timer, signalfd or asynchronous I/O context; a GPU runner keeps them until its driver is
    # checked on a GPU host. Round 15: POSIX timers whose signal no thread of the stopped process takes
    # make the kernel walk every thread at each expiry (13-23 ms per batch of expiries with 4,000 threads).
    # A userfaultfd could hold the judge's read of a CPU kernel's output (sandbox/judge/remote.py).
    from sandbox.runner import seccomp

    if not seccomp.program():
        pytest.skip(f"no system-call filter for {platform.machine()}")
    probe = (
        "import ctypes, platform, time\n"
        "from sandbox.runner import seccomp\n"
        f"print(seccomp.install(deferred_work={where == 'cpu'}))\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "nr = {'x86_64': (283, 289, 206), 'aarch64': (85, 74, 0)}[platform.machine()]\n"
        "print('timerfd', libc.syscall(nr[0], 1, 0) >= 0, ctypes.get_errno())\n"
        "mask = ctypes.c_uint64(1 << 9)\n"
        "print('signalfd', libc.syscall(nr[1], -1, ctypes.byref(mask), 8, 0) >= 0, ctypes.get_errno())\n"
        "context = ctypes.c_ulong(0)\n"
        "print('aio', libc.syscall(nr[2], 4, ctypes.byref(context)) >= 0, ctypes.get_errno())\n"
        "timer = ctypes.c_int(0)\n"
        "nr_timer = {'x86_64': 222, 'aarch64': 107}[platform.machine()]\n"
        "print('posix_timer', libc.syscall(nr_timer, 1, None, ctypes.byref(timer)) >= 0, ctypes.get_errno())\n"
        "nr_uffd = {'x86_64': 323, 'aarch64': 282}[platform.machine()]\n"
        "print('userfaultfd', libc.syscall(nr_uffd, 1) >= 0, ctypes.get_errno())  # UFFD_USER_MODE_ONLY\n"
        "if platform.machine() == 'x86_64':\n"
        "    print('x32', libc.syscall(0x40000000 | 39), ctypes.get_errno())  # x32's getpid\n"
        "time.sleep(0.01); print('sleep ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    assert "sleep ok" in out, out
    if where == "cpu":
        for call in ("timerfd", "signalfd", "aio", "posix_timer", "userfaultfd"):
            assert f"{call} False {errno.EPERM}" in out, out
    else:
        assert "timerfd True" in out and "signalfd True" in out and "posix_timer True" in out, out
    if platform.machine() == "x86_64":  # x32's calls are refused whole, whatever the kernel offers
        assert f"x32 -1 {errno.EPERM}" in out, out


@pytest.mark.parametrize("where", ["cpu", "device"])
def test_a_gpu_runner_stays_on_the_core_it_was_calibrated_on(where: str) -> None:
    # Cores of a lent GPU host ran the runner's host work 1.6-2.2 times apart; the judge calibrates a GPU
    # runner on the quicker half, and a kernel that moved to a core quicker by then would gain the difference.
    from sandbox.runner import seccomp

    if not seccomp.program():
        pytest.skip(f"no system-call filter for {platform.machine()}")
    probe = (
        "import os\n"
        "from sandbox.runner import seccomp\n"
        f"print(seccomp.install(deferred_work={where == 'cpu'}, keep_cores={where == 'device'}))\n"
        "mask = os.sched_getaffinity(0)\n"
        "try:\n"
        "    os.sched_setaffinity(0, mask); print('moved')\n"
        "except PermissionError:\n"
        "    print('kept')\n"
        "print('read', os.sched_getaffinity(0) == mask)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    assert "read True" in out, out
    assert ("kept" if where == "device" else "moved") in out, out
    assert ("a change of cores" in out) == (where == "device"), out


def test_the_quickest_cores_are_ones_this_process_may_use() -> None:
    from sandbox.envinfo import core_pace_ns, quickest_cores

    allowed = os.sched_getaffinity(0)
    cores = quickest_cores()
    assert (cores is None) == (len(allowed) < 4)
    assert cores is None or (cores <= allowed and len(cores) == max(2, len(allowed) // 2))
    assert core_pace_ns(min(allowed)) > 0
    assert os.sched_getaffinity(0) == allowed  # the probes leave this thread's cores as they were


@pytest.mark.parametrize("where", ["cpu", "device"])
def test_a_cpu_runner_cannot_make_written_memory_executable(where: str) -> None:
    # Library code is recognised by its bytes, read from the file a sample's code was mapped from. A
    # runner that could write into its code's pages (mprotect to writable, copy a library's kernel
    # over its own, mprotect back to executable), or map memory writable and executable at once,
    # would run code no file shows. Libraries still load: the loader maps code executable as it is.
    from sandbox.runner import seccomp

    if not seccomp.program():
        pytest.skip(f"no system-call filter for {platform.machine()}")
    probe = (
        "import ctypes, ctypes.util, mmap\n"
        "from sandbox.runner import seccomp\n"
        f"print(seccomp.install(deferred_work={where == 'cpu'}))\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.mmap.restype = ctypes.c_void_p\n"
        "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
        "R, W, X, FLAGS = 1, 2, 4, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS\n"
        "page = libc.mmap(None, 4096, R | W, FLAGS, -1, 0)\n"
        "print('rw', page not in (None, ctypes.c_void_p(-1).value))\n"
        "print('rwx', libc.mmap(None, 4096, R | W | X, FLAGS, -1, 0) == ctypes.c_void_p(-1).value, ctypes.get_errno())\n"
        "print('to_rx', libc.mprotect(ctypes.c_void_p(page), 4096, R | X), ctypes.get_errno())\n"
        "print('to_r', libc.mprotect(ctypes.c_void_p(page), 4096, R))\n"
        "ctypes.CDLL(ctypes.util.find_library('m')).cos\n"
        "import numpy; print('loads', float(numpy.ones(4).sum()))\n"
        "nr = {'x86_64': 101, 'aarch64': 117}[__import__('platform').machine()]\n"
        "clone, clone3, mremap = {'x86_64': (56, 435, 25), 'aarch64': (220, 435, 216)}[__import__('platform').machine()]\n"
        # unfiltered, these would take effect (a traced process, a child on the runner's own stack): probed
        # only where they are refused
        f"if {where == 'cpu'}:\n"
        "    print('ptrace', libc.syscall(nr, 0, 0, 0, 0), ctypes.get_errno())  # PTRACE_TRACEME\n"
        "    print('clone_vm', libc.syscall(clone, 0x100 | 17, 0, 0, 0, 0), ctypes.get_errno())  # CLONE_VM|SIGCHLD\n"
        "    print('clone3', libc.syscall(clone3, 0, 0), ctypes.get_errno())\n"
        "    moved = libc.mmap(None, 8192, R | W, FLAGS, -1, 0)\n"
        "    print('mremap_fixed', libc.syscall(mremap, ctypes.c_void_p(page), 4096, 4096, 3, "
        "ctypes.c_void_p(moved)) == -1, ctypes.get_errno())\n"
        "import threading, subprocess, os; t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
        "print('spawn', subprocess.run(['true']).returncode)\n"
        "child = os.fork()\n"
        "os._exit(0) if child == 0 else print('fork', os.waitpid(child, 0)[1])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    assert "rw True" in out and "to_r 0" in out and "loads 4.0" in out, out
    if where == "cpu":
        assert f"rwx True {errno.EPERM}" in out and f"to_rx -1 {errno.EPERM}" in out, out
        # a child that attaches to the runner writes its code pages whatever their protection (round 19)
        assert f"ptrace -1 {errno.EPERM}" in out, out
        # a process sharing the runner's memory, and pages moved: no record perf's samples are read against
        assert f"clone_vm -1 {errno.EPERM}" in out and f"clone3 -1 {errno.ENOSYS}" in out, out
        assert f"mremap_fixed True {errno.EPERM}" in out, out
    else:
        assert "to_rx 0" in out, out
    assert "spawn 0" in out and "fork 0" in out, out  # threads, subprocesses and forks are as they were


def test_the_runner_may_open_unix_sockets_only() -> None:
    # A red-team kernel parked 1.1 GB in TCP buffers on the sandbox's own loopback, memory no group saw;
    # io_uring could open a socket without a system call the filter sees.
    from sandbox.runner import seccomp

    if not seccomp.program():
        pytest.skip(f"no system-call filter for {platform.machine()}")
    probe = (
        "import socket\n"
        "from sandbox.runner import seccomp\n"
        "print(seccomp.install())\n"
        "for family in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK):\n"
        "    try:\n"
        "        socket.socket(family, socket.SOCK_STREAM if family != socket.AF_NETLINK else socket.SOCK_RAW).close()\n"
        "        print(family.name, 'opened')\n"
        "    except OSError as exc:\n"
        "        print(family.name, 'refused', exc.errno)\n"
        "a, b = socket.socketpair()\n"
        "print('pair', a.send(b'x'), b.recv(1))\n"
        "import ctypes, platform\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "params = ctypes.create_string_buffer(120)\n"
        "print('io_uring', libc.syscall(425, 8, params), ctypes.get_errno())\n"
        "attr = ctypes.create_string_buffer(128); attr[4] = 128  # perf_event_attr: a software clock event\n"
        "nr = {'x86_64': 298, 'aarch64': 241}[platform.machine()]\n"
        "print('perf', libc.syscall(nr, attr, 0, -1, -1, 0), ctypes.get_errno())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    assert "AF_UNIX opened" in out and "pair 1 b'x'" in out, out
    for family in ("AF_INET", "AF_INET6", "AF_NETLINK"):
        assert f"{family} refused {errno.EPERM}" in out, out
    assert f"io_uring -1 {errno.EPERM}" in out, out  # its requests would pass the filter unseen
    assert f"perf -1 {errno.EPERM}" in out, out  # its ring buffers are charged to no memory group


def test_the_runner_cannot_list_the_hosts_keys() -> None:
    if not isolation.probe().available:
        pytest.skip(f"no isolation here: {isolation.probe().reason}")
    command = isolation.command(["sh"], env={"PATH": "/usr/bin:/bin"}, readable=[], hidden=[], gpu=False)
    listing = "cat /proc/keys 2>/dev/null | wc -l; cat /proc/key-users 2>/dev/null | wc -l; echo done"
    seen = subprocess.run([*command[:-1], "sh", "-c", listing], capture_output=True, text=True, timeout=60).stdout.split()
    assert seen == ["0", "0", "done"], seen


def test_the_runner_sees_no_control_group(tmp_path: Path) -> None:
    # A group's peak memory only ever rises and outlives the evaluation: readable, it carried a number
    # from one candidate to the next.
    if not isolation.probe().available:
        pytest.skip(f"no isolation here: {isolation.probe().reason}")
    command = isolation.command(["sh"], env={"PATH": "/usr/bin:/bin"}, readable=[], hidden=[], gpu=False)
    listing = "ls -A /sys/fs/cgroup | wc -l; touch /sys/fs/cgroup/x 2>/dev/null && echo writable; echo done"
    seen = subprocess.run([*command[:-1], "sh", "-c", listing], capture_output=True, text=True, timeout=60).stdout.split()
    assert seen == ["0", "done"], seen


def test_the_runner_cannot_write_its_own_code_through_proc() -> None:
    # /proc/self/mem writes a process's code pages whatever their protection: the bytes that ran would
    # be no file's, and library code is recognised by its file's bytes.
    if not isolation.probe().available:
        pytest.skip(f"no isolation here: {isolation.probe().reason}")
    command = isolation.command(["sh"], env={"PATH": "/usr/bin:/bin"}, readable=[], hidden=[], gpu=False)
    probe = "(exec 3<>/proc/self/mem) 2>/dev/null && echo mem-writable; head -c 4 /proc/self/status; echo; echo done"
    seen = subprocess.run([*command[:-1], "sh", "-c", probe], capture_output=True, text=True, timeout=60).stdout.split()
    assert seen == ["Name", "done"], seen  # /proc still reads


def test_the_runner_sees_only_the_packages_kernels_need() -> None:
    # Red-team round 19 ran onnxruntime's matrix product (a dependency of the knowledge base's), whose
    # kernels no symbol names: the runner sees torch, numpy, triton, PyYAML and what they need. A hidden
    # package fails to import, as one not installed does: an empty folder would import as a namespace
    # package, and CuPy, which imports ml_dtypes where it can, then failed its own import on a GPU host.
    import importlib.util

    if not isolation.probe().available:
        pytest.skip(f"no isolation here: {isolation.probe().reason}")
    others = [name for name in ("onnxruntime", "scipy", "sklearn", "chromadb") if importlib.util.find_spec(name)]
    if not others:
        pytest.skip("no package beside torch's here to hide")
    # A copy further along the import path is still found, as it would be had the package never been
    # installed (torch.compile's C++ path imports `packaging`, and setuptools carries a copy of its own).
    probe = ("import importlib, os, sys\n"
             "os.makedirs('/tmp/later/' + sys.argv[-1], exist_ok=True)\n"
             "open('/tmp/later/' + sys.argv[-1] + '/__init__.py', 'w').write('LATER = 1')\n"
             "sys.path.append('/tmp/later')\n"
             "for name in sys.argv[1:-1]:\n"
             "    try:\n"
             "        print(name, 'file' if getattr(importlib.import_module(name), '__file__', None) else 'namespace')\n"
             "    except ImportError:\n"
             "        print(name, 'absent')\n"
             "print('later', getattr(importlib.import_module(sys.argv[-1]), 'LATER', None))\n")
    names = ["torch", "numpy", "yaml", *others[1:], others[0]]
    command = isolation.command([sys.executable, "-I", "-c", probe, *names], env={"PATH": "/usr/bin:/bin"},
                                readable=[Path(sys.prefix), Path(sys.base_prefix)], hidden=[], gpu=False)
    seen = dict(line.split() for line in subprocess.run(command, capture_output=True, text=True,
                                                        timeout=120).stdout.splitlines())
    assert seen == {"torch": "file", "numpy": "file", "yaml": "file", **{name: "absent" for name in others[1:]},
                    "later": "1"}, seen


def test_the_runners_dev_is_read_only_and_its_shm_capped() -> None:
    # bubblewrap's /dev is a tmpfs with no size it can set: a red-team kernel parked 1.2 GB there.
    found = isolation.probe()
    if not found.available:
        pytest.skip(f"no isolation here: {found.reason}")
    command = isolation.command(["sh"], env={"PATH": "/usr/bin:/bin"}, readable=[], hidden=[], gpu=False)
    probe = ("touch /dev/ks_probe 2>/dev/null && echo dev-writable; touch /dev/shm/ks_probe && echo shm-ok; "
             "echo x > /dev/null && echo null-ok")
    seen = subprocess.run([*command[:-1], "sh", "-c", probe], capture_output=True, text=True, timeout=60).stdout.split()
    assert seen == ["shm-ok", "null-ok"], seen


I386_KEYCTL = r"""
long key_i386(void) {
  long ret;  /* keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING) through the i386 ABI */
  __asm__ volatile ("int $0x80" : "=a"(ret) : "a"(288), "b"(0), "c"(-3), "d"(0) : "memory");
  return ret;
}
"""


def test_the_key_calls_are_refused_through_the_other_abi_too(tmp_path: Path) -> None:
    # Native code can enter the kernel through i386's `int 0x80`, where keyctl has another number
    # (288): the filter checks that architecture as well (it answered before the filter, here).
    import shutil

    if platform.machine() != "x86_64" or shutil.which("gcc") is None:
        pytest.skip("an x86-64 host with gcc")
    lib = tmp_path / "i386key.so"
    (tmp_path / "k.c").write_text(I386_KEYCTL)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "k.c")], check=True)
    probe = (
        "import ctypes, sys\n"
        "from sandbox.runner import seccomp\n"
        "lib = ctypes.CDLL(sys.argv[1]); lib.key_i386.restype = ctypes.c_long\n"
        "print(seccomp.install())\n"
        "print('i386', lib.key_i386())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(lib)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "refused (seccomp)" in out.stdout and f"i386 -{errno.EPERM}" in out.stdout, out.stdout + out.stderr


def _bytes_of(tensor: torch.Tensor) -> set[int]:
    """Every byte address a tensor's elements cover, counted one by one."""
    size = tensor.element_size()
    index = torch.zeros(tensor.shape, dtype=torch.int64)
    for dim, (n, stride) in enumerate(zip(tensor.shape, tensor.stride(), strict=True)):
        shape = [1] * tensor.dim()
        shape[dim] = n
        index = index + (torch.arange(n) * stride).view(shape)
    starts = {tensor.data_ptr() + int(i) * size for i in index.flatten().tolist()}
    return {s + k for s in starts for k in range(size)}


@pytest.mark.parametrize("search_steps", [100_000, 1])
def test_outputs_meet_exactly_where_their_bytes_do(search_steps: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # The runner calls a kept output overwritten when a later call's output meets it. Slices of one
    # workspace meet only where their bytes do, whatever their layout: compared with the bytes counted
    # one by one over random views (shapes, strides, offsets, element sizes) of one storage. With one
    # step of search allowed, every undecided pair is settled by marking bytes instead.
    from sandbox.runner import overlap
    from sandbox.runner.overlap import meet as _meet

    monkeypatch.setattr(overlap, "SEARCH_STEPS", search_steps)
    overlap.layouts_meet.cache_clear()  # decided layouts are remembered: decide these afresh

    generator = torch.Generator().manual_seed(7)

    def pick(high: int) -> int:
        return int(torch.randint(0, high, (1,), generator=generator))

    storage = torch.zeros(4096, dtype=torch.uint8)
    agreed = met = 0
    for _ in range(2000):
        views = []
        for _ in range(2):
            dtype = [torch.uint8, torch.int16, torch.float32, torch.float64][pick(4)]
            base = storage[pick(8):].view(torch.uint8)
            dims = 1 + pick(3)
            shape = [1 + pick(6) for _ in range(dims)]
            stride = [pick(20) for _ in range(dims)]
            size = torch.tensor([], dtype=dtype).element_size()
            offset = pick(200)
            reach = offset + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) + 1
            if reach * size > base.numel() - 8:
                continue
            raw = base[: base.numel() // size * size]
            views.append(raw.view(dtype).as_strided(shape, stride, offset) if raw.data_ptr() % size == 0 else None)
        if len(views) < 2 or None in views:
            continue
        first, second = views
        expected = bool(_bytes_of(first) & _bytes_of(second))
        assert _meet(first, second) == expected, (first.shape, first.stride(), second.shape, second.stride())
        agreed += 1
        met += expected
    assert agreed > 200 and 0 < met < agreed  # both answers were asked for


def test_interleaved_ring_slots_do_not_meet() -> None:
    # The red-team's legitimate kernel that was refused: slot k of a ring is ws[:, :, k], so every slot's
    # byte range spans the whole ring, yet no two slots share a byte; the same slot twice does.
    from sandbox.runner.overlap import meet as _meet

    ring = torch.empty((512, 256, 32))
    assert not any(_meet(ring[:, :, 3], ring[:, :, k]) for k in range(32) if k != 3)
    assert _meet(ring[:, :, 5], ring[:, :, 5])
    assert _meet(ring[:, :, 5], ring[7])  # a row of slots meets the slot that runs through it
    blocks = torch.empty(32 * 4096)
    assert not _meet(blocks[:4096], blocks[4096:8192]) and _meet(blocks[:4097], blocks[4096:8192])


@pytest.mark.parametrize("behaviour", ["agrees", "disagrees", "cannot build"])
def test_the_gpu_fold_is_used_only_where_it_gives_the_torch_trees_value(behaviour: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # The judge and the runner must never disagree on a digest because of the GPU's fold: before it is
    # trusted in a process it is run on probe rows beside the torch tree, and any failure or difference
    # leaves the torch tree in use (its value is the same by construction). The kernel itself is
    # tested on a GPU (tests/test_gpu.py); here its place is taken by functions that behave each way.
    from sandbox.shared import fold
    from sandbox.shared.blend import _K1, _K2, LANES, TOP_ROWS, torch_tree

    def wrong(rows: torch.Tensor, *_: object) -> torch.Tensor:
        return torch_tree(rows) ^ 1

    def broken(rows: torch.Tensor, *_: object) -> torch.Tensor:
        raise RuntimeError("no kernel image for this device")

    stand_in = {"agrees": lambda rows, *_: torch_tree(rows), "disagrees": wrong, "cannot build": broken}[behaviour]
    monkeypatch.setattr(fold, "_WORKS", None)
    monkeypatch.setattr(fold, "triton", object())
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(fold, "_fold", stand_in)
    rows = torch.randint(-(1 << 62), 1 << 62, (300, LANES), dtype=torch.int64)
    folded = fold.fold(rows, TOP_ROWS, _K1, _K2)
    if behaviour == "agrees":
        assert folded is not None and torch.equal(folded, torch_tree(rows)) and fold._WORKS is True
    else:
        assert folded is None and fold._WORKS is False
        assert fold.fold(rows, TOP_ROWS, _K1, _K2) is None  # decided once for the process


def test_the_runners_own_step_times_are_read_as_three_numbers_or_not_at_all() -> None:
    # The runner says what its clock saw of each call's steps; the judge shows the medians beside a
    # refusal and never uses them, so anything but three finite, non-negative numbers is dropped.
    from sandbox.judge.bound import step_medians
    from sandbox.judge.session import _said_times

    def _steps(value: Any) -> tuple[float, ...] | None:
        return _said_times(value, 3)

    assert _steps([1, 2.5, 3]) == (1.0, 2.5, 3.0)
    for bad in ([1, 2], [1, True, 3], [1, -1, 3], "1,2,3", [1e13, 0, 0], None, [1, float("nan"), 2]):
        assert _steps(bad) is None, bad
    calls = [SimpleNamespace(steps_us=(1.0, 10.0, 100.0)), SimpleNamespace(steps_us=None),
             SimpleNamespace(steps_us=(3.0, 30.0, 300.0)), SimpleNamespace(steps_us=(2.0, 20.0, 200.0))]
    assert step_medians(calls) == [2.0, 20.0, 200.0]
    assert step_medians([SimpleNamespace(steps_us=None)]) is None


@pytest.mark.parametrize("kind, contradicted, accepted", [("gpu", 3, True), ("gpu", 4, False), ("cpu", 1, True),
                                                          ("cpu", 2, False)])
def test_a_contradicted_timing_is_measured_again_before_it_is_refused(kind: str, contradicted: int, accepted: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # On a GPU host the runner's own work slowed for seconds at a time: up to four attempts there, two on
    # the CPU; the first that agrees stands and says so, and a refusal says how often it was measured.
    from sandbox.judge import evaluation

    monkeypatch.setattr(evaluation, "RETRY_PAUSE_S", {"cpu": 0.0, "gpu": 0.0})
    attempts: list[int] = []

    def run() -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) <= contradicted:
            raise IntegrityViolation("timing-contradicted", f"seen {len(attempts)}")
        return {"judge": {}}

    if accepted:
        stats = evaluation._retried(run, kind)
        assert len(attempts) == contradicted + 1 and stats["judge"]["retried"].endswith("(seen 1)")
        return
    with pytest.raises(IntegrityViolation) as refused:
        evaluation._retried(run, kind)
    assert len(attempts) == contradicted
    assert refused.value.reason == f"seen {contradicted} (measured {contradicted} times, contradicted each time)"


@pytest.mark.parametrize("outcomes, paired", [
    (["base", "base", "ok"], "the base's own timing was contradicted 2 times before the pair agreed"),
    (["candidate", "base", "ok"], "the base's own timing was contradicted once before the pair agreed"),
    (["base", "base", "base", "base"], None),
    # the base's attempts are its own: three of them never leave the candidate a single one
    (["base", "base", "base", "candidate", "ok"],
     "the base's own timing was contradicted 3 times before the pair agreed")])
def test_a_paired_base_contradicted_by_the_judges_clock_is_measured_again(outcomes: list[str], paired: str | None,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # A base refused by the bound is the host's noise as often as a candidate is: the pair is measured again
    # on the same count of attempts, and after the last the candidate's own figures stand, unpaired.
    from sandbox.judge import evaluation

    monkeypatch.setattr(evaluation, "RETRY_PAUSE_S", {"cpu": 0.0, "gpu": 0.0})
    seen: list[str] = []

    def run() -> dict[str, Any]:
        outcome = outcomes[len(seen)]
        seen.append(outcome)
        if outcome == "candidate":
            raise IntegrityViolation("timing-contradicted", "the candidate's")
        if outcome == "base":
            raise evaluation._BaseContradicted({"judge": {}, "paired": {"error": f"base {len(seen)}"}})
        return {"judge": {}, "paired": {"ratio": 1.1}}

    if paired is None:  # every attempt's base contradicted: the evaluation decides on a fresh runner for it
        with pytest.raises(evaluation._BaseContradicted) as gave_up:
            evaluation._retried(run, "gpu")
        assert seen == outcomes and gave_up.value.attempts == 4
        assert gave_up.value.stats["paired"]["error"] == "base 4"
        return
    stats = evaluation._retried(run, "gpu")
    assert seen == outcomes
    assert stats["paired"] == {"ratio": 1.1, "measured_again": paired}
    assert ("retried" in stats["judge"]) == ("candidate" in outcomes)


def test_only_a_contradiction_is_measured_again_and_only_while_the_phase_has_room(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.judge import evaluation

    monkeypatch.setattr(evaluation, "RETRY_PAUSE_S", {"cpu": 0.0, "gpu": 0.0})
    attempts: list[str] = []

    def wrong() -> dict[str, Any]:
        attempts.append("wrong")
        raise IntegrityViolation("timed-output-wrong", "a wrong output is never a clock's noise")

    with pytest.raises(IntegrityViolation):
        evaluation._retried(wrong, "gpu")
    assert attempts == ["wrong"]

    def slow() -> dict[str, Any]:
        attempts.append("slow")
        time.sleep(0.05)
        raise IntegrityViolation("timing-contradicted", "contradicted")

    with pytest.raises(IntegrityViolation):  # 0.1 s left: no room for four more attempts of 0.05 s
        evaluation._retried(slow, "gpu", deadline=time.monotonic() + 0.1)
    assert attempts == ["wrong", "slow"]
