"""GPU readiness at the paper's sizes, in one command: each paper backbone built from its real
configuration (config/models/*.json, the public model cards' values) with random weights, on the
visible accelerator, runs one LT-OPD update and an evaluation batch of each kind at the profile's
settings, and one table says what a run would cost:

    python benchmarks/gpu_readiness.py                 # config/paper.yaml, every paper backbone
    python benchmarks/gpu_readiness.py --backbones qwen35-4b
    python benchmarks/gpu_readiness.py --tiny          # the twins on CPU, config/smoke.yaml's settings

Per backbone: the parameters; one LT-OPD update (lt14k.batch_size questions x training.rollouts,
the rollout in decode batches of training.decode_batch, the teacher's top-K scoring and the
student's backward in training.teacher_microbatch / student_microbatch rows) split into rollout,
teacher top-K scoring and the whole update, its peak memory and rollout tokens per second; an
evaluation batch (evaluation.batch_size questions) at full tokens and at training.selector with the
grid's smallest budget; and the projected hours of every update of a run (lt14k.num_batches,
capped by training.steps) and of Table 2's evaluations (every setting Table 2 reads, each
benchmark at its split's size). Random weights never emit the closing answer tag, so every
rollout and answer runs to its cap: the projections are upper bounds of a trained model's.

Nothing is downloaded: the tokenizer is the released twin's of the same family (its special
tokens carry the real config's placeholder ids), the image processor the family's at the paper's
patch, merge and pixel range. Without an accelerator it refuses in one line (--tiny runs on CPU).
One device: a model that needs the training's FSDP ranks to fit reports OOM in its cells.
"""
from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# The paper profile's backbones and their real configurations (config/models/: sources in each
# file's `_source`); a checkpoint folder's own config.json, where present, is compared with them.
ARCHITECTURES = {
    "qwen35-4b": "config/models/qwen3_5_4b.json",
    "qwen35-9b": "config/models/qwen3_5_9b.json",
    "glm46v-9b": "config/models/glm_4_6v_flash.json",
    "llava-ov15-4b": "config/models/llava_ov_1_5_4b.json",
}

# Rows of the evaluated splits (the files the paper profile names: VLMEvalKit TSVs, lmms-eval's
# GQA testdev-balanced), for a benchmark given by path; a synthetic twin's are its profile's n.
SPLIT_ROWS = {"vstar": 191, "hrbench4k": 800, "gqa": 12578, "mmmu": 1050, "mmbench": 4329, "mme": 2374,
              "pope": 9000, "textvqa": 5000, "ocrbench": 1000, "muirbench": 2600, "mvbench": 4000}

# Pixel range of the paper's processors (Appendix E: min_pixels 65,536, max_pixels 16,777,216).
MAX_SIDE = 4096


def _qwen_images(cfg: Any) -> Any:
    from ltopd.models.processor import build_image_processor

    v = cfg.vision_config
    return build_image_processor(MAX_SIDE, v.patch_size, v.spatial_merge_size)


def _glm_images(cfg: Any) -> Any:
    from ltopd.models.processor import build_glm_image_processor

    v = cfg.vision_config
    return build_glm_image_processor(MAX_SIDE, v.patch_size, v.spatial_merge_size)


def _llava_images(cfg: Any) -> Any:
    from ltopd.models.processor import build_llava_image_processor

    return build_llava_image_processor(cfg.vision_config.image_size)


# model_type -> the image processor of a real config (the family's class at the model's patch and size)
PAPER_IMAGES: dict[str, Callable[[Any], Any]] = {"qwen3_5": _qwen_images, "glm46v": _glm_images,
                                                  "llava_onevision": _llava_images}


def twin_of(model_type: str) -> str:
    """The first tiny twin of the family (its release lends the tokenizer)."""
    from ltopd.twins.specs import TWINS

    return next(name for name, spec in TWINS.items() if spec.family == model_type)


