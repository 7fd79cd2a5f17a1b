"""Progress bars that suit both a terminal and a Snakemake log file."""
from __future__ import annotations

import sys

from tqdm import tqdm


def bar(total: int, desc: str, unit: str = "it", enabled: bool = True) -> tqdm:
    """tqdm with ETA; redraws often on a terminal, every 15 s in a log file (no wall of \\r lines)."""
    tty = sys.stderr.isatty()
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr,
                mininterval=0.2 if tty else 15.0, dynamic_ncols=tty, ascii=not tty)
