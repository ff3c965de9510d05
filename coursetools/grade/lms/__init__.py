"""The LMSs: a Canvas or Moodle download staged for the grader, and the gradebook each imports.

A module saved here is on this floor (tests/test_layering.py).
"""