def real_config(path: str | Path) -> Any:
    from ltopd.models.backbone import family_ops

    fields = {k: v for k, v in json.loads((ROOT / path).read_text()).items() if not k.startswith("_")}
    return family_ops(fields["model_type"]).config_class(**fields)


def config_differences(arch: str, checkpoint: str | None) -> list[str]:
    """Keys whose value differs between the real config here and a local checkpoint's config.json."""
    if not checkpoint or not (ROOT / checkpoint / "config.json").is_file():
        return []
    mine = json.loads((ROOT / arch).read_text())
    theirs = json.loads((ROOT / checkpoint / "config.json").read_text())
    out = []
    for section in ("text_config", "vision_config"):
        for k, v in (mine.get(section) or {}).items():
            if k in (theirs.get(section) or {}) and theirs[section][k] != v:
                out.append(f"{section}.{k}: {v!r} here, {theirs[section][k]!r} in {checkpoint}")
    return out


def paper_backbone(arch: str, device: str, dtype: Any) -> Any:
    """The real architecture with random weights on ``device``, its placeholders the twin tokenizer's ids."""
    import torch

    from ltopd.models import fast_paths
    from ltopd.models.backbone import Backbone, family_ops
    from ltopd.models.processor import ImageTextProcessor, TileProcessor
    from ltopd.twins.architectures import twin_config

    cfg = real_config(arch)
    twin = twin_of(cfg.model_type)
    lent = ImageTextProcessor.from_pretrained(ROOT / "releases" / twin)
    ids = twin_config(twin, lent.tokenizer)
    for key, value in ids.to_dict().items():  # image / video / vision markers: the tokenizer's ids
        if key.endswith(("_token_id", "_token_index")) and not isinstance(value, dict):
            setattr(cfg, key, value)
    text, twin_text = cfg.get_text_config(), ids.get_text_config()
    text.pad_token_id, text.eos_token_id = twin_text.pad_token_id, twin_text.eos_token_id
    images = PAPER_IMAGES[cfg.model_type](cfg)
    processor = (TileProcessor(lent.tokenizer, images, cfg.vision_config.patch_size, span=lent.span)
                 if isinstance(lent, TileProcessor) else ImageTextProcessor(lent.tokenizer, images, span=lent.span))
    torch.manual_seed(0)
    with torch.device(device):
        model = family_ops(cfg.model_type).model_class._from_config(cfg, torch_dtype=dtype)
    fast_paths.install(model)
    return Backbone(model=model.eval(), processor=processor)


def tiny_backbone(twin: str, device: str) -> Any:
    from ltopd.models.backbone import Backbone
    from ltopd.models.processor import ImageTextProcessor
    from ltopd.twins.architectures import build_twin

    processor = ImageTextProcessor.from_pretrained(ROOT / "releases" / twin)
    return Backbone(model=build_twin(twin, processor.tokenizer, seed=0).to(device), processor=processor)


class Peak:
    """Peak memory of a phase: the device's allocator on a GPU; on the CPU the process's peak
    resident set so far (it cannot be reset: a later phase reads at least an earlier one's)."""

    def __init__(self, device: str) -> None:
        self.device = device

    def __enter__(self) -> Peak:
        import torch

        if self.device != "cpu":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        if self.device != "cpu":
            torch.cuda.synchronize()
            self.gib = torch.cuda.max_memory_allocated() / 2**30
        else:
            self.gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def phase(row: dict[str, Any], keys: tuple[str, ...], fn: Callable[[], dict[str, Any]]) -> None:
    """Run one measured phase into ``row``; out of device memory, its cells say OOM."""
    import torch

    try:
        row.update(fn())
    except torch.OutOfMemoryError:
        row.update(dict.fromkeys(keys, "OOM"))
    finally:
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def records(benchmark: str, n: int, seed: int, world: dict[str, Any]) -> list[dict]:
    from ltopd.bench.suites import synthetic_records

    return synthetic_records(benchmark, n, seed, world)


