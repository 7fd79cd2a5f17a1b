"""What 5% pruning takes from the miniature, per item: evidence coverage and oracle selection
(project issue 38, items 1 and 3), on the released twin and the benchmark twins' own records.

    python probes/evidence_coverage.py --out docs/measured/regime-candidates.md
    python probes/evidence_coverage.py --n 40 --candidates current --benchmarks vstar,gqa   # a quick look

Everything runs on one torch thread; costs are CPU-seconds (time.process_time).

For each benchmark of Table 2 whose answers have localised evidence (V*Bench, HR-Bench, GQA,
MMBench, POPE, TextVQA, OCRBench; MMMU and MME are left out: they fail Table 2's gate, and
MMMU's counting items have no single region), the records are built as the pipeline builds
them (`synthetic_records`, evaluation seed 0, the twin's evidence-first instruction where its
backbone entry asks for it), and the answer's evidence is found by `ltopd.bench.coverage`
(MMBench records carry no scene: its base questions are drawn again, checked to give the same
image and question). Each batch goes through the pipeline's own path
(`Backbone.encode`, `image_features`, `selection_inputs` with the batch's seed, `hook.choose`,
`Backbone.generate`, the official scorer), as `ltopd.models.inference.predict_settings` does.

It prints (and with --out writes, as markdown, with this command at the top):

1. Evidence coverage of every training-free selector at 5%, 10% and 20% on the current design
   (256 px, 64 tokens, floor 1): per benchmark the share of localised items whose evidence
   survives, as ``any / each / all`` (ltopd.bench.coverage: some evidence cell kept / every
   needed object or text line touched / every evidence cell kept), and the oracle at 5%.
2. Accuracy at 5%: full tokens, CDPruner, the oracle (kept tokens = the evidence cells, cut
   round-robin over the needed regions when they exceed the budget, topped up to the budget's
   token count with CDPruner's own picks at that budget; items without localised evidence keep
   CDPruner's selection), the evidence cells alone (no top-up: fewer tokens), CDPruner on the
   items whose evidence it keeps / loses, and the share of CDPruner's gap the oracle gives back.
3. Candidate designs (coverage of CDPruner, FastV, random and uniform at 5%, each-coverage; the
   accuracy of full / CDPruner / oracle at 5%; the CPU cost per question at full tokens and at
   CDPruner 5%): larger canvases (384, 512 px; the world's pixel sizes scaled with the canvas,
   `WorldConfig.for_size`, and the processor's pixel budget raised to match), absolute floors at
   256 px, a 512 px canvas whose objects and letters keep their 256 px sizes (twice the objects,
   as HR-Bench's canvas has), and high-resolution V*Bench / HR-Bench (512 px canvases with the objects at their
   256 px sizes, read at native resolution). The twin was pretrained at 256 px only: at the
   larger canvases its CDPruner scores and its answers are those of a twin that never saw them.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import yaml

from ltopd.bench.coverage import Evidence, Grid, coverage, evidence_of, oracle_cells, oracle_selection
from ltopd.bench.evaluate import ROW_FIELDS, clean, evaluate_settings
from ltopd.bench.evidence import instructed
from ltopd.bench.scoring import score
from ltopd.bench.scoring.common import meta_of
from ltopd.bench.suites import SUITES, synthetic_records
from ltopd.bench.suites import hrbench as hr_suite
from ltopd.bench.suites import mmbench as mmb_suite
from ltopd.bench.suites import vstar as vstar_suite
from ltopd.bench.suites.synthetic import bench_rng, draw
from ltopd.data.sources import world_config
from ltopd.data.world import TASKS, WorldConfig, render_scene
from ltopd.models.hook import Selection, choose
from ltopd.models.loading import load_backbone
from ltopd.models.processor import ImageTextProcessor, build_image_processor
from ltopd.selectors import SELECTORS, keep_count, requirements

BENCHMARKS = ("vstar", "hrbench4k", "gqa", "mmbench", "pope", "textvqa", "ocrbench")
SELECTOR_ORDER = ("cdpruner", "divprune", "fastv", "dart", "hiprune", "random", "uniform")
SHORT = {"vstar": "V*Bench", "hrbench4k": "HR-4K", "gqa": "GQA", "mmbench": "MMB", "pope": "POPE",
         "textvqa": "TVQA", "ocrbench": "OCRB"}


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A miniature design: the world, the processor's canvas and the reduction floor. ``hires``:
    V*Bench and HR-Bench drawn on a canvas twice the world's (objects at the world's sizes) and
    read at that canvas (the others at ``side``)."""

    name: str
    side: int
    floor: int = 1
    hires: bool = False
    world: tuple[tuple[str, Any], ...] = ()  # overrides of the world section beyond image_size


