"""The grader's bottom floor: the records, the events and the wire, paths, the roster, escaping.

It imports no other floor. A module saved here is on this floor (tests/test_layering.py).
"""
