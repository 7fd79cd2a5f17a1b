"""Build one released twin: pretrain (resumable), gate it on every benchmark twin, publish the
folder with its manifest (ltopd.models.release).

The gates use items no other stage sees: benchmark seeds GATE_SEED (scored) and GATE_SEED + 1
(the question-only baseline's fit set), above every evaluation seed and below the instruction
items' seed space (ltopd.bench.suites.instruct).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ltopd.bench.suites.instruct import GATE_SEED

CHECKPOINT_EVERY = 50  # updates between saved pretraining states (pretrain.checkpoint_every)
DEFAULT_GATES = {"n": 200, "fit_n": 400, "ratio": 0.05, "selector": "cdpruner", "batch_size": 40}


def gate_settings(pt: Mapping[str, Any]) -> dict[str, Any]:
    return {**DEFAULT_GATES, **(pt.get("gates") or {})}


def gate_benchmarks(spec: Mapping[str, Any]) -> list[str]:
    """The synthetic benchmark twins of the profile (real data has no twin to gate on)."""
    return [b for b, entry in spec["evaluation"]["benchmarks"].items() if not entry.get("path")]


def twin_gates(backbone: Any, spec: Mapping[str, Any], progress: bool = False) -> dict[str, Any]:
    """Per benchmark: question-only (out of sample), full tokens, the selector at the gate ratio,
    full - QO with its bootstrap SE, and whether it passes (>= GATE_SE standard errors)."""
    from ltopd.bench.evaluate import evaluate_settings
    from ltopd.bench.suites import synthetic_records
    from ltopd.models.release import reduced_key
    from ltopd.report.gates import gate, question_only

    g = gate_settings(spec["pretrain"])
    floor = spec["reduction"]["floor"]
    out: dict[str, Any] = {"settings": g, "seed": GATE_SEED, "benchmarks": {}}
    for bench in gate_benchmarks(spec):
        records = synthetic_records(bench, g["n"], GATE_SEED, spec["world"])
        fit = synthetic_records(bench, g["fit_n"], GATE_SEED + 1, spec["world"])
        (full_rows, full), (_, reduced) = evaluate_settings(  # one vision pass for both settings
            backbone, records, bench, [(1.0, g["selector"]), (g["ratio"], g["selector"])], floor, g["batch_size"],
            progress=progress)
        qo_rows, _ = question_only([dict(r) for r in full_rows], bench, fit)
        verdict = gate(full_rows, qo_rows, bench)
        out["benchmarks"][bench] = {
            "n": len(records), "question_only": round(verdict.qo, 2), "full": round(full["score"], 2),
            reduced_key(g): round(reduced["score"], 2),
            "retain": round(100 * reduced["score"] / full["score"], 1) if full["score"] else None,
            "diff": round(verdict.diff.estimate, 2), "se": round(verdict.diff.se, 2),
            "margin_se": round(verdict.margin, 2), "passed": verdict.passed,
            "n_unparsed_full": full["n_unparsed"]}
    out["passed"] = sorted(b for b, v in out["benchmarks"].items() if v["passed"])
    return out


def build(spec: Mapping[str, Any], backbone_name: str, tokenizer: Any, state_dir: str | Path, out: str | Path,
          on_step: Callable | None = None, checkpoint_every: int = CHECKPOINT_EVERY,
          progress: bool = True) -> dict[str, Any]:
    """Pretrain `backbone_name`'s twin as `spec` says (resuming from `state_dir`), gate it and
    write the release folder `out` (staged beside it, then renamed). Returns the manifest."""
    from ltopd.atomic import write_json
    from ltopd.models import twin_job
    from ltopd.models.loading import save_backbone
    from ltopd.models.release import MANIFEST, build_manifest

    entry = spec["backbones"][backbone_name]
    start = time.process_time()
    backbone, metrics = twin_job.run(entry["twin"], tokenizer, spec["pretrain"], spec["world"],
                                     spec["reduction"]["floor"], entry.get("lr_scale", 1.0), on_step=on_step,
                                     progress=progress, state_dir=str(state_dir), checkpoint_every=checkpoint_every)
    gates = twin_gates(backbone, spec, progress=progress)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.release.", dir=target.parent))
    try:
        folder = save_backbone(backbone, staging / target.name)
        cost = {"steps": metrics["steps"], "samples": metrics["samples"], "wall_s": metrics["wall_s"],
                "this_call_cpu_s": round(time.process_time() - start, 1), "parameters": metrics["parameters"],
                "loss_first": metrics["loss_first"], "loss_last": metrics["loss_last"],
                "probe": {k: v for k, v in metrics.items() if "/" in k or k == "question_only"}}
        manifest = build_manifest(folder, spec, backbone_name, cost, gates)
        write_json(folder / MANIFEST, manifest)
        if target.exists():
            shutil.rmtree(target)
        folder.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest
