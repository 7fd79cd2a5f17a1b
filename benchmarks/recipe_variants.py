"""Recipe variants of the Table 2 twin, resumed from the end of its dense vision stage, run to a
deadline (one device call: several side by side), the item streams made by worker processes.

    python benchmarks/recipe_variants.py --variant bind --start STATE_3000.pt --tok releases/qwen35-tiny \
        --work OUT/bind --out OUT --deadline 430 [--device cuda] [--gates]

The start state is a pretrain_state.pt saved at update 3,000 of the release build (the vision
stage, the same in every variant); its recipe fingerprint is rewritten to the variant's, so the
pipeline's own resumable pretraining (ltopd.twins.pretrain) continues it. The stages after the
vision stage come from config/default.yaml's qwen35-tiny recipe (`variants`). Run the device under
the pinned transformers (docs/pretraining.md, "Library versions"). The final `mix` stage's length is solved
from step times measured first, so the run ends inside the deadline. Writes OUT/<variant>.json
(step times, learning curve, library versions, gates with --gates once the recipe completed).
Measurements: docs/pretraining.md ("A GPU lease").
"""

from __future__ import annotations

import argparse
import collections
import copy
import itertools
import json
import multiprocessing as mp
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch
import yaml

from ltopd.models.loading import load_tokenizer
from ltopd.twins import job as twin_job
from ltopd.twins.pretrain import STATE_FILE, accumulate_loss, pretrain

BACKBONE = "qwen35-tiny"


def focused(
    name: str, steps: int, tasks: list[str], objects: tuple[int, int], px: tuple[int, int], clutter: float = 0.1
) -> dict:
    """A world-task stage on scenes of `objects` shapes of `px` pixels, no text."""
    world = {
        "min_objects": objects[0],
        "max_objects": objects[1],
        "text_prob": 0.0,
        "clutter": clutter,
        "min_object_px": px[0],
        "max_object_px": px[1],
    }
    return {"name": name, "steps": steps, "lr": 0.002, "lr_vision": 0.0005, "tasks": tasks, "world": world}


def variants(release: list[dict]) -> dict[str, list[dict]]:
    """The stages after the vision stage of each variant, built from the release recipe's own
    (`release`: the backbone's pretrain_stages: vision, single, perceive, mix); the final mix's
    steps are left as None (solved from measured step times)."""
    _, single, perceive, mix = release

    def mix_at(lr: float) -> dict:
        return dict(mix, lr=lr, steps=None)

    bind = focused("bind", 800, ["color", "shape", "exists", "position"], (2, 4), (32, 96))
    two = focused("two", 400, ["color", "shape", "exists"], (2, 2), (48, 96), clutter=0.0)
    return {
        "long": [single, perceive, mix_at(0.001)],
        "long2e3": [single, perceive, mix_at(0.002)],
        "bind": [single, perceive, bind, mix_at(0.001)],
        "two": [single, two, perceive, mix_at(0.001)],
    }


VARIANTS = ("bind", "long", "long2e3", "two")


SOURCES: dict = {}
POOL = None


def _work(name: str, start: int, count: int) -> list[dict]:
    return list(itertools.islice(SOURCES[name](start), count))


def prefetched(name: str, chunk: int, ahead: int):
    def source(start: int):
        def gen():
            pending, nxt = collections.deque(), start
            while True:
                while len(pending) < ahead:
                    pending.append(POOL.apply_async(_work, (name, nxt, chunk)))
                    nxt += chunk
                yield from pending.popleft().get()

        return gen()

    return source


def log(**kw) -> None:
    print(json.dumps(kw), flush=True)


