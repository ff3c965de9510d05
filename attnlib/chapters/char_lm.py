"""Chapter 12's character-level language model on Tiny Shakespeare, and how it is trained.

The text (``data/tinyshakespeare.txt``, public domain, provenance and SHA-256 in
``data/README.md``) ships with attnlib: :func:`load_text` reads it offline and
refuses a file whose hash differs. :class:`CharVocab` maps its 65 characters to
ids; :func:`split` holds out the last tenth. The model is chapter 10's
:class:`attnlib.chapters.tiny_lm.TinyDecoderLM` (learned positions, causal
:class:`attnlib.transformer.TransformerBlock` s, a last LayerNorm, a linear
head), optionally with its head tied to the embedding (:func:`build_char_model`).

:func:`train_lm` is the training practice the chapter measures: AdamW with
weight decay on the matrices only, a linear warm-up and a cosine decay
(:func:`lr_at`), dropout (inside the blocks, on the attention weights too),
gradient clipping. :func:`generate_text` samples with a temperature and top-k
(:func:`top_k_logits`) through chapter 08's KV cache. :func:`induction_test`
and :func:`head_scores` measure the heads as Olsson et al. (2022) do.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attnlib.chapters import tiny_lm
from attnlib.chapters.tiny_lm import TinyDecoderLM

__all__ = [
    "DATA_PATH",
    "SHA256",
    "EMBED_STD",
    "CharVocab",
    "bigram_loss",
    "build_char_model",
    "estimate_loss",
    "generate_text",
    "get_batch",
    "head_scores",
    "induction_test",
    "load_text",
    "lr_at",
    "recency_baseline",
    "split",
    "top_k_logits",
    "train_lm",
]

DATA_PATH = Path(__file__).with_name("data") / "tinyshakespeare.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
VAL_FRACTION = 0.1


def load_text(path: Path | str = DATA_PATH) -> str:
    """The Tiny Shakespeare text, after checking its SHA-256 against :data:`SHA256`.

    Raises ``ValueError`` if the file's bytes are not the recorded ones (a
    truncated copy, changed line endings): every number of chapter 12 was
    measured on exactly these 1,115,394 characters.
    """
    data = Path(path).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise ValueError(f"load_text: {path} has SHA-256 {digest}, expected {SHA256} (see data/README.md)")
    return data.decode("utf-8")


class CharVocab:
    """Every distinct character of ``text``, sorted, as token ids ``0 .. V-1``."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """Long (len(text),): the id of each character (KeyError for one not in the vocabulary)."""
        return torch.tensor([self.index[c] for c in text], dtype=torch.long)

    def decode(self, ids) -> str:
        """The text of a sequence of ids (a 1-d tensor or a list)."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else ids
        return "".join(self.chars[i] for i in ids)


def split(ids: torch.Tensor, val_fraction: float = VAL_FRACTION) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``1 - val_fraction`` of the ids for training, the rest held out (no shuffling:
    the held-out part is text the model never saw, not sentences interleaved with it)."""
    n_train = int(len(ids) * (1 - val_fraction))
    return ids[:n_train], ids[n_train:]


def get_batch(data: torch.Tensor, batch_size: int, context: int, generator: torch.Generator) -> torch.Tensor:
    """Long (batch_size, context + 1): windows of ``data`` at random starts.

    Position ``t`` of a window is the input that predicts position ``t + 1``.
    """
    starts = torch.randint(0, len(data) - context - 1, (batch_size,), generator=generator)
    return torch.stack([data[s : s + context + 1] for s in starts.tolist()])


EMBED_STD = 0.02  # nanoGPT's (and GPT-2's) initial scale of the embeddings


def build_char_model(
    seed: int,
    vocab_size: int,
    context: int,
    tie: bool = True,
    d_model: int = 64,
    num_heads: int = 4,
    d_ff: int = 256,
    num_layers: int = 2,
    **block_kwargs,
) -> TinyDecoderLM:
    """Chapter 10's decoder-only model for characters, initial weights from ``seed`` alone.

    The token embedding is drawn from N(0, :data:`EMBED_STD` ²), as nanoGPT's
    ``GPT._init_weights`` does (``torch.nn.init.normal_(..., std=0.02)`` for
    every ``nn.Embedding``), not ``nn.Embedding``'s N(0, 1): with ``tie`` the
    output layer's weight *is* the embedding matrix (one ``(V, D)`` parameter
    used twice, Press & Wolf 2017), and N(0, 1) rows dotted with a
    LayerNorm'd vector of norm about sqrt(D) give logits of spread sqrt(D),
    an initial loss tens of nats above ln V. The head keeps its bias. Without
    ``tie`` the head's weight gets its own draw from the same N(0, 0.02²),
    after the embedding's, so tied and untied models share every other
    initial weight. ``block_kwargs`` go to every block (``dropout``,
    ``norm_first``). The weights are drawn inside :func:`torch.random.fork_rng`.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        # fmt: off
        model = TinyDecoderLM(
            d_model, num_heads, d_ff, num_layers,
            max_len=context, vocab_size=vocab_size, **block_kwargs,
        )
        # fmt: on
        with torch.no_grad():
            nn.init.normal_(model.embed.weight, mean=0.0, std=EMBED_STD)
            if tie:
                model.head.weight = model.embed.weight  # (V, D): the same Parameter
            else:
                nn.init.normal_(model.head.weight, mean=0.0, std=EMBED_STD)
    return model


