"""Isolation of a submission's process: namespaces, mounts, limits, privileges.

Two halves:

* the grader (parent) side, :func:`probe` and :func:`command`, decides how the
  child is started: under ``setpriv --pdeathsig KILL unshare --mount --net
  --pid --fork --kill-child --mount-proc`` where that works (Linux, root or
  unprivileged user namespaces), else as a plain child process;
* the child side, :func:`enter`, runs inside the harness *before any learner
  code*: it hides the solutions, submissions and output folders behind empty
  read-only tmpfs mounts, mounts a small private tmpfs as the scratch folder,
  remounts every other file system read-only, sets the resource limits
  (address space, processes, file size, CPU, core files) and, when it runs as
  real root, drops to an unprivileged uid so that ``RLIMIT_NPROC`` is enforced
  and file permissions apply.

Everything degrades: each step that the platform refuses is recorded in the
``isolation`` report that the harness sends back, and the grader shows it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

_FLAG_NAMES = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}
UNSHARE_FLAGS = ["--mount", "--net", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc"]
# uids of the sandbox users: one per job slot AND per grader instance (see
# allocate_uids), so that one submission's fork bomb cannot use up another's
# RLIMIT_NPROC, and two graders on one host never share a uid.
SANDBOX_UID_BASE = int(os.environ.get("ATTNLIB_GRADE_UID_BASE", "62000"))
UID_BLOCK = 16  # uids per grader instance: its job slots
UID_BLOCKS = 64
_HELD_LOCKS: list[int] = []


def allocate_uids(jobs: int) -> int:
    """The first of ``jobs`` sandbox uids that no other grader on this host holds.

    Blocks of :data:`UID_BLOCK` uids are claimed with ``flock`` on a lock file per
    block (released by the kernel when this process ends, even after ``kill -9``).
    """
    import fcntl

    if jobs > UID_BLOCK:
        raise ValueError(f"at most {UID_BLOCK} jobs per grader (got {jobs})")
    folder = os.environ.get("COURSETOOLS_LOCK_DIR", "/tmp")
    for block in range(UID_BLOCKS):
        path = os.path.join(folder, f".coursetools-grade-uids-{SANDBOX_UID_BASE + block * UID_BLOCK}.lock")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _HELD_LOCKS.append(fd)
        return SANDBOX_UID_BASE + block * UID_BLOCK
    raise RuntimeError(f"every block of sandbox uids is held by another grader ({UID_BLOCKS} blocks)")


def release_uids(base: int) -> None:
    """Give back the block of uids that :func:`allocate_uids` returned."""
    import fcntl

    for fd in list(_HELD_LOCKS):
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            name = ""
        if name.endswith(f"-{base}.lock"):
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            _HELD_LOCKS.remove(fd)


class MemoryGroup:
    """A memory cgroup for one job slot: every process of a submission counts against one limit.

    cgroup v2 where a writable cgroup2 mount offers the memory controller (``memory.max``,
    no swap), else the v1 memory hierarchy (``memory.limit_in_bytes``); :meth:`create`
    returns None where neither is writable (then only the per-process ``RLIMIT_AS`` and
    the process count bound a submission). The grader puts a run's first process into
    the group before sending it its plan, so learner code never runs outside it.
    """

    def __init__(self, path: str, kind: str):
        self.path = path
        self.kind = kind

    @classmethod
    def create(cls, name: str, limit_mb: int) -> MemoryGroup | None:
        if not sys.platform.startswith("linux") or os.geteuid() != 0:
            return None
        limit = str(int(limit_mb) << 20)
        for kind, top in _cgroup_roots():
            path = os.path.join(top, name)
            try:
                os.makedirs(path, exist_ok=True)
                if kind == "cgroup v2":
                    _write(os.path.join(path, "memory.max"), limit)
                    _write(os.path.join(path, "memory.swap.max"), "0", required=False)
                else:
                    _write(os.path.join(path, "memory.limit_in_bytes"), limit)
                    _write(os.path.join(path, "memory.memsw.limit_in_bytes"), limit, required=False)
                return cls(path, kind)
            except OSError:
                try:
                    os.rmdir(path)
                except OSError:
                    pass
        return None

    def add(self, pid: int) -> None:
        _write(os.path.join(self.path, "cgroup.procs"), str(pid))

    def remove(self) -> None:
        for _ in range(50):  # the last processes may still be exiting
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                import time

                time.sleep(0.1)


def sweep_memory_groups() -> None:
    """Remove the empty groups of graders that ended without cleaning up (``kill -9``)."""
    if os.geteuid() != 0:
        return
    for _kind, top in _cgroup_roots():
        try:
            names = os.listdir(top)
        except OSError:
            continue
        for name in names:
            parts = name.split("-")
            if name.startswith("coursetools-grade-") and len(parts) > 2 and parts[2].isdigit():
                if not os.path.exists(f"/proc/{parts[2]}"):
                    try:
                        os.rmdir(os.path.join(top, name))
                    except OSError:
                        pass


def _write(path: str, text: str, required: bool = True) -> None:
    try:
        with open(path, "w", encoding="ascii") as fh:
            fh.write(text)
    except OSError:
        if required:
            raise


def _cgroup_roots() -> list[tuple[str, str]]:
    """Writable cgroup folders that offer the memory controller: v2 first, then v1."""
    found: list[tuple[str, str]] = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or not tail:
            continue
        point = _unescape(fields[4])
        if tail[0] == "cgroup2":
            try:
                with open(os.path.join(point, "cgroup.controllers"), encoding="ascii") as fh:
                    if "memory" in fh.read().split():
                        found.insert(0, ("cgroup v2", point))
            except OSError:
                pass
        elif tail[0] == "cgroup" and len(tail) >= 3 and "memory" in tail[2].split(","):
            found.append(("cgroup v1", point))
    return [(k, p) for k, p in found if os.access(p, os.W_OK)]


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` (what a submission left behind: setsid, daemons).

    A forked helper takes the uid and calls ``kill(-1, SIGKILL)``, which reaches
    exactly the processes that uid may signal: its own. Root only; a no-op otherwise.
    """
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return
    for _ in range(3):  # a fork that raced with the kill: try again
        pid = os.fork()
        if pid == 0:
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, 9)
            except BaseException:  # noqa: BLE001, S110 - nothing left to kill
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        if not _uid_processes(uid):
            return