def main() -> int:
    global POOL
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", required=True, choices=VARIANTS)
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--start", required=True, help="pretrain_state.pt after the vision stage")
    ap.add_argument("--tok", required=True, help="the twin's tokenizer folder")
    ap.add_argument("--work", required=True, help="state folder (resumable)")
    ap.add_argument("--out", required=True, help="folder of the summary <variant>.json (the state stays in --work)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--deadline", type=float, required=True, help="seconds from now to stop training")
    ap.add_argument("--gates", action="store_true", help="gate the twin when the recipe completed")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--mix-steps", type=int, default=0, help="fix the mix length instead of solving it")
    ap.add_argument("--gate-n", type=int, default=0)
    ap.add_argument("--test-steps", type=int, default=0, help="every stage after vision this long (a dry run)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    torch.set_num_threads(1)
    spec = yaml.safe_load(open(args.config))
    release = spec["backbones"][BACKBONE]["pretrain_stages"]
    vision = release[0]
    stages = [vision] + copy.deepcopy(variants(release)[args.variant])
    if args.test_steps:
        stages = stages[:1] + [dict(s, steps=args.test_steps) for s in stages[1:]]
    pt = {**spec["pretrain"], "stages": stages}
    # a stage's item stream depends on its position, not its length: the mix's length, solved
    # below, leaves the streams the workers inherit unchanged
    for i, s in enumerate(stages):
        SOURCES[s["name"]] = twin_job.stage_source(s, i, pt, spec["world"])
    POOL = mp.get_context("fork").Pool(args.workers)  # before CUDA is touched
    tok = load_tokenizer(args.tok)
    from ltopd.twins.architectures import twin_backbone

    backbone = twin_backbone(BACKBONE, tok, seed=pt["seed"])
    backbone.model.to(args.device)
    start_state = torch.load(args.start, map_location="cpu", weights_only=False)
    if start_state["steps"] != vision["steps"]:
        ap.error(f"--start holds update {start_state['steps']}; the vision stage ends at {vision['steps']}")

    # step times per stage kind (forward + backward, no update), data from the workers
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    backbone.model.load_state_dict(start_state["model"])
    per = {}
    for s in stages[1:]:
        it = prefetched(s["name"], 32, 2)(10**7)
        times = []
        for _ in range(6):
            recs = [next(it) for _ in range(32)]
            sync()
            t = time.perf_counter()
            accumulate_loss(backbone, recs)
            backbone.model.zero_grad(set_to_none=True)
            sync()
            times.append(time.perf_counter() - t)
        per[s["name"]] = statistics.median(times[2:]) * 1.15  # + optimizer step and data stalls
    left = args.deadline - (time.perf_counter() - t0)
    fixed = sum(s["steps"] * per[s["name"]] for s in stages[1:] if s["steps"])
    n_mix = args.mix_steps or args.test_steps or max(300, int((0.9 * left - fixed) / per["mix"]) // 100 * 100)
    stages[-1]["steps"] = n_mix
    import transformers

    log(
        variant=args.variant,
        step_s=per,
        mix_steps=n_mix,
        left_s=left,
        torch=torch.__version__,
        transformers=transformers.__version__,
    )

    # the variant's recipe, as twin_job.run builds it, on the dense-stage state
    recipe = {
        "twin": BACKBONE,
        "stages": pt["stages"],
        "seed": pt["seed"],
        "world": spec["world"],
        "tokenizer": pt.get("tokenizer"),
    }
    config = twin_job.pretrain_config(pt, 1.0)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if not (work / STATE_FILE).exists():
        torch.save({**start_state, "recipe": {"config": repr(config), "recipe": recipe}}, work / STATE_FILE)
    streams = {s["name"]: prefetched(s["name"], 32, 4) for s in stages}
    total = sum(s["steps"] for s in stages)
    curve, means = [], []

    def on_step(st) -> None:
        curve.append(st.loss)
        if st.step % 100 == 0:
            means.append((st.step, st.stage, round(sum(curve[-100:]) / len(curve[-100:]), 4)))
        if st.step % 500 == 0:
            log(
                variant=args.variant,
                step=st.step,
                stage=st.stage,
                loss=sum(curve[-100:]) / len(curve[-100:]),
                t=round(time.perf_counter() - t0, 1),
            )

    done = vision["steps"]
    while done < total and time.perf_counter() - t0 < args.deadline:
        chunk = max(50, min(500, int((args.deadline - (time.perf_counter() - t0)) / per["mix"] / 2)))
        m = pretrain(
            backbone,
            streams,
            config,
            on_step=on_step,
            state_dir=work,
            stop_after=min(total, done + chunk),
            recipe=recipe,
        )
        done = m.steps
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "variant": args.variant,
        "steps": done,
        "total": total,
        "stages": stages,
        "step_s": per,
        "train_s": round(time.perf_counter() - t0, 1),
        "curve": means,
    }
    log(**{k: v for k, v in summary.items() if k not in ("stages", "curve")})
    (out / f"{args.variant}.json").write_text(json.dumps(summary, indent=1))
    if args.gates and done == total:
        try:
            from ltopd.twins.build import twin_gates

            gspec = {
                **spec,
                "pretrain": {
                    **pt,
                    "gates": {
                        **pt.get("gates", {}),
                        **({"n": args.gate_n, "fit_n": 2 * args.gate_n} if args.gate_n else {}),
                    },
                },
            }
            backbone.model.eval()
            summary["gates"] = twin_gates(backbone, gspec)
            g = summary["gates"]["benchmarks"]
            log(
                variant=args.variant,
                gates_passed=summary["gates"]["passed"],
                margins={b: v["margin_se"] for b, v in g.items()},
                t=round(time.perf_counter() - t0, 1),
            )
        except Exception:
            traceback.print_exc()
    (out / f"{args.variant}.json").write_text(json.dumps(summary, indent=1))
    POOL.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
