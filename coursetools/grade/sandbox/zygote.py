"""A pre-warmed process that forks one sandboxed child per run.

Starting Python and importing torch costs one to several seconds, more than
grading a chapter's exercises. A zygote pays it once per job slot: it imports
numpy, torch and attnlib, then waits on a Unix socket. For each run the grader
sends three pipe ends (plan, events, output); the zygote forks a child that
starts a new session, unshares its mount, network and PID namespaces, forks
the process that becomes PID 1 there, and runs :func:`coursetools.grade.sandbox.harness.run`
in it. Killing the child's process group kills PID 1, and with it every process
the learner's code started. Each of these processes asks to be killed if its
parent dies, so nothing outlives the grader, even after ``kill -9``.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from typing import BinaryIO

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _child(fds: list[int], control: socket.socket, isolate: bool) -> None:
    """In the forked child: become a session leader, then (optionally) PID 1 of new namespaces."""
    from coursetools.grade.sandbox.shared import (
        MS_NODEV,
        MS_NOEXEC,
        MS_NOSUID,
        MS_PRIVATE,
        MS_REC,
        load_libc,
        mount,
        set_pdeathsig,
    )

    control.close()
    os.setsid()
    set_pdeathsig()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    plan_fd, events_fd, output_fd = fds
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(devnull)
    os.close(output_fd)
    chunks = []
    while True:
        data = os.read(plan_fd, 1 << 20)
        if not data:
            break
        chunks.append(data)
    os.close(plan_fd)
    plan = json.loads(b"".join(chunks).decode("utf-8"))
    plan["fd"] = events_fd
    if isolate:
        libc = load_libc()
        if libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID) != 0:
            err = ctypes.get_errno()
            os.write(2, f"unshare failed: {os.strerror(err)}\n".encode())
            os._exit(70)
        pid = os.fork()
        if pid:
            os.close(events_fd)
            while True:
                try:
                    _, status = os.waitpid(pid, 0)
                    break
                except ChildProcessError:
                    os._exit(71)
                except InterruptedError:
                    continue
            code = _exit_code(status)
            os._exit(128 - code if code < 0 else code)
        set_pdeathsig()
        try:
            mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
            mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError as exc:
            os.write(2, f"could not mount /proc: {exc}\n".encode())
    from coursetools.grade.sandbox import harness

    harness.run(plan)


def _package_modules(name: str) -> list[str]:
    """The modules of package ``name`` (not imported)."""
    import importlib
    import pkgutil

    try:
        package = importlib.import_module(name)
    except Exception:  # noqa: BLE001 - nothing to warm
        return []
    return [f"{name}.{info.name}" for info in pkgutil.iter_modules(package.__path__)]


def _import_modules(names: list[str]) -> None:
    """Import each module of ``names`` whose import succeeds (warming only)."""
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - warming is optional
            continue


def serve(control_fd: int, isolate: bool) -> None:
    """The zygote's loop: warm imports, then one fork per request until the socket closes."""
    # No parent-death signal here: it fires when the *thread* that started the zygote
    # ends (Zygote.warm starts it from a short-lived thread). The zygote ends instead
    # when its control socket closes, which happens when the grader ends, even by
    # kill -9; each child it forks asks for SIGKILL when the zygote dies.
    import numpy  # noqa: F401
    import torch  # noqa: F401

    import attnlib  # noqa: F401
    import attnlib.checks  # noqa: F401  (core and forbidden: the checker's machinery, no answers)
    from coursetools.grade.sandbox import harness  # noqa: F401

    # Warm the modules whose classes the cases' inputs hold (models of the chapters). Never
    # a check module (attnlib/checks/chNN_*.py): whatever this process imports, every
    # learner's code forked from it can reach, and those modules hold the references.
    _import_modules(["attnlib.transformer", "attnlib.positions", "attnlib.efficient"])
    _import_modules(_package_modules("attnlib.chapters"))
    control = socket.socket(fileno=control_fd)
    control.sendall(b'{"ready": true}\n')
    children: dict[int, int] = {}
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(control, 4096, 3)
        except OSError:
            break
        if not msg:
            break
        request = json.loads(msg.decode())
        if "wait" in request:
            pid = int(request["wait"])
            try:
                _, status = os.waitpid(pid, 0)
                code = _exit_code(status)
            except ChildProcessError:
                code = children.get(pid, 1)
            control.sendall(json.dumps({"code": code}).encode() + b"\n")
            continue
        pid = os.fork()
        if pid == 0:
            try:
                _child(list(fds), control, isolate)
            finally:
                os._exit(72)
        for fd in fds:
            os.close(fd)
        control.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    os._exit(0)


class Zygote:
    """The grader's handle on one zygote process (one per job slot)."""

    def __init__(self, python: str, root: str, env: dict, isolate: bool):
        self.python = python
        self.root = root
        self.env = env
        self.isolate = isolate
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.reader: BinaryIO | None = None
        self.lock = threading.Lock()

    def _start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        boot = (
            f"import sys; sys.path.insert(0, {self.root!r}); "
            f"from coursetools.grade.sandbox.zygote import serve; serve({child.fileno()}, {self.isolate!r})"
        )
        self.proc = subprocess.Popen(
            [self.python, "-I", "-B", "-c", boot],  # -I ignores PYTHONDONTWRITEBYTECODE: -B
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=self.env,
        )
        child.close()
        self.sock = parent
        self.reader = reader = parent.makefile("rb")
        line = reader.readline()
        if not line or not json.loads(line).get("ready"):
            self.close()
            raise OSError("the zygote did not start")

    def _channel(self) -> tuple[socket.socket, BinaryIO]:
        """The socket to the running zygote and its reader (set together by :meth:`_start`)."""
        if self.sock is None or self.reader is None:
            raise OSError("the zygote is not running")
        return self.sock, self.reader

    def warm(self) -> None:
        """Start the zygote in the background, so that it is ready when the first run comes."""

        def start():
            with self.lock:
                if self.proc is None:
                    try:
                        self._start()
                    except OSError:
                        pass

        threading.Thread(target=start, daemon=True).start()

    def spawn(self, fds: list[int]) -> int:
        """Fork a child that owns ``fds`` (plan read end, events and output write ends); its pid."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            sock, reader = self._channel()
            socket.send_fds(sock, [b'{"run": true}'], fds)
            reply = json.loads(reader.readline())
            return int(reply["pid"])

    def wait(self, pid: int) -> int | None:
        """Reap the child ``pid`` (after it ended or was killed); its exit code, negative for a signal."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                return None
            try:
                sock, reader = self._channel()
                sock.sendall(json.dumps({"wait": pid}).encode())
                line = reader.readline()
                return int(json.loads(line)["code"]) if line else None
            except (OSError, ValueError, KeyError):
                return None

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.proc = None
        self.sock = None


if __name__ == "__main__":  # pragma: no cover - started by Zygote._start
    serve(int(sys.argv[1]), sys.argv[2] == "1")
