"""The gated delta rule on CPU: transformers' reference kernels, re-batched for short sequences.

Qwen3.5's linear-attention layers call ``chunk_gated_delta_rule`` (prefill) and
``fused_recurrent_gated_delta_rule`` (one token per decoding step); without
flash-linear-attention (no CPU kernel) transformers runs its reference PyTorch code
(``torch_chunk_gated_delta_rule``, ``torch_recurrent_gated_delta_rule``), a third of an
evaluation's CPU time on the twins' shapes (batch 40, ~100-200 prompt tokens, 4 value heads over
2 key heads, head size 32: docs/measured/eval-breakdown.md). On these small tensors the cost is
not arithmetic but passes over memory and fresh buffers (each new page of a large temporary
faults on these machines), so the same mathematics is computed here with:

- the chunk length fitted to the sequence (n = ceil(T / 64) chunks of ceil(T / n) tokens), so
  almost no padding; chunk-major buffers, so each step of the scan reads contiguous slices;
- the key-only products (Q K^T, K K^T, the L2 norms) once per key head, broadcast to its
  value heads instead of copying query and key per value head;
- one triangular solve for both right-hand sides (new values and decayed keys);
- within-chunk decays exp(min(c_i - c_j, 0)) times a 0/1 causal mask (no -inf fill), and
  in-place elementwise work wherever a buffer is not read again;
- no read of a zero state (the first chunk without an initial state).

Same arguments and returns as the reference functions, equal within float32 rounding
(tests/models/test_delta_rule.py states the tolerance). ``install`` puts them in a loaded
model's Gated DeltaNet layers, where each layer looks its kernels up; they run only where the
reference would and is replaced exactly: CPU tensors, no packed sequences, no gradient (training
keeps the reference's autograd graph); anything else goes to the library's own routing.
"""

from __future__ import annotations

import math
from types import MethodType
from typing import Any

import torch
from torch import Tensor, nn

MAX_CHUNK = 64  # the reference's chunk length: the longest chunk whose decays stay well scaled


def _l2norm_(x: Tensor, scale: float = 1.0) -> Tensor:
    """In place: x * rsqrt(sum x^2 + 1e-6) (the reference's and FLA's form), times `scale`."""
    inv = torch.linalg.vecdot(x, x).add_(1e-6).rsqrt_()
    if scale != 1.0:
        inv.mul_(scale)
    return x.mul_(inv.unsqueeze(-1))


