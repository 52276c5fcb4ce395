"""The judge reads a CPU kernel's outputs where they lie in the runner's memory (sandbox/judge/remote.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch

from sandbox.judge import remote
from sandbox.judge.remote import READ_FACTOR, READ_SLACK, SPAN_FACTOR, SPAN_SLACK, ReadBudget, RunnerMemory, new_token
from sandbox.shared.arena import ArenaError, parse_spec

# A process that holds a token and a 6x8 float32 tensor 0..47, says where both lie, and waits.
_HOLDER = """
import sys, torch
token = torch.frombuffer(bytearray(bytes.fromhex(sys.argv[1])), dtype=torch.uint8)
held = torch.arange(48, dtype=torch.float32).reshape(6, 8)
print(token.data_ptr(), held.data_ptr(), flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="module")
def holder() -> Iterator[tuple[subprocess.Popen[str], bytes, int, int]]:
    token = new_token()
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, token.hex()], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    token_at, held_at = (int(x) for x in proc.stdout.readline().split())
    yield proc, token, token_at, held_at
    proc.kill()
    proc.wait()


def _spec(address: int, shape: list[int], stride: list[int], dtype: str = "float32") -> dict[str, object]:
    return {"dtype": dtype, "shape": shape, "stride": stride, "address": address}


def test_the_probe_reads_the_token_back_and_outputs_come_out_with_their_layout(holder) -> None:
    proc, token, token_at, held_at = holder
    memory, why = RunnerMemory.probe(proc.pid, token_at, token)
    assert memory is not None, why
    expected = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    assert torch.equal(memory.tensor(_spec(held_at, [6, 8], [8, 1]), ReadBudget(192)), expected)
    # A strided view (every other column, transposed) reads as that view, and only its span is copied.
    assert torch.equal(memory.tensor(_spec(held_at, [4, 6], [2, 8]), ReadBudget(96)), expected[:, ::2].t())
    memory.close()


def test_a_span_larger_than_a_piece_is_read_piece_by_piece(holder, monkeypatch: pytest.MonkeyPatch) -> None:
    # A slot of a ring interleaved along its last axis spans far more than it holds; the judge reads such
    # a span a piece at a time (here 40 bytes), so its own memory holds no more than a piece of it.
    proc, token, token_at, held_at = holder
    memory, _ = RunnerMemory.probe(proc.pid, token_at, token)
    assert memory is not None
    monkeypatch.setattr(remote, "PIECE", 40)
    expected = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    assert torch.equal(memory.tensor(_spec(held_at, [6, 8], [8, 1]), ReadBudget(192)), expected)
    assert torch.equal(memory.tensor(_spec(held_at + 4, [6, 2], [8, 3]), ReadBudget(48)), expected[:, 1:5:3])
    assert torch.equal(memory.tensor(_spec(held_at, [48], [1]), ReadBudget(192)), expected.reshape(-1))


def test_the_probe_fails_where_the_token_is_not(holder) -> None:
    proc, token, token_at, held_at = holder
    memory, why = RunnerMemory.probe(proc.pid, held_at, token)
    assert memory is None and "other bytes" in why
    memory, why = RunnerMemory.probe(proc.pid, "here", token)
    assert memory is None and "no place" in why


def test_a_spec_beyond_what_the_output_could_span_is_refused_before_any_read(holder) -> None:
    proc, token, token_at, held_at = holder
    memory, _ = RunnerMemory.probe(proc.pid, token_at, token)
    assert memory is not None
    limit = SPAN_FACTOR * 192 + SPAN_SLACK
    with pytest.raises(ArenaError, match="more than"):
        memory.tensor(_spec(held_at, [limit + 1], [1], "uint8"), ReadBudget(192))  # holds past the limit
    through_mem = RunnerMemory(proc.pid, os.open(f"/proc/{proc.pid}/mem", os.O_RDONLY), vm_readv=False)
    with pytest.raises(ArenaError, match="to read"):  # a span read whole (no runs through /proc/PID/mem) past it
        through_mem.tensor(_spec(held_at, [2, 2], [READ_FACTOR * 192 + READ_SLACK, 1]), ReadBudget(192))
    through_mem.close()
    with pytest.raises(ArenaError, match="to read"):  # neither its span nor its runs (their reads' floors) fit
        memory.tensor(_spec(held_at, [4 << 20], [64], "uint8"), ReadBudget(1 << 20))
    with pytest.raises(ArenaError, match="more than"):
        memory.tensor(_spec(held_at, [1 << 30], [0]), ReadBudget(192))  # spans 4 bytes, holds 4 GB once made dense
    with pytest.raises(ArenaError, match="malformed"):
        memory.tensor(_spec(held_at, [2, 3], [1]), ReadBudget(192))


def test_memory_the_runner_has_not_mapped_reads_as_the_runners_error(holder) -> None:
    proc, token, token_at, held_at = holder
    memory, _ = RunnerMemory.probe(proc.pid, token_at, token)
    assert memory is not None
    with pytest.raises(ArenaError, match="cannot be read"):
        memory.tensor(_spec(4096, [16], [1]), ReadBudget(64))  # the first pages are never mapped
    with pytest.raises(ArenaError, match="cannot be read"):  # read run by run: the second run lies past the heap
        memory.tensor(_spec(held_at, [2, 2], [1 << 40, 1]), ReadBudget(16))
    with pytest.raises(ArenaError, match="past any address"):
        memory.tensor(_spec(held_at, [1 << 10], [1 << 47]), ReadBudget(1 << 12))


