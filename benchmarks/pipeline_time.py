"""Where the default pipeline's time goes, from Snakemake's own per-job benchmark files.

    python benchmarks/pipeline_time.py --workdir /tmp/clone [--run --cores 2] [--configfile config/smoke.yaml]
        [--flops]

--run first runs `snakemake --cores N --logger=ltopd <the profile's Table 2>` in --workdir (a clean
clone: "from empty") and times it, with the Snakemake process's own CPU (its /proc utime + stime,
sampled while it runs: the DAG, parameter functions, scheduler and logger, not its jobs) beside
the whole run's (the process and every job it waited for). Then, from
<out_root>/logs/**/*.benchmark.tsv (every rule writes one), it prints per stage (LT-14K, twins,
trainings, evaluations, tables) the jobs, their summed wall and CPU seconds, and per job class the
mean CPU-seconds per job; then the disk footprint of out_root per folder (what the run added,
with --run), and with --run the ETA the logger printed against the time that actually remained, at the
four points issue 55 measured (60, 62, 72 and 84 of 99 jobs, as fractions of this run's jobs) and
its worst error after the first tenth of the jobs. --flops measures the
evaluation's questions per CPU-second on one thread against the FLOP-bound rate of the default
twin (its FLOPs per question counted by torch's FlopCounterMode on the real evaluation path,
over the GEMM rate of this core).
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

STAGES = {  # rule (first folder under logs/, or the file's stem) -> stage
    "lt14k": "LT-14K", "tokenizer": "twins", "pretrain_twin": "twins", "release_twin": "twins",
    "train": "trainings", "bench_records": "evaluations", "fit_records": "evaluations",
    "evaluate": "evaluations",
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


def own_cpu(pid: int) -> float:
    """CPU seconds process ``pid`` itself has used (utime + stime of /proc/<pid>/stat; its
    children's are not included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The logger's line for a finished job: "[60/99] <job> in 3s | elapsed 1m38s, ETA 1m38s".
PROGRESS = re.compile(r"^\[(\d+)/(\d+)\] .* \| elapsed (\S+), ETA (\S+)$")
ISSUE_POINTS = (60 / 99, 62 / 99, 72 / 99, 84 / 99)  # where issue 55 found the ETA 17x short to 2x long


def seconds(text: str) -> float:
    """The logger's durations back to seconds: "7s", "3m05s", "1h02m"."""
    h, m, s = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text).groups()
    return 3600 * int(h or 0) + 60 * int(m or 0) + int(s or 0)


def eta_table(lines: list[str]) -> str:
    """Each issue point's printed ETA against the time that remained after it (the last progress
    line's elapsed minus its own), and the worst relative error after the first tenth of the jobs."""
    rows = [(int(m[1]), int(m[2]), seconds(m[3]), m[4]) for m in map(PROGRESS.match, lines) if m]
    if not rows:
        return "no progress lines (was the ltopd logger on?)"
    end, total = rows[-1][2], rows[-1][1]

    def error(row: tuple[int, int, float, str]) -> float | None:
        left = end - row[2]
        return None if row[3] == "?" or left <= 0 else (seconds(row[3]) - left) / left

    lines_out = ["| progress | printed ETA | time that remained | error |", "|---|---|---|---|"]
    for point in ISSUE_POINTS:
        row = next(r for r in rows if r[0] >= point * total)
        err = error(row)
        lines_out.append(f"| [{row[0]}/{total}] | {row[3]} | {end - row[2]:.0f} s | "
                         + ("-" if err is None else f"{100 * err:+.0f}%") + " |")
    late = [(e, r) for r in rows if r[0] > total / 10 and (e := error(r)) is not None]
    if late:
        e, r = max(late, key=lambda x: abs(x[0]))
        lines_out.append(f"\nworst ETA error after the first tenth of the jobs: {100 * e:+.0f}% at [{r[0]}/{total}] "
                         f"(printed {r[3]}, {end - r[2]:.0f} s remained)")
    return "\n".join(lines_out)