def _uid_processes(uid: int) -> list[int]:
    """Live processes of ``uid`` (zombies, already dead and waiting to be reaped, are not counted)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid != uid:
                    continue
                with open(os.path.join(entry.path, "stat"), "rb") as fh:
                    state = fh.read().rsplit(b")", 1)[1].split()[0]
                if state not in (b"Z", b"X"):
                    found.append(int(entry.name))
            except (OSError, IndexError):
                pass
    return found


# --------------------------------------------------------------------------- grader side


def probe() -> str:
    """How children can be isolated here: ``"namespaces"``, ``"userns"`` or ``"none"``."""
    if not sys.platform.startswith("linux"):
        return "none"
    unshare = shutil.which("unshare")
    if not unshare:
        return "none"
    prefixes = [[unshare, *UNSHARE_FLAGS]]
    kinds = ["namespaces"]
    if os.geteuid() != 0:
        prefixes = [[unshare, "--user", "--map-root-user", *UNSHARE_FLAGS]]
        kinds = ["userns"]
    for prefix, kind in zip(prefixes, kinds, strict=True):
        try:
            proc = subprocess.run([*prefix, "true"], capture_output=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode == 0:
            return kind
    return "none"


def describe(mode: str, uid_base: int | None, jobs: int, memory_groups: str | None, needed: list[str]) -> str:
    """What the isolation of a run amounts to, in words, for the grader's summary line.

    A grader that is not root still grades, with the isolation it can get: the
    namespaces of ``unshare --user`` (``userns``) or none; it says what that lacks.
    """
    text = [mode]
    if mode == "none":
        text.append("no namespaces: submissions see the file system, the network and IPC as their user does")
    root = os.geteuid() == 0
    if root and uid_base is not None and (mode == "namespaces" or (mode == "none" and _traversable(needed))):
        text.append(f"a uid per job slot ({uid_base}-{uid_base + jobs - 1})")
    elif root:
        text.append("submissions stay root: the interpreter is not readable by other users")
    else:
        text.append("the grader is not root: submissions run as its own user (no uid per submission)")
        if mode not in ("namespaces", "userns"):
            text.append("a process that leaves its process group outlives grading")
    text.append(
        f"memory limited per submission ({memory_groups})"
        if memory_groups
        else "memory limited per process only (RLIMIT_AS): no writable memory cgroup"
    )
    return "; ".join(text)


def command(mode: str, argv: list[str]) -> list[str]:
    """The command line that starts ``argv`` isolated according to ``mode`` (see :func:`probe`)."""
    prefix: list[str] = []
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if setpriv:
        prefix = [setpriv, "--pdeathsig", "KILL", "--"]
    if mode == "namespaces":
        prefix += [shutil.which("unshare") or "unshare", *UNSHARE_FLAGS, "--"]
    elif mode == "userns":
        prefix += [shutil.which("unshare") or "unshare", "--user", "--map-root-user", *UNSHARE_FLAGS, "--"]
    return prefix + argv


# --------------------------------------------------------------------------- child side


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _mount(libc, source, target, fstype, flags, data=None) -> None:
    enc = [None if s is None else os.fsencode(s) for s in (source, target, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _unescape(path: str) -> str:
    return path.encode().decode("unicode_escape") if "\\" in path else path


def _mounts() -> list[tuple[str, int]]:
    """Mount points of this mount namespace with the flags to preserve on a remount."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            if len(fields) < 6:
                continue
            flags = 0
            for opt in fields[5].split(","):
                flags |= _FLAG_NAMES.get(opt, 0)
            found.append((_unescape(fields[4]), flags))
    return found


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def set_pdeathsig() -> None:
    """Ask Linux to SIGKILL this process when the grader dies (a no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        try:
            _libc().prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def _open_up(libc, needed: list[str], stage: str, report: dict) -> None:
    """Make the folders the Python interpreter lives in traversable for the sandbox uid.

    A folder such as ``/root`` (mode 0700) that lies on the way to the
    interpreter is covered, inside this mount namespace only, by a tmpfs of
    mode 0755 into which the one needed child folder is bind-mounted back; the
    rest of the folder stays invisible.
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
                spot = os.path.join(stage, f"stage{len(report['opened'])}-{k}")
                os.makedirs(spot, exist_ok=True)
                src = os.path.join(folder, child)
                if os.path.isdir(src):
                    _mount(libc, src, spot, None, MS_BIND | MS_REC)
                    staged.append((child, spot))
            _mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
            for child, spot in staged:
                os.makedirs(os.path.join(folder, child), exist_ok=True)
                _mount(libc, spot, os.path.join(folder, child), None, MS_MOVE)
                os.rmdir(spot)
            report["opened"].append(folder)


