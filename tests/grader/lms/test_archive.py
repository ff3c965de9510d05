"""Zips extracted safely (coursetools/grade/lms/archive.py): unsafe members refused, limits kept."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest
from fixtures import STEM, _nb, _zip

from coursetools.grade.lms.archive import UnsafeArchive, safe_extract


def test_unsafe_members_are_refused_and_nothing_lands_outside(tmp_path):
    # The size limit sits between an honest notebook and the oversized member, whatever
    # size the fake class's notebook grows to.
    limit = len(_nb()) + 1000
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("../escaped.ipynb", _nb())
        zf.writestr("/tmp/absolute-escape.ipynb", _nb())
        zf.writestr("a/../../escaped2.ipynb", _nb())
        link = zipfile.ZipInfo("ada_1_2_link.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
        device = zipfile.ZipInfo("dev_7_8_null.ipynb")
        device.external_attr = (stat.S_IFCHR | 0o666) << 16
        zf.writestr(device, b"")
        zf.writestr("huge_3_4_big.ipynb", b"x" * (limit + 1))
        zf.writestr(f"ok_5_6_{STEM}.ipynb", _nb())
    dest = tmp_path / "out" / "x"
    problems = safe_extract(path, dest, max_file_bytes=limit)
    found = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert found == [f"ok_5_6_{STEM}.ipynb"]
    text = "\n".join(problems)
    for word in ("leaves the folder", "absolute path", "symbolic link", "not a plain file", "larger than"):
        assert word in text
    assert not (tmp_path / "out" / "escaped.ipynb").exists() and not (tmp_path / "escaped.ipynb").exists()
    assert not Path("/tmp/absolute-escape.ipynb").exists()
    assert not any(p.is_symlink() for p in dest.rglob("*"))


def test_a_zip_too_large_or_with_too_many_members_is_refused(tmp_path):
    many = _zip(tmp_path / "many.zip", {f"s{i}.ipynb": b"{}" for i in range(30)})
    with pytest.raises(UnsafeArchive, match="members"):
        safe_extract(many, tmp_path / "a", max_files=20)
    big = _zip(tmp_path / "big.zip", {f"s{i}.ipynb": b"y" * 1000 for i in range(5)})
    with pytest.raises(UnsafeArchive, match="bytes"):
        safe_extract(big, tmp_path / "b", max_total_bytes=3500)
    (tmp_path / "not.zip").write_bytes(b"plain text")
    with pytest.raises(UnsafeArchive, match="not a zip"):
        safe_extract(tmp_path / "not.zip", tmp_path / "c")


def test_a_highly_compressed_member_is_cut_at_the_limit(tmp_path):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb_1_2_x.ipynb", b"\0" * (8 << 20))  # 8 MB that compress to a few kB
    assert path.stat().st_size < 100_000
    problems = safe_extract(path, tmp_path / "d", max_file_bytes=1 << 20)
    assert problems and not list((tmp_path / "d").rglob("*.ipynb"))
