"""The analytic Table 5 for Qwen3.5-4B: KV cache and prefill FLOPs, full vs a reduced budget, by
part, beside the paper's figures. No model is loaded (config/models/qwen3_5_4b.json).

    python probes/efficiency_table.py [--budget 0.05] [--floor 32] [--config config/models/qwen3_5_4b.json]
                                          [--visual N --text T]   # own token counts instead of the paper-derived ones
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ltopd.efficiency import table5
from ltopd.efficiency.analytic import (
    MB,
    TFLOP,
    ProtocolTokens,
    TextArch,
    keep_count,
    kv_cache,
    prefill_flops,
    tokens_from_kv,
)

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(ROOT / "config" / "models" / "qwen3_5_4b.json"))
    p.add_argument("--budget", type=float, default=0.05)
    p.add_argument("--floor", type=int, default=32)
    p.add_argument("--visual", type=float, help="mean visual tokens per question (default: solved from the paper's KV)")
    p.add_argument("--text", type=float, help="mean text tokens per question (with --visual)")
    args = p.parse_args()

    arch = TextArch.from_file(args.config)
    paper = {r["method"]: r for r in table5.paper_table5()["rows"]}
    if args.visual is not None:
        tokens = ProtocolTokens(text=args.text or 0.0, visual=args.visual)
        kept = keep_count(tokens.visual, args.budget, args.floor)
        source = "given"
    else:
        tokens, kept = tokens_from_kv(arch, paper["full"]["kv_cache_mb"], paper["ltopd"]["kv_cache_mb"],
                                      args.budget, args.floor)
        source = "solved from the paper's KV figures"
    print(f"{arch.name}: {len(arch.layer_types)} layers ({arch.full_layers} full attention, "
          f"{arch.linear_layers} Gated DeltaNet), hidden {arch.hidden}, vocab {arch.vocab}")
    print(f"tokens ({source}): text {tokens.text:.1f} + visual {tokens.visual:.1f}; kept at {args.budget:g}: {kept}\n")

    full_t, red_t = tokens.total(), tokens.total(kept)
    kv_f, kv_r = kv_cache(arch, full_t), kv_cache(arch, red_t)
    f_f, f_r = prefill_flops(arch, full_t), prefill_flops(arch, red_t)
    width = 28
    print(f"{'':{width}} {'full':>12} {f'{args.budget:g}':>12} {'ratio':>8}")
    print(f"{'prefill tokens':{width}} {full_t:12.1f} {red_t:12.1f} {red_t / full_t:8.3f}")
    print(f"{'KV cache (MB, BF16)':{width}} {kv_f.kv_mb:12.2f} {kv_r.kv_mb:12.2f} {kv_r.kv_bytes / kv_f.kv_bytes:8.3f}")
    print(f"{'linear state (MB)':{width}} {kv_f.state_mb:12.2f} {kv_r.state_mb:12.2f}   (constant)")
    for part in ("projections", "attention", "linear_recurrence", "mlp", "lm_head"):
        a, b = getattr(f_f, part) / TFLOP, getattr(f_r, part) / TFLOP
        print(f"{part + ' (TFLOPs)':{width}} {a:12.4f} {b:12.4f} {b / a if a else float('nan'):8.3f}")
    print(f"{'prefill (TFLOPs)':{width}} {f_f.tflops:12.3f} {f_r.tflops:12.3f} {f_r.total / f_f.total:8.3f}")
    epic = prefill_flops(arch, full_t, reduced_tokens=red_t, prune_layer=2)
    noncausal = prefill_flops(arch, full_t, causal=False)
    print(f"\npaper: KV {paper['full']['kv_cache_mb']} -> {paper['ltopd']['kv_cache_mb']} MB "
          f"({paper['ltopd']['kv_change_pct']}%), prefill {paper['full']['prefill_tflops']} TFLOPs x "
          f"{paper['ltopd']['flops_ratio']} (HiPrune {paper['hiprune']['flops_ratio']}, "
          f"EPIC {paper['epic']['flops_ratio']})")
    print(f"ours:  KV {kv_f.kv_bytes / MB:.2f} -> {kv_r.kv_bytes / MB:.2f} MB "
          f"({100 * (kv_r.kv_bytes / kv_f.kv_bytes - 1):.1f}%), prefill {f_f.tflops:.3f} TFLOPs x "
          f"{f_r.total / f_f.total:.3f} (EPIC, pruned before layer 2: {epic.total / f_f.total:.3f})")
    print(f"       attention counted without the causal mask: {noncausal.tflops:.3f} TFLOPs full")


if __name__ == "__main__":
    main()
