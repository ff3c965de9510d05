"""Answer banks, one module per checks module (``ch04_scaling_softmax.py`` ...); see ../bank.py."""
