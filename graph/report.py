"""A run's report: one self-contained HTML file (inline CSS, figures embedded as base64 PNG) and
the same figures as PNG files beside it."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from pydantic import BaseModel

from graph.archive import Archive
from graph.plots import FIGURES, write_figures
from graph.report_data import KernelPoint, ReportData, collect_report
from graph.run_data import VERIFIED_NOTE, num, num_interval, ratio, seed_ratio_text

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 2rem auto;
       max-width: 1100px; color: #222; line-height: 1.45; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
.sub { color: #666; margin-top: 0; }
.cards { display: flex; flex-wrap: wrap; gap: .8rem; margin: 1rem 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: .6rem .9rem; min-width: 9rem; }
.card .v { font-size: 1.25rem; font-weight: 600; } .card .k { color: #666; font-size: .8rem; }
table { border-collapse: collapse; margin: .6rem 0; font-size: .88rem; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; text-align: left; }
th { background: #f5f5f5; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #666; font-size: .85rem; }
pre.diff { background: #fafafa; border: 1px solid #ddd; padding: .6rem; overflow-x: auto; font-size: .8rem; }
pre.diff .add { background: #e6ffec; color: #1a7f37; display: block; }
pre.diff .del { background: #ffebe9; color: #cf222e; display: block; }
pre.diff .hunk { color: #8250df; display: block; }
ul.tree, ul.tree ul { list-style: none; padding-left: 1.2rem; border-left: 1px dashed #ccc; }
ul.tree li { margin: .15rem 0; } .plan { color: #555; font-style: italic; } .failed { color: #cf222e; }
.best { font-weight: 700; color: #1f77b4; }
"""


class ReportFiles(BaseModel):
    html: Path
    figures: dict[str, Path]


def e(value: object) -> str:
    return html.escape(str(value))


