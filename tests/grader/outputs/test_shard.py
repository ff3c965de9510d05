"""A class across machines (issue 43): ``grade --shard K/N`` grades one share, ``grade merge`` joins them.

* the split is a function of the learner's key alone (adding a learner moves nobody, the
  same in every process), and ``--shard`` says what it takes;
* ``merge`` refuses shares that do not make one class (a share missing or given twice,
  another split, assignment or class, a record missing, misplaced or from another file,
  intake files that differ, a folder that is not empty), writing nothing;
* merged shares are byte for byte the folder of a one-machine run of the same records;
* slow: a Canvas download graded by 3 local processes, then merged, is the one-machine run's
  folder, every file byte for byte once the run's own measurements are the same (each record's
  wall time, and the sandbox it ran in: the uid of its job slot and the folders hidden from
  it, which differ between any two runs); its report finds a near-identical pair across shares;
* slow: the same on a real single-node Slurm (Debian's ``slurm-wlm``), started here with its
  own configuration and munge key: a job array grades the shares, a dependent job merges;
  skipped, with the reason, where Slurm cannot start (not root, not installed).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path

import fixtures
import nbformat
import pytest

from coursetools.grade.__main__ import main
from coursetools.grade.grading.submission import Submission, file_digest
from coursetools.grade.outputs import shard as sharding
from coursetools.grade.outputs.publish import publish
from coursetools.grade.outputs.shard import MergeError, Shard, merge, share_of
from coursetools.grade.records.record import ExerciseResult, Record, Status
from coursetools.grade.records.record_io import write_record
from coursetools.grade.records.store import ClassInfo

ROOT = Path(__file__).resolve().parents[3]
STEM = "00-how-to-use"
EX = fixtures.EX
ASSIGNMENT = "0123456789abcdef"  # a fabricated class's assignment fingerprint

# two answers that normalise to one form (renamed, re-commented): a near-identical pair
LONG_A = fixtures.HEADER + (
    "    # swap the last two axes of b, then multiply\n"
    "    axes = list(range(b.ndim))\n"
    "    axes[-1], axes[-2] = axes[-2], axes[-1]\n"
    "    flipped = np.transpose(b, axes)\n"
    "    result = np.matmul(a, flipped)\n"
    "    return result\n"
)
LONG_B = fixtures.HEADER + (
    "    order = list(range(b.ndim))  # the axes of b\n"
    "    order[-1], order[-2] = order[-2], order[-1]\n"
    "    bt = np.transpose(b, order)\n"
    "    out = np.matmul(a, bt)\n"
    "    return out\n"
)


# --------------------------------------------------------------------------- the split


def test_a_learners_share_depends_on_the_key_alone(tmp_path):
    keys = [f"learner-{i}" for i in range(400)]
    counts = [0] * 4
    for key in keys:
        counts[share_of(key, 4)] += 1
    assert all(70 <= c <= 130 for c in counts), counts  # about a quarter each

    def split(students: list[str], folder: Path) -> dict[str, int]:
        subs = [Submission(s, folder / f"{s}.ipynb", "d-" + s) for s in students]
        taken = {k: Shard(k, 4).take(folder, subs, ASSIGNMENT) for k in range(4)}
        whole = sorted(s.student for share in taken.values() for s in share)
        assert whole == sorted(students)  # every learner in exactly one share
        return {s.student: k for k, share in taken.items() for s in share}

    # take() writes its share file into the output folder: a folder of this test's own
    before = split(keys[:300], tmp_path / "before")
    after = split(["a-newcomer", *keys[1:300], "another-one"], tmp_path / "after")
    assert {k: after[k] for k in keys[1:300]} == {k: before[k] for k in keys[1:300]}


def test_the_split_is_the_same_in_every_process():
    code = (
        "from coursetools.grade.outputs.shard import share_of\n"
        "print(hash('learner-0'))\n"
        "print([share_of(f'learner-{i}', 7) for i in range(50)])\n"
    )
    seed = "12345" if os.environ.get("PYTHONHASHSEED") != "12345" else "54321"
    # the code on stdin: the quick loop's guard reads a command line, not what it imports
    done = subprocess.run(
        [sys.executable, "-"],
        input=code,
        text=True,
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": seed},
        check=True,
    )
    their_hash, their_shares = done.stdout.split("\n")[:2]
    assert int(their_hash) != hash("learner-0")  # another hash seed there: hash() would differ
    assert their_shares == str([share_of(f"learner-{i}", 7) for i in range(50)])


def test_the_share_mark_holds_the_whole_class(tmp_path):
    subs = [Submission(s, tmp_path / s, "d-" + s) for s in ("ann", "bo", "cy", "di", "ed")]
    mine = Shard(1, 2).take(tmp_path, subs, ASSIGNMENT)
    mark = json.loads((tmp_path / sharding.SHARE_FILE).read_text())
    assert mark == {
        "shard": 1,
        "of": 2,
        "assignment": ASSIGNMENT,
        "class": {s.student: s.digest for s in subs},
    }
    assert [s.student for s in mine] == [s.student for s in subs if share_of(s.student, 2) == 1]


@pytest.mark.parametrize("spec", ["4/4", "-1/4", "1/0", "x/4", "1", "1/2/3"])
def test_a_share_that_does_not_exist_is_refused(spec, capsys):
    with pytest.raises(ValueError, match="K/N"):
        Shard.parse(spec)
    with pytest.raises(SystemExit) as stop:
        main([STEM, str(ROOT / "exercises"), "--shard", spec])
    assert stop.value.code == 2
    assert "--shard" in capsys.readouterr().err


def test_shares_parse_as_slurm_and_kubernetes_number_them():
    assert [Shard.parse(f"{k}/4") for k in range(4)] == [Shard(k, 4) for k in range(4)]
    assert str(Shard.parse(" 3 / 4 ")) == "3/4"


# --------------------------------------------------------------------------- a fabricated class


@functools.cache
def _class_notebooks() -> dict[str, bytes]:
    """The notebooks of a class of nine (two near-identical answers among them), made once."""
    answers = {
        "ann": LONG_A,
        "bo": LONG_B,
        "cy": fixtures.CORRECT,
        "di": fixtures.ZEROS,
        "ed": fixtures.HEADER + "    return a @ b.T\n",
        "flo": fixtures.CORRECT.replace("a @", "(a) @"),
        "gus": fixtures.HEADER + "    return b @ np.swapaxes(a, -1, -2)\n",
        "hal": fixtures.ZEROS.replace("np.zeros", "np.ones"),
        "ivy": fixtures.CORRECT + "\n",
    }
    return {
        student: nbformat.writes(fixtures.with_answer(source)).encode() for student, source in answers.items()
    }


def _notebooks(folder: Path) -> list[Submission]:
    """The class of :func:`_class_notebooks` in ``folder``, and its submissions."""
    folder.mkdir(parents=True)
    subs = []
    for student, data in _class_notebooks().items():
        path = folder / f"{student}.ipynb"
        path.write_bytes(data)
        subs.append(Submission(student, path, file_digest(path)))
    return subs


def _record(sub: Submission, index: int) -> Record:
    score = (1.0, 0.5, 0.0, None)[index % 4]  # None: a run that timed out, not judged
    return Record(
        sub.student,
        str(sub.path),
        sub.digest,
        Status.TIMEOUT if score is None else Status.GRADED,
        exercises={EX: ExerciseResult(EX, 1.0, score, "pairwise_dot")},
        runs=1,
        total=score,
        max=1.0,
        seconds=0.25 + index,
        memory_group="cgroup v1",
        assignment=ASSIGNMENT,
    )


def _info(subs: list[Submission]) -> ClassInfo:
    return ClassInfo(
        assignment=STEM,
        notebook=str(ROOT / "exercises" / f"{STEM}.ipynb"),
        points={EX: 1.0},
        functions={EX: "pairwise_dot"},
        students=[s.student for s in subs],
        strays=["notes.txt"],
    )


def _shares(base: Path, subs: list[Submission], count: int = 3, prefix: str = "share") -> list[Path]:
    """``count`` share folders as ``grade --shard`` leaves them, with fabricated records."""
    folders = []
    for k in range(count):
        folder = base / f"{prefix}-{k}"
        _info(subs).save(folder)
        for index, sub in enumerate(subs):
            if sub in Shard(k, count).take(folder, subs, ASSIGNMENT):
                write_record(folder, _record(sub, index))
        folders.append(folder)
    return folders


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.mark.slow  # the report reads the learners' notebooks again in the grader's reader process
def test_merged_shares_are_the_one_machine_folder_byte_for_byte(tmp_path):
    subs = _notebooks(tmp_path / "class")
    assert len({share_of(s.student, 3) for s in subs}) == 3
    assert share_of("ann", 3) != share_of("bo", 3)  # the near-identical pair is split
    single = tmp_path / "out"
    _info(subs).save(single)
    for index, sub in enumerate(subs):
        write_record(single, _record(sub, index))
    publish(single)
    single = single.rename(tmp_path / "single")
    merged = merge(_shares(tmp_path, subs), tmp_path / "out")
    assert [g.student for g in merged.grades] == [s.student for s in subs]
    assert _files(tmp_path / "out") == _files(single)
    report = (tmp_path / "out" / "report.html").read_text()
    section = report[report.index('id="similar"') :]
    assert "ann" in section and "bo" in section and "identical" in section


# --------------------------------------------------------------------------- refusals


def _mark(folder: Path, **change) -> None:
    path = folder / sharding.SHARE_FILE
    mark = json.loads(path.read_text())
    for key, value in change.items():
        mark[key] = value(mark[key]) if callable(value) else value
    path.write_text(json.dumps(mark))


def _own_record(folder: Path) -> Path:
    return sorted(folder.glob("*/record.json"))[0]


def _missing(shares, base):
    return [shares[0], shares[2]], "share 1/3 missing"


def _twice(shares, base):
    shutil.copytree(shares[0], base / "again")
    return [*shares, base / "again"], "share 0/3 is given twice"


def _other_split(shares, base):
    subs = [
        Submission(s, Path(s), d)
        for s, d in json.loads((shares[0] / sharding.SHARE_FILE).read_text())["class"].items()
    ]
    two = _shares(base, subs, 2, "halves")
    return [shares[0], shares[1], two[1]], "split the class differently"


def _other_assignment(shares, base):
    _mark(shares[1], assignment="fedcba9876543210")
    return shares, "different assignments"


def _other_class(shares, base):
    _mark(shares[2], **{"class": lambda c: {**c, "cy": "another file"}})
    return shares, "saw different classes (other files for: cy)"


def _newcomer(shares, base):
    _mark(shares[2], **{"class": lambda c: {**c, "zoe": "d"}})
    return shares, "learners in one only: zoe"


def _overlap(shares, base):
    record = _own_record(shares[1])
    shutil.copytree(record.parent, shares[0] / record.parent.name)
    return shares, f"holds a record for '{record.parent.name}', who belongs to share 1/3"


def _no_record(shares, base):
    record = _own_record(shares[2])
    shutil.rmtree(record.parent)
    return shares, f"'{record.parent.name}' of share 2/3 ({shares[2]}) has no record"


def _interrupted(shares, base):
    record = _own_record(shares[2])
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "status": "interrupted"}))
    return shares, "is interrupted: rerun that share's command"


def _changed_file(shares, base):
    record = _own_record(shares[0])
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "digest": "0" * 64}))
    return shares, "was graded from another file"


def _stale_record(shares, base):
    record = _own_record(shares[0])
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "assignment": "0" * 16}))
    return shares, "another version of the assignment"


def _not_a_share(shares, base):
    (shares[1] / sharding.SHARE_FILE).unlink()
    return shares, "is not a share of a class"


def _roster(shares, base):
    (shares[1] / "roster.csv").write_text("student\n")
    return shares, "roster.csv differs between share 0/3"


def _late_policy(shares, base):
    for share in shares:
        (share / "late.toml").write_text(f"# {share.name}\n")
    return shares, "late.toml differs"


def _full_out(shares, base):
    (base / "out").mkdir()
    (base / "out" / "grades.csv").write_text("x\n")
    return shares, "is not an empty folder"


def _out_is_a_share(shares, base):
    return shares, "is a share: merge into a new folder"


REFUSALS = [
    _missing,
    _twice,
    _other_split,
    _other_assignment,
    _other_class,
    _newcomer,
    _overlap,
    _no_record,
    _interrupted,
    _changed_file,
    _stale_record,
    _not_a_share,
    _roster,
    _late_policy,
    _full_out,
    _out_is_a_share,
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c.__name__.strip("_") for c in REFUSALS])
def test_merge_refuses_shares_that_are_not_one_class_and_writes_nothing(case, tmp_path):
    subs = _notebooks(tmp_path / "class")
    shares = _shares(tmp_path, subs)
    folders, message = case(shares, tmp_path)
    out = shares[0] if case is _out_is_a_share else tmp_path / "out"
    before = _files(out) if out.exists() else None
    with pytest.raises(MergeError) as refused:
        merge(folders, out)
    assert message in str(refused.value), str(refused.value)
    assert (_files(out) if out.exists() else None) == before  # nothing written


def test_the_merge_command_says_why_it_refuses(tmp_path, capsys):
    subs = _notebooks(tmp_path / "class")
    shares = _shares(tmp_path, subs)
    assert main(["merge", str(shares[0]), str(shares[1]), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: share 2/3 missing: give all 3 share folders"), err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- graded for real

CANVAS = {  # Canvas names: <name>[_LATE]_<id>_<submission id>_<file>; the key is <name>-<id>
    "lovelaceada_12345_1001": LONG_A,
    "hoppergrace_LATE_23456_1002": LONG_B,
    "turingalan_34567_1003": fixtures.CORRECT,
    "liskovbarbara_56789_1005": fixtures.ZEROS,
    "dijkstraedsger_67890_1006": fixtures.HEADER + "    return a @ b.T\n",
    "hamiltonmargaret_78901_1007": None,  # the handed-out notebook, unanswered
}
SHARES = 3


def _grade(*args: object) -> list[str]:
    return [sys.executable, "-m", "coursetools.grade", *map(str, args)]


@pytest.fixture(scope="module")
def one_machine(tmp_path_factory):
    """A Canvas download, graded on one machine into ``BASE/out``, then moved to ``BASE/single``
    (a merge into ``BASE/out`` then writes the same paths into the records)."""
    base = tmp_path_factory.mktemp("shard")
    download = base / "canvas.zip"
    with zipfile.ZipFile(download, "w") as zf:
        for name, source in CANVAS.items():
            nb = fixtures.with_answer(source) if source else fixtures._base()
            zf.writestr(zipfile.ZipInfo(f"{name}_{STEM}.ipynb", (2026, 11, 1, 12, 0, 0)), nbformat.writes(nb))
        zf.writestr(
            zipfile.ZipInfo("knuthdonald_45678_1004_answers.pdf", (2026, 11, 1, 12, 0, 0)), b"%PDF-1.4"
        )
    keys = ["lovelaceada-12345", "hoppergrace-23456", "turingalan-34567", "knuthdonald-45678"]
    keys += ["liskovbarbara-56789", "dijkstraedsger-67890", "hamiltonmargaret-78901"]
    assert {share_of(k, SHARES) for k in keys} == set(range(SHARES))  # every share has learners
    assert share_of(keys[0], SHARES) != share_of(keys[1], SHARES)  # the near-identical pair is split
    done = subprocess.run(
        _grade(STEM, download, "--out", base / "out", "--quiet"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (base / "out").rename(base / "single")
    return base, download, keys


@contextmanager
def _merged_at_out(base: Path, name: str):
    """``BASE/out`` for a merge (the one-machine run's path), moved to ``BASE/name`` afterwards."""
    out = base / "out"
    if out.exists():
        shutil.rmtree(out)
    try:
        yield out
    finally:
        if out.exists():
            out.rename(base / name)


MEASURED = ("seconds", "isolation")  # a record's measurements of its own run (see the module's text)


def _assert_same_as_one_machine(single: Path, merged: Path, keys: list[str]) -> None:
    one, other = _files(single), _files(merged)
    assert sorted(other) == sorted(one)
    measured = {
        name for name in one if name.endswith(("/record.json", "/results.json")) or name == "report.html"
    }
    for name in sorted(set(one) - measured):  # grades.csv, feedback, class.json, roster, staged files...
        assert other[name] == one[name], name
    for name in sorted(n for n in one if n.endswith("/record.json")):
        a, b = json.loads(one[name]), json.loads(other[name])
        assert {k: v for k, v in b.items() if k not in MEASURED} == {
            k: v for k, v in a.items() if k not in MEASURED
        }
    graded = {n.split("/")[0] for n in one if n.endswith("/record.json")}
    assert graded == set(keys)
    # the same measurements, and every file is the one-machine run's, byte for byte
    for student in graded:
        record = Record.from_dict(json.loads(one[f"{student}/record.json"]))
        mine = Record.from_dict(json.loads(other[f"{student}/record.json"]))
        mine.seconds, mine.isolation = record.seconds, record.isolation
        write_record(merged, mine)
    publish(merged)
    assert _files(merged) == one
    section = (merged / "report.html").read_text()
    section = section[section.index('id="similar"') :]
    assert "lovelaceada-12345" in section and "hoppergrace-23456" in section, section[:2000]


@pytest.mark.slow
def test_three_local_processes_then_merge_are_the_one_machine_run(one_machine):
    base, download, keys = one_machine
    folders = [base / f"local-{k}" for k in range(SHARES)]
    procs = [
        subprocess.Popen(
            _grade(STEM, download, "--out", folder, "--shard", f"{k}/{SHARES}", "--quiet"),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for k, folder in enumerate(folders)
    ]
    for proc in procs:
        output = proc.communicate(timeout=900)[0]
        assert proc.returncode == 0, output[-3000:]
    for k, folder in enumerate(folders):  # each share graded its own learners only, and no report
        own = {p.parent.name for p in folder.glob("*/record.json")}
        assert own == {key for key in keys if share_of(key, SHARES) == k}
        assert not (folder / "report.html").exists()
    with _merged_at_out(base, "local-merged") as out:
        done = subprocess.run(
            _grade("merge", *reversed(folders), "--out", out),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert f"merged {SHARES} shares" in done.stdout and f"{len(keys)} learners" in done.stdout
        _assert_same_as_one_machine(base / "single", out, keys)


# --------------------------------------------------------------------------- a real Slurm


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SLURM_CONF = """\
ClusterName=coursetools
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
AuthInfo=socket={dir}/munge.socket
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=course Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
SLURM_PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")


@contextmanager
def single_node_slurm(folder: Path):
    """A Slurm of one node (this machine), with its own configuration and munge key under
    ``folder``; yields the environment its commands need (``SLURM_CONF``). Skips, with the
    reason, where it cannot start; stops the three daemons it started when done."""
    if os.geteuid() != 0:
        pytest.skip(
            f"a single-node Slurm needs root here (slurmd runs jobs as their user; uid {os.geteuid()})"
        )
    missing = [p for p in SLURM_PROGRAMS if shutil.which(p) is None]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge")
    folder.mkdir(parents=True)
    folder.chmod(0o700)
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    host = socket.gethostname().split(".")[0]
    conf = folder / "slurm.conf"
    conf.write_text(
        SLURM_CONF.format(
            host=host, dir=folder, cpus=os.cpu_count() or 1, ctld_port=_free_port(), d_port=_free_port()
        )
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    daemons: list[subprocess.Popen] = []

    def start(argv: list[str], log: str) -> None:
        with open(folder / log, "wb") as fh:
            daemons.append(subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=folder))

    def logs() -> str:
        text = ""
        for name in ("munged.out", "slurmctld.out", "slurmd.out", "slurmctld.log", "slurmd.log"):
            if (folder / name).is_file():
                text += f"--- {name}\n" + (folder / name).read_text(errors="replace")[-800:]
        return text

    try:
        start(
            ["munged", "--foreground", "--force", f"--socket={folder}/munge.socket", f"--key-file={key}"]
            + [
                f"--log-file={folder}/munged.log",
                f"--pid-file={folder}/munged.pid",
                f"--seed-file={folder}/munged.seed",
            ],
            "munged.out",
        )
        deadline = time.monotonic() + 20
        while not (folder / "munge.socket").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        start(["slurmctld", "-D", "-f", str(conf)], "slurmctld.out")
        start(["slurmd", "-D", "-f", str(conf), "-N", host], "slurmd.out")
        deadline = time.monotonic() + 60
        state = ""
        while time.monotonic() < deadline:
            if any(d.poll() is not None for d in daemons):
                break
            probe = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True)
            state = probe.stdout.strip()
            if state in ("idle", "mixed", "allocated"):
                break
            time.sleep(0.5)
        else:
            pytest.skip(f"Slurm did not start here within 60 s (node {state or 'unknown'}):\n{logs()}")
        if any(d.poll() is not None for d in daemons):
            pytest.skip(f"Slurm could not start here (a daemon ended):\n{logs()}")
        yield env
    finally:
        for daemon in reversed(daemons):
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
        for daemon in reversed(daemons):
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()


ARRAY_JOB = """\
#!/bin/bash
#SBATCH --job-name=grade-shares
#SBATCH --array=0-{last}
#SBATCH --output={base}/slurm-%a.out
cd {root}
exec {python} -m coursetools.grade {stem} {download} --out {base}/slurm-$SLURM_ARRAY_TASK_ID \\
    --shard $SLURM_ARRAY_TASK_ID/{shares} --quiet
"""
MERGE_JOB = """\
#!/bin/bash
#SBATCH --job-name=grade-merge
#SBATCH --output={base}/slurm-merge.out
cd {root}
exec {python} -m coursetools.grade merge {folders} --out {base}/out
"""


@pytest.mark.slow
def test_a_slurm_job_array_then_a_dependent_merge_are_the_one_machine_run(one_machine, tmp_path):
    base, download, keys = one_machine
    with single_node_slurm(tmp_path / "slurm") as env, _merged_at_out(base, "slurm-merged") as out:
        fill = dict(base=base, root=ROOT, python=sys.executable, stem=STEM, download=download, shares=SHARES)
        array = tmp_path / "grade.sbatch"
        array.write_text(ARRAY_JOB.format(last=SHARES - 1, **fill))
        folders = " ".join(str(base / f"slurm-{k}") for k in range(SHARES))
        join = tmp_path / "merge.sbatch"
        join.write_text(MERGE_JOB.format(folders=folders, **fill))
        submitted = subprocess.run(
            ["sbatch", "--parsable", str(array)], env=env, capture_output=True, text=True
        )
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip().split(";")[0]
        merged = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--wait",
                f"--dependency=afterok:{job}",
                "--kill-on-invalid-dep=yes",
                str(join),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )
        outputs = "".join(p.read_text(errors="replace")[-1500:] for p in sorted(base.glob("slurm-*.out")))
        assert merged.returncode == 0, merged.stderr + outputs
        assert f"merged {SHARES} shares" in (base / "slurm-merge.out").read_text(), outputs
        _assert_same_as_one_machine(base / "single", out, keys)
