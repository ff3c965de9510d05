"""The learner's process confines itself: limits, the sandbox uid, no capabilities, seccomp.

Runs in the learner's process, forked by the sandbox's trusted parent
(:mod:`coursetools.grade.sandbox.parent`) inside the root it built, and runs there before
the first line of learner code and never again: :func:`confine` sets the resource limits,
takes the sandbox uid when the grader is root (then the home folder is handed to it), drops
every capability (in a user namespace the process would otherwise keep root's there), sets
``no_new_privs`` and installs a seccomp filter (:func:`seccomp_program`) that refuses
``socket()`` of every family, ``ptrace``, access to other processes' memory, mounts and new
namespaces. It may assume only what the parent left: its working directory (the home
folder of the new root in a namespace mode, the scratch folder without namespaces), the uid
the run started with (root, the grader's own, or root mapped by a user namespace) and the
limits of Linux where it runs (off Linux only the limits are set). What it achieved is added to the parent's
:class:`~coursetools.grade.sandbox.shared.IsolationReport`, sent to the grader before any
learner code. It imports nothing of the grader's side (:mod:`coursetools.grade.sandbox.host`)
nor of the parent's (``tests/test_layering.py`` checks it).
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import sys

from coursetools.grade.sandbox.shared import (
    IsolationReport,
    SandboxConfig,
    load_libc,
    machine_name,
    set_pdeathsig,
    traversable,
)

PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4


def confine(settings: SandboxConfig, report: IsolationReport) -> None:
    """Confine the learner's process (a child of the trusted parent), before any learner code.

    Resource limits; the sandbox uid when the grader is root (then the home
    folder is handed to it); no capabilities at all (in a user namespace the
    process would otherwise keep root's there); ``no_new_privs``; and a seccomp
    filter (:func:`install_seccomp`) that refuses ``socket()`` of every family,
    ``ptrace``, access to other processes' memory, mounts and new namespaces.
    What was achieved is added to ``report`` (started by the trusted parent).
    """
    linux = sys.platform.startswith("linux")
    _limits(settings, report)
    home = os.getcwd()
    uid = settings.uid
    if uid is not None and os.getuid() == 0 and _real_root():
        if traversable(list(settings.needed)):
            try:
                os.chown(home, uid, uid)
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                report.uid = uid
                # a change of credentials clears the parent-death signal: arm it again
                set_pdeathsig()
            except OSError as exc:
                report.errors.append(f"could not drop privileges: {exc}")
        else:
            report.errors.append("stayed root: the interpreter is not readable by other users")
    if linux:
        libc = load_libc()
        try:
            drop_capabilities(libc)
        except OSError as exc:
            report.errors.append(str(exc))
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        # a forked child does not inherit the parent-death signal, and a change of uid clears
        # it: arm it here in every mode (in userns mode the uid never changes)
        set_pdeathsig()
        try:
            install_seccomp(libc)
            report.seccomp = True
        except OSError as exc:
            report.errors.append(str(exc))


def drop_capabilities(libc) -> None:
    """Drop every capability: bounding set, ambient set, then effective, permitted, inheritable."""
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    if libc.capset(header, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")


# --------------------------------------------------------------------------- seccomp

_SECCOMP_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# system calls refused to learner code, by architecture: socket() of every family (a
# socketpair stays possible), tracing and other processes' memory, mounts, namespaces,
# the kernel's keyring, BPF, perf, userfaultfd, io_uring, handles to files by number
_SECCOMP_DENY = {
    "x86_64": {
        "socket": 41,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "unshare": 272,
        "setns": 308,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "io_uring_setup": 425,
        "open_by_handle_at": 304,
        "name_to_handle_at": 303,
        "kcmp": 312,
        "pidfd_getfd": 438,
        "fsopen": 430,
        "fsmount": 432,
        "open_tree": 428,
        "move_mount": 429,
        "mount_setattr": 442,
        "init_module": 175,
        "finit_module": 313,
        "kexec_load": 246,
        "acct": 163,
        "swapon": 167,
        "reboot": 169,
        "syslog": 103,
    },
    "aarch64": {
        "socket": 198,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "unshare": 97,
        "setns": 268,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "io_uring_setup": 425,
        "open_by_handle_at": 265,
        "name_to_handle_at": 264,
        "kcmp": 272,
        "pidfd_getfd": 438,
        "fsopen": 430,
        "fsmount": 432,
        "open_tree": 428,
        "move_mount": 429,
        "mount_setattr": 442,
        "init_module": 105,
        "finit_module": 273,
        "kexec_load": 104,
        "acct": 89,
        "swapon": 224,
        "reboot": 142,
        "syslog": 116,
    },
}
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = 435
# clone() flags that make a new namespace (user, mount, PID, network, IPC, UTS, cgroup, time)
_CLONE_NEW = 0x10000000 | 0x00020000 | 0x20000000 | 0x40000000 | 0x08000000 | 0x04000000 | 0x02000000 | 0x80
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_SECCOMP_RET_KILL_PROCESS = 0x80000000
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The BPF program of the learner's seccomp filter, as ``(code, jt, jf, k)`` rows.

    Another architecture than the one named is killed (a 32-bit entry into a
    64-bit kernel reads other numbers); on x86_64 the x32 calls (bit 30) are
    refused; each call of :data:`_SECCOMP_DENY` returns ``EPERM``; ``clone``
    with a namespace flag returns ``EPERM``; ``clone3`` (whose flags a filter
    cannot read) returns ``ENOSYS``, so that the C library falls back to ``clone``.
    """
    machine = machine or machine_name()
    if machine not in _SECCOMP_ARCH:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {machine}")
    ld_w_abs, jeq, jset, jge, ret = 0x20, 0x15, 0x45, 0x35, 0x06
    eperm = _SECCOMP_RET_ERRNO | errno.EPERM
    prog = [
        (ld_w_abs, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, _SECCOMP_ARCH[machine]),
        (ret, 0, 0, _SECCOMP_RET_KILL_PROCESS),
        (ld_w_abs, 0, 0, 0),  # seccomp_data.nr
    ]
    if machine == "x86_64":
        prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, eperm)]
    for nr in sorted(set(_SECCOMP_DENY[machine].values())):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, eperm)]
    prog += [(jeq, 0, 1, _CLONE3), (ret, 0, 0, _SECCOMP_RET_ERRNO | errno.ENOSYS)]
    prog += [
        (jeq, 0, 3, _CLONE[machine]),
        (ld_w_abs, 0, 0, 16),  # the low 32 bits of args[0]: clone's flags
        (jset, 0, 1, _CLONE_NEW),
        (ret, 0, 0, eperm),
        (ret, 0, 0, _SECCOMP_RET_ALLOW),
    ]
    return prog


