"""Table 5: KV cache, prefill FLOPs and latency, full vs reduced, with the paper's rows beside ours.

Three kinds of rows (column ``source``):
* ``paper``: Table 5 as reported (Qwen3.5-4B, 5%), from ltopd/paper_numbers.yaml.
* ``analytic``: Qwen3.5-4B from config/models/qwen3_5_4b.json and the protocol's token counts
  (derived from the paper's two KV figures, see :func:`analytic_rows`).
* ``ours``: the Appendix E protocol measured on the profile's backbones (twins on CPU by default):
  KV and state bytes read from the cache, analytic FLOPs at the measured tokens, profiler FLOPs,
  latency; ratios against the same backbone's full row.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ltopd.catalog import METHODS
from ltopd.efficiency.analytic import MB, TFLOP, ProtocolTokens, TextArch, kv_cache, prefill_flops, tokens_from_kv
from ltopd.reported import paper_numbers

COLUMNS = ("source", "backbone", "method", "budget", "text_tokens", "visual_tokens", "kept_tokens",
           "prefill_tokens", "kv_cache_mb", "kv_change_pct", "linear_state_mb", "prefill_tflops",
           "flops_ratio", "profiler_tflops", "latency_ms", "latency_sd_ms", "speedup", "questions", "note")

def paper_table5() -> dict[str, Any]:
    return paper_numbers()["table5"]


def analytic_methods(selector: str) -> dict[str, tuple[str, int] | None]:
    """Table 5's rows as the paper names them -> how each prunes: (selector, LM layer it prunes
    before), None for full tokens. A training-free method prunes with itself, a trained one with
    ``selector`` (the students': the profile's training.selector), before the LM, unless the
    paper's table5.pruning says otherwise (EPIC: DART at layer 2)."""
    t5 = paper_table5()
    out: dict[str, tuple[str, int] | None] = {}
    for r in t5["rows"]:
        name = r["method"]
        if METHODS[name].kind == "reference":
            out[name] = None
            continue
        how = t5.get("pruning", {}).get(name, {})
        own = name if METHODS[name].kind == "selector" else selector
        out[name] = (how.get("selector", own), int(how.get("layer", 0)))
    return out


def paper_rows() -> list[dict[str, Any]]:
    """The paper's Table 5 as rows of COLUMNS (missing cells left empty; FLOPs from the ratio)."""
    t5 = paper_table5()
    full = next(r for r in t5["rows"] if r["method"] == "full")
    rows = []
    for r in t5["rows"]:
        ratio = r.get("flops_ratio", 1.0 if r["method"] == "full" else None)
        rows.append({
            "source": "paper", "backbone": t5["backbone"], "method": r["method"], "budget": r["budget"],
            "kv_cache_mb": r.get("kv_cache_mb"), "kv_change_pct": r.get("kv_change_pct"),
            "prefill_tflops": r.get("prefill_tflops", full["prefill_tflops"] * ratio if ratio else None),
            "flops_ratio": ratio, "latency_ms": r.get("latency_ms"), "speedup": r.get("speedup"),
            "questions": t5["protocol"]["questions"], "note": r.get("note", ""),
        })
    return rows


def protocol_tokens(arch: TextArch, budget: float | None = None,
                    floor: int | None = None) -> tuple[ProtocolTokens, int, float, int]:
    """(mean tokens, kept visual tokens, budget, floor) of the paper's protocol on ``arch``: the
    paper gives no token counts, so the means are solved from its two KV figures
    (analytic.tokens_from_kv); ``budget`` and ``floor`` default to the protocol's (the setting
    those figures were measured at)."""
    t5 = paper_table5()
    proto = t5["protocol"]
    budget = proto["budget"] if budget is None else budget
    floor = proto["floor"] if floor is None else floor
    kv_rows = {r["method"]: r["kv_cache_mb"] for r in t5["rows"] if "kv_cache_mb" in r}
    tokens, kept = tokens_from_kv(arch, kv_rows["full"], kv_rows["ltopd"], budget, floor)
    return tokens, kept, budget, floor