def run_snakemake(cmd: list[str], cwd: Path, every: float = 0.5) -> tuple[int, float, float, float, list[str]]:
    """Run ``cmd``; (exit code, wall s, the process's own CPU s, CPU s of the process and every
    descendant it waited for, its output lines, also passed through as they come). The own CPU is
    sampled every ``every`` seconds until it exits (the last sample: at most ``every`` seconds of
    it are missed)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines: list[str] = []

    def relay() -> None:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line.rstrip("\n"))

    relayer = threading.Thread(target=relay, daemon=True)
    relayer.start()
    own = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                own[0] = own_cpu(proc.pid)
            except (OSError, ValueError, IndexError):  # exited: /proc/<pid> is gone or a zombie's
                return
            done.wait(every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    sampler.join()
    relayer.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.perf_counter() - start, own[0], usage.ru_utime + usage.ru_stime, lines


def disk_usage(path: Path, seen: set[tuple[int, int]] | None = None) -> int:
    """Bytes allocated on disk under ``path`` (st_blocks; a file hard-linked twice counts once)."""
    seen = set() if seen is None else seen
    total = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            st = os.lstat(os.path.join(root, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def folder_sizes(root: Path) -> dict[str, int]:
    """Disk usage of each entry of ``root`` (folders below ``data/`` one level deeper: the LT-14K
    and benchmark records apart), hard links counted once across all of them."""
    seen: set[tuple[int, int]] = set()
    out = {}
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        parts = sorted(entry.iterdir()) if entry.name == "data" and entry.is_dir() else [entry]
        for part in parts:
            out[str(part.relative_to(root))] = (disk_usage(part, seen) if part.is_dir() and not part.is_symlink()
                                               else os.lstat(part).st_blocks * 512)
    return out


def disk_table(after: dict[str, int], before: dict[str, int] | None = None) -> str:
    """Per folder of out_root: its size, or with ``before`` what the run added (grown entries only)."""
    grown = {k: v - (before or {}).get(k, 0) for k, v in after.items()}
    rows = {k: v for k, v in grown.items() if v > 0} if before is not None else after
    what = "added by the run" if before is not None else "on disk"
    lines = [f"| folder of out_root | {what} (MB) |", "|---|---|"]
    lines += [f"| {k} | {v / 1e6:.1f} |" for k, v in sorted(rows.items(), key=lambda kv: -kv[1])]
    lines.append(f"| all | {sum(rows.values()) / 1e6:.1f} |")
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


def flop_table(workdir: Path, items: int, profile: str) -> str:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from ltopd import config
    from ltopd.bench.suites import synthetic_records
    from ltopd.grid import model_path
    from ltopd.models.inference import predict_settings
    from ltopd.models.loading import load_backbone

    torch.set_num_threads(1)
    cfg = config.load(workdir / profile)
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
    ap.add_argument("--configfile", default="config/default.yaml", help="the profile (relative to --workdir)")
    ap.add_argument("--target", help="what --run builds (default: the profile's Table 2)")
    ap.add_argument("--flops", action="store_true", help="also measure evaluation against the FLOP bound")
    ap.add_argument("--items", type=int, default=120, help="questions per benchmark for --flops")
    args = ap.parse_args()
    from ltopd import config, grid

    cfg = config.load(args.workdir / args.configfile)
    out_root = args.workdir / cfg["out_root"]
    target = args.target or grid.table_outputs(cfg, "table2")["csv"]
    run_wall = before = None
    if args.run:
        before = folder_sizes(out_root)
        code, run_wall, own, total, lines = run_snakemake(
            [sys.executable, "-m", "snakemake", "--cores", args.cores, "--configfile", args.configfile,
             "--logger=ltopd", target], args.workdir)
        if code:
            sys.exit(f"snakemake failed (exit {code}) after {run_wall:.0f} s")
    print(stage_table(read_jobs(out_root / "logs"), run_wall))
    if args.run:
        print(f"\nSnakemake process's own CPU: {own:.1f} s of the run's {total:.1f} CPU-s "
              f"({100 * own / total:.1f}%)")
        print()
        print(eta_table(lines))
    print()
    print(disk_table(folder_sizes(out_root), before))
    if args.flops:
        print()
        print(flop_table(args.workdir, args.items, args.configfile))


if __name__ == "__main__":
    main()
