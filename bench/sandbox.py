"""What a sandboxed call costs: `python -m bench.sandbox`.

Runs code with the real runner (``tools.sandbox.runner.run_sandboxed``,
bubblewrap and the sandbox's own Python, ``.sandbox-python`` made by
`make sandbox`), in this process, as a sandbox worker's pool process does,
and prints:

- one call at a time, call start -> result (the outcome read and its job
  directory removed): ``print(1)``, ``import pandas`` and
  ``import matplotlib.pyplot``, p50 / p95 / p99;
- the sandbox's Python started outside any sandbox (``python -I -B -c
  pass``), for how much of a call is the interpreter's own start;
- ``--parallel`` sandboxes at once (one thread each, as ``-c 4`` prefork
  processes would run them): calls a second and latency;
- memory: ``--parallel`` sandboxes held open after their imports, the PSS
  and RSS of each one's processes (bubblewrap's two and the launcher's two:
  the processes below each bubblewrap this process started), and this
  process's own RSS before and after all the calls;
- with ``--engine``, the same ``print(1)`` through the whole engine: the
  benchmark's stack (``bench.run.bench_stack``) and a sandbox worker, the
  fake model asking for the ``python`` tool, timed from the run's
  ``tool_call`` event to its ``tool_output`` event (their ``ts`` stamps:
  the LLM worker's publish to the sandbox worker's).

Run as root, the sandboxes run as an unprivileged uid (``SandboxConfig.run_as``),
as on a worker whose image runs as root. The figures move with the
machine's load; docs/performance.md ("The sandbox") records a run. Nothing
here is a target or a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx

from bench.counting import counting_postgres, prepare_counting, role_url
from bench.processes import children, process_tree
from bench.load import make_tokens
from bench.run import DB_NAME, TOOL_MODULE, bench_stack, fresh_database, private_redis
from bench.services import SECRET_KEY, env_settings, percentile
from tests.fakes.openai_server import FakeOpenAIServer, Reply, tool_results
from tests.support.client import follow_run
from tests.support.stack import TEST_SECRET_KEYS, base_env, start_worker
from tools.sandbox.command import bwrap_argv
from tools.sandbox.config import SandboxConfig, hand_over, job_directory
from tools.sandbox.probe import probe
from tools.sandbox.runner import run_sandboxed
from tools.sandbox_limits import SandboxLimits

ROOT = Path(__file__).resolve().parents[1]
LIMITS = SandboxLimits()  # the python tool's defaults
WALL_S = 60.0  # the python tool's timeout
READY_FILE = "/tmp/bench-ready"  # inside a sandbox: written once its imports are done
HOLD_S = 600  # how long a held-open sandbox would sleep; the benchmark stops it long before
KIB = 1024


@dataclass(frozen=True)
class Case:
    label: str
    code: str


PRINT = Case("print(1)", "print(1)")
PANDAS = Case("import pandas", "import pandas")
PYPLOT = Case("import matplotlib.pyplot", "import matplotlib.pyplot")


# --- Timing -------------------------------------------------------------------------


def call_ms(config: SandboxConfig, code: str, cancel_check: Callable[[], bool] | None = None) -> float:
    """One call, start -> result read and its job directory gone (what a tool call waits for)."""
    started = time.perf_counter()
    with run_sandboxed(config, code, limits=LIMITS, wall_s=WALL_S, cancel_check=cancel_check) as outcome:
        if outcome.setup_error or (outcome.exit_code != 0 and outcome.stopped != "cancelled"):
            raise RuntimeError(f"the sandbox failed: {outcome.setup_error or outcome.stderr[-500:]}")
    return (time.perf_counter() - started) * 1000


def sequential(config: SandboxConfig, case: Case, runs: int) -> list[float]:
    call_ms(config, case.code)  # warm-up: the page cache holds the files it reads
    return [call_ms(config, case.code) for _ in range(runs)]


def parallel(config: SandboxConfig, case: Case, threads: int, runs_each: int) -> tuple[float, list[float]]:
    """``threads`` threads calling back to back from one barrier: (wall seconds, every call's latency)."""
    barrier = threading.Barrier(threads + 1)
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        barrier.wait()
        try:
            for _ in range(runs_each):
                latencies[index].append(call_ms(config, case.code))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    wall_s = time.perf_counter() - started
    if errors:
        raise errors[0]
    return wall_s, [ms for each in latencies for ms in each]


def interpreter_start_ms(config: SandboxConfig, runs: int) -> list[float]:
    """The sandbox's Python started and ended outside any sandbox, as the launcher is started."""
    times = []
    for _ in range(runs + 1):
        started = time.perf_counter()
        subprocess.run([config.python, "-I", "-B", "-c", "pass"], check=True)
        times.append((time.perf_counter() - started) * 1000)
    return times[1:]


def bwrap_alone_ms(config: SandboxConfig, runs: int) -> list[float]:
    """Bubblewrap with a call's namespaces and mounts (``bwrap_argv``) running
    ``/usr/bin/true`` instead of the launcher: what making the sandbox costs."""
    bwrap = config.bwrap_path()
    assert bwrap is not None
    job_dir = job_directory(config)
    try:
        for name in ("passwd", "group", "launcher.py", "job.json", "main.py"):
            Path(job_dir, name).write_text("")
            hand_over(config, os.path.join(job_dir, name))
        os.mkdir(os.path.join(job_dir, "inputs"))
        hand_over(config, os.path.join(job_dir, "inputs"))
        drop = config.drops_to()
        times = []
        for _ in range(runs + 1):
            info_read, info_write = os.pipe()  # bubblewrap writes a line of JSON on it: the pipe holds it
            try:
                argv = bwrap_argv(config, bwrap, job_dir, LIMITS, info_fd=info_write)
                argv = [*argv[: argv.index("--") + 1], "/usr/bin/true"]
                started = time.perf_counter()
                subprocess.run(argv, check=True, env={"PATH": "/usr/bin:/bin"}, user=drop, group=drop,
                               extra_groups=[] if drop is not None else None, cwd="/", pass_fds=(info_write,))
                times.append((time.perf_counter() - started) * 1000)
            finally:
                os.close(info_read)
                os.close(info_write)
        return times[1:]
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)