def analytic_rows(arch: TextArch, selector: str, budget: float | None = None,
                  floor: int | None = None) -> list[dict[str, Any]]:
    """Qwen3.5-4B computed from its config. The paper gives no token counts, so the mean text
    and visual tokens are solved from its two KV figures (analytic.tokens_from_kv); the FLOPs
    then follow independently of the paper's FLOPs figures (BF16 KV, lm_head on the last
    position, causal attention). ``selector``: the students' (analytic_methods); ``budget`` and
    ``floor`` default to the paper's protocol (the setting its KV figures were measured at)."""
    tokens, kept, budget, floor = protocol_tokens(arch, budget, floor)
    full_tokens, reduced_tokens = tokens.total(), tokens.total(kept)
    kv_full = kv_cache(arch, full_tokens)
    flops_full = prefill_flops(arch, full_tokens)
    rows = []
    for method, how in analytic_methods(selector).items():
        if how is None:
            kv, flops, b, k, note = kv_full, flops_full, 1.0, tokens.visual, "all visual tokens"
        else:
            pruner, layer = how
            # Pruning inside the LM: layers before `layer` are linear attention in Qwen3.5 (no KV),
            # so the KV is the reduced one either way; only the FLOPs see the full prefix.
            kv = kv_cache(arch, reduced_tokens)
            flops = prefill_flops(arch, full_tokens, reduced_tokens=reduced_tokens, prune_layer=layer)
            b, k = budget, kept
            note = f"{pruner}, pruned before LM layer {layer}" if layer else f"{pruner}, pruned before the LM"
        rows.append({
            "source": "analytic", "backbone": arch.name or "Qwen3.5-4B", "method": method, "budget": b,
            "text_tokens": tokens.text, "visual_tokens": tokens.visual, "kept_tokens": k,
            "prefill_tokens": tokens.total(k), "kv_cache_mb": kv.kv_mb,
            "kv_change_pct": 100 * (kv.kv_bytes / kv_full.kv_bytes - 1), "linear_state_mb": kv.state_mb,
            "prefill_tflops": flops.tflops, "flops_ratio": flops.total / flops_full.total, "note": note,
        })
    return rows


