"""The sandbox's trusted parent: the new root of a run, built before any learner code.

Runs in the harness's first process inside the sandbox (:func:`coursetools.grade.sandbox.harness.run`),
started by the grader with its plan on a pipe: in a namespace mode it is PID 1 of new mount,
network, IPC and PID namespaces (``unshare`` or the zygote made them), still root there (the
host's root, or the grader's own uid mapped to 0 by ``unshare --user``), with the host's file
system mounted as the grader sees it; without namespaces (mode ``none``) it is a plain child
of the grader, with the grader's uid, and only moves into its scratch folder. No learner code
has run yet, and none ever runs in this process. :func:`enter` builds the sandbox's root from
an allow-list (:func:`build_root`: a tmpfs with read-only bind mounts of what grading needs
and a private home) and returns the :class:`~coursetools.grade.sandbox.shared.IsolationReport`
it starts; :func:`set_dumpable` keeps the learner's uid from tracing this process. A
namespace mode whose root cannot be built stops the run instead of running less isolated
(issue 24).

The learner's process, forked from here, confines itself further
(:mod:`coursetools.grade.sandbox.child`); this module imports nothing of the grader's side
(:mod:`coursetools.grade.sandbox.host`).
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from coursetools.grade.sandbox.shared import (
    HOME,
    MS_BIND,
    MS_MOVE,
    MS_NOATIME,
    MS_NODEV,
    MS_NODIRATIME,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_RELATIME,
    MS_REMOUNT,
    MS_STRICTATIME,
    IsolationReport,
    SandboxConfig,
    load_libc,
    machine_name,
    mount,
    mountinfo_entries,
    under,
)

_FLAG_NAMES = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}


def _mounts() -> list[tuple[str, int]]:
    """Mount points of this mount namespace with the flags to preserve on a remount."""
    found = []
    for entry in mountinfo_entries():
        flags = 0
        for opt in entry.options:
            flags |= _FLAG_NAMES.get(opt, 0)
        found.append((entry.point, flags))
    return found


def open_up(libc, needed: list[str], stage: str, opened: list[str]) -> None:
    """Make the folders the Python interpreter lives in traversable for the sandbox uid.

    A folder such as ``/root`` (mode 0700) that lies on the way to the
    interpreter is covered, inside this mount namespace only, by a tmpfs of
    mode 0755 into which the one needed child folder is bind-mounted back; the
    rest of the folder stays invisible. Each folder covered is added to ``opened``
    (:attr:`IsolationReport.opened`).
    """
    for _ in range(8):
        blocked: dict[str, set[str]] = {}
        for path in needed:
            parts = Path(path).parts
            for i in range(1, len(parts) - 1):
                folder = str(Path(*parts[: i + 1]))
                try:
                    mode = os.stat(folder).st_mode
                except OSError:
                    break
                if not mode & 0o001:
                    blocked.setdefault(folder, set()).add(parts[i + 1])
                    break
        if not blocked:
            return
        for folder, children in blocked.items():
            staged = []
            for k, child in enumerate(sorted(children)):
                spot = os.path.join(stage, f"stage{len(opened)}-{k}")
                os.makedirs(spot, exist_ok=True)
                src = os.path.join(folder, child)
                if os.path.isdir(src):
                    mount(libc, src, spot, None, MS_BIND | MS_REC)
                    staged.append((child, spot))
            mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
            for child, spot in staged:
                os.makedirs(os.path.join(folder, child), exist_ok=True)
                mount(libc, spot, os.path.join(folder, child), None, MS_MOVE)
                os.rmdir(spot)
            opened.append(folder)


# What a sandbox's root holds besides the interpreter and the packages (issue 24): the
# system's libraries and programs, a few files of /etc, device nodes, the CPU topology
# (torch's cpuinfo reads it). Nothing else of the host exists there: no /tmp, no /run,
# no home folders, no other checkout, no socket.
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
)
DEV_NODES = ("null", "zero", "full", "random", "urandom")
SYS_DIRS = ("/sys/devices/system/cpu", "/sys/devices/system/node")
MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
PR_SET_DUMPABLE = 4


def set_dumpable(value: bool) -> None:
    """``PR_SET_DUMPABLE``: a process that is not dumpable cannot be traced or read through
    ``/proc/<pid>/mem`` by a process of the same uid without ``CAP_SYS_PTRACE``."""
    if sys.platform.startswith("linux"):
        load_libc().prctl(PR_SET_DUMPABLE, int(value), 0, 0, 0)


def _host_uid() -> int:
    """This process's uid as the host sees it: through ``/proc/self/uid_map`` in a user namespace."""
    uid = os.getuid()
    try:
        with open("/proc/self/uid_map", encoding="ascii") as fh:
            for line in fh:
                inside, outside, count = (int(x) for x in line.split())
                if inside <= uid < inside + count:
                    return outside + uid - inside
    except (OSError, ValueError):
        pass
    return uid