# --- Memory -----------------------------------------------------------------------


def sandbox_trees() -> list[list[int]]:
    """Each bubblewrap this process started, with every process below it."""
    tree = children()
    found = []
    for pid in tree.get(os.getpid(), []):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except FileNotFoundError:
            continue
        if name != "bwrap":
            continue
        found.append(process_tree(pid, tree))
    return found


def memory_kib(pid: int) -> tuple[int, int]:
    """(PSS, RSS) of one process in KiB, from its smaps_rollup; (0, 0) once it is gone."""
    values = {"Pss:": 0, "Rss:": 0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                parts = line.split()
                if parts and parts[0] in values:
                    values[parts[0]] = int(parts[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return values["Pss:"], values["Rss:"]


def own_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _ready(members: list[int]) -> bool:
    """Whether the code of this sandbox has written its ready file (seen through /proc/<pid>/root)."""
    for pid in members:
        try:
            if os.path.exists(f"/proc/{pid}/root{READY_FILE}"):
                return True
        except PermissionError:
            continue
    return False


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {timeout_s:.0f} s")
        time.sleep(0.05)


@contextmanager
def held_open(config: SandboxConfig, imports: str, count: int) -> Iterator[list[list[int]]]:
    """``count`` sandboxes that did ``imports`` and now sleep, until the block ends (then they are cancelled)."""
    stop = threading.Event()
    code = f"{imports}\nimport time\nopen({READY_FILE!r}, 'w').close()\ntime.sleep({HOLD_S})\n"
    threads = [threading.Thread(target=call_ms, args=(config, code, stop.is_set)) for _ in range(count)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(trees := sandbox_trees()) == count and all(_ready(t) for t in trees),
                   timeout_s=120, what=f"{count} sandboxes to finish '{imports or 'nothing'}'")
        yield sandbox_trees()
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def memory_line(config: SandboxConfig, label: str, imports: str, count: int) -> None:
    with held_open(config, imports, count) as trees:
        per_tree = [[memory_kib(pid) for pid in members] for members in trees]
        processes = statistics.median(len(members) for members in trees)
    pss = [sum(p for p, _ in each) for each in per_tree]
    rss = [sum(r for _, r in each) for each in per_tree]
    print(f"  {label:<30} {count} at once, {processes:.0f} processes each: PSS {_mib(statistics.median(pss))} "
          f"per sandbox ({_mib(sum(pss))} in all), RSS {_mib(statistics.median(rss))} per sandbox")


# --- Printing -----------------------------------------------------------------------


def _mib(kib: float) -> str:
    return f"{kib / KIB:.1f} MiB"


def latency_line(label: str, values: list[float]) -> None:
    print(f"  {label:<30} p50 {percentile(values, 50):6.1f} ms   p95 {percentile(values, 95):6.1f} ms   "
          f"p99 {percentile(values, 99):6.1f} ms   min {min(values):6.1f}   max {max(values):6.1f}   (n={len(values)})")


def machine_line(when: str) -> None:
    one, five, fifteen = os.getloadavg()
    print(f"{when}: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average "
          f"{one:.2f} {five:.2f} {fifteen:.2f}")


def bwrap_version(config: SandboxConfig) -> str:
    path = config.bwrap_path()
    if path is None:
        return "not installed"
    return subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip()


# --- Main ---------------------------------------------------------------------------


# --- Through the engine -------------------------------------------------------------

ENGINE_MODEL = "bench-sandbox"


def _ts_ms(stamp: str) -> float:
    """An event's ``ts`` (UTC, milliseconds, ``Z``) in ms since the epoch."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


def _engine_run(http: httpx.Client, ws_url: str, token: str) -> tuple[float, int]:
    """One run whose model calls ``python`` with ``print(1)`` once: (tool_call
    event -> tool_output event in ms, by their stamps; the tool's own execution_time_ms)."""
    conversation = http.post("/api/conversations/", json={}).json()["id"]
    response = http.post(f"/api/conversations/{conversation}/messages/",
                         json={"content": "Print one", "model": ENGINE_MODEL})
    assert response.status_code == 202, response.text
    events = follow_run(ws_url, response.json()["run_id"], token)
    assert events[-1]["type"] == "run.completed", events[-1]
    [call] = [e for e in events if e["type"] == "tool_call"]
    [output] = [e for e in events if e["type"] == "tool_output"]
    assert output["data"]["status"] == "success", output
    return _ts_ms(output["ts"]) - _ts_ms(call["ts"]), int(output["data"].get("execution_time_ms") or 0)


def _python_offered(http: httpx.Client) -> bool:
    body = http.get("/api/tools/").json()
    items = body["tools"] if isinstance(body, dict) and "tools" in body else body
    return "python" in {item["name"] for item in items}


def tree_pss_kib(pid: int) -> int:
    """PSS of a process and every process below it (a worker and its pool)."""
    return sum(memory_kib(member)[0] for member in process_tree(pid))


def engine_latencies(python_env: str, runs: int) -> tuple[list[float], list[int]]:
    """The benchmark's stack (``bench.run.bench_stack``, private Postgres and
    Redis) and a sandbox worker (``-P prefork -c 1``), the fake model asking
    for ``python`` with ``print(1)``; runs one at a time after 3 warm-up ones.
    Prints the sandbox worker's PSS (its main process and its pool process)
    once ready, and after the runs."""
    fake = FakeOpenAIServer().start()
    fake.add_script(ENGINE_MODEL, lambda body: Reply(text="1.") if tool_results(body)
                    else Reply(tool_calls=[("python", {"code": "print(1)"})]))
    log_dir = Path(tempfile.mkdtemp(prefix="chatforge-bench-sandbox-"))
    settings = [f"CHATFORGE_SANDBOX_PYTHON={python_env}", "CHATFORGE_MAX_ACTIVE_RUNS_PER_USER=1000"]
    try:
        with counting_postgres() as pg, private_redis() as broker, private_redis() as events:
            database_url = fresh_database(pg=pg.url("postgres").rsplit("/", 1)[0], name=DB_NAME,
                                          redis_url=broker.url(0))
            prepare_counting(pg, DB_NAME)
            token = make_tokens(1, f"sandbox-{uuid.uuid4().hex[:6]}", database_url, broker.url(0))[0]
            with bench_stack(pg=pg, broker=broker, events=events, provider_url=fake.base_url, log_dir=log_dir,
                             tool_pool="process", extra_env=settings) as stack:
                # The same settings as the stack's tools worker (bench_stack), on the sandbox queue.
                env = base_env(REDIS_URL=broker.url(0), CHATFORGE_EVENT_LOG_REDIS_URL=events.url(0),
                               DJANGO_SECRET_KEY=SECRET_KEY, CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS,
                               OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY="bench", CHATFORGE_TOOL_MODULES=TOOL_MODULE,
                               CHATFORGE_LOG_LEVEL="INFO",
                               DATABASE_URL=role_url(pg, DB_NAME, "tools"), **env_settings(settings))
                worker = start_worker("sandbox", queues="sandbox", pool="prefork", concurrency=1, env=env,
                                      log_dir=log_dir)
                try:
                    with httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {token}"},
                                      timeout=60) as http:
                        wait_until(lambda: _python_offered(http), timeout_s=60, what="the python tool to be offered")
                        ready_kib = tree_pss_kib(worker.popen.pid)
                        for _ in range(3):
                            _engine_run(http, stack.ws_url, token)
                        measured = [_engine_run(http, stack.ws_url, token) for _ in range(runs)]
                        print(f"  the sandbox worker (-c 1, main and pool process): PSS {_mib(ready_kib)} ready, "
                              f"{_mib(tree_pss_kib(worker.popen.pid))} after {runs + 3} calls")
                finally:
                    worker.stop()
    finally:
        fake.stop()
    return [ms for ms, _ in measured], [tool_ms for _, tool_ms in measured]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python-env", default=str(ROOT / ".sandbox-python"),
                        help="the sandbox's Python environment (make sandbox)")
    parser.add_argument("--runs", type=int, default=50, help="timed calls of print(1), one at a time")
    parser.add_argument("--import-runs", type=int, default=20, help="timed calls of each import, one at a time")
    parser.add_argument("--parallel", type=int, default=4, help="sandboxes at once")
    parser.add_argument("--parallel-runs", type=int, default=15, help="calls of each thread, back to back")
    parser.add_argument("--engine", action="store_true",
                        help="also time print(1) through the whole engine (a stack with a sandbox worker)")
    parser.add_argument("--engine-runs", type=int, default=30, help="runs through the engine, one at a time")
    args = parser.parse_args()

    config = SandboxConfig(python_env=os.path.abspath(args.python_env))
    availability = probe(config)
    if not availability.ok:
        raise SystemExit(f"the sandbox cannot run here: {availability.reason}")
    print(f"{os.cpu_count()} cores, kernel {platform.release()}, {bwrap_version(config)}, "
          f"sandbox Python {config.python_env}, sandboxes run as uid "
          f"{config.drops_to() if config.drops_to() is not None else os.getuid()}")
    machine_line("start")
    rss_before = own_rss_kib()

    print("\nOne call at a time, call start -> result:")
    latency_line(PRINT.label, sequential(config, PRINT, args.runs))
    for case in (PANDAS, PYPLOT):
        latency_line(case.label, sequential(config, case, args.import_runs))
    latency_line("bubblewrap alone (true)", bwrap_alone_ms(config, args.runs))
    latency_line("python -I -c pass, no sandbox", interpreter_start_ms(config, args.runs))

    print(f"\n{args.parallel} sandboxes at once ({os.cpu_count()} cores), {args.parallel_runs} calls each:")
    for case in (PRINT, PANDAS):
        wall_s, latencies = parallel(config, case, args.parallel, args.parallel_runs)
        print(f"  {case.label:<30} {len(latencies) / wall_s:5.1f} calls/s   p50 {percentile(latencies, 50):6.1f} ms   "
              f"p95 {percentile(latencies, 95):6.1f} ms   max {max(latencies):6.1f} ms   (n={len(latencies)})")

    print(f"\nMemory, {args.parallel} sandboxes held open after their imports:")
    rss_after_calls = own_rss_kib()
    memory_line(config, "nothing imported", "", args.parallel)
    memory_line(config, "import pandas", "import pandas", args.parallel)
    memory_line(config, "import matplotlib.pyplot", "import matplotlib.pyplot", args.parallel)
    calls = 3 + args.runs + 2 * (1 + args.import_runs) + 2 * args.parallel * args.parallel_runs + 3 * args.parallel
    print(f"  this process (the runner's host): RSS {_mib(rss_before)} before the first call, "
          f"{_mib(rss_after_calls)} after {calls - 3 * args.parallel} calls, {_mib(own_rss_kib())} after {calls}")

    if args.engine:
        print(f"\nThrough the engine, print(1), {args.engine_runs} runs one at a time:")
        event_ms, tool_ms = engine_latencies(config.python_env, args.engine_runs)
        latency_line("tool_call -> tool_output", event_ms)
        latency_line("the call's execution_time_ms", [float(ms) for ms in tool_ms])
    machine_line("\nend")


if __name__ == "__main__":
    main()
