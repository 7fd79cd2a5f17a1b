"""Peak extra memory and time of distill_loss (top-K support) versus a full-vocabulary JSD.

The logits (positions x V float32, ~1 GB each at the paper's size) are inputs and are
allocated before measuring; the table reports memory the loss adds beyond them.
Forward+backward also holds the student-logits gradient (one more logits-sized tensor),
which any method needs; the last column subtracts it.

CUDA: torch.cuda.max_memory_allocated. CPU: every measurement runs in a fresh subprocess;
the kernel's peak-RSS counter (VmHWM) is reset through /proc/self/clear_refs after the
inputs are touched, and the peak minus the resident size at reset is the extra memory.

    PYTHONPATH=src python benchmarks/loss_memory.py                     # 1,024 x 248,320
    PYTHONPATH=src python benchmarks/loss_memory.py --positions 128 --vocab 32768
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import torch

from ltopd.train.losses import distill_loss

METHODS = ("topk", "full_jsd")
MODES = ("fwd", "fwd+bwd")
GIB = 2**30


def full_vocab_jsd(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """The straightforward dense JSD (a = 0.5) over the whole vocabulary, mean over positions."""
    s = torch.log_softmax(student_logits.float(), -1)
    t = torch.log_softmax(teacher_logits.detach().float(), -1)
    m = torch.logsumexp(torch.stack([s, t]), dim=0) + math.log(0.5)
    per_token = 0.5 * (s.exp() * (s - m)).sum(-1) + 0.5 * (t.exp() * (t - m)).sum(-1)
    return per_token.mean()


def _rss_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # "5" resets VmHWM to the current RSS


def measure_one(method: str, mode: str, positions: int, vocab: int, top_k: int, chunk: int, seed: int) -> dict:
    """Run one loss in this process; returns extra peak bytes and seconds."""
    torch.manual_seed(seed)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    student = (torch.randn(1, positions, vocab, device=device) * 2).requires_grad_(mode == "fwd+bwd")
    teacher = torch.randn(1, positions, vocab, device=device) * 2
    sampled = torch.randint(0, vocab, (1, positions), device=device)
    mask = torch.ones(1, positions, dtype=torch.bool, device=device)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        _reset_peak_rss()
        base = _rss_bytes("VmRSS")
    start = time.perf_counter()
    with torch.set_grad_enabled(mode == "fwd+bwd"):
        if method == "topk":
            loss, _ = distill_loss(student, teacher, sampled, mask, "jsd", top_k=top_k, chunk=chunk)
        else:
            loss = full_vocab_jsd(student, teacher)
        if mode == "fwd+bwd":
            loss.backward()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if cuda else _rss_bytes("VmHWM")
    return {"extra_bytes": peak - base, "seconds": seconds, "loss": float(loss), "device": device}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positions", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=248_320)
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--chunk", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--one", nargs=2, metavar=("METHOD", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    common = (args.positions, args.vocab, args.top_k, args.chunk, args.seed)
    if args.one:
        print(json.dumps(measure_one(args.one[0], args.one[1], *common)))
        return

    logits_gib = args.positions * args.vocab * 4 / GIB
    print(f"positions={args.positions} V={args.vocab:,} K={args.top_k} chunk={args.chunk} "
          f"threads={torch.get_num_threads()} one fp32 logits tensor = {logits_gib:.2f} GiB (x2 inputs)")
    print("| loss | pass | device | time s | extra peak GiB | extra minus logits grad GiB | loss value |")
    print("|---|---|---|---|---|---|---|")
    for method in args.methods:
        for mode in args.modes:
            # a fresh process per row so that one row's allocations cannot hide another's peak
            cmd = [sys.executable, __file__, "--one", method, mode, "--positions", str(args.positions),
                   "--vocab", str(args.vocab), "--top-k", str(args.top_k), "--chunk", str(args.chunk),
                   "--seed", str(args.seed)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
            extra = row["extra_bytes"] / GIB
            beyond_grad = extra - (logits_gib if mode == "fwd+bwd" else 0.0)
            print(f"| {method} | {mode} | {row['device']} | {row['seconds']:.2f} | {extra:.3f} | "
                  f"{beyond_grad:.3f} | {row['loss']:.5f} |", flush=True)


if __name__ == "__main__":
    main()
