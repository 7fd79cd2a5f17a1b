"""The miniature's instruction tuning: items drawn from the benchmark twins' own generators in a
seed space no evaluation uses.

The paper starts from released checkpoints that already answer every benchmark format (option
letters, yes/no, words, numbers) and every task type the benchmarks pose. A tiny twin learns
those from the procedural world during pretraining; drawing its items from the benchmark
generators teaches exactly the formats the official scorers parse. The scenes never repeat an
evaluation scene: evaluation seeds are below ``INSTRUCT_SEED_BASE`` (config validation holds
them there), pretraining chunks sit at or above it, and ``bench_seed`` maps distinct seeds to
distinct streams.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

INSTRUCT_SEED_BASE = 2**39  # evaluation seeds must stay below (ltopd.config checks)
CHUNK = 64  # records drawn per generator call; coupled records (MME pairs, MMBench rotations) stay together
_CHUNKS_PER_RUN = 2**20  # 67 M items per benchmark and run


def instruct_seed(run_seed: int, chunk: int) -> int:
    """The benchmark seed of chunk ``chunk`` of pretraining run ``run_seed``: in
    [INSTRUCT_SEED_BASE, 2**40), distinct for distinct chunks of runs whose seeds differ mod 2**19."""
    if not 0 <= chunk < _CHUNKS_PER_RUN:
        raise ValueError(f"chunk {chunk} outside [0, {_CHUNKS_PER_RUN})")
    return INSTRUCT_SEED_BASE + (run_seed * _CHUNKS_PER_RUN + chunk) % INSTRUCT_SEED_BASE


@lru_cache(maxsize=32)
def _chunk(name: str, seed: int, world_key: str) -> tuple[dict, ...]:
    from ltopd.bench.suites import synthetic_records

    return tuple(synthetic_records(name, CHUNK, seed, json.loads(world_key)))


def instruct_stream(benchmarks: Sequence[str], run_seed: int, world: dict[str, Any],
                    start: int = 0) -> Iterator[dict]:
    """Endless round-robin over ``benchmarks``; item i is deterministic in (benchmarks, run_seed,
    world, i), so a resumed run continues with exactly the items it would have seen."""
    if not benchmarks:
        raise ValueError("instruct_stream needs at least one benchmark")
    key = json.dumps(world, sort_keys=True)  # hashable, nested `canvas` included
    k = len(benchmarks)
    for i in itertools.count(start):
        name, j = benchmarks[i % k], i // k
        yield _chunk(name, instruct_seed(run_seed, j // CHUNK), key)[j % CHUNK]

# The released twins' gate items (ltopd.twins.build): seed GATE_SEED is scored, GATE_SEED + 1
# fits the question-only baseline. Evaluation seeds stay below GATE_SEED (ltopd.config checks).
GATE_SEED = 2**38