def eval_rows(cfg: dict[str, Any]) -> dict[str, int]:
    """Items per benchmark of Table 2: a split's rows (SPLIT_ROWS) or a synthetic twin's n."""
    return {b: (SPLIT_ROWS[b] if cfg["evaluation"]["benchmarks"][b].get("path")
                else cfg["evaluation"]["benchmarks"][b]["n"]) for b in cfg["grid"]["benchmarks"]}


def table2_hours(cfg: dict[str, Any], full_s: float, reduced_s: float, cap: int) -> float:
    """Hours of Table 2's evaluations at the measured seconds per question (at ``cap`` new
    tokens): every (method, budget, benchmark, seed) Table 2 reads, the benchmark's rows each, a
    question's time scaled by the benchmark's generation cap (random weights decode to the cap)."""
    from ltopd.catalog import BENCHMARKS
    from ltopd.grid import grid_jobs, table2_methods

    rows, keep, total = eval_rows(cfg), set(table2_methods(cfg)), 0.0
    first = cfg["grid"]["backbones"][0]
    for job in grid_jobs(cfg):
        if job.backbone == first and job.method in keep:
            per_q = (full_s if job.budget >= 1 else reduced_s) * BENCHMARKS[job.benchmark].generation_cap / cap
            total += rows[job.benchmark] * per_q
    return total / 3600


def measure(bb: Any, cfg: dict[str, Any], device: str, image_side: int, benchmark: str) -> dict[str, Any]:
    import torch

    from ltopd.bench.evaluate import evaluate_settings
    from ltopd.catalog import BENCHMARKS
    from ltopd.grid import reduction_defaults
    from ltopd.train.families import make_trainer
    from ltopd.train.job import total_updates
    from ltopd.train.methods import method_spec
    from ltopd.train.trainer import TrainConfig

    rd, training = reduction_defaults(cfg), cfg["training"]
    world = {**cfg["world"], "image_size": image_side}
    lt, batch = cfg["lt14k"], cfg["evaluation"]["batch_size"]
    row: dict[str, Any] = {"params_b": sum(p.numel() for p in bb.model.parameters()) / 1e9}
    cap = BENCHMARKS[benchmark].generation_cap
    questions = records(benchmark, batch, 0, world)

    def evaluate() -> dict[str, Any]:
        out = {}
        with Peak(device) as peak:
            for key, setting in (("eval_full_s", (1.0, None)), ("eval_reduced_s", (rd.budget, rd.selector))):
                with torch.inference_mode():
                    start = time.perf_counter()
                    evaluate_settings(bb, questions, benchmark, [setting], rd.floor, batch, progress=False)
                    out[key] = (time.perf_counter() - start) / len(questions)
        out["eval_peak_gib"] = peak.gib
        out["table2_h"] = table2_hours(cfg, out["eval_full_s"], out["eval_reduced_s"], cap)
        return out

    def update() -> dict[str, Any]:
        tc = TrainConfig.from_profile(training, budget=rd.budget, floor=rd.floor, seed=0)
        trainer = make_trainer(bb, method_spec("ltopd"), tc, total_updates(training, lt["num_batches"]))
        data = records(benchmark, lt["batch_size"], 1, world)  # one LT-14K-sized batch of the world's questions
        with Peak(device) as peak:
            (log,) = trainer.fit([data], None, stop_after=1)
        m = log.metrics
        return {"rollout_s": m["rollout_s"], "teacher_s": m["teacher_s"], "update_s": m["step_s"],
                "rollout_tok_s": m.get("rollout_tokens_per_s", float("nan")), "update_peak_gib": peak.gib,
                "run_h": m["step_s"] * trainer.total_steps / 3600, "updates": trainer.total_steps}

    phase(row, ("eval_full_s", "eval_reduced_s", "eval_peak_gib", "table2_h"), evaluate)
    phase(row, ("rollout_s", "teacher_s", "update_s", "rollout_tok_s", "update_peak_gib", "run_h"), update)
    return row