def enter(settings: dict) -> dict:
    """Confine the current process as ``settings`` asks; return what was achieved.

    ``settings`` keys: ``mode`` (from :func:`probe`), ``scratch`` (folder that
    becomes the private writable tmpfs), ``scratch_mb``, ``hide`` (folders to
    cover), ``needed`` (folders the interpreter must still read), ``uid``,
    ``memory_mb``, ``nproc``, ``fsize_mb``, ``cpu_s``.
    """
    report: dict = {
        "mode": settings.get("mode", "none"),
        "network": False,
        "readonly": False,
        "hidden": [],
        "opened": [],
        "uid": _host_uid(),  # as the host sees it (in a user namespace, uid 0 is the grader's own uid)
        "limits": [],
        "errors": [],
    }
    scratch = settings["scratch"]
    linux = sys.platform.startswith("linux")
    in_ns = report["mode"] in ("namespaces", "userns") and linux
    if in_ns:
        libc = _libc()
        report["network"] = True  # a new network namespace: only a loopback, which is down
        try:
            _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
            needed = [os.path.realpath(p) for p in settings.get("needed", [])]
            for folder in settings.get("hide", []):
                folder = os.path.realpath(folder)
                if not os.path.isdir(folder) or any(_under(n, folder) for n in needed):
                    continue
                _mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m")
                report["hidden"].append(folder)
            os.makedirs(scratch, exist_ok=True)
            size = int(settings.get("scratch_mb", 64))
            _mount(libc, "tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,size={size}m")
            uid = settings.get("uid")
            if uid is not None and os.getuid() == 0 and _real_root():
                _open_up(libc, needed, scratch, report)
            for point, flags in _mounts():
                if point == scratch or any(_under(point, t) for t in ("/proc", "/sys", "/dev")):
                    continue
                try:
                    _mount(libc, None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
                except OSError as exc:
                    if point == "/":
                        raise
                    report["errors"].append(str(exc))
            report["readonly"] = True
            if os.path.isdir("/dev/shm"):
                _mount(libc, "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=16m")
        except OSError as exc:
            report["errors"].append(str(exc))
    else:
        os.makedirs(scratch, exist_ok=True)
    os.chdir(scratch)
    _limits(settings, report)
    uid = settings.get("uid")
    if uid is not None and os.getuid() == 0 and _real_root():
        if _traversable(settings.get("needed", [])):
            try:
                os.chown(scratch, uid, uid)
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                report["uid"] = uid
                # a change of credentials clears the parent-death signal: arm it again
                set_pdeathsig()
            except OSError as exc:
                report["errors"].append(f"could not drop privileges: {exc}")
        else:
            report["errors"].append("stayed root: the interpreter is not readable by other users")
    if linux:
        try:
            _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    return report


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


def _real_root() -> bool:
    """True when uid 0 here is the host's root (no user namespace maps it elsewhere)."""
    try:
        with open("/proc/self/uid_map", encoding="ascii") as fh:
            first = fh.read().split()
        return first[:2] == ["0", "0"]
    except OSError:
        return True


def _traversable(paths) -> bool:
    for path in paths:
        parts = Path(os.path.realpath(path)).parts
        for i in range(1, len(parts)):
            try:
                if not os.stat(str(Path(*parts[: i + 1]))).st_mode & 0o001:
                    return False
            except OSError:
                return False
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


def _limits(settings: dict, report: dict) -> None:
    mb = 1 << 20
    wanted = []
    if settings.get("memory_mb"):
        wanted.append(("RLIMIT_AS", int(settings["memory_mb"]) * mb))
    if settings.get("fsize_mb"):
        wanted.append(("RLIMIT_FSIZE", int(settings["fsize_mb"]) * mb))
    if settings.get("cpu_s"):
        wanted.append(("RLIMIT_CPU", int(settings["cpu_s"])))
    wanted.append(("RLIMIT_CORE", 0))
    nproc = settings.get("nproc")
    if nproc:
        dropping = settings.get("uid") is not None and os.getuid() == 0
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
            report["limits"].append(name)
        except (ValueError, OSError) as exc:
            report["errors"].append(f"{name}: {exc}")
