"""Throughput of the synthetic world, single process: images/s (scene sampling + rendering)
and items/s (full records with questions, styles in rotation) at several resolutions.

    python benchmarks/world_speed.py [--n 200] [--sizes 128 256 448]
"""

from __future__ import annotations

import argparse
import time

from ltopd.data.world import (
    STYLES,
    WorldConfig,
    generate_item,
    item_rng,
    render_scene,
    sample_scene,
)


def images_per_second(cfg: WorldConfig, n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        render_scene(sample_scene(item_rng(0, "speed", i), cfg))
    return n / (time.perf_counter() - t0)


def items_per_second(cfg: WorldConfig, n: int) -> float:
    styles = list(STYLES)
    t0 = time.perf_counter()
    for i in range(n):
        generate_item(styles[i % len(styles)], i, 0, cfg)
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="images / items timed per size")
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 448])
    args = ap.parse_args()
    print(f"{'size':>6} {'images/s':>10} {'items/s':>10}")
    for size in args.sizes:
        cfg = WorldConfig.for_size(size)
        generate_item("llava", 0, 0, cfg)  # warm the font caches
        print(f"{size:>6} {images_per_second(cfg, args.n):>10.0f} "
              f"{items_per_second(cfg, args.n):>10.0f}")


if __name__ == "__main__":
    main()