COLUMNS = (("params_b", "params (B)", "{:.3g}"), ("rollout_s", "rollout s", "{:.1f}"),
           ("teacher_s", "teacher top-K s", "{:.1f}"), ("update_s", "s / update", "{:.1f}"),
           ("rollout_tok_s", "rollout tok/s", "{:.0f}"), ("update_peak_gib", "peak GiB (update)", "{:.2f}"),
           ("eval_full_s", "eval s/q full", "{:.3f}"), ("eval_reduced_s", "eval s/q reduced", "{:.3f}"),
           ("eval_peak_gib", "peak GiB (eval)", "{:.2f}"), ("run_h", "h, all updates", "{:.3g}"),
           ("table2_h", "h, Table 2 eval", "{:.3g}"))


def table(rows: dict[str, dict[str, Any]]) -> str:
    def cell(row: dict[str, Any], key: str, fmt: str) -> str:
        v = row.get(key, "")
        return fmt.format(v) if isinstance(v, (int, float)) else str(v)

    head = ["backbone", *(c[1] for c in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join([name, *(cell(r, k, f) for k, _, f in COLUMNS)]) + " |" for name, r in rows.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="the tiny twins on the CPU (a test's check of this script)")
    ap.add_argument("--config", help="profile (default config/paper.yaml; --tiny: config/smoke.yaml)")
    ap.add_argument("--backbones", nargs="+", help="default: every paper backbone (--tiny: the profile's twins)")
    ap.add_argument("--benchmark", default="textvqa", help="the records of the update and the evaluation batches")
    ap.add_argument("--image-side", type=int, help="the world's image side (default the profile's world.image_size)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (--tiny)")
    args = ap.parse_args(argv)

    import torch

    from ltopd import config

    if not args.tiny and not torch.cuda.is_available():
        print("error: no accelerator visible (torch.cuda.is_available() is False): run it on a GPU node, or "
              "with --tiny for the twins on the CPU", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    device = "cpu" if args.tiny else "cuda"
    cfg = config.load(ROOT / (args.config or ("config/smoke.yaml" if args.tiny else "config/paper.yaml")))
    names = args.backbones or ([b for b in cfg["backbones"] if cfg["backbones"][b].get("twin")] if args.tiny
                               else list(ARCHITECTURES))
    side = args.image_side or cfg["world"]["image_size"]
    t, lt = cfg["training"], cfg["lt14k"]
    print(f"profile {cfg['profile']} on {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}: "
          f"{lt['batch_size']} questions x {t['rollouts']} rollouts of <= {t['max_new_tokens']} tokens per update "
          f"(decode batch {t.get('decode_batch', 'all')}, student / teacher micro-batches "
          f"{t.get('student_microbatch', 'all')} / {t.get('teacher_microbatch', 'all')}), evaluation batch "
          f"{cfg['evaluation']['batch_size']}; {args.benchmark} questions on {side} px images; random weights",
          flush=True)
    rows: dict[str, dict[str, Any]] = {}
    for name in names:
        if not args.tiny:
            for line in config_differences(ARCHITECTURES[name], cfg["backbones"].get(name, {}).get("checkpoint")):
                print(f"warning: {name}: {line}", file=sys.stderr)
        try:
            bb = (tiny_backbone(cfg["backbones"][name]["twin"], device) if args.tiny
                  else paper_backbone(ARCHITECTURES[name], device, torch.bfloat16))
        except torch.OutOfMemoryError:
            rows[name] = {"params_b": "OOM"}
            continue
        rows[name] = measure(bb, cfg, device, side, args.benchmark)
        del bb
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
        print(f"{name}: done", file=sys.stderr, flush=True)
    updates = next((r["updates"] for r in rows.values() if "updates" in r), lt["num_batches"])
    print(table(rows))
    print(f"h, all updates: {updates} updates at the measured s / update; h, Table 2 eval: every setting Table 2 "
          f"reads at the measured seconds per question (full tokens, or {cfg['training']['selector']} at "
          f"{min(cfg['grid']['budgets']):g} for every reduced setting), scaled to each benchmark's rows and "
          "generation cap; one device, no overlap of jobs. Peak GiB on the CPU: the process's peak resident set.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