def test_a_view_far_sparser_than_its_span_is_read_run_by_run(holder, monkeypatch: pytest.MonkeyPatch) -> None:
    # Red-team round 30's softmax returned its rows at a pitch of 131,072 elements: 2 MB of elements over a
    # 268 MB span, refused before as no output of this call. Such a view is read where its elements lie,
    # many runs a system call (here at most 2, so one view takes several), whatever order its strides are in.
    proc, token, token_at, held_at = holder
    memory, _ = RunnerMemory.probe(proc.pid, token_at, token)
    assert memory is not None
    monkeypatch.setattr(remote, "LEAF_CHARGE", 1)  # a few bytes are cheaper read run by run
    monkeypatch.setattr(remote, "RUN_CHARGE", 1)
    monkeypatch.setattr(remote, "IOV_MAX", 2)
    expected = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    budget = ReadBudget(1024)
    left = budget.read_left
    assert torch.equal(memory.tensor(_spec(held_at, [3, 2], [16, 1]), budget), expected[::2, :2])
    assert left - budget.read_left == 3 * 2 * 4  # its elements' bytes, not its span's 136
    assert torch.equal(memory.tensor(_spec(held_at + 4, [2, 3, 2], [1, 16, 2]), budget),
                       expected[::2, 1:5].reshape(3, 2, 2).permute(2, 0, 1))
    assert torch.equal(memory.tensor(_spec(held_at, [3, 4, 2], [16, 0, 1]), budget),
                       expected[::2, :2].unsqueeze(1).expand(3, 4, 2))  # a broadcast dimension is read once


def test_reading_through_proc_mem_gives_the_same_bytes(holder) -> None:
    # Where process_vm_readv is refused (a container's seccomp profile), /proc/PID/mem, opened before
    # any candidate code, serves instead.
    proc, token, token_at, held_at = holder
    probed, _ = RunnerMemory.probe(proc.pid, token_at, token)
    assert probed is not None
    memory = RunnerMemory(proc.pid, os.open(f"/proc/{proc.pid}/mem", os.O_RDONLY), vm_readv=False)
    assert torch.equal(memory.tensor(_spec(held_at, [6, 8], [8, 1]), ReadBudget(192)),
                       probed.tensor(_spec(held_at, [6, 8], [8, 1]), ReadBudget(192)))
    memory.close()


def test_one_outputs_tensors_share_one_budget(holder, monkeypatch: pytest.MonkeyPatch) -> None:
    # Red-team round 30 returned 70,000 references to one tensor, each within the limits alone; the
    # judge's copies filled its memory. An output's tensors together may hold SPAN_FACTOR times its bytes.
    proc, token, token_at, held_at = holder
    memory, _ = RunnerMemory.probe(proc.pid, token_at, token)
    assert memory is not None
    monkeypatch.setattr(remote, "LEAF_CHARGE", 1)  # what is held runs out first
    budget = ReadBudget(192)
    for _ in range((SPAN_FACTOR * 192 + SPAN_SLACK) // 192):
        memory.tensor(_spec(held_at, [6, 8], [8, 1]), budget)
    with pytest.raises(ArenaError, match="holds"):
        memory.tensor(_spec(held_at, [6, 8], [8, 1]), budget)


def test_a_layout_read_again_and_again_stops_at_the_read_budget(holder, monkeypatch: pytest.MonkeyPatch) -> None:
    # Cut into pieces along its widest stride, a view whose other strides overlap reads most of its span
    # once per piece (red-team round 30: 32 TiB from a spec within both single limits). Every byte read
    # is charged: here pieces of 8 bytes over a 21-byte span, 2**6 of them.
    proc, token, token_at, held_at = holder
    memory, _ = RunnerMemory.probe(proc.pid, token_at, token)
    assert memory is not None
    monkeypatch.setattr(remote, "PIECE", 8)
    monkeypatch.setattr(remote, "READ_FACTOR", 1)
    monkeypatch.setattr(remote, "READ_SLACK", 100)
    spec = _spec(held_at, [2] * 6 + [2], [3] * 6 + [2], "uint8")
    with pytest.raises(ArenaError, match="past"):
        memory.tensor(spec, ReadBudget(64))


def test_each_read_is_charged_at_least_a_floor(holder) -> None:
    # Cut into tiny pieces, a layout would cost a system call per byte within the budget; each read costs
    # at least LEAF_CHARGE, so an output's reads are few whatever their sizes.
    proc, token, token_at, held_at = holder
    memory, _ = RunnerMemory.probe(proc.pid, token_at, token)
    assert memory is not None
    budget = ReadBudget(192)
    reads = (READ_FACTOR * 192 + READ_SLACK) // remote.LEAF_CHARGE
    for _ in range(reads):
        memory.tensor(_spec(held_at, [1], [1]), budget)
    with pytest.raises(ArenaError, match="past"):
        memory.tensor(_spec(held_at, [1], [1]), budget)


def test_two_columns_of_a_large_intermediate_fit_one_outputs_budget() -> None:
    # Two columns of one 4096x4096 buffer, returned as a tuple, span 64 MB each for 16 KB of elements: read
    # whole, the pair passed the output's read budget; run by run (a page charged per element) it fits.
    column = parse_spec(_spec(1 << 20, [4096], [4096]), "address")
    budget = ReadBudget(2 * 4096 * 4)
    assert 2 * remote.Runs.of(column).cost() <= budget.read_left < 2 * column.span