def _chunked(x: Tensor, num_k_heads: int, n: int, c: int) -> Tensor:
    """(B, T, H, ...) -> float32 (n, B, Hk, H // Hk, C, ...), chunk-major so that each chunk is
    contiguous, zero-padded to n * C tokens, in one new buffer (value head h reads key head
    h // (H // Hk), as the reference's repeat_interleave)."""
    b, t, h = x.shape[:3]
    rest = x.shape[3:]
    out = torch.zeros((n, b, h, c, *rest), dtype=torch.float32, device=x.device)
    full = (n - 1) * c
    out[:-1].copy_(x[:, :full].reshape(b, n - 1, c, h, *rest).transpose(0, 1).transpose(2, 3))
    out[-1, :, :, : t - full].copy_(x[:, full:].transpose(1, 2))
    return out.view(n, b, num_k_heads, h // num_k_heads, c, *rest)


def chunk_gated_delta_rule(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    g: Tensor,
    beta: Tensor,
    chunk_size: int = MAX_CHUNK,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    **kwargs: Any,
) -> tuple[Tensor, Tensor | None]:
    """transformers' torch_chunk_gated_delta_rule, re-batched (module docstring)."""
    dtype = query.dtype
    b, t, hk, dk = key.shape
    hv, dv = value.shape[-2:]
    groups = hv // hk
    n = max(1, math.ceil(t / chunk_size))
    c = max(1, math.ceil(t / n))  # chunk length: n chunks, fewer than n padded tokens

    # key-head tensors (n, B, Hk, 1, C, dk); value-head tensors (n, B, Hk, G, C, ...)
    q, k = _chunked(query, hk, n, c), _chunked(key, hk, n, c)
    if use_qk_l2norm_in_kernel:
        _l2norm_(q, dk**-0.5), _l2norm_(k)
    else:
        q.mul_(dk**-0.5)
    v = _chunked(value, hk, n, c)
    bt = _chunked(beta, hk, n, c).unsqueeze_(-1)
    cum = _chunked(g, hk, n, c).cumsum_(-1)

    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    # decay from position j to i of a chunk; cum is non-increasing (g <= 0), so the clamp only
    # touches the masked (j > i) half, which it keeps finite
    decay = (cum.unsqueeze(-1) - cum.unsqueeze(-2)).clamp_max_(0).exp_().mul_(causal)
    ut = (k @ k.transpose(-1, -2)).mul(bt).mul_(decay)  # the UT system (its strict lower part is read)
    attn = decay.mul_(q @ k.transpose(-1, -2))  # within-chunk attention, causal
    cum_exp = cum.exp().unsqueeze_(-1)
    # one solve for both right-hand sides: the new values and the decayed keys that read the
    # state (none is read by a lone chunk without an initial state)
    reads_state = n > 1 or initial_state is not None
    rhs = torch.empty((*v.shape[:-1], dv + dk * reads_state), dtype=v.dtype, device=v.device)
    torch.mul(v, bt, out=rhs[..., :dv])
    if reads_state:
        torch.mul(k, bt, out=rhs[..., dv:]).mul_(cum_exp)
    solved = torch.linalg.solve_triangular(ut, rhs, upper=False, unitriangular=True)
    new_v, k_cumdecay = solved[..., :dv], solved[..., dv:]
    # each token's key decayed to its chunk's end: what it writes into the state
    k_tail = k.mul((cum[..., -1:] - cum).exp_().unsqueeze_(-1)).transpose(-1, -2)
    q_decayed = q * cum_exp
    chunk_decay = cum[..., -1].exp()[..., None, None]

    state = None if initial_state is None else initial_state.float().reshape(b, hk, groups, dk, dv)
    out = torch.empty_like(new_v)
    for i in range(n):
        if state is None:  # a zero state: nothing to read
            v_new = new_v[i]
            torch.matmul(attn[i], v_new, out=out[i])
        else:
            v_new = new_v[i] - k_cumdecay[i] @ state
            torch.matmul(q_decayed[i], state, out=out[i]).add_(attn[i] @ v_new)
        if i < n - 1 or output_final_state:
            written = k_tail[i] @ v_new
            state = written if state is None else written.add_(state * chunk_decay[i])
    # (n, B, Hk, G, C, dv) -> (B, T, Hv, dv)
    chunks = out.permute(1, 0, 4, 2, 3, 5).reshape(b, n * c, hv, dv)
    out = torch.empty((b, t, hv, dv), dtype=dtype, device=chunks.device).copy_(chunks[:, :t])
    if output_final_state:
        return out, state.reshape(b, hv, dk, dv)
    return out, None


def recurrent_gated_delta_rule(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    g: Tensor,
    beta: Tensor,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    **kwargs: Any,
) -> tuple[Tensor, Tensor | None]:
    """transformers' torch_recurrent_gated_delta_rule, one batched matrix product per read and
    write of the state (the reference's elementwise products and sums over (B, H, dk, dv))."""
    dtype = query.dtype
    b, t, hk, dk = key.shape
    hv, dv = value.shape[-2:]
    groups = hv // hk
    # per (batch, value head) rows, each value head reading its key head (new buffers)
    q, k = (x.float().repeat_interleave(groups, dim=2).transpose(1, 2).reshape(b * hv, t, dk) for x in (query, key))
    if use_qk_l2norm_in_kernel:
        _l2norm_(q, dk**-0.5), _l2norm_(k)
    else:
        q = q * dk**-0.5
    v = value.float().transpose(1, 2).reshape(b * hv, t, dv)
    decay = g.float().exp().transpose(1, 2).reshape(b * hv, t, 1, 1)
    bt = beta.float().transpose(1, 2).reshape(b * hv, t, 1)
    state = (
        initial_state.float().reshape(b * hv, dk, dv).clone()
        if initial_state is not None
        else q.new_zeros(b * hv, dk, dv)
    )
    outs = []
    for i in range(t):
        state.mul_(decay[:, i])
        k_t = k[:, i : i + 1]  # (BH, 1, dk)
        delta = (v[:, i : i + 1] - k_t @ state) * bt[:, i : i + 1]
        state.baddbmm_(k_t.transpose(1, 2), delta)
        outs.append(q[:, i : i + 1] @ state)
    out = torch.cat(outs, 1).reshape(b, hv, t, dv).transpose(1, 2).to(dtype).contiguous()
    return out, (state.reshape(b, hv, dk, dv) if output_final_state else None)


FAST = {
    "chunk_gated_delta_rule": chunk_gated_delta_rule,
    "fused_recurrent_gated_delta_rule": recurrent_gated_delta_rule,
}


def _applies(args: tuple, kwargs: dict) -> bool:
    """Where the reference would run and this path is equal to it: CPU, no packed sequences
    (the reference refuses them), no gradient needed."""
    tensors = [x for x in (*args, *kwargs.values()) if isinstance(x, Tensor)]
    return (
        all(x.device.type == "cpu" for x in tensors)
        and kwargs.get("cu_seqlens") is None
        and not (torch.is_grad_enabled() and any(x.requires_grad for x in tensors))
    )


def _dispatch(name: str):
    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        if _applies(args, kwargs):
            return FAST[name](*args, **kwargs)
        return type(self).forward(self, *args, **kwargs)  # the library's own routing

    return forward


def install(model: nn.Module, enabled: bool = True) -> list[str]:
    """Route every Gated DeltaNet layer of `model` to this module's kernels where they apply
    (`enabled`), or back to the library's (not `enabled`); returns the layer names. Each layer
    holds its kernels as per-instance modules (transformers' ``use_kernelized_func``:
    ``layer._kernel_funcs[name]``, whose forward ``kernels.kernelize`` also sets); their forward is
    set here, so the library's files and other models are untouched."""
    installed = []
    for name, module in model.named_modules():
        funcs = getattr(module, "_kernel_funcs", None)
        if not isinstance(funcs, dict) or not all(k in funcs for k in FAST):
            continue
        for fn_name in FAST:
            if enabled:
                funcs[fn_name].forward = MethodType(_dispatch(fn_name), funcs[fn_name])
            else:
                funcs[fn_name].__dict__.pop("forward", None)
        installed.append(name)
    return installed
