"""Build one released twin: pretrain (resumable), gate it on every benchmark twin, publish the
folder with its manifest (ltopd.twins.release).

The gates use items no other stage sees: benchmark seeds GATE_SEED (scored) and GATE_SEED + 1
(the question-only baseline's fit set), above every evaluation seed and below the instruction
items' seed space (ltopd.bench.suites.instruct).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ltopd.bench.suites.instruct import GATE_SEED

CHECKPOINT_EVERY = 50  # updates between saved pretraining states (pretrain.checkpoint_every)
# Without `n`, a benchmark's gate scores as many items as Table 2 evaluates (evaluation.benchmarks):
# the manifest then resolves what the table resolves. The fit set is at least as large. The reduced
# setting (ratio, selector) has no default: the profile's pretrain.gates gives it, in the twin's recipe.
DEFAULT_GATES = {"fit_n": 400, "batch_size": 40}
GATE_SETTING = ("ratio", "selector")


def gate_settings(pt: Mapping[str, Any]) -> dict[str, Any]:
    g = {**DEFAULT_GATES, **(pt.get("gates") or {})}
    if missing := [k for k in GATE_SETTING if k not in g]:
        raise ValueError(f"pretrain.gates: no {missing}: give the reduced setting a release is gated at")
    return g


def gate_benchmarks(spec: Mapping[str, Any]) -> list[str]:
    """The synthetic benchmark twins of the profile (real data has no twin to gate on)."""
    return [b for b, entry in spec["evaluation"]["benchmarks"].items() if not entry.get("path")]


def twin_gates(backbone: Any, spec: Mapping[str, Any], backbone_name: str | None = None,
               progress: bool = False) -> dict[str, Any]:
    """Per benchmark: question-only (out of sample), the blind twin (these weights without the
    images), full tokens, the selector at the gate ratio, full - QO and full - blind with their
    bootstrap SEs, and whether both clear GATE_SE standard errors (Table 2's gate). A twin taught
    to answer a benchmark evidence-first (its entry's `evidence`) is asked with the instruction."""
    from ltopd.bench.evaluate import evaluate_settings
    from ltopd.bench.evidence import instructed, text_only
    from ltopd.bench.suites import synthetic_records
    from ltopd.models.manifest import reduced_key
    from ltopd.stats.gates import gate, question_only

    g = gate_settings(spec["pretrain"])
    floor = spec["reduction"]["floor"]
    evidence = set((spec["backbones"].get(backbone_name) or {}).get("evidence", ())) if backbone_name else set()
    out: dict[str, Any] = {"settings": g, "seed": GATE_SEED, "benchmarks": {}}
    for bench in gate_benchmarks(spec):
        n = g.get("n") or spec["evaluation"]["benchmarks"][bench]["n"]
        records = synthetic_records(bench, n, GATE_SEED, spec["world"])
        fit = synthetic_records(bench, max(g["fit_n"], n), GATE_SEED + 1, spec["world"])
        if bench in evidence:
            records, fit = [instructed(r, bench) for r in records], [instructed(r, bench) for r in fit]
        (full_rows, full), (_, reduced) = evaluate_settings(  # one vision pass for both settings
            backbone, records, bench, [(1.0, g["selector"]), (g["ratio"], g["selector"])], floor, g["batch_size"],
            progress=progress)
        ((blind_rows, blind),) = evaluate_settings(backbone, [text_only(r) for r in records], bench,
                                                   [(1.0, g["selector"])], floor, g["batch_size"], progress=progress)
        qo_rows, _ = question_only([dict(r) for r in full_rows], bench, fit)
        verdict = gate(full_rows, qo_rows, bench, blind_rows=blind_rows)
        out["benchmarks"][bench] = {
            "n": len(records), "question_only": round(verdict.qo, 2), "blind": round(blind["score"], 2),
            "full": round(full["score"], 2), reduced_key(g): round(reduced["score"], 2),
            "retain": round(100 * reduced["score"] / full["score"], 1) if full["score"] else None,
            "diff": round(verdict.diff.estimate, 2), "se": round(verdict.diff.se, 2),
            "margin_se": round(verdict.margin, 2), "blind_margin_se": round(verdict.blind.margin, 2),
            "passed": verdict.passed, "n_unparsed_full": full["n_unparsed"],
            **({"asked": "evidence-first"} if bench in evidence else {})}
    out["passed"] = sorted(b for b, v in out["benchmarks"].items() if v["passed"])
    return out


WARM_START = "warm_start.json"  # beside the pretraining state: which release it continued
# The parts of a recipe that must equal the parent's for its weights to be the prefix run's.
_SAME_AS_PARENT = ("seed", "batch_size", "warmup_steps", "tokenizer")


def warm_start(spec: Mapping[str, Any], backbone_name: str, parent: str | Path, state_dir: str | Path) -> dict:
    """Seed `state_dir` with the weights of the release `parent` when `spec`'s recipe for this twin
    is the parent's followed by stages, the first of them with `fresh_optimizer`: a build that
    resumes there gives the weights a build from scratch gives (a fresh optimiser needs nothing of
    the earlier run), without rerunning the parent's stages. Returns what the manifest records;
    a recipe that does not continue the parent's is a ReleaseError naming the difference."""
    from ltopd.atomic import write_json
    from ltopd.models.loading import load_backbone
    from ltopd.models.manifest import ReleaseError, verify_weights
    from ltopd.twins import job as twin_job
    from ltopd.twins.pretrain import seed_state
    from ltopd.twins.release import recipe

    manifest = verify_weights(parent)
    mine, theirs = recipe(spec, backbone_name), manifest["recipe"]
    pt, ppt = mine["pretrain"], theirs["pretrain"]
    k = len(ppt["stages"])
    problems = [f"pretrain.{key}: {ppt.get(key)!r} in the parent, {pt.get(key)!r} here"
                for key in _SAME_AS_PARENT if pt.get(key) != ppt.get(key)]
    if mine["world"] != theirs["world"]:
        problems.append("world differs from the parent's")
    if mine["entry"].get("twin") != theirs["entry"].get("twin") or \
            mine["entry"].get("lr_scale", 1.0) != theirs["entry"].get("lr_scale", 1.0):
        problems.append("twin or lr_scale differs from the parent's")
    if pt["stages"][:k] != ppt["stages"]:
        problems.append(f"the first {k} stages are not the parent's")
    elif len(pt["stages"]) == k or not pt["stages"][k].get("fresh_optimizer"):
        problems.append(f"stage {k} (after the parent's) must exist and set `fresh_optimizer: true`")
    if problems:
        raise ReleaseError(f"cannot warm-start {backbone_name} from {parent}: " + "; ".join(problems))
    entry = mine["entry"]
    config = twin_job.pretrain_config(pt, entry.get("lr_scale", 1.0))
    steps = sum(s["steps"] for s in ppt["stages"])
    backbone = load_backbone(parent)
    seed_state(state_dir, backbone.model, config, twin_job.pretrain_recipe(entry["twin"], pt, mine["world"]),
               steps, manifest["pretraining"]["wall_s"])
    info = _parent_record(parent, manifest)
    write_json(Path(state_dir) / WARM_START, info)
    return info


def continue_release(spec: Mapping[str, Any], backbone_name: str, parent: str | Path, state_dir: str | Path) -> dict:
    """Seed `state_dir` with the weights of the release `parent` at update 0 of this recipe,
    whose stages continue it (the entry's `continues`; its first stage sets `fresh_optimizer`).
    Unlike `warm_start`, the recipe need not repeat the parent's stages or world: the release
    records its parent (weights' sha256 and recipe), and a rebuild builds the parent first.
    Returns what the manifest records."""
    from ltopd.atomic import write_json
    from ltopd.models.loading import load_backbone
    from ltopd.models.manifest import verify_weights
    from ltopd.twins import job as twin_job
    from ltopd.twins.pretrain import seed_state
    from ltopd.twins.release import recipe

    manifest = verify_weights(parent)
    mine = recipe(spec, backbone_name)
    entry, pt = mine["entry"], mine["pretrain"]
    config = twin_job.pretrain_config(pt, entry.get("lr_scale", 1.0))
    stream = twin_job.pretrain_recipe(entry["twin"], pt, mine["world"])
    seed_state(state_dir, load_backbone(parent).model, config, stream, 0)
    info = {**_parent_record(parent, manifest), "mode": "continues", "parent_recipe": manifest["recipe"]}
    write_json(Path(state_dir) / WARM_START, info)
    return info


def _parent_record(parent: str | Path, manifest: Mapping[str, Any]) -> dict:
    """What a build started from a release records of it (beside its state, then in its manifest)."""
    from ltopd.twins.release import code_hashes

    changed = sorted(f for f, h in code_hashes().items() if manifest["code_sha256"].get(f) != h)
    return {"parent": str(parent), "weights_sha256": manifest["weights_sha256"],
            "steps": manifest["pretraining"]["steps"], "wall_s": manifest["pretraining"]["wall_s"],
            "loss_first": manifest["pretraining"]["loss_first"], "code_changed_since_parent": changed}


def build(spec: Mapping[str, Any], backbone_name: str, tokenizer: Any, state_dir: str | Path, out: str | Path,
          on_step: Callable | None = None, checkpoint_every: int = CHECKPOINT_EVERY,
          progress: bool = True) -> dict[str, Any]:
    """Pretrain `backbone_name`'s twin as `spec` says (resuming from `state_dir`), gate it and
    write the release folder `out` (staged beside it, then renamed). Returns the manifest."""
    from ltopd.atomic import write_json
    from ltopd.models.loading import save_backbone
    from ltopd.models.manifest import MANIFEST
    from ltopd.twins import job as twin_job
    from ltopd.twins.release import build_manifest

    entry = spec["backbones"][backbone_name]
    start = time.process_time()
    backbone, metrics = twin_job.run(entry["twin"], tokenizer, spec["pretrain"], spec["world"],
                                     spec["reduction"]["floor"], entry.get("lr_scale", 1.0), on_step=on_step,
                                     progress=progress, state_dir=str(state_dir), checkpoint_every=checkpoint_every,
                                     processor_side=entry.get("processor_side"))
    gates = twin_gates(backbone, spec, backbone_name, progress=progress)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.release.", dir=target.parent))
    try:
        folder = save_backbone(backbone, staging / target.name)
        cost = {"steps": metrics["steps"], "samples": metrics["samples"], "wall_s": metrics["wall_s"],
                "this_call_cpu_s": round(time.process_time() - start, 1), "parameters": metrics["parameters"],
                "loss_first": metrics["loss_first"], "loss_last": metrics["loss_last"],
                "probe": {k: v for k, v in metrics.items() if "/" in k or k == "question_only"}}
        warm = Path(state_dir) / WARM_START
        if warm.is_file():  # continued from a release's weights
            cost["warm_start"] = json.loads(warm.read_text())
            if cost["warm_start"].get("mode") != "continues":  # a prefix rebuild: its loss curve starts there
                cost["loss_first"] = cost["warm_start"]["loss_first"]
        manifest = build_manifest(folder, spec, backbone_name, cost, gates)
        write_json(folder / MANIFEST, manifest)
        if target.exists():
            shutil.rmtree(target)
        folder.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest
