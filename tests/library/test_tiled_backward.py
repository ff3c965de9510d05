"""The backward pass of tiled attention (FlashAttention-2) against autograd and torch SDPA."""

import math

import pytest
import torch
import torch.nn.functional as F

from attnlib.efficient import KVCache, decode_step, grouped_query_attention, tiled_attention


def leaves(*shape_qk, S=None, Ev=None, dtype=torch.float64, seed=0):
    *lead, L, E = shape_qk
    S = L if S is None else S
    Ev = E if Ev is None else Ev
    g = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(*lead, n, d, generator=g, dtype=dtype).requires_grad_(True)
        for n, d in ((L, E), (S, E), (S, Ev))
    )


def grads_of(fn, q, k, v, grad_out):
    for t in (q, k, v):
        t.grad = None
    out = fn(q, k, v)
    out.backward(grad_out)
    return out.detach(), [t.grad.clone() for t in (q, k, v)]


CASES = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "causal lower right": dict(is_causal=True, diagonal=2),
    "scale": dict(scale=0.37),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck_float64(name):
    q, k, v = leaves(2, 2, 5, 3, S=7, Ev=2)
    kw = CASES[name]
    assert torch.autograd.gradcheck(
        lambda q, k, v: tiled_attention(q, k, v, block_q=2, block_k=3, **kw), (q, k, v)
    )


def test_gradcheck_masks_and_fully_masked_rows():
    q, k, v = leaves(2, 2, 5, 3, S=6)
    g = torch.Generator().manual_seed(1)
    allowed = torch.rand(2, 1, 5, 6, generator=g) > 0.4
    allowed[0, 0, 1] = False  # a fully masked row
    key_mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    bias = torch.randn(5, 6, generator=g, dtype=torch.float64)
    for kw in (
        dict(attn_mask=allowed),
        dict(key_mask=key_mask),
        dict(attn_mask=bias),
        dict(attn_mask=allowed, key_mask=key_mask, is_causal=True),
    ):
        assert torch.autograd.gradcheck(
            lambda q, k, v, kw=kw: tiled_attention(q, k, v, block_q=2, block_k=4, **kw),
            (q, k, v),
        )


def test_gradcheck_gqa():
    q, _, _ = leaves(1, 4, 5, 3)
    _, k, v = leaves(1, 2, 5, 3, S=6, seed=1)
    assert torch.autograd.gradcheck(
        lambda q, k, v: grouped_query_attention(q, k, v, is_causal=True, block_q=2, block_k=4),
        (q, k, v),
    )


SHAPES = [
    # (lead, L, S, E, Ev, block_q, block_k)
    ((2, 4), 37, 53, 16, 8, 8, 16),
    ((1, 8), 128, 128, 32, 32, 32, 64),
    ((3,), 9, 1, 4, 4, 4, 4),
    ((1, 2), 300, 300, 64, 64, 512, 512),  # one tile
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_equal_sdpa_float32(shape, causal):
    lead, L, S, E, Ev, bq, bk = shape
    q, k, v = leaves(*lead, L, E, S=S, Ev=Ev, dtype=torch.float32)
    g = torch.Generator().manual_seed(9)
    grad_out = torch.randn(*lead, L, Ev, generator=g)
    out, ours = grads_of(
        lambda q, k, v: tiled_attention(q, k, v, is_causal=causal, block_q=bq, block_k=bk), q, k, v, grad_out
    )
    ref_out, theirs = grads_of(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v, grad_out
    )
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_gqa_gradients_sum_over_shared_heads():
    q, _, _ = leaves(2, 6, 11, 8, dtype=torch.float32)
    _, k, v = leaves(2, 2, 11, 8, S=13, dtype=torch.float32, seed=3)
    grad_out = torch.randn(2, 6, 11, 8, generator=torch.Generator().manual_seed(4))
    _, ours = grads_of(
        lambda q, k, v: grouped_query_attention(q, k, v, is_causal=True, block_q=4, block_k=5),
        q,
        k,
        v,
        grad_out,
    )
    _, theirs = grads_of(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        q,
        k,
        v,
        grad_out,
    )
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_padding_and_fully_masked_rows_get_zero_gradients():
    q, k, v = leaves(2, 2, 6, 8, S=9, dtype=torch.float32)
    key_mask = torch.ones(2, 9, dtype=torch.bool)
    key_mask[1] = False  # sequence 1: every key padded, every row fully masked
    key_mask[0, 7:] = False
    out = tiled_attention(q, k, v, key_mask=key_mask, block_q=4, block_k=4)
    out.pow(2).sum().backward()
    assert torch.all(out[1] == 0)
    assert torch.all(q.grad[1] == 0) and torch.all(k.grad[1] == 0) and torch.all(v.grad[1] == 0)
    assert torch.all(k.grad[0, :, 7:] == 0) and torch.all(v.grad[0, :, 7:] == 0)
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


def test_broadcast_inputs_get_summed_gradients():
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 3, 7, 8, generator=g, requires_grad=True)
    k = torch.randn(1, 1, 9, 8, generator=g, requires_grad=True)
    v = torch.randn(2, 1, 9, 4, generator=g, requires_grad=True)
    grad_out = torch.randn(2, 3, 7, 4, generator=g)
    _, ours = grads_of(lambda q, k, v: tiled_attention(q, k, v, block_q=3, block_k=4), q, k, v, grad_out)
    _, theirs = grads_of(F.scaled_dot_product_attention, q, k, v, grad_out)
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 5e-3), (torch.bfloat16, 4e-2)])
def test_low_precision_gradients(dtype, tol):
    q, k, v = leaves(1, 2, 20, 16, S=24, dtype=dtype)
    grad_out = torch.randn(1, 2, 20, 16, generator=torch.Generator().manual_seed(6)).to(dtype)
    _, ours = grads_of(lambda q, k, v: tiled_attention(q, k, v, block_q=8, block_k=8), q, k, v, grad_out)
    q64, k64, v64 = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    _, exact = grads_of(F.scaled_dot_product_attention, q64, k64, v64, grad_out.double())
    for a, b in zip(ours, exact, strict=True):
        assert a.dtype == dtype
        torch.testing.assert_close(a.double(), b, atol=tol, rtol=tol)


def test_double_backward_is_refused_clearly():
    q, k, v = leaves(1, 1, 4, 3)
    out = tiled_attention(q, k, v)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(out.sum(), q, create_graph=True)
    (gq,) = torch.autograd.grad(tiled_attention(q, k, v).sum(), q)  # one backward is fine
    assert gq.shape == q.shape and gq.grad_fn is None


def test_no_grad_saves_nothing_and_decode_step_stays_forward():
    q, k, v = leaves(1, 2, 5, 4, dtype=torch.float32)
    with torch.no_grad():
        out = tiled_attention(q, k, v)
    assert out.grad_fn is None
    node = tiled_attention(q, k, v).grad_fn
    while not type(node).__name__.startswith("_TiledAttention"):  # past the reshapes
        node = node.next_functions[0][0]
    saved = node.saved_tensors  # q, k, v, the output, the row log-sum-exp
    assert len(saved) == 5 and saved[4].shape == (2, 1, 5, 1)
    cache = KVCache(batch=1, kv_heads=2, capacity=5, head_dim=4)
    with torch.no_grad():
        step = decode_step(q, k, v, cache)
    torch.testing.assert_close(
        step, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5, rtol=1e-5
    )
    assert math.isfinite(float(step.sum()))
