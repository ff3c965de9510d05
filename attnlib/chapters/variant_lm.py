"""Chapter 13's task and model: one small decoder, six kinds of attention, one long-range probe.

The task ("recall"): a sequence of ``SEQ_LEN`` tokens is a stream of *filler* tokens
that follow a local rule (each filler is the previous one plus 1, modulo 8, with
probability 3/4, else plus 2), with one *key* token (one of 8) planted early, at a
position in ``[KEY_FIRST, KEY_LAST]``; the second-to-last token is ``QUERY`` and the
last is the key again. So a model is measured twice on the same sequences:

* **local modelling**: its loss on the filler tokens, which depend only on the token
  before (the rule's own entropy, ``-(3/4 ln 3/4 + 1/4 ln 1/4)`` = 0.562 nats, is the
  floor; chance is ``ln VOCAB_SIZE``);
* **long-range recall**: whether it predicts the key after ``QUERY``, at a distance of
  more than ``SEQ_LEN - KEY_LAST - 2`` tokens, beyond a window of ``WINDOW`` keys even
  through ``LAYERS`` stacked layers (chance: 1/8).

:class:`VariantLM` is token embedding + learned positions + ``LAYERS`` pre-norm blocks
whose attention is one of :data:`VARIANTS` (built from :mod:`attnlib.variants` and
attnlib's core) + LayerNorm + head; every variant has the same width, heads, layers,
steps, batches and seed. Nothing is downloaded: every batch is generated.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from torch import nn

from attnlib.positions import LearnedPositions
from attnlib.variants import LatentAttention, linear_attention, sliding_window_attention

__all__ = [
    "FILLER_ENTROPY",
    "SEQ_LEN",
    "VARIANTS",
    "VariantLM",
    "build_variant_model",
    "experiment",
    "recall_batch",
    "train_variant",
]

KEYS = 8  # key tokens 0..7
FILLERS = 8  # filler tokens 8..15
QUERY = KEYS + FILLERS  # 16
VOCAB_SIZE = QUERY + 1
SEQ_LEN = 48
KEY_FIRST, KEY_LAST = 4, 11
WINDOW = 8
D_MODEL, HEADS, LAYERS = 32, 4, 2
STEPS, BATCH, LR = 300, 32, 1e-2
FILLER_ENTROPY = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))  # nats: the local rule's floor
VARIANTS = ("full", "mqa", "mla", "window", "linear")


def recall_batch(batch_size: int, generator: torch.Generator) -> torch.Tensor:
    """Sequences of the recall task, long ``(batch_size, SEQ_LEN)``.

    Filler ``f_t = KEYS + (f_{t-1} - KEYS + s_t) mod 8`` with ``s_t`` = 1 (probability
    3/4) or 2; the key at a random position in ``[KEY_FIRST, KEY_LAST]`` replaces a
    filler (the filler after it continues the chain from the one before it);
    ``tokens[:, -2] = QUERY`` and ``tokens[:, -1]`` is the key.
    """
    steps = 1 + (torch.rand(batch_size, SEQ_LEN, generator=generator) < 0.25).long()  # (B, N) 1 or 2
    start = torch.randint(0, FILLERS, (batch_size, 1), generator=generator)  # (B, 1)
    chain = (start + steps.cumsum(dim=1)) % FILLERS + KEYS  # (B, N) fillers
    keys = torch.randint(0, KEYS, (batch_size,), generator=generator)  # (B,)
    where = torch.randint(KEY_FIRST, KEY_LAST + 1, (batch_size,), generator=generator)  # (B,)
    tokens = chain.clone()
    rows = torch.arange(batch_size)
    tokens[rows, where] = keys
    # the filler after the key continues from the filler before it: a two-step move
    tokens[rows, where + 1] = (
        chain[rows, where - 1] - KEYS + steps[rows, where] + steps[rows, where + 1]
    ) % 8 + KEYS
    tokens[:, -2] = QUERY
    tokens[:, -1] = keys
    return tokens


class _Attention(nn.Module):
    """Causal self-attention ``(B, n, D) -> (B, n, D)`` of one kind (:data:`VARIANTS`)."""

    def __init__(self, kind: str, d_model: int, heads: int, window: int):
        super().__init__()
        self.kind, self.heads, self.window = kind, heads, window
        self.head_dim = d_model // heads
        if kind == "mla":
            # latent 16 and rotary 4: the attention's parameters within 4 % of full MHA's
            self.mla = LatentAttention(d_model, heads, self.head_dim, latent_dim=16, rope_dim=4)
            return
        kv_width = self.head_dim if kind == "mqa" else d_model  # MQA: one key-value head
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.kv = nn.Linear(d_model, 2 * kv_width, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "mla":
            return self.mla(x)
        batch, n, _ = x.shape
        split = lambda t: t.unflatten(-1, (-1, self.head_dim)).transpose(1, 2)  # noqa: E731  (B, h, n, d)
        q = split(self.q(x))  # (B, H, n, d)
        k, v = (split(t) for t in self.kv(x).chunk(2, dim=-1))  # (B, H or 1, n, d)
        if self.kind == "window":
            o = sliding_window_attention(q, k, v, self.window, block_size=16)
        elif self.kind == "linear":
            o = linear_attention(q, k, v)
        else:  # full and mqa (whose single key-value head broadcasts over the query heads)
            o = F.scaled_dot_product_attention(q, k.expand_as(q), v.expand_as(q), is_causal=True)
        return self.out(o.transpose(1, 2).flatten(-2))


class _Block(nn.Module):
    def __init__(self, kind: str, d_model: int, heads: int, window: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attention = _Attention(kind, d_model, heads, window)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VariantLM(nn.Module):
    """A small pre-norm decoder whose attention is ``kind``: ``(B, n)`` tokens to ``(B, n, V)`` logits."""

    def __init__(
        self,
        kind: str,
        d_model: int = D_MODEL,
        heads: int = HEADS,
        layers: int = LAYERS,
        window: int = WINDOW,
    ):
        super().__init__()
        if kind not in VARIANTS:
            raise ValueError(f"VariantLM: kind must be one of {VARIANTS}, got {kind!r}")
        self.kind = kind
        self.embed = nn.Embedding(VOCAB_SIZE, d_model)
        self.positions = LearnedPositions(SEQ_LEN, d_model)
        self.blocks = nn.ModuleList(_Block(kind, d_model, heads, window) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB_SIZE, bias=False)
        for module in self.modules():  # GPT-2's scale, so that the first loss is near ln V
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.positions(self.embed(tokens))  # (B, n, D)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))  # (B, n, V)


def build_variant_model(kind: str, seed: int) -> VariantLM:
    """:class:`VariantLM` of ``kind``, its weights drawn from ``seed``."""
    torch.manual_seed(seed)
    return VariantLM(kind)


def measure(model: VariantLM, tokens: torch.Tensor) -> dict:
    """Filler loss (nats, the positions a local rule predicts) and recall accuracy on ``tokens``."""
    with torch.no_grad():
        logits = model(tokens[:, :-1])  # (B, N-1, V): position t predicts token t+1
        targets = tokens[:, 1:]
        losses = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, N-1)
        filler = (targets >= KEYS) & (targets < QUERY)
        after_key = torch.zeros_like(filler)  # the token after the key jumps two steps: not local
        where = (tokens[:, :-1] < KEYS).nonzero()
        after_key[where[:, 0], where[:, 1]] = True
        local = filler & ~after_key
        recalled = logits[:, -1].argmax(dim=-1) == tokens[:, -1]
    return {"filler_loss": losses[local].mean().item(), "recall": recalled.float().mean().item()}


def train_variant(kind: str, seed: int, steps: int = STEPS) -> tuple[VariantLM, dict]:
    """Train ``kind`` for ``steps`` AdamW steps on generated batches; the model and its numbers."""
    model = build_variant_model(kind, seed)
    data = torch.Generator().manual_seed(10_000 + seed)  # the same batches for every variant
    test = recall_batch(512, torch.Generator().manual_seed(99))
    initial = measure(model, test)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    start = time.perf_counter()
    for _ in range(steps):
        tokens = recall_batch(BATCH, data)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - start
    final = measure(model, test)
    return model, {
        "initial_filler_loss": initial["filler_loss"],
        "filler_loss": final["filler_loss"],
        "recall": final["recall"],
        "ms_per_step": 1000 * seconds / max(steps, 1),
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def experiment(seed: int) -> dict:
    """Every variant trained from ``seed``: ``{"<kind>_<number>": value}`` for the spread."""
    out = {}
    for kind in VARIANTS:
        _, numbers = train_variant(kind, seed)
        for name, value in numbers.items():
            if name != "ms_per_step":  # a time is no number of the method: measured in the benchmark
                out[f"{kind}_{name}"] = value
    return out