def install_seccomp(libc=None) -> None:
    """Install :func:`seccomp_program` on this process (and every process it starts)."""
    libc = libc or load_libc()
    rows = seccomp_program()
    array = (_SockFilter * len(rows))(*[_SockFilter(*row) for row in rows])
    prog = _SockFprog(len(rows), array)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")


def _real_root() -> bool:
    """True when uid 0 here is the host's root (no user namespace maps it elsewhere)."""
    try:
        with open("/proc/self/uid_map", encoding="ascii") as fh:
            first = fh.read().split()
        return first[:2] == ["0", "0"]
    except OSError:
        return True


def _user_process_count() -> int:
    uid = os.getuid()
    count = 0
    try:
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == uid:
                        count += 1
                except OSError:
                    pass
    except OSError:
        return 0
    return count


def _limits(settings: SandboxConfig, report: IsolationReport) -> None:
    mb = 1 << 20
    wanted = []
    if settings.memory_mb:
        wanted.append(("RLIMIT_AS", int(settings.memory_mb) * mb))
    if settings.fsize_mb:
        wanted.append(("RLIMIT_FSIZE", int(settings.fsize_mb) * mb))
    if settings.cpu_s:
        wanted.append(("RLIMIT_CPU", int(settings.cpu_s)))
    wanted.append(("RLIMIT_CORE", 0))
    nproc = settings.nproc
    if nproc:
        dropping = settings.uid is not None and os.getuid() == 0
        # without a uid of its own, the limit counts every process of this user
        wanted.append(("RLIMIT_NPROC", int(nproc) + (0 if dropping else _user_process_count())))
    for name, value in wanted:
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))
            report.limits.append(name)
        except (ValueError, OSError) as exc:
            report.errors.append(f"{name}: {exc}")
