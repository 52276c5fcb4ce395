"""A kernel source's static report, as the Critic reads it during a run and `show` prints after one.

On a GPU target it is the registers, memory and occupancy of the compiled kernels; on the CPU,
which loops the compiler vectorised (sandbox/static_cpu.py), which no verdict stores. Kept free
of the roles and LangGraph so that `show` imports it at once.
"""

from __future__ import annotations

import logging
from pathlib import Path

from graph.archive import sha256_text

log = logging.getLogger(__name__)


def source_resource_report(source: str, target: str, directory: Path) -> str:
    """The static report of `source` compiled for `target`, written to a file under `directory`
    first (the analysers read a submission file); '' where there is no native source, or on error:
    a report is advice, and its failure must not stop what asked for it."""
    # One file per source: experiments of a generation are reviewed in parallel.
    path = directory / f"review-{sha256_text(source)[:16]}.py"
    try:
        path.write_text(source)
        if target == "cpu":
            from sandbox.static_cpu import analyze_cpu_submission

            report = analyze_cpu_submission(path)
            return report.summary() if report.status != "no_source" else ""
        from sandbox.static_analysis import analyze_submission

        return analyze_submission(path, target).summary()
    except Exception as exc:
        log.info("no resource report: %s", exc)
        return ""
