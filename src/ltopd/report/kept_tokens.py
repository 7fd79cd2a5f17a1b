"""What the downsampling control's rows keep: the processor resizes each image to about a budget's
token count on its own patch grid, so two budgets can give the same images (the table's 20% and
15% rows equal, 10% and 5%). Each resize row names the visual tokens it keeps per item, and a row
whose images equal a larger budget's (the same kept tokens on every benchmark and seed) says so.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ltopd.catalog import method as method_entry


def resize_notes(results: Sequence[dict[str, Any]], backbone: str,
                 benchmarks: Sequence[str]) -> dict[tuple[str, float], dict[str, Any]]:
    """(method, budget) of each resize row -> ``tokens`` (kept visual tokens per item, all its
    benchmarks and seeds), ``same_as`` (the larger budget whose kept tokens it equals everywhere,
    or None) and ``note`` (the table's words). Rows without token counts (older runs) are left out."""
    kept: dict[tuple[str, float], dict[tuple[str, int], int]] = defaultdict(dict)
    items: dict[tuple[str, float], int] = defaultdict(int)
    for r in results:
        if (r["backbone"] == backbone and r["benchmark"] in benchmarks and "kept_tokens" in r
                and method_entry(r["method"]).kind == "resize"):
            key = (r["method"], float(r["budget"]))
            kept[key][(r["benchmark"], int(r["seed"]))] = int(r["kept_tokens"])
            items[key] += int(r["n"])
    out = {}
    for key in sorted(kept, key=lambda k: (k[0], -k[1])):
        tokens = sum(kept[key].values()) / items[key] if items[key] else float("nan")
        same = next((b for (m, b) in out if m == key[0] and b > key[1] and kept[(m, b)] == kept[key]), None)
        note = (f"{tokens:.0f} token{'' if round(tokens) == 1 else 's'} per item"
                + (f", the same images as {100 * same:g}%" if same else ""))
        out[key] = {"tokens": tokens, "same_as": same, "note": note}
    return out


def annotate(rows: list[dict[str, Any]], results: Sequence[dict[str, Any]], backbone: str,
             benchmarks: Sequence[str]) -> list[dict[str, Any]]:
    """``rows`` with each resize row of ours carrying its ``note``, ``tokens`` and ``same_as``."""
    notes = resize_notes(results, backbone, benchmarks)
    return [dict(r, **notes[(r["method"], r["budget"])]) if r["source"] == "ours" and r["budget"] is not None
            and (r["method"], r["budget"]) in notes else r for r in rows]