def measured_rows(measurement: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows of one backbone's measurement JSON (written by ``ltopd table5 --measure``)."""
    results = measurement["results"]
    full = next((r for r in results if r["ratio"] >= 1.0), None)
    rows = []
    for r in results:
        row = {
            "source": "ours", "backbone": measurement["backbone"], "method": r["method"], "budget": r["ratio"],
            "text_tokens": r["text_tokens"], "visual_tokens": r["visual_tokens"], "kept_tokens": r["kept_tokens"],
            "prefill_tokens": r["prefill_tokens"], "kv_cache_mb": r["kv_bytes"] / MB,
            "linear_state_mb": r["state_bytes"] / MB, "prefill_tflops": r["analytic_flops"] / TFLOP,
            "profiler_tflops": r["profiler_flops"] / TFLOP if r.get("profiler_flops") else None,
            "latency_ms": r["latency_ms"], "latency_sd_ms": r["latency_sd_ms"], "questions": r["questions"],
            "note": f"{measurement['device']} {measurement['dtype']}"
                    + (f", selector {r['selector']}" if r["ratio"] < 1 else "")
                    + (f" + {r['module']} module" if r.get("module") else ""),
        }
        if full is not None:
            row["kv_change_pct"] = 100 * (r["kv_bytes"] / full["kv_bytes"] - 1) if full["kv_bytes"] else None
            row["flops_ratio"] = r["analytic_flops"] / full["analytic_flops"]
            row["speedup"] = full["latency_ms"] / r["latency_ms"]
        rows.append(row)
    return rows


def build(arch: TextArch, measurements: Sequence[Mapping[str, Any]], selector: str) -> list[dict[str, Any]]:
    """The paper's rows, the analytic ones (LT-OPD's with ``selector``, the profile's
    training.selector) and ours from ``measurements``."""
    rows = paper_rows() + analytic_rows(arch, selector)
    for m in measurements:
        rows += measured_rows(m)
    return [{c: row.get(c) for c in COLUMNS} for row in rows]


def load_measurements(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    out = []
    for p in paths:
        data = json.loads(Path(p).read_text())
        if "results" not in data or "backbone" not in data:
            raise ValueError(f"{p}: not an efficiency measurement (no 'backbone'/'results')")
        out.append(data)
    return out


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if abs(value) >= 1e-3 or value == 0 else f"{value:.3g}"
    return str(value)


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({c: _fmt(r.get(c), 6) for c in COLUMNS})
    return buf.getvalue()


MD_COLUMNS = (("source", "source"), ("backbone", "backbone"), ("method", "method"), ("budget", "budget"),
              ("prefill_tokens", "prefill tokens"), ("kv_cache_mb", "KV cache (MB)"), ("kv_change_pct", "ΔKV %"),
              ("linear_state_mb", "linear state (MB)"), ("prefill_tflops", "prefill TFLOPs"),
              ("flops_ratio", "FLOPs ratio"), ("profiler_tflops", "profiler TFLOPs"),
              ("latency_ms", "latency (ms)"), ("speedup", "speed-up"))


def to_markdown(rows: Sequence[Mapping[str, Any]], notes: Sequence[str] = ()) -> str:
    head = "| " + " | ".join(label for _, label in MD_COLUMNS) + " |"
    sep = "|" + "---|" * len(MD_COLUMNS)
    lines = [head, sep]
    for r in rows:
        cells = []
        for key, _ in MD_COLUMNS:
            v = r.get(key)
            digits = 6 if key in ("prefill_tflops", "profiler_tflops") and r["source"] == "ours" else 3
            if key == "latency_ms" and v is not None and r.get("latency_sd_ms"):
                cells.append(f"{v:.1f} ± {r['latency_sd_ms']:.1f}")
            else:
                cells.append(_fmt(v, digits))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n"


def notes(rows: Sequence[Mapping[str, Any]], arch: TextArch | None = None) -> list[str]:
    """How our analytic Qwen3.5-4B rows compare with the paper's, and what the columns mean."""
    paper = {r["method"]: r for r in rows if r["source"] == "paper"}
    ana = {r["method"]: r for r in rows if r["source"] == "analytic"}
    out = []
    if "full" in paper and "full" in ana and "ltopd" in ana:
        pf, af = paper["full"]["prefill_tflops"], ana["full"]["prefill_tflops"]
        out.append(
            f"Analytic Qwen3.5-4B: tokens solved from the paper's KV figures ({ana['full']['text_tokens']:.1f} text + "
            f"{ana['full']['visual_tokens']:.1f} visual, {ana['ltopd']['kept_tokens']:g} kept at 5%), so ΔKV "
            f"{ana['ltopd']['kv_change_pct']:.1f}% matches {paper['ltopd']['kv_change_pct']}% by construction. "
            f"FLOPs are independent of the paper's: full prefill {af:.3f} vs {pf:.3f} TFLOPs "
            f"({100 * (af / pf - 1):+.1f}%), 5% ratio {ana['ltopd']['flops_ratio']:.4f} vs "
            f"{paper['ltopd']['flops_ratio']} "
            f"(Δ {100 * (ana['ltopd']['flops_ratio'] - paper['ltopd']['flops_ratio']):+.2f}"
            f" points); EPIC (prune before layer 2) {ana['epic']['flops_ratio']:.3f} "
            f"vs {paper['epic']['flops_ratio']}. "
            "The residual absolute gap is counting convention (docs/cluster.md, section 6)"
            + (f": attention counted without the causal mask would add "
               f"{(prefill_flops(arch, ana['full']['prefill_tokens'], causal=False).total - af * TFLOP) / TFLOP:.3f}"
               " TFLOPs; chunked gated-delta kernels and element-wise ops (not counted) the rest." if arch else "."))
    out.append("Linear-attention (Gated DeltaNet) layers keep a fixed-size state (recurrent matrix + conv window), "
               "shown as 'linear state' and not included in the KV cache column, which scales with tokens.")
    out.append("ours: Appendix E protocol on the profile's backbones (twins on CPU on the default profile): batch 1, "
               "reference replayed with one prefill + ref_tokens-1 cached forward passes, latency = mean over "
               "repetitions then questions (± SD across questions); prefill TFLOPs analytic at the measured tokens; "
               "profiler TFLOPs = torch.profiler's matmul-type count of the LM prefill (omits SDPA attention).")
    return out
