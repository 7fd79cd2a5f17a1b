"""The eleven evaluation benchmarks as record sets: a synthetic twin drawn from the procedural
world (held-out seed space, see synthetic.py) and a loader of the real data from a local path
(real.py), both in the design.md record format the official scorers (bench/scoring) read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltopd.catalog import BENCHMARKS, resolve
from ltopd.data.world import WorldConfig

from .real import RealFormatError, load_real
from .synthetic import bench_seed


@dataclass(frozen=True)
class Suite:
    name: str
    synthetic: Callable[[int, int, WorldConfig], list[dict]]  # (n, seed, the canvas' cfg) -> records
    real: Callable[[str | Path], list[dict]]  # path -> records
    generation_cap: int  # max new tokens (the closing answer tag included)
    default_canvas: Callable[[WorldConfig], WorldConfig]  # base world -> its canvas when the profile names none


def _same(cfg: WorldConfig) -> WorldConfig:
    return cfg


def _real(name: str) -> Callable[[str | Path], list[dict]]:
    return lambda path: load_real(name, path)


# One suite per benchmark of the catalog (its generator, loader and generation cap are declared there).
SUITES: dict[str, Suite] = {
    b.name: Suite(b.name, resolve(__name__, b.synthetic), _real(b.name), b.generation_cap,
                  resolve(__name__, b.default_canvas) if b.default_canvas else _same)
    for b in BENCHMARKS.values()
}


def _suite(name: str) -> Suite:
    if name not in SUITES:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(sorted(SUITES))}")
    return SUITES[name]


def synthetic_records(name: str, n: int, seed: int, world: dict[str, Any]) -> list[dict]:
    """``n`` twin records of benchmark ``name``; ``world`` is a profile's world section (its
    ``canvas`` names the benchmark's canvas; else the suite's default canvas)."""
    from ltopd.data.world.canvas import base_world, benchmark_world

    if not isinstance(n, int) or n < 0:
        raise ValueError(f"{name}: n must be a non-negative integer, got {n!r}")
    suite = _suite(name)
    cfg = benchmark_world(world, name) or suite.default_canvas(base_world(world))
    return suite.synthetic(n, seed, cfg)


def load_records(name: str, path: str | Path) -> list[dict]:
    """Records of the real benchmark ``name`` from a local TSV / saved dataset / parquet path."""
    return _suite(name).real(path)


__all__ = ["SUITES", "RealFormatError", "Suite", "bench_seed", "load_records",
           "synthetic_records"]
