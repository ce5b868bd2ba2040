"""PyTorch autograd references for attention.

`attention(...)` is the math, written once; the oracle calls it twice: upcast to float64
(the reference) and in the input dtype (the baseline that measures what rounding alone costs).
Tensors are canonical [batch, heads, seq, dim]; harness.layout converts to and from the kernel's.
"""
from __future__ import annotations

import torch

from harness.layout import from_canonical, to_canonical

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def visible(seqlen_q: int, seqlen_k: int, left: int, right: int, device=None) -> torch.Tensor:
    """[seqlen_q, seqlen_k] bool: query i sees key j (FlashAttention bottom-right alignment)."""
    i = torch.arange(seqlen_q, device=device)[:, None]
    j = torch.arange(seqlen_k, device=device)[None, :]
    shift = seqlen_k - seqlen_q
    seen = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if left >= 0:
        seen &= j >= i + shift - left
    if right >= 0:
        seen &= j <= i + shift + right
    return seen


def attention(q, k, v, sinks, seen, scale, bias=None):
    """O and LSE for q [b,h,sq,d], k/v [b,hk,sk,d] (GQA by repetition), sinks [h] or None; `seen`
    and `bias` (added to the scaled scores, or None) broadcast against [b, h, sq, sk].

    A row that sees no key gives O = 0 and LSE = -inf (or the sink logit when there are sinks).
    Written without NaN anywhere, so autograd through it is clean on empty rows too.
    """
    p, lse = softmax(q, k, sinks, seen, scale, bias)
    o = torch.matmul(p.to(v.dtype), repeat_kv(v, q.shape[1]))
    return o, lse


def repeat_kv(x, heads):
    """[b, hk, s, d] -> [b, heads, s, d]: each KV head serves heads // hk query heads (GQA)."""
    return x.repeat_interleave(heads // x.shape[1], dim=1)


def softmax(q, k, sinks, seen, scale, bias=None):
    """P [b,h,sq,sk] (the sink's share left out) and LSE [b,h,sq] of attention's softmax."""
    s = torch.matmul(q, repeat_kv(k, q.shape[1]).transpose(-1, -2)) * scale
    if bias is not None:
        s = s + bias
    s = s.masked_fill(~seen, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    if sinks is not None:
        m = torch.maximum(m, sinks.to(s.dtype)[None, :, None, None])
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m).detach()
    e = torch.exp(s - m)
    denom = e.sum(dim=-1, keepdim=True)
    if sinks is not None:
        denom = denom + torch.exp(sinks.to(s.dtype)[None, :, None, None] - m)
    p = e / torch.where(denom == 0, torch.ones_like(denom), denom)
    return p, (torch.log(denom) + m).squeeze(-1)


def make_inputs(case, device) -> dict:
    """Random inputs in the kernel's layout, determined by case.seed."""
    g = torch.Generator(device="cpu").manual_seed(case.seed)
    dtype = DTYPES[case.dtype]

    def tensor(b, s, h, d):
        return from_canonical(torch.randn(b, h, s, d, generator=g), case.layout).to(device=device, dtype=dtype)

    return {
        "q": tensor(case.batch, case.seqlen_q, case.heads, case.head_dim),
        "k": tensor(case.batch, case.seqlen_k, case.kv_heads, case.head_dim),
        "v": tensor(case.batch, case.seqlen_k, case.kv_heads, case.head_dim_v),
        # Sink logits on the scale of attention scores; zeros when unused (the kernel ignores them).
        "sinks": (torch.randn(case.heads, generator=g) * 2 if case.sinks
                  else torch.zeros(case.heads)).to(device=device, dtype=torch.float32),
    }


def forward(case, inputs, dtype) -> dict:
    """{"O", "LSE"} computed in `dtype` (float64 for the reference, the input dtype for the baseline)."""
    q, k, v = (to_canonical(inputs[n], case.layout).to(dtype) for n in ("q", "k", "v"))
    left, right = case.bounds
    seen = visible(case.seqlen_q, case.seqlen_k, left, right, device=q.device)
    sinks = inputs["sinks"] if case.sinks else None
    o, lse = attention(q, k, v, sinks, seen, case.head_dim ** -0.5)
    return {"O": o, "LSE": lse}
