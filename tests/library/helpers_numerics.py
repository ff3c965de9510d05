"""Tolerances and reference implementations shared by the numerical tests.

Tolerances (stated once, used everywhere):
* float64 against a float64 PyTorch reference: atol 1e-12, rtol 1e-12. Both
  sides compute the same sums in a possibly different order, so they differ by
  a few ulps of values of order 1.
* float32 against the float64 reference: atol 1e-6 (float32 eps is 1.2e-7 and
  a softmax-weighted sum of O(1) values accumulates a few of them).
* float16/bfloat16 against the float64 reference: atol 1e-2 (the output is
  only rounded to half precision, everything inside runs in float32).
* float32 against a float32 result (torch's float32 kernels, or the float64
  reference rounded to float32): torch's own float32 defaults, atol 1e-5 and
  rtol 1.3e-6 (``TOL32``); the tiled loops sum in another order than torch.
* float64 tiled attention against the float64 reference: atol 1e-12 and rtol
  1e-10 (``TOL64_TILED``): the online softmax rescales each row once per tile,
  which costs a few more ulps than one softmax.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

ATOL64 = 1e-12
RTOL64 = 1e-12
ATOL32 = 1e-6
RTOL32 = 0.0
ATOL16 = 1e-2
TOL32 = {"atol": 1e-5, "rtol": 1.3e-6}
TOL64_TILED = {"atol": ATOL64, "rtol": 1e-10}


def assert_close64(actual, expected):
    torch.testing.assert_close(actual, expected, atol=ATOL64, rtol=RTOL64)


def assert_close32(actual, expected64):
    """float32 `actual` against a float64 reference."""
    assert actual.dtype == torch.float32
    torch.testing.assert_close(actual.double(), expected64, atol=ATOL32, rtol=RTOL32)


def randn(*shape, dtype=torch.float64, seed=None):
    gen = None if seed is None else torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=gen)


def bool_to_float_mask(mask: torch.Tensor, dtype=torch.float64) -> torch.Tensor:
    """Reference conversion of a bool mask (True = attend) to a 0/-inf additive mask."""
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float("-inf"))


def torch_sdpa_reference(query, key, value, attn_mask=None, is_causal=False, scale=None):
    """torch's SDPA with `attn_mask` and `is_causal` both applied.

    torch refuses an explicit mask together with is_causal, so the causal part
    is folded into the mask here (top-left aligned, as torch's is_causal is).
    """
    if attn_mask is not None and attn_mask.dim() < 2:
        attn_mask = attn_mask[None, :]  # torch wants at least (1, S); broadcasting is unchanged
    if is_causal:
        L, S = query.shape[-2], key.shape[-2]
        causal = torch.ones(L, S, dtype=torch.bool).tril()
        if attn_mask is None:
            attn_mask = causal
        elif attn_mask.dtype == torch.bool:
            attn_mask = attn_mask & causal
        else:
            attn_mask = attn_mask + bool_to_float_mask(causal, attn_mask.dtype)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, scale=scale)


def weights_reference(query, key, attn_mask=None, is_causal=False, scale=None):
    """Attention weights with torch ops in the input dtype; fully masked rows -> 0."""
    E = query.shape[-1]
    scale = E**-0.5 if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    L, S = scores.shape[-2:]
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = torch.where(attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    return torch.nan_to_num(weights, nan=0.0)


def sdpa64(query, key, value, **kwargs):
    """torch's SDPA in float64, cast back to ``query``'s dtype (the reference of a lower precision)."""
    out = F.scaled_dot_product_attention(query.double(), key.double(), value.double(), **kwargs)
    return out.to(query.dtype)
