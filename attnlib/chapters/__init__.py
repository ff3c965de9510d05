"""The models and toy tasks that the chapters train (not part of attnlib's core API).

Each module names the chapter that builds it:

* ``attnlib.chapters.seq2seq``: digit tasks and the GRU encoder-decoders of chapters 01 and 02;
* ``attnlib.chapters.retrieval``: the key-value retrieval experiments of chapter 03;
* ``attnlib.chapters.first_and_previous``: chapter 06's toy task where heads specialise;
* ``attnlib.chapters.cross_attention``: chapter 07's encoder-decoder with cross attention.

Import them by name, e.g. ``from attnlib.chapters.seq2seq import Seq2SeqGRU``.
"""