def lm_loss(model: nn.Module, windows: torch.Tensor) -> torch.Tensor:
    """Mean next-character cross-entropy over every position of ``windows`` (B, L + 1)."""
    logits = model(windows[:, :-1])  # (B, L, V): position t predicts character t+1
    return F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten())


# fmt: off
def lr_at(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    """The learning rate of ``step`` (0-based): linear warm-up, cosine decay.

    Steps ``0 .. warmup_steps - 1`` rise linearly to ``peak_lr``
    (``peak_lr * (step + 1) / warmup_steps``); then the rate follows half a
    cosine from ``peak_lr`` down to ``min_lr`` at ``total_steps``, and stays at
    ``min_lr`` after it.
    """
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)  # 0 .. 1
    cosine = 0.5 * (1 + math.cos(math.pi * progress))  # 1 .. 0
    return min_lr + (peak_lr - min_lr) * cosine
# fmt: on


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's groups: weight decay on the matrices (dim >= 2), none on biases, LayerNorms.

    The learned positions are a matrix and are decayed, as nanoGPT does.
    """
    seen, decay, no_decay = set(), [], []
    for p in model.parameters():  # a tied Parameter comes once
        if id(p) in seen:
            continue
        seen.add(id(p))
        (decay if p.dim() >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


@torch.no_grad()
def estimate_loss(model: nn.Module, windows: torch.Tensor) -> float:
    """Mean loss over fixed ``windows`` (B, L + 1) in eval mode (no dropout); restores the mode."""
    was_training = model.training
    model.eval()
    loss = lm_loss(model, windows).item()
    model.train(was_training)
    return loss


def eval_windows(data: torch.Tensor, context: int, count: int = 64, seed: int = 1234) -> torch.Tensor:
    """The fixed windows a split is measured on: ``count`` windows drawn once from ``seed``."""
    return get_batch(data, count, context, torch.Generator().manual_seed(seed))


# fmt: off
def train_lm(
    model, train_data, steps, *, context, batch_size=32, peak_lr=1e-2,
    warmup_steps=20, min_lr=1e-3, weight_decay=0.1, clip=1.0, seed=0,
    eval_every=0, train_windows=None, val_windows=None,
):
    """AdamW on ``steps`` random windows of ``train_data``; returns a log dict.

    The rate follows :func:`lr_at` (``warmup_steps=0``: no warm-up;
    ``min_lr=peak_lr``: no decay). ``clip``: the gradient's total norm is
    clipped to it (``None``: not clipped). The batches come from ``seed``, and
    so does the dropout. Before the first step (``eval_step`` 0: the initial
    loss), every ``eval_every`` steps and after the last, the loss on
    ``train_windows`` and ``val_windows`` is measured in eval mode.
    The log holds ``"loss"`` (every step), ``"grad_norm"`` (before clipping),
    ``"eval_step"``, ``"train_eval"``, ``"val_eval"``.
    """
    batches = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(
        param_groups(model, weight_decay), lr=peak_lr, betas=(0.9, 0.99))
    log = {"loss": [], "grad_norm": [], "eval_step": [], "train_eval": [],
           "val_eval": []}
    if val_windows is not None:  # step 0: the loss of the initial weights
        log["eval_step"].append(0)
        log["train_eval"].append(estimate_loss(model, train_windows))
        log["val_eval"].append(estimate_loss(model, val_windows))
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # the dropout masks
        for step in range(steps):
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, peak_lr, warmup_steps, steps, min_lr)
            loss = lm_loss(model, get_batch(train_data, batch_size, context,
                                            batches))
            optimizer.zero_grad()
            loss.backward()
            norm = nn.utils.clip_grad_norm_(
                model.parameters(), clip if clip is not None else math.inf)
            optimizer.step()
            log["loss"].append(loss.item())
            log["grad_norm"].append(norm.item())
            last = step == steps - 1
            if val_windows is not None and (
                    last or (eval_every and (step + 1) % eval_every == 0)):
                log["eval_step"].append(step + 1)
                log["train_eval"].append(estimate_loss(model, train_windows))
                log["val_eval"].append(estimate_loss(model, val_windows))
    model.eval()
    return log
# fmt: on


# -- sampling --------------------------------------------------------------------------------


# fmt: off
def top_k_logits(logits, k):
    """Keep the ``k`` largest logits of each row (last dim), the others -inf.

    Ties with the ``k``-th largest are kept (a row may keep more than ``k``);
    ``k`` at least the row's length keeps everything.
    """
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth, float("-inf"))


@torch.no_grad()
def generate_text(model, prompt, max_new_tokens, temperature=1.0,
                  top_k=None, generator=None, use_cache=True):
    """Continue ``prompt`` (B, P) by sampling; returns (B, P + max_new_tokens).

    Each token is drawn from ``softmax(top_k_logits(logits, top_k) /
    temperature)`` (``temperature=0``: the argmax). With ``use_cache`` every
    block keeps its keys and values (chapter 08), and each new token costs one
    position. ``P + max_new_tokens`` must fit the model's positions.
    """
    model.eval()
    B, P = prompt.shape
    tokens = prompt
    if use_cache:
        caches = [block.new_cache(B, P + max_new_tokens)
                  for block in model.blocks]
        logits = model.forward_cached(prompt, caches, offset=0)[:, -1]
    else:
        logits = model(prompt)[:, -1]  # (B, V)
    for step in range(max_new_tokens):
        if top_k is not None:
            logits = top_k_logits(logits, top_k)
        if temperature == 0:
            next_token = logits.argmax(-1, keepdim=True)  # (B, 1)
        else:
            probs = torch.softmax(logits / temperature, dim=-1)  # (B, V)
            next_token = torch.multinomial(probs, 1, generator=generator)
        tokens = torch.cat([tokens, next_token], dim=1)
        if step == max_new_tokens - 1:
            break
        if use_cache:
            logits = model.forward_cached(
                next_token, caches, offset=tokens.shape[1] - 1)[:, -1]
        else:
            logits = model(tokens)[:, -1]
    return tokens
# fmt: on


# -- what the heads do -----------------------------------------------------------------------


def attention_maps(model: TinyDecoderLM, tokens: torch.Tensor) -> torch.Tensor:
    """Every head's causal attention weights (layers, B, h, L, L) of a pre-norm model, eval mode
    (chapter 10's :func:`attnlib.chapters.tiny_lm.attention_maps`, after ``model.eval()``)."""
    model.eval()
    return tiny_lm.attention_maps(model, tokens)


def repeated_random(batch_size: int, half: int, vocab_size: int, generator: torch.Generator) -> torch.Tensor:
    """Long (batch_size, 2 * half): ``half`` uniformly random tokens, then the same ``half`` again."""
    first = torch.randint(0, vocab_size, (batch_size, half), generator=generator)
    return torch.cat([first, first], dim=1)


@torch.no_grad()
def induction_test(model: TinyDecoderLM, tokens: torch.Tensor) -> dict:
    """Olsson et al.'s measurements on repeated random sequences ``tokens`` (B, 2T).

    Returns ``"first"`` and ``"second"``: the mean loss of the predictions of
    tokens ``1 .. T-1`` (inside the first half: random, unpredictable) and
    ``T+1 .. 2T-1`` (inside the second half: a copy of the first), and
    ``"induction"`` (layers, h): each head's mean attention weight, from every
    query ``t`` of the second half, on key ``t - T + 1``, the token after the
    earlier occurrence of the current one (what an induction head reads).
    """
    T = tokens.shape[1] // 2
    model.eval()
    logits = model(tokens[:, :-1])  # (B, 2T-1, V): row t predicts token t+1
    losses = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")  # (B, 2T-1)
    maps = attention_maps(model, tokens)  # (layers, B, h, 2T, 2T)
    rows = torch.arange(T, 2 * T)
    induction = maps[..., rows, rows - T + 1].mean(dim=(1, 3))  # (layers, h)
    return {
        "first": losses[:, : T - 1].mean().item(),
        "second": losses[:, T:].mean().item(),
        "induction": induction,
    }


@torch.no_grad()
def head_scores(model: TinyDecoderLM, windows: torch.Tensor) -> dict:
    """Mean attention weight (layers, h) on the previous token and on the current one, over real text.

    ``windows`` (B, L); rows ``1 .. L-1`` count (row 0 can only attend to itself).
    """
    maps = attention_maps(model, windows)  # (layers, B, h, L, L)
    rows = torch.arange(1, windows.shape[1])
    return {
        "previous": maps[..., rows, rows - 1].mean(dim=(1, 3)),
        "current": maps[..., rows, rows].mean(dim=(1, 3)),
    }


def _recency_maps(log_ratio: torch.Tensor, length: int) -> torch.Tensor:
    """(n, L, L): causal rows with weight proportional to ``exp(log_ratio * distance)``, float64."""
    pos = torch.arange(length, dtype=torch.float64)
    distance = pos[:, None] - pos[None, :]  # (L, L): query minus key
    scores = log_ratio[:, None, None] * distance  # (n, L, L)
    scores = scores.masked_fill(distance < 0, float("-inf"))
    return torch.softmax(scores, dim=-1)


@torch.no_grad()
def recency_baseline(maps: torch.Tensor) -> dict:
    """A matched control for a previous-token score: each head's recency, without its peak.

    ``maps`` (..., B, h, L, L): causal attention weights (leading dims: layers).
    For each head, its mean distance back (query minus key, over the rows
    ``1 .. L-1`` and the batch) is measured; a *recency head* puts weight
    proportional to ``r ** distance`` on every key up to its query, with ``r``
    chosen (bisection on ``log r``) so that its mean distance is the head's.
    Returns, per head (..., h): ``"distance"`` (the head's mean distance back),
    ``"previous"`` (its mean weight on the previous token, as :func:`head_scores`)
    and ``"recency_previous"`` (the matched recency head's weight on the
    previous token). A head that only prefers what is near scores about its
    recency head; a previous-token head scores well above it.
    """
    maps = maps.double()
    L = maps.shape[-1]
    pos = torch.arange(L, dtype=torch.float64)
    distance = (pos[:, None] - pos[None, :]).clamp(min=0)  # (L, L)
    rows = torch.arange(1, L)
    mean_d = (maps[..., 1:, :] * distance[1:]).sum(-1).mean(-1).mean(-2)  # (..., h): rows, then batch
    previous = maps[..., rows, rows - 1].mean(-1).mean(-2)  # (..., h)
    target = mean_d.flatten()
    lo = torch.full_like(target, -30.0)
    hi = torch.full_like(target, 30.0)
    for _ in range(80):  # a recency head's mean distance grows with log r
        mid = (lo + hi) / 2
        d_mid = (_recency_maps(mid, L)[:, 1:] * distance[1:]).sum(-1).mean(-1)
        lo = torch.where(d_mid < target, mid, lo)
        hi = torch.where(d_mid < target, hi, mid)
    fitted = _recency_maps((lo + hi) / 2, L)[:, rows, rows - 1].mean(-1)
    return {"distance": mean_d, "previous": previous, "recency_previous": fitted.reshape(mean_d.shape)}


def bigram_loss(train_data: torch.Tensor, val_data: torch.Tensor, vocab_size: int) -> float:
    """Held-out loss of counted bigram frequencies (add-one smoothing): the no-context baseline."""
    counts = torch.ones(vocab_size, vocab_size, dtype=torch.float64)
    counts.index_put_(
        (train_data[:-1], train_data[1:]),
        torch.ones(len(train_data) - 1, dtype=torch.float64),
        accumulate=True,
    )
    logp = (counts / counts.sum(1, keepdim=True)).log()
    return -logp[val_data[:-1], val_data[1:]].mean().item()


# -- the chapter's experiments (seeded; swept by attnlib.chapters.spread) -------------------

CONTEXT = 64
MAIN = {"d_model": 64, "num_heads": 4, "d_ff": 256, "num_layers": 2}
MAIN_STEPS = 400
MAIN_BATCH = 16
MAIN_WARMUP = 40
INDUCTION_HALF = 30


def corpus() -> tuple[CharVocab, torch.Tensor, torch.Tensor]:
    """The vocabulary and the training and held-out ids of the whole text."""
    text = load_text()
    vocab = CharVocab(text)
    train_data, val_data = split(vocab.encode(text))
    return vocab, train_data, val_data


def main_experiment(seed: int, steps: int = MAIN_STEPS) -> dict:
    """Chapter 12's model: the recipe on :data:`MAIN`, ``steps`` steps from ``seed``.

    Returns ``"loss"`` (mean training loss of each 25 steps), ``"clipped"``
    (share of steps whose gradient norm exceeded 1), ``"max_grad"``, the curves
    (``"eval_step"``, ``"train_eval"``, ``"val_eval"``: eval-mode loss on
    fixed windows at step 0 and every 50 steps), the initial and final
    held-out loss ``"val_init"`` and ``"val"``, the induction test
    (``"first"``, ``"second"``, ``"induction"`` flattened layer-major), and,
    per head over held-out text, the weight on the previous and current token
    (``"previous"``, ``"current"``), the mean distance back (``"distance"``)
    and the previous-token weight of the recency head matched to that distance
    (``"recency_previous"``, :func:`recency_baseline`). No timing is recorded.
    """
    vocab, train_data, val_data = corpus()
    model = build_char_model(seed, len(vocab), CONTEXT, **MAIN)
    log = train_lm(
        model,
        train_data,
        steps,
        context=CONTEXT,
        batch_size=MAIN_BATCH,
        warmup_steps=MAIN_WARMUP,
        seed=seed,
        eval_every=50,
        train_windows=eval_windows(train_data, CONTEXT),
        val_windows=eval_windows(val_data, CONTEXT),
    )
    ind = induction_test(
        model, repeated_random(64, INDUCTION_HALF, len(vocab), torch.Generator().manual_seed(7))
    )
    held_out = eval_windows(val_data, CONTEXT)[:, :-1]
    heads = head_scores(model, held_out)
    recency = recency_baseline(attention_maps(model, held_out))
    losses = log["loss"]
    return {
        "loss": [sum(losses[i : i + 25]) / 25 for i in range(0, len(losses), 25)],
        "clipped": sum(n > 1.0 for n in log["grad_norm"]) / len(losses),
        "max_grad": max(log["grad_norm"]),
        "eval_step": log["eval_step"],
        "train_eval": log["train_eval"],
        "val_eval": log["val_eval"],
        "val_init": log["val_eval"][0],
        "val": log["val_eval"][-1],
        "first": ind["first"],
        "second": ind["second"],
        "induction": ind["induction"].flatten().tolist(),
        "previous": heads["previous"].flatten().tolist(),
        "current": heads["current"].flatten().tolist(),
        "distance": recency["distance"].flatten().tolist(),
        "recency_previous": recency["recency_previous"].flatten().tolist(),
    }


# The practice runs: a smaller model, each variant changes one thing of the recipe.
PRACTICE = {"d_model": 32, "num_heads": 4, "d_ff": 128, "num_layers": 2}
PRACTICE_CONTEXT = 32
PRACTICE_STEPS = 100
PRACTICE_BATCH = 16
RECIPE = {"peak_lr": 1e-2, "weight_decay": 0.1, "warmup_steps": 20, "min_lr": 1e-3, "clip": 1.0}
PRACTICE_VARIANTS = {
    "recipe": ({}, {}),
    "no weight decay": ({"weight_decay": 0.0}, {}),
    "no warm-up": ({"warmup_steps": 0}, {}),
    "constant rate": ({"warmup_steps": 0, "min_lr": 1e-2}, {}),
    "post-norm": ({}, {"norm_first": False}),
    "post-norm, no warm-up": ({"warmup_steps": 0}, {"norm_first": False}),
    "dropout 0.1": ({}, {"dropout": 0.1}),
    "untied": ({}, {"tie": False}),
    "no clipping": ({"clip": None}, {}),
}


def practice_key(name: str) -> str:
    """``"post-norm, no warm-up"`` -> ``"post-norm_no_warm-up"``: a variant's metric suffix."""
    return name.replace(",", "").replace(" ", "_")


def practice_model(seed: int, name: str, vocab_size: int) -> TinyDecoderLM:
    """The initial model of variant ``name`` of :data:`PRACTICE_VARIANTS`, from ``seed``.

    Every variant starts from the recipe's initial weights where its parameters
    coincide. The untied model's head is the one parameter the recipe does not
    have: it gets its own draw from the embedding's distribution
    (:func:`build_char_model`), not a copy of the embedding, so that the
    ablation changes one thing, the sharing.
    """
    train_kw, model_kw = PRACTICE_VARIANTS[name]
    tie = model_kw.get("tie", True)
    block_kw = {k: v for k, v in model_kw.items() if k != "tie"}
    reference = build_char_model(seed, vocab_size, PRACTICE_CONTEXT, **PRACTICE)
    model = build_char_model(seed, vocab_size, PRACTICE_CONTEXT, tie=tie, **PRACTICE, **block_kw)
    state = reference.state_dict()
    if not tie:
        state["head.weight"] = model.state_dict()["head.weight"]  # its own draw
    model.load_state_dict({k: state[k].clone() for k in model.state_dict()})
    return model


def practice_run(seed: int, name: str, data=None) -> dict:
    """One variant of :data:`PRACTICE_VARIANTS` from ``seed``: its model and its training log.

    The model is :func:`practice_model`'s; all variants see the same batches.
    """
    vocab, train_data, val_data = data or corpus()
    train_kw, _ = PRACTICE_VARIANTS[name]
    model = practice_model(seed, name, len(vocab))
    log = train_lm(
        model,
        train_data,
        PRACTICE_STEPS,
        context=PRACTICE_CONTEXT,
        batch_size=PRACTICE_BATCH,
        seed=seed,
        eval_every=40,
        train_windows=eval_windows(train_data, PRACTICE_CONTEXT),
        val_windows=eval_windows(val_data, PRACTICE_CONTEXT),
        **{**RECIPE, **train_kw},
    )
    return {"model": model, "log": log}


def practice_experiment(seed: int) -> dict:
    """Every variant of :data:`PRACTICE_VARIANTS`, same initial weights and batches.

    Per variant (suffix :func:`practice_key`): ``"loss"`` (mean training loss of
    each 10 steps), ``"init"`` (held-out loss of the initial weights), ``"train"``
    and ``"val"`` (eval-mode loss on fixed training and held-out windows after
    the last step), ``"val_curve"`` (at step 0, every 40 steps and after the
    last), ``"params"`` (distinct parameters), ``"clipped"`` (share of steps
    whose gradient norm exceeded the clip, 1.0), ``"max_grad"`` and
    ``"max_grad_step"`` (the largest gradient norm before clipping, and its
    step, 1-based).
    """
    data = corpus()
    out = {}
    for name in PRACTICE_VARIANTS:
        run = practice_run(seed, name, data)
        log, key = run["log"], practice_key(name)
        losses, norms = log["loss"], log["grad_norm"]
        out[f"loss_{key}"] = [sum(losses[i : i + 10]) / 10 for i in range(0, len(losses), 10)]
        out[f"init_{key}"] = log["val_eval"][0]
        out[f"train_{key}"] = log["train_eval"][-1]
        out[f"val_{key}"] = log["val_eval"][-1]
        out[f"val_curve_{key}"] = log["val_eval"]
        out[f"params_{key}"] = sum(p.numel() for p in run["model"].parameters())
        out[f"clipped_{key}"] = sum(n > 1.0 for n in norms) / len(norms)
        out[f"max_grad_{key}"] = max(norms)
        out[f"max_grad_step_{key}"] = norms.index(max(norms)) + 1
    return out


def experiment(seed: int) -> dict:
    """Chapter 12's recorded experiment: :func:`main_experiment` and :func:`practice_experiment`."""
    return {**main_experiment(seed), **practice_experiment(seed)}
