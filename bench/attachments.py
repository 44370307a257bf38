"""What attaching files costs a message's POST: `python -m bench.attachments`.

It starts the benchmark's stack (``bench.run.bench_stack``: private
Postgres and Redis, the gevent LLM worker, the prefork tools worker, which
reads documents' text, and the web process), then posts ``--runs`` messages
with no files and as many with ``--files`` small text documents each,
alternating, one at a time, each in a conversation of its own and followed
to its end. The files are uploaded (and read) before each timed POST, so
the figure is what the attachments add to POST → 202: checking and locking
them, linking them to the message, and naming them in its parts. Printed,
not written: docs/performance.md has the figures of a run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from bench.counting import counting_postgres, prepare_counting
from bench.load import make_tokens
from bench.run import DB_NAME, bench_stack, fresh_database, private_redis
from bench.services import percentile
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.client import follow_run
from tests.support.stack import wait_for

MODEL = "bench-attachments"


def _upload(http: httpx.Client, conversation: str, count: int) -> list[str]:
    ids = []
    for k in range(count):
        response = http.post("/api/files/", data={"conversation_id": conversation},
                             files={"file": (f"notes-{k}.txt", f"Notes {k}: {uuid.uuid4().hex}\n".encode(), "text/plain")})
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    for file_id in ids:  # read before the clock starts: the POST is what is timed
        wait_for(lambda file_id=file_id: http.get(f"/api/files/{file_id}/").json()["text_status"] == "ready",
                 timeout=60, what=f"file {file_id} read")
    return ids


def _post(http: httpx.Client, ws_url: str, token: str, files: int) -> float:
    created = http.post("/api/conversations/", json={})
    assert created.status_code == 201, created.text
    conversation = created.json()["id"]
    attachments = _upload(http, conversation, files)
    started = time.perf_counter()
    response = http.post(f"/api/conversations/{conversation}/messages/",
                         json={"content": "Read these", "model": MODEL, "attachments": attachments})
    elapsed_ms = (time.perf_counter() - started) * 1000
    assert response.status_code == 202, response.text
    events = follow_run(ws_url, response.json()["run_id"], token)
    assert events[-1]["type"] == "run.completed", events[-1]
    return elapsed_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60, help="POSTs of each kind (after 5 warm-up ones)")
    parser.add_argument("--files", type=int, default=5, help="files on each message that carries files")
    args = parser.parse_args()

    fake = FakeOpenAIServer().start()
    fake.add_script(MODEL, lambda body: Reply(text="Read."))
    log_dir = Path(tempfile.mkdtemp(prefix="chatforge-bench-attachments-"))
    files_dir = Path(tempfile.mkdtemp(prefix="chatforge-bench-files-"))
    try:
        with counting_postgres() as pg, private_redis() as broker, private_redis() as events:
            database_url = fresh_database(pg=pg.url("postgres").rsplit("/", 1)[0], name=DB_NAME,
                                          redis_url=broker.url(0))
            prepare_counting(pg, DB_NAME)  # a login role per process, as bench_stack connects
            token = make_tokens(1, f"attach-{uuid.uuid4().hex[:6]}", database_url, broker.url(0))[0]
            env = [f"CHATFORGE_FILES_DIR={files_dir}", "CHATFORGE_MAX_ACTIVE_RUNS_PER_USER=1000"]
            with bench_stack(pg=pg, broker=broker, events=events, provider_url=fake.base_url, log_dir=log_dir,
                             tool_pool="process", extra_env=env) as stack, \
                    httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {token}"},
                                 timeout=60) as http:
                for _ in range(5):
                    _post(http, stack.ws_url, token, 0)
                    _post(http, stack.ws_url, token, args.files)
                plain, attached = [], []
                for _ in range(args.runs):
                    plain.append(_post(http, stack.ws_url, token, 0))
                    attached.append(_post(http, stack.ws_url, token, args.files))
    finally:
        fake.stop()
    for label, values in (("no files", plain), (f"{args.files} files", attached)):
        print(f"POST → 202 with {label}: p50 {percentile(values, 50):.1f} ms, p95 {percentile(values, 95):.1f} ms, "
              f"max {max(values):.1f} ms (n={len(values)})")
    print(f"added by {args.files} files: p50 {percentile(attached, 50) - percentile(plain, 50):+.1f} ms")
    print(f"logs: {log_dir}")


if __name__ == "__main__":
    main()
