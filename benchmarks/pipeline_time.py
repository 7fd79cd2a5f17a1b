"""Where the default pipeline's time goes, from Snakemake's own per-job benchmark files.

    python benchmarks/pipeline_time.py --workdir /tmp/clone [--run --cores 2] [--flops]

--run first runs `snakemake --cores N --logger=ltopd results/table2.csv` in --workdir (a clean
clone: "from empty") and times it. Then, from <out_root>/logs/**/*.benchmark.tsv (every rule
writes one), it prints per stage (LT-14K, twins, trainings, evaluations, tables) the jobs, their
summed wall and CPU seconds, and per job class the mean CPU-seconds per job. --flops measures the
evaluation's questions per CPU-second on one thread against the FLOP-bound rate of the default
twin (its FLOPs per question counted by torch's FlopCounterMode on the real evaluation path,
over the GEMM rate of this core).
"""
from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

STAGES = {  # rule (first folder under logs/, or the file's stem) -> stage
    "lt14k": "LT-14K", "tokenizer": "twins", "pretrain_twin": "twins", "release_twin": "twins",
    "train": "trainings", "bench_records": "evaluations", "evaluate": "evaluations",
}


def job_class(tsv: Path, logs: Path) -> str:
    rel = tsv.relative_to(logs)
    return rel.parts[0] if len(rel.parts) > 1 else rel.name.removesuffix(".benchmark.tsv")


def read_jobs(logs: Path) -> list[tuple[str, float, float]]:
    """(job class, wall s, CPU s) of every job that wrote a benchmark file."""
    jobs = []
    for tsv in sorted(logs.rglob("*.benchmark.tsv")):
        with tsv.open() as fh:
            row = next(csv.DictReader(fh, delimiter="\t"))
        jobs.append((job_class(tsv, logs), float(row["s"]), float(row.get("cpu_time") or 0.0)))
    return jobs


def stage_table(jobs: list[tuple[str, float, float]], run_wall: float | None) -> str:
    stages: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    classes: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for cls, wall, cpu in jobs:
        for key, table in ((STAGES.get(cls, "tables"), stages), (cls, classes)):
            table[key][0] += 1
            table[key][1] += wall
            table[key][2] += cpu
    order = ["LT-14K", "twins", "trainings", "evaluations", "tables"]
    lines = ["| stage | jobs | job wall, summed (s) | CPU (s) |", "|---|---|---|---|"]
    lines += [f"| {s} | {stages[s][0]} | {stages[s][1]:.0f} | {stages[s][2]:.0f} |" for s in order if s in stages]
    total = [sum(v[i] for v in stages.values()) for i in range(3)]
    lines.append(f"| all | {total[0]:.0f} | {total[1]:.0f} | {total[2]:.0f} |")
    if run_wall is not None:
        lines.append(f"\nwall time of the whole run: {run_wall:.0f} s ({run_wall / 60:.1f} min)")
    lines += ["", "| job class | jobs | mean wall (s) | mean CPU (s) |", "|---|---|---|---|"]
    lines += [f"| {c} | {n:.0f} | {w / n:.1f} | {u / n:.1f} |" for c, (n, w, u) in sorted(classes.items())]
    return "\n".join(lines)


def gemm_flops(n: int = 512, repeats: int = 20) -> float:
    """FLOP/s of one float32 GEMM on one thread (the bound a dense model's matmuls can reach)."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t = time.process_time()
    for _ in range(repeats):
        a @ b
    return 2 * n**3 * repeats / (time.process_time() - t)


def flop_table(workdir: Path, items: int) -> str:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from ltopd import config
    from ltopd.bench.suites import synthetic_records
    from ltopd.grid import model_path
    from ltopd.models.inference import predict_settings
    from ltopd.models.loading import load_backbone

    torch.set_num_threads(1)
    cfg = config.load(workdir / "config" / "default.yaml")
    backbone = cfg["grid"]["backbones"][0]
    bb = load_backbone(workdir / model_path(cfg, backbone))
    bb.model.requires_grad_(False)  # FlopCounterMode's module hooks trip over leaf weights passed as arguments
    floor, batch = cfg["reduction"]["floor"], cfg["evaluation"]["batch_size"]
    peak = gemm_flops()
    lines = [f"{backbone}, one thread; GEMM rate of this core: {peak / 1e9:.1f} GFLOP/s", "",
             "| benchmark | settings in one pass | FLOPs per question | FLOP-bound q/CPU-s "
             "| measured q/CPU-s | % of bound |",
             "|---|---|---|---|---|---|"]
    for bench in ("gqa", "mmbench"):
        records = synthetic_records(bench, items, 0, cfg["world"])
        for settings in ([(1.0, "cdpruner")], [(0.05, "cdpruner")],
                         [(b, "cdpruner") for b in sorted(cfg["grid"]["budgets"])]):
            with FlopCounterMode(display=False) as counter:
                predict_settings(bb, records[:batch], settings, floor, batch, max_new_tokens=16)
            per_q = counter.get_total_flops() / (len(records[:batch]) * len(settings))
            t = time.process_time()
            predict_settings(bb, records, settings, floor, batch, max_new_tokens=16)
            rate = len(records) * len(settings) / (time.process_time() - t)
            label = ", ".join(f"{r:g}" for r, _ in settings)
            lines.append(f"| {bench} | {label} | {per_q / 1e6:.1f} M | {peak / per_q:.0f} | {rate:.1f} | "
                         f"{100 * rate * per_q / peak:.1f}% |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path("."))
    ap.add_argument("--run", action="store_true", help="run the default pipeline in --workdir first")
    ap.add_argument("--cores", default="2")
    ap.add_argument("--target", default="results/table2.csv")
    ap.add_argument("--flops", action="store_true", help="also measure evaluation against the FLOP bound")
    ap.add_argument("--items", type=int, default=120, help="questions per benchmark for --flops")
    args = ap.parse_args()
    run_wall = None
    if args.run:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", args.cores, "--logger=ltopd",
                               args.target], cwd=args.workdir)
        run_wall = time.perf_counter() - start
        if proc.returncode:
            sys.exit(f"snakemake failed (exit {proc.returncode}) after {run_wall:.0f} s")
    from ltopd import config

    cfg = config.load(args.workdir / "config" / "default.yaml")
    logs = args.workdir / cfg["out_root"] / "logs"
    print(stage_table(read_jobs(logs), run_wall))
    if args.flops:
        print()
        print(flop_table(args.workdir, args.items))


if __name__ == "__main__":
    main()