CANDIDATES = {
    "current": Candidate("256 px, floor 1 (current)", 256),
    "floor8": Candidate("256 px, floor 8", 256, floor=8),
    "floor16": Candidate("256 px, floor 16", 256, floor=16),
    "c384": Candidate("384 px (scaled world)", 384),
    "c512": Candidate("512 px (scaled world)", 512),
    # the canvas grows, the objects and letters keep their 256 px sizes (twice the objects, as
    # HR-Bench's canvas does): a real processor's larger image with more in it
    "c512u": Candidate("512 px, 256 px object sizes, 2x objects", 512,
                       world=(("min_object_px", 22), ("max_object_px", 64), ("small_target_px", 12),
                              ("font_px", 22), ("small_font_px", 18), ("object_gap_px", 4), ("max_objects", 16))),
    "hires": Candidate("256 px; V* and HR at 512 px native", 256, hires=True),
}


# ---------------------------------------------------------------------------------------------
# records and their evidence

def build_records(bench: str, n: int, seed: int, world: dict, cand: Candidate,
                  evidence_benches: Sequence[str]) -> tuple[list[dict], WorldConfig]:
    """The benchmark's records as the pipeline builds them (and the WorldConfig they come from)."""
    cfg = world_config(world)
    if cand.hires and bench == "vstar":
        big = hr_suite.large_canvas(cfg)  # HR-Bench's own recipe: 2x canvas, objects keep their size
        records, cfg = vstar_suite.synthetic(n, seed, big), big
    else:
        records = synthetic_records(bench, n, seed, world)
        if bench == "hrbench4k":
            cfg = hr_suite.large_canvas(cfg)
    if bench in evidence_benches:
        records = [instructed(r, bench) for r in records]
    return records, cfg


def mmbench_evidence(records: list[dict], seed: int, cfg: WorldConfig) -> list[Evidence | None]:
    """MMBench keeps no scene: draw each base question again (the suite's own steps) and check it
    gives the record's image and question."""
    out, cache = [], {}
    for r in records:
        base = meta_of(r)["index"] % mmb_suite.GROUP_MODULUS
        if base not in cache:
            rng = bench_rng(mmb_suite.NAME, seed, base)
            tasks = list(mmb_suite.CATEGORIES)
            task = tasks[int(rng.integers(len(tasks)))]
            scene, (q, _, answer, _, meta) = draw(rng, cfg, lambda sc, trng, t=task: TASKS[t](sc, trng))
            if q != r["question"] or render_scene(scene).tobytes() != r["images"][0].tobytes():
                raise RuntimeError(f"{r['id']}: the redrawn base question differs from the record")
            pseudo = {"id": r["id"], "question": q, "answer": answer,
                      "meta": {"template": meta["template"], "scene": scene.to_dict()}}
            cache[base] = evidence_of(pseudo, small_font_px=cfg.small_font_px)
        out.append(cache[base])
    return out


def evidence_list(bench: str, records: list[dict], seed: int, cfg: WorldConfig) -> list[Evidence | None]:
    if bench == "mmbench":
        return mmbench_evidence(records, seed, cfg)
    return [evidence_of(r, small_font_px=cfg.small_font_px) for r in records]


def unit_of(bench: str, record: dict) -> str:
    """The scoring unit an item belongs to (MMBench's circular group; the record otherwise)."""
    if bench == "mmbench":
        return str(meta_of(record)["index"] % mmb_suite.GROUP_MODULUS)
    return record["id"]


# ---------------------------------------------------------------------------------------------
# one pass over a benchmark