def _table(header: list[str], rows: list[list[str]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(name: str, png: bytes | None) -> str:
    if png is None:
        return ""
    caption = FIGURES[name][0]
    data = base64.b64encode(png).decode()
    return (
        f'<figure id="fig-{name}"><img alt="{e(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{e(caption)} ({e(name)}.png)</figcaption></figure>"
    )


def _cards(data: ReportData) -> str:
    pct_sol = (
        f"{100 * data.baselines.sol_geomean_us / data.best_geomean_us:.1f}%"
        if data.baselines.sol_geomean_us and data.best_geomean_us
        else "-"
    )
    ref = data.baselines.reference_geomean_us
    vs_ref = ref / data.best_geomean_us if ref and data.best_geomean_us else None  # the run's one baseline
    total_cost = sum(s.cost_usd for s in data.spend)
    total_tokens = sum(s.input_tokens + s.output_tokens for s in data.spend)
    cards = [
        ("best kernel", f"{data.best_id or '-'}"),
        ("best geometric mean [95%]", num_interval(data.best_geomean_us, data.best_geomean_ci_us, "µs")),
        ("speed-up over the seed", data.over_seed_text or ratio(data.speedup_over_seed)),
        ("against PyTorch", ratio(vs_ref)),
        ("of the speed of light", pct_sol),
        ("experiments (failed)", f"{data.experiments} ({data.failed_experiments})"),
        ("LLM tokens · cost", f"{total_tokens} · ${total_cost:.4f}"),
    ]
    return (
        '<div class="cards">'
        + "".join(f'<div class="card"><div class="v">{e(v)}</div><div class="k">{e(k)}</div></div>' for k, v in cards)
        + "</div>"
    )


def _leaderboard(data: ReportData) -> str:
    rows = [
        [
            str(r.rank),
            f"<b>{e(r.id)}</b>",
            str(r.generation),
            e(r.origin),
            e(",".join(r.parents) or "-"),
            num_interval(r.geomean_us, r.geomean_ci_us) + (" (busy host)" if r.noisy else ""),
            seed_ratio_text(r.vs_seed, r.vs_seed_verified),
            ratio(r.vs_reference),
            e(r.title),
        ]
        for r in data.leaderboard
    ]
    if not rows:
        return "<p>No correct kernel yet.</p>"
    header = ["#", "kernel", "generation", "origin", "parents", "geomean µs [95%]", "vs seed", "vs PyTorch", "plan"]
    return _table(header, rows, numeric={5, 6, 7}) + f"<p>{e(VERIFIED_NOTE)}</p>"


def _generations(data: ReportData) -> str:
    rows = [
        [str(g.generation), e(g.best_id or "-"), num(g.best_geomean_us), "yes" if g.improved else "no"]
        for g in data.generations
    ]
    ref, sol = data.baselines.reference_geomean_us, data.baselines.sol_geomean_us
    note = f"<p>PyTorch reference: {num(ref)} µs · speed of light: {num(sol)} µs (geometric means).</p>"
    return note + _table(["generation", "best kernel", "best geomean µs", "improved"], rows, numeric={2})


def _shapes(data: ReportData) -> str:
    shapes = data.baselines.shapes or sorted({s for t in data.shape_times.values() for s in t})
    kernel_ids = list(data.shape_times)
    header = [
        "shape",
        *[f"{k}{' (seed)' if k == data.seed_id else ''} µs" for k in kernel_ids],
        "PyTorch µs",
        "speed of light µs",
    ]
    rows = [
        [
            e(s),
            *[num(data.shape_times[k].get(s)) for k in kernel_ids],
            num(data.baselines.reference_us.get(s)),
            num(data.baselines.sol_us.get(s)),
        ]
        for s in shapes
    ]
    return _table(header, rows, numeric=set(range(1, len(header))))


def _tree(data: ReportData) -> str:
    kids: dict[str | None, list[KernelPoint]] = {}
    for k in data.kernels:
        kids.setdefault(k.parent, []).append(k)

    def item(k: KernelPoint, depth: int) -> str:
        klass = "best" if k.id == data.best_id else ("failed" if k.geomean_us is None else "")
        result = f"{num(k.geomean_us)} µs" if k.geomean_us is not None else k.status
        edge = "" if k.parent is None else f'<span class="plan">— {e(k.title)} →</span> '
        label = f'{edge}<span class="{klass}" id="kernel-{e(k.id)}">{e(k.id)}</span> (generation {k.generation}, {e(result)})'
        sub = kids.get(k.id, [])
        inner = "<ul>" + "".join(item(c, depth + 1) for c in sub) + "</ul>" if sub and depth < 400 else ""
        return f"<li>{label}{inner}</li>"

    roots = kids.get(None, [])
    return '<ul class="tree">' + "".join(item(r, 0) for r in roots) + "</ul>" if roots else "<p>No kernels.</p>"


def _diff(data: ReportData) -> str:
    if not data.diff:
        return "<p>The best kernel is the seed: nothing to compare.</p>"
    lines = []
    for line in data.diff.splitlines():
        if line.startswith(("+++", "---")):
            lines.append(f"<b>{e(line)}</b>\n")
        elif line.startswith("@@"):
            lines.append(f'<span class="hunk">{e(line)}</span>')
        elif line.startswith("+"):
            lines.append(f'<span class="add">{e(line)}</span>')
        elif line.startswith("-"):
            lines.append(f'<span class="del">{e(line)}</span>')
        else:
            lines.append(e(line) + "\n")
    return f'<pre class="diff">{"".join(lines)}</pre>'


def _source(data: ReportData) -> str:
    if not data.best_source:
        return "<p>No kernel passed yet.</p>"
    return f'<pre class="diff">{e(data.best_source)}</pre>'


def _spend(data: ReportData) -> str:
    rows = [
        [e(s.role), str(s.calls), str(s.input_tokens), str(s.output_tokens), f"{s.cost_usd:.4f}"] for s in data.spend
    ]
    if not rows:
        return "<p>No LLM calls (a Tuner-only run).</p>"
    return _table(["role", "calls", "input tokens", "output tokens", "cost USD"], rows, numeric={1, 2, 3, 4})


def render_html(data: ReportData, figures: dict[str, bytes]) -> str:
    directives = "".join(f"<li>{e(d)}</li>" for d in data.directives) or "<li>none</li>"
    stopped = f" · stopped: {e(data.stop_reason)}" if data.stop_reason else ""
    sections = [
        ("leaderboard", "Leaderboard", _leaderboard(data) + _figure("leaderboard", figures.get("leaderboard"))),
        ("progress", "Best time per generation", _figure("progress", figures.get("progress")) + _generations(data)),
        ("shapes", "Per-shape results of the best kernels", _shapes(data) + _figure("shapes", figures.get("shapes"))),
        ("lineage", "Lineage", _figure("lineage", figures.get("lineage")) + _tree(data)),
        (
            "diff",
            f"The best kernel ({e(data.best_id or '-')}) against the seed ({e(data.seed_id or '-')})",
            _diff(data),
        ),
        ("source", f"The best kernel's source ({e(data.best_id or '-')})", _source(data)),
        ("spend", "LLM spend per role", _spend(data) + _figure("spend", figures.get("spend"))),
        ("directives", "Directives", f"<ul>{directives}</ul>"),
    ]
    body = "".join(f'<section id="{sid}"><h2>{title}</h2>{content}</section>' for sid, title, content in sections)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>Kernel Scientist · {e(data.run_id)}</title>'
        f"<style>{CSS}</style></head><body>"
        f"<header><h1>Kernel Scientist report: {e(data.problem)} on {e(data.target)}</h1>"
        f'<p class="sub">run {e(data.run_id)} · started {e(data.created_at or "-")} · status {e(data.status)}{stopped}</p>'
        f"{_cards(data)}</header>{body}</body></html>\n"
    )


def write_report(archive: Archive, run_id: str, target: str, out_dir: Path) -> ReportFiles:
    """`index.html` and the PNG figures in out_dir."""
    data = collect_report(archive, run_id, target)
    figures = write_figures(data, out_dir)
    page = render_html(data, {name: path.read_bytes() for name, path in figures.items()})
    html_path = out_dir / "index.html"
    html_path.write_text(page, encoding="utf-8")
    return ReportFiles(html=html_path, figures=figures)
