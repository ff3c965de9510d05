"""Isolation of a submission's processes: namespaces, an allow-listed root, limits, privileges.

The sandbox's code lives in one module per process it runs in (issue 38), each saying what
it may assume there; this module is their public face for the grader's side and for tests:

* :mod:`coursetools.grade.sandbox.host`, the grader's process: :func:`probe` and
  :func:`command` decide how the sandbox is started (``setpriv --pdeathsig KILL unshare
  --mount --net --ipc --pid --fork --kill-child --mount-proc`` where that works, else a plain
  child process), :func:`describe` says what that amounts to; the sandbox uids
  (:func:`allocate_uids`), a job slot's :class:`MemoryGroup`, a run's :class:`RunGroup`
  (every process of a run in its own cgroups, all killed after it) and :func:`kill_uid`;
* :mod:`coursetools.grade.sandbox.parent`, the sandbox's trusted parent: :func:`enter`
  builds a new root from an allow-list (:func:`build_root`: a tmpfs with read-only bind
  mounts of what grading needs, a private home) before any learner code;
* :mod:`coursetools.grade.sandbox.child`, the learner's process: :func:`confine` (resource
  limits, the sandbox uid, no capabilities, ``no_new_privs`` and a seccomp filter,
  :func:`seccomp_program`);
* :mod:`coursetools.grade.sandbox.shared`, below the three: :class:`SandboxConfig` (what the
  grader asks of a run's sandbox), :class:`IsolationReport` (what it achieved), the kernel's
  flags and the C library.

Everything the platform refuses is recorded in the isolation report that the harness sends
back, and the grader shows it; a namespace mode whose root cannot be built stops the run
instead of running less isolated (issue 24).

The grader's side (:mod:`coursetools.grade.grading.process`, :mod:`coursetools.grade.batch`) calls
the host's functions through this module, so a test that replaces ``sandbox.allocate_uids``
(say) replaces what the grader calls. The code that runs inside the sandbox
(:mod:`coursetools.grade.sandbox.harness`, :mod:`coursetools.grade.sandbox.zygote`) imports the parent's, the
child's and the shared module itself, never this one nor the host's.
"""

from __future__ import annotations

from coursetools.grade.sandbox.child import confine as confine
from coursetools.grade.sandbox.child import drop_capabilities as drop_capabilities
from coursetools.grade.sandbox.child import install_seccomp as install_seccomp
from coursetools.grade.sandbox.child import seccomp_program as seccomp_program
from coursetools.grade.sandbox.host import SANDBOX_UID_BASE as SANDBOX_UID_BASE
from coursetools.grade.sandbox.host import UID_BLOCK as UID_BLOCK
from coursetools.grade.sandbox.host import UID_BLOCKS as UID_BLOCKS
from coursetools.grade.sandbox.host import UNSHARE_FLAGS as UNSHARE_FLAGS
from coursetools.grade.sandbox.host import Confinement as Confinement
from coursetools.grade.sandbox.host import MemoryGroup as MemoryGroup
from coursetools.grade.sandbox.host import RunGroup as RunGroup
from coursetools.grade.sandbox.host import _uid_processes as _uid_processes
from coursetools.grade.sandbox.host import allocate_uids as allocate_uids
from coursetools.grade.sandbox.host import command as command
from coursetools.grade.sandbox.host import describe as describe
from coursetools.grade.sandbox.host import kill_uid as kill_uid
from coursetools.grade.sandbox.host import probe as probe
from coursetools.grade.sandbox.host import release_uids as release_uids
from coursetools.grade.sandbox.host import sweep_memory_groups as sweep_memory_groups
from coursetools.grade.sandbox.parent import build_root as build_root
from coursetools.grade.sandbox.parent import enter as enter
from coursetools.grade.sandbox.parent import set_dumpable as set_dumpable
from coursetools.grade.sandbox.shared import HOME as HOME
from coursetools.grade.sandbox.shared import IsolationReport as IsolationReport
from coursetools.grade.sandbox.shared import SandboxConfig as SandboxConfig
from coursetools.grade.sandbox.shared import set_pdeathsig as set_pdeathsig