def run_benchmark(bb: Any, bench: str, records: list[dict], evidence: list[Evidence | None],
                  ratios: Sequence[float], selectors: Sequence[str], floor: int, seed: int, batch_size: int,
                  generate: bool) -> dict:
    """Coverage of every (selector, ratio) and of the oracle at the smallest ratio; with
    ``generate``, the replies at full tokens, CDPruner, the oracle and the evidence cells alone
    at the smallest ratio."""
    small = min(ratios)
    needs = frozenset().union(*(requirements(s) for s in selectors))
    cov: dict[tuple[str, float], list] = {}
    texts: dict[str, list[str]] = {k: [] for k in ("full", "cdpruner", "oracle", "evidence")}
    grids, ks, out_alone = [], [], []
    cap = SUITES[bench].generation_cap
    for start in range(0, len(records), batch_size):
        chunk = records[start:start + batch_size]
        ev = evidence[start:start + batch_size]
        with torch.no_grad():
            batch = bb.encode(chunk)
            features = bb.image_features(batch)
            inputs = bb.selection_inputs(batch, features, needs, seed + start)
        hw = bb.ops.grid_hw(bb.model, batch.inputs)
        grid = [Grid(r["images"][0].width, r["images"][0].height, h, w) for r, (h, w) in zip(chunk, hw)]
        grids += grid
        picks: dict[tuple[str, float], Selection] = {}
        for sel in selectors:
            for ratio in ratios:
                picks[sel, ratio] = choose(inputs, ratio, sel, floor)
                cov.setdefault((sel, ratio), []).extend(
                    None if e is None else coverage(e, g, kept.tolist())
                    for e, g, kept in zip(ev, grid, picks[sel, ratio].kept))
        k = [keep_count(g.n, small, floor) for g in grid]
        ks += k
        cdp = picks["cdpruner", small]
        oracle = [oracle_selection(e, g, kk, fill=c.tolist()) for e, g, kk, c in zip(ev, grid, k, cdp.kept)]
        alone = [oracle_cells(e, g, kk) if e is not None else c.tolist()
                 for e, g, kk, c in zip(ev, grid, k, cdp.kept)]
        out_alone.extend(len(a) for a in alone)
        cov.setdefault(("oracle", small), []).extend(
            None if e is None else coverage(e, g, o) for e, g, o in zip(ev, grid, oracle))
        if not generate:
            continue
        n_tokens = tuple(g.n for g in grid)
        settings = {"full": bb.full_selection(batch), "cdpruner": cdp,
                    "oracle": Selection(tuple(torch.tensor(o) for o in oracle), n_tokens),
                    "evidence": Selection(tuple(torch.tensor(sorted(a)) for a in alone), n_tokens)}
        for name, selection in settings.items():
            with torch.no_grad():
                ids = bb.generate(batch, selection, features, do_sample=False, max_new_tokens=cap)
            texts[name] += bb.tokenizer.batch_decode(ids, skip_special_tokens=False)
    out = {"coverage": cov, "grids": grids, "k": ks, "alone_tokens": out_alone}
    if generate:
        out["rows"] = {name: [{**{f: r.get(f) for f in ROW_FIELDS}, "prediction": clean(t)}
                              for r, t in zip(records, gen)] for name, gen in texts.items()}
    return out


def share(values: list, attr: str) -> float | None:
    """Percent of the localised items (non-None) whose coverage has ``attr``."""
    vals = [getattr(v, attr) for v in values if v is not None]
    return 100.0 * sum(vals) / len(vals) if vals else None


def scored(bench: str, rows: list[dict]) -> float | None:
    return float(score(bench, rows)["score"]) if rows else None


def split_scores(bench: str, rows: list[dict], cov: list) -> tuple[float | None, int, float | None, int]:
    """The score on the units whose evidence survives (each) and on those where it is lost
    (a unit's first item decides; items without localised evidence left out)."""
    first: dict[str, Any] = {}
    for r, c in zip(rows, cov):
        first.setdefault(unit_of(bench, r), c)
    kept = [r for r in rows if first[unit_of(bench, r)] is not None and first[unit_of(bench, r)].each]
    lost = [r for r in rows if first[unit_of(bench, r)] is not None and not first[unit_of(bench, r)].each]
    units = lambda rs: len({unit_of(bench, r) for r in rs})  # noqa: E731
    return scored(bench, kept), units(kept), scored(bench, lost), units(lost)


# ---------------------------------------------------------------------------------------------
# the backbone at a canvas

