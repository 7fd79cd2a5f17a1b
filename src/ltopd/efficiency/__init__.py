"""Efficiency (Table 5): analytic KV cache and prefill FLOPs, the measured Appendix E protocol,
and the table with the paper's numbers beside ours."""

from ltopd.efficiency.analytic import KVCache, PrefillFlops, TextArch, kv_cache, prefill_flops, tokens_from_kv

__all__ = ["KVCache", "PrefillFlops", "TextArch", "kv_cache", "prefill_flops", "tokens_from_kv"]