def enter(settings: SandboxConfig) -> IsolationReport:
    """Confine the sandbox's trusted parent as ``settings`` asks; return what was achieved.

    In a namespace mode the process gets a new root built from an allow-list
    (:func:`build_root`): a tmpfs holding read-only bind mounts of exactly what
    grading needs and a private writable home folder, which becomes the working
    directory. Without namespaces the scratch folder is the working directory.
    The learner's limits, uid, capabilities and system-call filter are set later,
    in the learner's own process (:func:`~coursetools.grade.sandbox.child.confine`): this process stays the
    trusted parent that holds the grader's channel.

    ``settings``: :class:`SandboxConfig`. A namespace mode that cannot build its root raises
    OSError: a submission never runs with less isolation than its report says.
    """
    # the uid as the host sees it (in a user namespace, uid 0 is the grader's own uid)
    report = IsolationReport(settings.mode, uid=_host_uid())
    scratch = settings.scratch
    linux = sys.platform.startswith("linux")
    in_ns = report.mode in ("namespaces", "userns") and linux
    if in_ns:
        report.network = True  # a new network namespace: only a loopback, which is down
        build_root(settings, report)
        report.readonly = True
        os.chdir(HOME)
    else:
        os.makedirs(scratch, exist_ok=True)
        os.chdir(scratch)
    return report


def build_root(settings: SandboxConfig, report: IsolationReport) -> None:
    """Make this mount namespace's root a fresh tmpfs with only what grading needs.

    On the (host) folder ``settings.scratch``: a tmpfs that becomes ``/`` by
    ``pivot_root``, into which the system folders (:data:`SYSTEM_DIRS`, or their
    symbolic links), a few files of ``/etc``, the ``needed`` folders (the
    interpreter, the virtual environment, the course's packages) are bind-mounted
    read-only at their own paths; ``/proc`` (this PID namespace's), a few device
    nodes, a private ``/dev/shm``, and a writable tmpfs home (:data:`HOME`, also
    ``/tmp``) of ``scratch_mb``. ``attnlib/checks`` is left out: the harness has
    imported the checker's machinery before (the check modules never enter the
    sandbox). The old root is detached, so ``/proc/self/mountinfo`` names only
    these mounts.
    """
    libc = load_libc()
    mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    new = os.path.realpath(settings.scratch)
    os.makedirs(new, exist_ok=True)
    mount(libc, "tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096")
    binds: list[str] = []

    def bind(src: str, recursive: bool = True) -> None:
        target = new + src
        if os.path.isdir(src) and not os.path.islink(src):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.lexists(target):
                with open(target, "wb"):
                    pass
        mount(libc, src, target, None, MS_BIND | (MS_REC if recursive else 0))
        binds.append(src)

    for top in SYSTEM_DIRS:
        if os.path.islink(top):
            os.symlink(os.readlink(top), new + top)
        elif os.path.isdir(top):
            bind(top)
    os.makedirs(new + "/etc", exist_ok=True)
    for path in ETC_FILES:
        if os.path.islink(path):
            os.symlink(os.readlink(path), new + path)
        elif os.path.isfile(path):
            bind(path, recursive=False)
    needed = sorted({os.path.realpath(p) for p in settings.needed}, key=len)
    for path in needed:
        if not os.path.exists(path) or any(under(path, b) for b in binds):
            continue
        name = os.path.basename(path)
        if name == "attnlib" and os.path.isdir(os.path.join(path, "checks")):
            # the package without its check modules: each entry but checks/ on its own
            os.makedirs(new + path, exist_ok=True)
            for entry in sorted(os.listdir(path)):
                if entry != "checks":
                    bind(os.path.join(path, entry))
            continue
        bind(path)
    for path in SYS_DIRS:
        if os.path.isdir(path):
            try:
                bind(path)
            except OSError as exc:
                report.errors.append(str(exc))
    # this PID namespace's /proc (mounted by unshare --mount-proc or the zygote)
    os.makedirs(new + "/proc", exist_ok=True)
    mount(libc, "/proc", new + "/proc", None, MS_BIND | MS_REC)
    os.makedirs(new + "/dev", exist_ok=True)
    mount(libc, "tmpfs", new + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for node in DEV_NODES:
        if os.path.exists("/dev/" + node):
            bind("/dev/" + node, recursive=False)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{new}/dev/{name}")
    os.makedirs(new + "/dev/shm")
    mount(libc, "tmpfs", new + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=16m")
    size = int(settings.scratch_mb)
    os.makedirs(new + HOME)
    mount(libc, "tmpfs", new + HOME, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,size={size}m")
    if not os.path.exists(new + "/tmp"):
        os.makedirs(new + "/tmp")
        mount(libc, new + HOME, new + "/tmp", None, MS_BIND)
    # else: the checkout (or the venv) lives under /tmp: the sandbox's /tmp then holds only the
    # folders on the way to it (read-only), nothing else of the host's /tmp
    os.makedirs(new + "/.old")
    os.chdir(new)
    if libc.syscall(_PIVOT_ROOT.get(machine_name(), -1), b".", b".old") != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root: {os.strerror(err)}")
    os.chdir("/")
    if libc.umount2(b"/.old", MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"detaching the old root: {os.strerror(err)}")
    os.rmdir("/.old")
    # everything read-only but the home folder (and /tmp, the same), /dev/shm, /proc
    writable = {HOME, "/tmp", "/dev/shm", "/proc"}
    for point, flags in _mounts():
        if point in writable or under(point, "/proc"):
            continue
        try:
            mount(libc, None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError as exc:
            if point == "/":
                raise
            report.errors.append(str(exc))
    report.root = sorted(set(binds))
    # what the grader asked to hide is simply not there (the host's /tmp: a fresh one)
    wanted = [
        *settings.hide,
        *(os.path.join(p, "checks") for p in needed if p.endswith("/attnlib")),
    ]
    report.hidden = sorted({h for h in wanted if h == "/tmp" or not os.path.exists(h)})
