"""Grading one submission: find it, read it, run it in the sandbox, judge its outputs.

A module saved here is on this floor (tests/test_layering.py).
"""
