"""The outputs: read OUT and render (scores, feedback, gradebook, report, results.json), never run
learner code.

A module saved here is on this floor (tests/test_layering.py).
"""
