"""Time every selector at growing token counts; CDPruner matrix-free vs materialised kernel.

Usage: python benchmarks/selectors_bench.py [--dim 2560] [--sizes 196 1024 4096 16384] [--threads 1]
Budget k = 5% of N (keep_count). Inputs are seeded Gaussians; grids are square.
Prints markdown tables (milliseconds; best of --repeats, one run at the largest N).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from functools import partial

import torch

from ltopd.selectors import SELECTORS, SelectionInputs, cdpruner_dense, keep_count, peak_allocated_bytes, select

DENSE_LIMIT_BYTES = 4 * 2**30
KEY_DIM = 1024
TEXT_TOKENS = 32


def make_inputs(n: int, dim: int, seed: int = 0) -> SelectionInputs:
    g = torch.Generator().manual_seed(seed)
    side = math.isqrt(n)
    grid = (side, n // side) if side * (n // side) == n else None
    return SelectionInputs(
        features=torch.randn(n, dim, generator=g),
        query=torch.randn(dim, generator=g),
        last_query_attention=torch.rand(n, generator=g),
        key_states=torch.randn(n, KEY_DIM, generator=g),
        text_key_states=torch.randn(TEXT_TOKENS, KEY_DIM, generator=g),
        hidden_states=torch.randn(n, dim, generator=g),
        encoder_attention_object=torch.rand(n, generator=g),
        encoder_attention_output=torch.rand(n, generator=g),
        grid_hw=grid,
        seed=seed,
    )


def best_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * min(times)


def dense_kernel_bytes(n: int, dim: int) -> int:
    return 4 * (n * n + 2 * n * dim)  # kernel + normalised features and their scaled copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=2560)
    parser.add_argument("--sizes", type=int, nargs="+", default=[196, 1024, 4096, 16384])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="1 keeps timings stable on a shared box")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    names = sorted(SELECTORS)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, load avg {load}")
    print(f"D={args.dim}, Dk={KEY_DIM}, k=5% of N\n")
    print("| N | k | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for n in args.sizes:
        inputs, k = make_inputs(n, args.dim), keep_count(n, 0.05, 1)
        repeats = 1 if n == max(args.sizes) else args.repeats
        cells = [f"{best_ms(partial(select, name, inputs, k), repeats):.1f}" for name in names]
        print(f"| {n} | {k} | " + " | ".join(cells) + " |", flush=True)

    print("\nCDPruner: matrix-free vs materialised kernel (time ms; peak tensor memory MB)\n")
    print("| N | k | free ms | dense ms | free peak MB | dense peak MB | same picks |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        inputs, k = make_inputs(n, args.dim), keep_count(n, 0.05, 1)
        repeats = 1 if n == max(args.sizes) else args.repeats
        free_ms = best_ms(partial(select, "cdpruner", inputs, k), repeats)
        free, free_peak = peak_allocated_bytes(partial(select, "cdpruner", inputs, k))
        need = dense_kernel_bytes(n, args.dim)
        if need > DENSE_LIMIT_BYTES:
            dense_cells = [f"skipped (needs {need / 2**30:.1f} GB)"] * 2 + ["-"]
        else:
            dense_ms = best_ms(partial(cdpruner_dense, inputs, k), repeats)
            dense, dense_peak = peak_allocated_bytes(partial(cdpruner_dense, inputs, k))
            dense_cells = [f"{dense_ms:.1f}", f"{dense_peak / 2**20:.1f}", str(torch.equal(free, dense))]
        print(
            f"| {n} | {k} | {free_ms:.1f} | {dense_cells[0]} | {free_peak / 2**20:.1f} | {dense_cells[1]} "
            f"| {dense_cells[2]} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
