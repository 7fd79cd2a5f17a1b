"""The released twins' table (README and docs/releases.md): what each twin cost to build and what
its gates measured, rendered from the manifests alone so that no figure is typed in."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ltopd.models.manifest import MANIFEST, read_manifest, reduced_key

BEGIN, END = "<!-- releases:begin (ltopd release-report) -->", "<!-- releases:end -->"


def manifests(release_dir: str | Path) -> dict[str, dict[str, Any]]:
    """backbone folder name -> manifest, for every release under `release_dir`."""
    root = Path(release_dir)
    return {p.parent.name: read_manifest(p.parent) for p in sorted(root.glob(f"*/{MANIFEST}"))}


def _size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file()) / 2**20


def render(found: Mapping[str, Mapping[str, Any]], release_dir: str | Path, missing: Sequence[str] = ()) -> str:
    """Markdown: one cost line per twin (a warm-started build says from where), then per
    benchmark its n, both baselines (question-only, blind twin; "n/a" in manifests before the
    blind twin), full / reduced and the gate verdict."""
    root = Path(release_dir)
    lines = []
    for name, m in found.items():
        cost, gates = m["pretraining"], m["gates"]
        lines += [f"**{name}** (`{root / name}`, {_size_mb(root / name):.1f} MB): {cost['parameters']:,} parameters, "
                  f"{cost['steps']:,} updates of {m['recipe']['pretrain']['batch_size']} in "
                  f"{cost['wall_s'] / 60:.0f} min of pretraining wall time on CPU{_warm_start(cost)}; "
                  f"gates passed on {len(gates['passed'])} of {len(gates['benchmarks'])} benchmark twins "
                  "(held-out items per benchmark: column n).", ""] + _probe_line(m) + gate_table(gates)
        lines.append("")
    for name in missing:
        lines += [f"**{name}**: not released yet (`{root / name}` missing); a run that needs it builds it first.", ""]
    return "\n".join(lines).rstrip() + "\n"


def gate_table(gates: Mapping[str, Any]) -> list[str]:
    """A manifest's (or ltopd.twins.build.twin_gates') gates as markdown table lines."""
    s = gates["settings"]
    reduced = reduced_key(s)
    lines = [f"| benchmark | n | question-only (out of sample) | blind twin | full tokens | "
             f"{s['selector']} {100 * s['ratio']:g}% | retain % | full - QO (SE) | gate (>= 3 SE over both) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for bench, g in gates["benchmarks"].items():
        retain = "n/a" if g["retain"] is None else f"{g['retain']:.1f}"
        blind = "n/a" if "blind" not in g else f"{g['blind']:.1f}"  # manifests before the blind twin
        margins = f"{g['margin_se']:+.1f} SE"
        if "blind" in g:
            margins += f"; blind {g['blind_margin_se']:+.1f} SE"
        if g.get("asked"):
            margins += f"; asked {g['asked']}"
        lines.append(f"| {bench} | {g['n']} | {g['question_only']:.1f} | {blind} | {g['full']:.1f} | "
                     f"{g[reduced]:.1f} | {retain} | {g['diff']:+.1f} ({g['se']:.1f}) | "
                     f"{'pass' if g['passed'] else 'fail'} ({margins}) |")
    return lines


def _warm_start(cost: Mapping[str, Any]) -> str:
    """Where a warm-started build began (ltopd.twins.build.warm_start)."""
    start = cost.get("warm_start")
    if start and start.get("mode") == "continues":  # its own stages after a parent's (twins.build.continue_release)
        return (f", continuing the release `{start['parent']}` ({start['steps']:,} updates, "
                f"{start['wall_s'] / 60:.0f} min)")
    if not start:
        return ""
    return (f" ({(cost['wall_s'] - start['wall_s']) / 60:.0f} min of it in this build, warm-started from the "
            f"release of its first {start['steps']:,} updates)")


def _probe_line(m: Mapping[str, Any]) -> list[str]:
    """The held-out probe of the pretraining recipe (does the twin read the image at all?)."""
    probe, heldout = m["pretraining"].get("probe") or {}, m["recipe"]["pretrain"].get("heldout") or {}
    if "full/all" not in probe:
        return []
    reduced = ", ".join(f"{k.split('-')[0]} {100 * heldout.get('ratio', 0):g}% {v:.3f}" for k, v in probe.items()
                        if k.endswith("/all") and not k.startswith("full"))
    return [f"Held-out probe ({heldout.get('n', '?')} questions on {', '.join(heldout.get('tasks', []))}): "
            f"question-only {probe['question_only']:.3f}, full tokens {probe['full/all']:.3f}, {reduced}.", ""]


def update_block(text: str, table: str) -> str:
    """`text` with the block between BEGIN and END replaced by `table`."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"no {BEGIN} ... {END} block to update")
    return pattern.sub(lambda _: f"{BEGIN}\n{table}{END}", text)
