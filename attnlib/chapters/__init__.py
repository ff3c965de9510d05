"""The models and toy tasks that the chapters train (not part of attnlib's core API).

Each module names the chapter that builds it:

* ``attnlib.chapters.vocab``: the tokens (PAD, BOS, EOS, digits, digit words) and the one greedy
  decoder of chapters 01, 02 and 07;
* ``attnlib.chapters.seq2seq``: digit tasks, the GRU encoder-decoders of chapters 01 and 02 and
  their training loop;
* ``attnlib.chapters.retrieval``: the key-value retrieval experiments of chapter 03;
* ``attnlib.chapters.first_and_previous``: chapter 06's toy task where heads specialise;
* ``attnlib.chapters.cross_attention``: chapter 07's encoder and decoder layers and its
  encoder-decoder with cross attention (and causal decoder self-attention).

Import them by name, e.g. ``from attnlib.chapters.seq2seq import Seq2SeqGRU``.
"""
