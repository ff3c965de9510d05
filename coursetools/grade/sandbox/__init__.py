"""Isolation: the sandbox by the process its code runs in, the harness and the zygote inside it.

This package imports nothing: the harness imports its siblings inside the sandbox, and the
grader reaches the host's side through ``api``. A module saved here is on this floor.
"""
