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
    """A TinyDecoderLM whose full forward is off: generation must go through forward_cached (ex-10-3)."""

    def forward(self, *args, **kwargs):
        raise RuntimeError(
            "use the KV cache: call model.forward_cached(tokens, caches, offset), not model(tokens)"
        )
