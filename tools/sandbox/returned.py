"""The files a sandboxed run returned, read back from the launcher's tar
stream and trusted for nothing: only regular files with a plain relative
name, within the size and count limits, are taken; every other member is
named with the reason it was left out (the model reads them)."""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import tarfile
from dataclasses import dataclass, field

from tools.sandbox_limits import SandboxLimits

MANIFEST = ".chatforge-manifest.json"  # written first by the launcher: what it left out
MAX_FILES = 20
_MANIFEST_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class ReturnedFile:
    name: str  # as the code named it, relative to its output directory
    path: str  # where its bytes are on the host (inside the job directory)
    size: int


@dataclass(frozen=True)
class ReturnedFiles:
    files: list[ReturnedFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why it was not returned)


def read_returned(spool_path: str, limits: SandboxLimits, job_dir: str, *, overflowed: bool = False) -> ReturnedFiles:
    files: list[ReturnedFile] = []
    skipped: list[tuple[str, str]] = []
    if overflowed:
        skipped.append(("(some files)", f"the files together passed the limit of {limits.work_mb} MiB"))
    target_dir = os.path.join(job_dir, "returned")
    os.makedirs(target_dir, exist_ok=True)
    max_bytes = limits.max_file_mb * 1024 * 1024
    try:
        with tarfile.open(spool_path, mode="r:") as tar:
            for member in _members(tar):
                name = member.name
                if name == MANIFEST and member.isfile() and member.size <= _MANIFEST_MAX_BYTES:
                    skipped += _manifest_skips(tar, member)
                    continue
                safe = _safe_name(name)
                if safe is None:
                    skipped.append((name[:200], "not a plain file name inside the output directory"))
                elif not member.isfile():
                    skipped.append((safe, "a link or special file"))
                elif member.size > max_bytes:
                    skipped.append((safe, f"larger than {limits.max_file_mb} MiB"))
                elif len(files) >= MAX_FILES:
                    skipped.append((safe, f"more than {MAX_FILES} files"))
                else:
                    path = os.path.join(target_dir, str(len(files)))
                    source = tar.extractfile(member)
                    if source is None:
                        continue
                    with source, open(path, "wb") as target:
                        shutil.copyfileobj(source, target, 1024 * 1024)
                    files.append(ReturnedFile(name=safe, path=path, size=member.size))
    except (tarfile.TarError, OSError, EOFError):
        if not files and not skipped and os.path.getsize(spool_path) == 0:
            return ReturnedFiles()
        skipped.append(("(the rest)", "the files could not be read back whole"))
    return ReturnedFiles(files=files, skipped=skipped)


def _members(tar: tarfile.TarFile):
    while True:
        member = tar.next()
        if member is None:
            return
        yield member


def _safe_name(name: str) -> str | None:
    """``name`` as a relative path with no way out of the directory; None if it has one."""
    if not name or "\x00" in name or name.startswith("/"):
        return None
    normal = posixpath.normpath(name)
    if normal.startswith("../") or normal in (".", "..") or any(part == ".." for part in normal.split("/")):
        return None
    return normal


def _manifest_skips(tar: tarfile.TarFile, member: tarfile.TarInfo) -> list[tuple[str, str]]:
    source = tar.extractfile(member)
    try:
        data = json.loads(source.read()) if source is not None else {}
        return [(str(item["name"])[:200], str(item["reason"])[:200]) for item in data.get("skipped", [])[:MAX_FILES * 5]]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []
