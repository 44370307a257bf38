"""Uploading a big file: `python -m bench.file_upload` (``make bench-file-upload``).

Starts ``make run``'s process (embedded mode: one web process, SQLite, the
demo user; ``tests/support/stack.py``'s ``embedded_server``) on a free port,
with its files in a local directory or, with ``--storage s3``, in a bucket
of moto's S3 server on loopback (``tests/support/s3_server.py``), and
uploads a ``--size-mb`` file (50 MB) to ``POST /api/files/`` with httpx, as
a multipart body streamed from disk, ``--repeat`` times.

For each upload it prints the throughput (MB/s, from the first byte sent to
the 201) and the web process's memory: its resident set before the upload,
and its peak during it. The peak is the kernel's own high-water mark
(``VmHWM`` in ``/proc/PID/status``), reset just before each upload by
writing 5 to ``/proc/PID/clear_refs``, so it covers every instant of the
upload, not only the moments a sampler looked. The point is that an upload
is I/O-bound and costs the web process a constant amount of memory
whatever the file's size (Django spools the body to a temporary file;
``file_create`` reads it in 1 MiB chunks): the peak stays near the
resident set before it, not near it plus the file.

The file is a PNG signature followed by random bytes: it is taken as an
image, so no document is read afterwards (in embedded mode the reading
task would run in the same process and its memory would be counted).
Small uploads first (``--warm-up``, 8) load what the upload path imports
and give each of the web process's request threads what it keeps (with S3,
django-storages keeps a boto3 client per thread: about 20 MiB each, once,
for botocore's service models), so that the measured uploads are charged
for the upload alone. ``--warm-up 1`` shows those first-use costs too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from tests.support.s3_server import s3_server
from tests.support.stack import embedded_server

MB = 1000 * 1000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def make_file(path: Path, size: int) -> None:
    with open(path, "wb") as out:
        out.write(PNG_SIGNATURE)
        left = size - len(PNG_SIGNATURE)
        while left > 0:
            piece = os.urandom(min(left, 4 * 1024 * 1024))
            out.write(piece)
            left -= len(piece)


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak(pid: int) -> bool:
    """Reset the process's VmHWM to its current RSS (Linux 4.0+; our own child)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def upload(client: httpx.Client, path: Path, name: str) -> tuple[float, dict]:
    with open(path, "rb") as handle:
        started = time.perf_counter()
        response = client.post("/api/files/", files={"file": (name, handle, "application/octet-stream")})
        elapsed = time.perf_counter() - started
    if response.status_code != 201:
        raise SystemExit(f"upload answered {response.status_code}: {response.text[:500]}")
    return elapsed, response.json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=50, help="File size in MB (10^6 bytes).")
    parser.add_argument("--repeat", type=int, default=3, help="Measured uploads.")
    parser.add_argument("--storage", choices=("local", "s3"), default="local",
                        help="Where the server keeps files: a directory, or moto's S3 server on loopback.")
    parser.add_argument("--warm-up", type=int, default=8, help="Small uploads before the measured ones.")
    parser.add_argument("--json", type=Path, help="Also write the figures to this file.")
    args = parser.parse_args()

    size = args.size_mb * MB
    work = Path(tempfile.mkdtemp(prefix="chatforge-bench-upload-"))
    big, small = work / "big.png", work / "small.png"
    make_file(big, size)
    make_file(small, 64 * 1024)

    with ExitStack() as stack:
        env = {"CHATFORGE_MAX_FILE_BYTES": str(size + MB)}
        if args.storage == "s3":
            s3 = stack.enter_context(s3_server())
            env.update(s3.storage_env(s3.create_bucket("bench-files")))
        server = stack.enter_context(embedded_server(prefix="chatforge-bench-upload-server-", **env))
        pid = server.process.popen.pid
        client = stack.enter_context(httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=600))
        for _ in range(args.warm_up):
            warm = upload(client, small, "warm-up.png")[1]
            client.delete(f"/api/files/{warm['id']}/").raise_for_status()

        rows = []
        for attempt in range(1, args.repeat + 1):
            rss_before = status_kib(pid, "VmRSS")
            exact = reset_peak(pid)
            elapsed, body = upload(client, big, f"big-{attempt}.png")
            peak = status_kib(pid, "VmHWM")
            assert body["size"] == size, body
            rows.append({
                "attempt": attempt, "seconds": round(elapsed, 3), "mb_per_s": round(size / MB / elapsed, 1),
                "rss_before_mib": round(rss_before / 1024, 1), "peak_rss_mib": round(peak / 1024, 1),
                "peak_above_before_mib": round((peak - rss_before) / 1024, 1), "peak_exact": exact,
            })
            client.delete(f"/api/files/{body['id']}/").raise_for_status()

    print(f"Upload of a {args.size_mb} MB file to POST /api/files/: embedded web process, "
          f"{args.storage} storage, {os.cpu_count()} cores, after {args.warm_up} small uploads")
    print(f"{'upload':>6} {'seconds':>8} {'MB/s':>7} {'RSS before':>11} {'peak RSS':>9} {'peak - before':>14}")
    for row in rows:
        print(f"{row['attempt']:>6} {row['seconds']:>8.2f} {row['mb_per_s']:>7.1f} "
              f"{row['rss_before_mib']:>8.1f} MiB {row['peak_rss_mib']:>5.1f} MiB {row['peak_above_before_mib']:>10.1f} MiB")
    print(f"median: {statistics.median(r['mb_per_s'] for r in rows):.1f} MB/s; largest peak above the RSS before: "
          f"{max(r['peak_above_before_mib'] for r in rows):.1f} MiB"
          + ("" if all(r["peak_exact"] for r in rows) else " (VmHWM not reset: peak since start)"))
    if args.json:
        args.json.write_text(json.dumps({"size_mb": args.size_mb, "storage": args.storage, "uploads": rows}, indent=2))


if __name__ == "__main__":
    main()