def backbone_at(release: str, side: int) -> Any:
    """The released twin with the processor's pixel budget at ``side`` x ``side``."""
    bb = load_backbone(release)
    if side != 256:
        bb.processor = ImageTextProcessor(bb.tokenizer, build_image_processor(side))
    return bb


def cost_per_question(bb: Any, records: list[dict], bench: str, floor: int, batch_size: int) -> tuple[float, float]:
    """CPU-seconds per question at full tokens and at CDPruner 5%, each its own pipeline pass
    (`evaluate_settings`: encode, vision tower, selection, greedy generation, scoring)."""
    out = []
    for ratio in (1.0, 0.05):
        t = time.process_time()
        evaluate_settings(bb, records, bench, [(ratio, "cdpruner")], floor, batch_size, seed=0, progress=False)
        out.append((time.process_time() - t) / len(records))
    return out[0], out[1]


# ---------------------------------------------------------------------------------------------
# formatting

def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def num(v: float | None, digits: int = 1) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:.{digits}f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def triple(values: list) -> str:
    return " / ".join(pct(share(values, a)) for a in ("any", "each", "all"))


class Report:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, text: str) -> None:
        print(text + "\n", flush=True)
        self.parts.append(text)


# ---------------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", default="releases/qwen35-tiny")
    ap.add_argument("--config", default="config/default.yaml", help="profile: world, floor, evidence-first benchmarks")
    ap.add_argument("--backbone", default="qwen35-tiny", help="the profile's backbone entry (its evidence list)")
    ap.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    ap.add_argument("--n", type=int, default=200, help="records per benchmark (POPE: --pope-n)")
    ap.add_argument("--pope-n", type=int, default=540, help="POPE records (18 per image: 540 = 30 images)")
    ap.add_argument("--seed", type=int, default=0, help="evaluation seed (the twins' seed space)")
    ap.add_argument("--budgets", default="0.05,0.1,0.2")
    ap.add_argument("--candidates", default=",".join(CANDIDATES), help=f"of {list(CANDIDATES)}")
    ap.add_argument("--no-generate", default="floor16",
                    help="candidates measured for coverage only (comma-separated)")
    ap.add_argument("--cost-n", type=int, default=80, help="GQA records timed per canvas")
    ap.add_argument("--batch-size", type=int, default=40)
    ap.add_argument("--out", help="write the tables as markdown here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t_all = time.process_time()
    profile = yaml.safe_load(open(args.config))
    base_world = dict(profile["world"])
    evidence_benches = profile["backbones"][args.backbone].get("evidence", [])
    ratios = [float(b) for b in args.budgets.split(",")]
    benches = args.benchmarks.split(",")
    selectors = [s for s in SELECTOR_ORDER if s in SELECTORS]
    small = min(ratios)
    rep = Report()
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    import subprocess

    import ltopd
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    rep.add("# Regime candidates: evidence coverage, oracle selection and cost (measured)\n\n"
            f"Generated by `{command}` (probes/evidence_coverage.py; its docstring defines every column; "
            f"git HEAD {head or '?'}, `ltopd` from {Path(ltopd.__file__).parent.parent}). "
            f"Twin: `{args.release}` (pretrained at 256 px only); evaluation seed {args.seed}; "
            f"n = {args.n} records per benchmark (POPE {args.pope_n}: 30 images x 18 questions); "
            f"one torch thread; costs in CPU-seconds (time.process_time).")

    results: dict[str, dict[str, dict]] = {}
    costs: dict[str, tuple[float, float, float]] = {}
    for key in args.candidates.split(","):
        cand = CANDIDATES[key]
        t0 = time.process_time()
        world = {**base_world, "image_size": cand.side, **dict(cand.world)} if not cand.hires else dict(base_world)
        generate = key not in args.no_generate.split(",")
        results[key] = {}
        for bench in benches:
            n = args.pope_n if bench == "pope" else args.n
            records, cfg = build_records(bench, n, args.seed, world, cand, evidence_benches)
            side = 2 * cand.side if cand.hires and bench in ("vstar", "hrbench4k") else cand.side
            bb = backbone_at(args.release, side)
            ev = evidence_list(bench, records, args.seed, cfg)
            sels = selectors if key == "current" else [s for s in ("cdpruner", "fastv", "random", "uniform")
                                                       if s in selectors]
            res = run_benchmark(bb, bench, records, ev, ratios if key == "current" else [small], sels,
                                cand.floor, args.seed, args.batch_size, generate)
            res["evidence"] = ev
            res["records"] = records
            results[key][bench] = res
            print(f"[{key}] {bench}: {len(records)} records, {time.process_time() - t0:.0f} CPU-s so far",
                  file=sys.stderr, flush=True)
        # cost per question at this canvas (GQA, the pipeline's evaluate_settings)
        if cand.floor == 1 and not cand.hires:
            bb = backbone_at(args.release, cand.side)
            gqa, _ = build_records("gqa", args.cost_n, args.seed, world, cand, evidence_benches)
            full, five = cost_per_question(bb, gqa, "gqa", cand.floor, args.batch_size)
        else:
            full = five = float("nan")
        costs[key] = (full, five, time.process_time() - t0)

    report(rep, results, costs, benches, selectors, ratios, small, args)
    rep.add(f"Total: {time.process_time() - t_all:.0f} CPU-s.")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n\n".join(rep.parts) + "\n")


def report(rep: Report, results: dict, costs: dict, benches: list[str], selectors: list[str],
           ratios: list[float], small: float, args: argparse.Namespace) -> None:
    cur = results.get("current")
    if cur:
        # 1. coverage on the current design
        loc = []
        for b in benches:
            ev = cur[b]["evidence"]
            g = cur[b]["grids"]
            cells = [len(set().union(*(set(g[i].cells(r.box)) for r in e.regions))) for i, e in enumerate(ev)
                     if e is not None]
            loc.append(f"{SHORT[b]} {sum(e is not None for e in ev)}/{len(ev)}, "
                       f"{sum(cells) / max(1, len(cells)):.1f} cells")
        k_note = ", ".join(f"{r:g}: {keep_count(64, r, 1)}" for r in ratios)
        rep.add("## 1. Evidence coverage on the current design (256 px, 64 tokens, floor 1)\n\n"
                f"Tokens kept of 64 at each budget: {k_note} (HR-Bench's 512 px canvas is read as 64 tokens "
                "too: 64 px cells). Localised items of all, and evidence cells per localised item: "
                + "; ".join(loc) + ". Cells: `any / each / all` in percent of the localised items "
                "(some evidence cell kept / every needed object or text line touched / every evidence "
                "cell kept). `oracle`: the evidence cells cut round-robin to the budget.")
        for ratio in ratios:
            rows = []
            for sel in [*selectors, "oracle"]:
                if (sel, ratio) not in cur[benches[0]]["coverage"]:
                    continue
                rows.append([sel] + [triple(cur[b]["coverage"][sel, ratio]) for b in benches])
            rep.add(f"**Budget {ratio:g}** (any / each / all, %)\n\n"
                    + table(["selector", *[SHORT[b] for b in benches]], rows))
        # 2. accuracy
        if "rows" in cur[benches[0]]:
            rows = []
            for b in benches:
                r = cur[b]["rows"]
                full, cdp, orc, alone = (scored(b, r[k]) for k in ("full", "cdpruner", "oracle", "evidence"))
                cov5 = cur[b]["coverage"]["cdpruner", small]
                c_kept, nk, c_lost, nl = split_scores(b, r["cdpruner"], cov5)
                f_kept, _, f_lost, _ = split_scores(b, r["full"], cov5)
                back = None if full is None or cdp is None or full - cdp <= 0 else 100 * (orc - cdp) / (full - cdp)
                tokens = sum(cur[b]["alone_tokens"]) / len(cur[b]["alone_tokens"])
                gap_k = nk * (f_kept - c_kept) if nk else 0.0
                gap_l = nl * (f_lost - c_lost) if nl else 0.0
                on_lost = 100 * gap_l / (gap_k + gap_l) if gap_k + gap_l > 0 else None
                rows.append([SHORT[b], len(r["full"]), num(full), num(cdp), num(orc), f"{num(alone)} ({tokens:.1f})",
                             pct(back), f"{pct(100 * nk / max(1, nk + nl))} ({nk + nl})",
                             f"{num(f_kept)} -> {num(c_kept)}", f"{num(f_lost)} -> {num(c_lost)}", pct(on_lost)])
            rep.add(f"## 2. Accuracy at {small:g}: information lost vs adaptation lost (current design)\n\n"
                    "`oracle`: kept tokens = the evidence cells (cut round-robin over the needed regions "
                    "when more than the budget; topped up to the budget's token count with CDPruner's own "
                    "picks; items without localised evidence keep CDPruner's selection). `evidence only`: "
                    "the evidence cells alone, without the top-up (mean tokens kept in brackets). "
                    "`oracle gives back`: (oracle - CDPruner) / (full - CDPruner), %. "
                    "`CDP keeps evidence`: % of the localised scoring units (MMBench: circular groups) whose "
                    "evidence CDPruner keeps (each), units in brackets; `kept` / `lost`: full tokens -> "
                    "CDPruner on those units and on the others (the same items both ways, so item "
                    "difficulty cancels); `gap on lost units`: the share of CDPruner's unit-weighted gap "
                    "(where positive) that sits on the units whose evidence it drops (the information "
                    "lost; the rest is lost with the evidence in view).\n\n"
                    + table(["benchmark", "n", "full", "CDPruner", "oracle", "evidence only (tokens)",
                             "oracle gives back %", "CDP keeps evidence % (units)", "kept: full -> CDP",
                             "lost: full -> CDP", "gap on lost units %"], rows))
    # 3. candidates
    rows, rows_b, acc_rows, cost_rows = [], [], [], []
    for key, res in results.items():
        cand = CANDIDATES[key]
        first = res[benches[0]]
        ks = sorted({(g.n, k) for b in benches for g, k in zip(res[b]["grids"], res[b]["k"])})
        tok = ", ".join(f"{n} -> {k}" for n, k in ks)
        cells, cells_b = [], []
        for b in benches:
            cv = res[b]["coverage"]
            cells.append(triple(cv["cdpruner", small]))
            cells_b.append(" / ".join(pct(share(cv[s, small], "each")) for s in ("fastv", "random", "uniform")
                                      if (s, small) in cv)
                           + f" / {pct(share(cv['oracle', small], 'each'))}, {pct(share(cv['oracle', small], 'all'))}")
        rows.append([cand.name, tok, *cells])
        rows_b.append([cand.name, *cells_b])
        if "rows" in first:
            accs = []
            for b in benches:
                r = res[b]["rows"]
                accs.append(" / ".join(num(scored(b, r[k]), 0 if b == "ocrbench" else 1)
                                       for k in ("full", "cdpruner", "oracle")))
            acc_rows.append([cand.name, *accs])
        full, five, spent = costs[key]
        cost_rows.append([cand.name, tok, num(full, 3), num(five, 3),
                          "-" if math.isnan(full) else f"{full / five:.2f}", f"{spent:.0f}"])
    rep.add(f"## 3. Candidate designs at {small:g}\n\n"
            "With the current twin's features and scores at each canvas (it was pretrained at 256 px "
            "only). `tokens -> kept`: merged tokens per image -> kept at the budget (HR-Bench's "
            "canvas, twice the world's, is read at the world's token count, except in the "
            "high-resolution candidate). Reading needs every cell of the word: for TextVQA and "
            "OCRBench `all` is the test that matters, for the object benchmarks `each`.\n\n"
            f"CDPruner {small:g} coverage, `any / each / all` (% of localised items):\n\n"
            + table(["candidate", "tokens -> kept", *[SHORT[b] for b in benches]], rows))
    rep.add(f"The other selectors at {small:g}, `FastV / random / uniform` each-coverage, then the oracle's "
            "`each, all` (the oracle's cut to the budget):\n\n"
            + table(["candidate", *[SHORT[b] for b in benches]], rows_b))
    if acc_rows:
        rep.add(f"Accuracy `full / CDPruner {small:g} / oracle {small:g}` (same records as the coverage):\n\n"
                + table(["candidate", *[SHORT[b] for b in benches]], acc_rows))
    rep.add(f"Cost: CPU-seconds per GQA question ({args.cost_n} records, the pipeline's `evaluate_settings`: "
            "encode, vision tower, selection, greedy generation, scoring), at full tokens and at CDPruner "
            f"{small:g}; `CPU-s spent`: this candidate's part of the probe (all benchmarks).\n\n"
            + table(["candidate", "tokens -> kept", "full s/q", f"CDP {small:g} s/q", "full / 5%", "CPU-s spent"],
                    cost_rows))


if __name__ == "__main__":
    main()
