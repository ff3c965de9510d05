"""Objects that exercises hand to a learner's function, with a part switched off.

An exercise that asks the learner to wire a block's sublayers, or to generate
with a KV cache, hands over a model whose shortcut raises instead: calling
``block(x)`` or ``model(tokens)`` would skip the exercise's work.

These classes live here, not beside the exercise's checks in
``attnlib.checks``: the grader makes every case's inputs in its own process
and ships them, pickled, to the sandbox, which cannot import a check module
(it holds the answer key). A class defined here is pickled by reference, like
any library class, and the grader refuses to ship anything of a check module.
"""

from __future__ import annotations

from attnlib.chapters.tiny_lm import TinyDecoderLM
from attnlib.transformer import TransformerBlock

__all__ = ["CacheOnlyLM", "SublayersOnlyBlock"]


class SublayersOnlyBlock(TransformerBlock):
    """A TransformerBlock whose forward is off: the exercise wires the sublayers itself (ex-10-1)."""

    def forward(self, *args, **kwargs):
        raise RuntimeError(
            "write the block yourself: call block.norm1, block.self_attention, "
            "block.norm2 and block.feed_forward, not block(x)"
        )


class CacheOnlyLM(TinyDecoderLM):
    """A TinyDecoderLM whose full forward is off: generation must go through forward_cached (ex-10-3).

    With ``position_budget`` set (the prompt's length plus the tokens to
    generate), it also counts the positions that go through the model and
    refuses to run more than the whole sequence holds: a generation that
    runs some position twice (the prompt again, or every token so far at
    every step) does the work the cache is there to save.
    """

    def __init__(self, *args, position_budget: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.position_budget = position_budget
        self.positions_run = 0

    def forward(self, *args, **kwargs):
        raise RuntimeError(
            "use the KV cache: call model.forward_cached(tokens, caches, offset), not model(tokens)"
        )

    def forward_cached(self, tokens, caches, offset):
        """TinyDecoderLM.forward_cached, counting the positions run against ``position_budget``."""
        self.positions_run += tokens.shape[1]
        if self.position_budget is not None and self.positions_run > self.position_budget:
            raise RuntimeError(
                f"{self.positions_run} positions went through the model for a sequence of "
                f"{self.position_budget} (prompt and new tokens): some position ran more than once. "
                "Each position runs once; after that its keys and values come from the cache"
            )
        return super().forward_cached(tokens, caches, offset)
