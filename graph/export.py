"""Export a run's kernel as a submission file in the competition's format."""

from __future__ import annotations

from pathlib import Path

from graph.archive import Archive, KernelRecord

# The `#!POPCORN gpus` value of each target.
POPCORN_GPUS = {"hip": "MI300", "cuda": "H100"}


class ExportError(ValueError):
    pass


def submission_text(source: str, leaderboard: str, gpu: str | None) -> str:
    """The source with fresh `#!POPCORN` header lines (any old ones removed)."""
    body = [line for line in source.splitlines() if not line.startswith("#!POPCORN")]
    while body and not body[0].strip():
        body.pop(0)
    header = [f"#!POPCORN leaderboard {leaderboard}"]
    if gpu:
        header.append(f"#!POPCORN gpus {gpu}")
    return "\n".join(header + body) + "\n"


def pick_kernel(archive: Archive, kernel_id: str | None) -> KernelRecord:
    if kernel_id is None:
        best = archive.run_best()
        if best is None:
            raise ExportError("the run has no correct, timed kernel yet")
        return best
    kernel = archive.kernel(kernel_id)
    if kernel is None:
        raise ExportError(f"no kernel {kernel_id!r} in this run")
    if not kernel.ok:
        raise ExportError(f"kernel {kernel_id} did not pass ({kernel.status}); export a correct one")
    return kernel


def export_kernel(
    archive: Archive,
    out: Path,
    target: str,
    kernel_id: str | None = None,
    leaderboard: str | None = None,
    gpu: str | None = None,
) -> KernelRecord:
    kernel = pick_kernel(archive, kernel_id)
    name = leaderboard or str(archive.get_meta("problem_name") or "kernel")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(submission_text(kernel.source, name, gpu or POPCORN_GPUS.get(target)))
    return kernel
