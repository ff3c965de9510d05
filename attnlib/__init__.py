"""attnlib: the exact, tested helper library of the attention course.

Each chapter builds a piece of attention step by step; its final version lives
here so that later chapters import it instead of copying it.
"""

__version__ = "0.1.0"
