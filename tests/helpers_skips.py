"""Skip reasons the suite documents, shared by the test that raises them and by the test that
lists which skips are allowed (tests/grader/sandbox/test_unprivileged.py)."""

# test_setup_sh stands an older Python in for an Ubuntu image's python3; where this machine has
# none of those interpreters, that case cannot run here (CI's image has them).
INTERPRETER_SKIP = "no interpreter on this machine to stand for"
