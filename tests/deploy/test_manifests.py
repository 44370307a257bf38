"""Offline checks of the deployment files in deploy/.

Nothing here starts a container or talks to a cluster: the files are parsed
and checked against the code they deploy (management commands, the Celery
app and its queues, the environment variables the settings read), and the
Kubernetes manifests against the Kubernetes API schemas (strict: unknown
fields are errors).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import kubernetes_validate
import yaml
from django.conf import settings
from django.core.management import get_commands

from tests.support.stack import TEST_SECRET_KEYS, base_env
from tools.sandbox.command import MPL_SEED

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
IMAGE = "chatforge:latest"
# Variables of the compose file that configure the Postgres container, not ChatForge.
# CHATFORGE_LLM_WORKERS: how many LLM worker containers compose runs (one per core).
COMPOSE_ONLY_VARIABLES = {"POSTGRES_PASSWORD", "FLOWER_BASIC_AUTH", "CHATFORGE_LLM_WORKERS"}
# Read by Flower itself, not by ChatForge's settings.
FLOWER_VARIABLES = {"FLOWER_BASIC_AUTH"}
# The files bucket's credentials: boto3's standard variables, read by boto3 and
# django-storages rather than by ChatForge's settings (chatforge/settings/files.py).
BOTO3_VARIABLES = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
# Kubernetes versions whose API schemas the manifests must satisfy.
K8S_VERSIONS = ("1.30.0", "1.37.0")
# Every worker kind, each in the Procfile, the Makefile, compose and Kubernetes.
WORKERS = ("worker-llm", "worker-tools", "worker-tools-io", "worker-sandbox")
# The pool each queue needs, matched on the exact queue name ("tools_io" is
# not "tools"), and why.
QUEUE_POOLS = {
    "llm": ("gevent", "LLM turns wait on the network: gevent pool (decision 0012)"),
    "tools": ("prefork", "tools need prefork: hard time limits only work there"),
    "tools_io": ("threads", "pool='io' tools run many calls at once on threads (decision 0025)"),
    "sandbox": ("prefork", "sandboxed tools need prefork: hard time limits, one sandbox per process"),
}
# The time limit each worker's shutdown grace must exceed. The threads pool
# enforces none (its calls stop at their tools' own timeouts), so the I/O
# tools worker is held to the tools' budget, as the prefork tools worker is.
GRACE_ABOVE = {
    "worker-llm": "CHATFORGE_LLM_HARD_TIME_LIMIT_S",
    "worker-tools": "CHATFORGE_TOOL_HARD_TIME_LIMIT_S",
    "worker-tools-io": "CHATFORGE_TOOL_HARD_TIME_LIMIT_S",
    "worker-sandbox": "CHATFORGE_TOOL_HARD_TIME_LIMIT_S",
}

ENV_READ = re.compile(r"""\benv\.(?:str|int|bool|list|float)\(\s*["']([A-Z][A-Z0-9_]*)["']""")
ENV_CALL = re.compile(r"\benv(?:\.\w+)?\(")


def settings_env_vars() -> set[str]:
    names: set[str] = set()
    for path in sorted((ROOT / "chatforge" / "settings").glob("*.py")):
        names |= set(ENV_READ.findall(path.read_text()))
    return names


SETTINGS_VARS = settings_env_vars()


def load_all(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def k8s_docs() -> list[dict]:
    return [doc for path in sorted(K8S.glob("*.yaml")) for doc in load_all(path)]


def k8s_named(kind: str, name: str) -> dict:
    matches = [d for d in k8s_docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


def procfile() -> dict[str, str]:
    entries = {}
    for line in (DEPLOY / "Procfile").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, command = line.split(":", 1)
            assert name not in entries, f"duplicate Procfile entry {name}"
            entries[name] = command.strip()
    return entries


def env_example() -> dict[str, str]:
    """NAME -> value for every variable line, commented-out defaults included."""
    entries = {}
    for line in (DEPLOY / "env.example").read_text().splitlines():
        match = re.match(r"^#?\s?([A-Z][A-Z0-9_]*)=(.*)$", line)
        if match:
            assert match[1] not in entries, f"{match[1]} appears twice in env.example"
            entries[match[1]] = match[2]
    return entries


def routed_queues() -> set[str]:
    queues = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    return queues | {settings.CELERY_TASK_DEFAULT_QUEUE}


def option(tokens: list[str], flag: str) -> str | None:
    return tokens[tokens.index(flag) + 1] if flag in tokens else None


def check_command(tokens: list[str]) -> None:
    """The command runs one of our entry points, with sane worker options."""
    if tokens[:2] == ["sh", "-c"]:
        tokens = shlex.split(tokens[2])
    if tokens[:2] == ["python", "manage.py"]:
        assert tokens[2] in get_commands(), f"no management command {tokens[2]!r}"
        return
    assert tokens[:3] == ["celery", "-A", "chatforge"], f"unknown entry point: {tokens}"
    assert tokens[3] in {"worker", "beat", "inspect", "flower"}, tokens
    if tokens[3] == "worker":
        queues = set(option(tokens, "-Q").split(","))
        assert queues <= routed_queues(), f"unknown queues {queues - routed_queues()}"
        pool = option(tokens, "-P")
        for queue in sorted(queues & QUEUE_POOLS.keys()):
            needed, why = QUEUE_POOLS[queue]
            assert pool == needed, f"{queue} on {pool}: {why}"
        assert re.fullmatch(r"[a-z-]+@%h", option(tokens, "-n")), "node name must be <name>@%h"
        assert int(option(tokens, "-c")) > 0


def worker_commands(commands: list[list[str]]) -> list[list[str]]:
    return [c for c in commands if c[:4] == ["celery", "-A", "chatforge", "worker"]]


def check_queues_covered(commands: list[list[str]]) -> None:
    consumed = set()
    for command in worker_commands(commands):
        consumed |= set(option(command, "-Q").split(","))
    assert consumed == routed_queues(), f"queues nobody consumes: {routed_queues() - consumed}"


# --- The environment variables ------------------------------------------------


def test_settings_read_the_environment_only_through_recognised_calls():
    for path in (ROOT / "chatforge" / "settings").glob("*.py"):
        text = path.read_text()
        assert "os.environ" not in text and "getenv" not in text, path.name
        assert len(ENV_CALL.findall(text)) == len(ENV_READ.findall(text)), (
            f"{path.name} reads the environment in a way this test does not recognise"
        )
    assert {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY", "CHATFORGE_LOG_LEVEL"} <= SETTINGS_VARS


def test_env_example_documents_exactly_the_variables_the_settings_read():
    documented = set(env_example()) - BOTO3_VARIABLES
    assert documented == SETTINGS_VARS, (
        f"undocumented: {SETTINGS_VARS - documented}; unknown: {documented - SETTINGS_VARS}"
    )
    # Each variable has a comment right above it saying what its default is.
    lines = (DEPLOY / "env.example").read_text().splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"^#?\s?([A-Z][A-Z0-9_]*)=", line)
        if match:
            block = []
            for previous in reversed(lines[:i]):
                if not previous.startswith("# ") or re.match(r"^#\s?[A-Z][A-Z0-9_]*=", previous):
                    break
                block.append(previous)
            assert "Default" in " ".join(block), f"{match[1]}: the comment must state the default"


def test_env_example_holds_placeholders_not_secrets():
    documented = env_example()
    for name in ("DJANGO_SECRET_KEY", "OPENAI_API_KEY"):
        assert documented[name] == "CHANGE_ME"
    assert ":CHANGE_ME@" in documented["DATABASE_URL"]


def _secret_placeholder_env() -> dict[str, str]:
    return {"DJANGO_SECRET_KEY": "deploy-test-secret-key-0123456789-abcdefghijklmnop",
            "CHATFORGE_SECRET_KEYS": TEST_SECRET_KEYS}


def _k8s_env() -> dict[str, str]:
    env = dict(k8s_named("ConfigMap", "chatforge-config")["data"])
    env.update(k8s_named("Secret", "chatforge-secrets")["stringData"])
    return env


@pytest.mark.parametrize("source", ["env.example", "kubernetes"])
def test_settings_load_with_the_documented_values(source):
    values = env_example() if source == "env.example" else _k8s_env()
    values = {**values, **_secret_placeholder_env()}
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.CHATFORGE_MODE, settings.DEBUG)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=base_env(**values),
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["distributed", "False"]


def test_the_placeholder_secret_key_is_refused():
    values = {**_k8s_env(), "DJANGO_SECRET_KEY": "CHANGE_ME"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=base_env(**values),
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0 and "DJANGO_SECRET_KEY" in result.stderr


# --- Every YAML file, the Procfile and the Dockerfile ------------------------------


def test_every_yaml_file_parses():
    paths = sorted(p for p in DEPLOY.rglob("*") if p.suffix in {".yml", ".yaml"})
    assert len(paths) >= 10
    for path in paths:
        assert load_all(path), f"{path.relative_to(ROOT)} is empty"


def test_procfile():
    entries = procfile()
    assert set(entries) == {"release", "web", *WORKERS, "beat"}
    assert entries["release"] == "python manage.py migrate --noinput"
    assert entries["web"].startswith("python manage.py serve --host 0.0.0.0 --port ")
    # Workers log each task at INFO and send task events (-E) for Flower and `celery events`.
    assert entries["worker-llm"] == "celery -A chatforge worker -Q llm,default -P gevent -c 500 -n llm@%h -l INFO -E"
    assert entries["worker-tools"] == "celery -A chatforge worker -Q tools -P prefork -c 4 -n tools@%h -l INFO -E"
    assert entries["worker-tools-io"] == (
        "celery -A chatforge worker -Q tools_io -P threads -c 16 -n tools-io@%h -l INFO -E"
    )
    assert entries["worker-sandbox"] == (
        "celery -A chatforge worker -Q sandbox -P prefork -c 4 -n sandbox@%h -l INFO -E"
    )
    assert entries["beat"] == "celery -A chatforge beat -l INFO"
    commands = [shlex.split(c) for c in entries.values()]
    for command in commands:
        check_command(command)
    check_queues_covered(commands)


def test_procfile_workers_match_the_makefile():
    makefile = (ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", makefile, re.MULTILINE)[1].split()
    for name in (*WORKERS, "beat"):
        assert f"\n{name}: install\n\t$(VENV)/bin/{procfile()[name]}\n" in makefile, name
        assert name in phony, name


def test_every_routed_queue_but_default_has_a_required_pool():
    assert routed_queues() - {"default"} == set(QUEUE_POOLS)


@pytest.mark.parametrize("queues, pool, accepted", [
    ("tools", "prefork", True),
    ("tools", "threads", False),
    ("tools_io", "threads", True),
    # Matched on the whole queue name: tools_io is not held to the prefork rule...
    ("tools_io", "prefork", False),
    # ...nor can a threads worker take the prefork-only queue beside its own.
    ("tools,tools_io", "threads", False),
    ("llm,default", "gevent", True),
    ("llm,default", "threads", False),
    ("sandbox", "prefork", True),
    ("sandbox", "threads", False),
])
def test_worker_commands_are_held_to_the_pool_of_each_queue(queues, pool, accepted):
    command = shlex.split(f"celery -A chatforge worker -Q {queues} -P {pool} -c 4 -n x@%h -l INFO -E")
    if accepted:
        check_command(command)
    else:
        with pytest.raises(AssertionError, match=" on "):
            check_command(command)


def test_celery_app_is_the_one_the_commands_name():
    from chatforge.celery import app

    assert app.main == "chatforge"


def test_dockerfile():
    text = (DEPLOY / "Dockerfile").read_text()
    instructions = [
        line.split(None, 1) for line in text.splitlines() if line and not line.startswith((" ", "#"))
    ]
    keywords = [i[0] for i in instructions]
    assert instructions[0] == ["FROM", "python:3.11-slim"]
    assert "RUN pip install -r requirements.txt" in text
    user = dict(instructions)["USER"].split(":")[0]
    assert user.isdigit() and int(user) != 0, "non-root, numeric (Kubernetes runAsNonRoot checks it)"
    assert keywords.index("USER") > keywords.index("COPY"), "drop root after installing"
    check_command(yaml.safe_load(dict(instructions)["CMD"]))
    # Static files are collected into the image (WhiteNoise serves them)
    # after the code is copied and before root is dropped.
    collect = text.splitlines().index("RUN python manage.py collectstatic --noinput -v 0")
    lines = text.splitlines()
    assert lines.index("COPY . .") < collect < next(i for i, line in enumerate(lines) if line.startswith("USER"))
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            # A name, its extras if any (markitdown[docx,xlsx,pptx]), an exact version.
            assert re.fullmatch(r"[A-Za-z0-9_.\-]+(\[[A-Za-z0-9_.,\-]+\])?==[\w.]+", line.strip()), f"unpinned: {line}"
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert {".git", ".venv"} <= set(ignored)


# --- docker compose ------------------------------------------------------------


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


CHATFORGE_SERVICES = {"migrate", "web", *WORKERS, "beat", "flower"}


def test_compose_services():
    services = compose()["services"]
    assert set(services) == CHATFORGE_SERVICES | {"postgres", "redis"}
    assert services["postgres"]["image"] == "postgres:15"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    redis_service = services["redis"]
    assert redis_service["image"] == "redis:7"
    assert " ".join(redis_service["command"]).endswith("--maxmemory-policy noeviction --appendonly no")
    assert redis_service["healthcheck"]["test"][-2:] == ["redis-cli", "ping"]
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])

    for name in CHATFORGE_SERVICES:
        service = services[name]
        assert service["image"] == IMAGE
        assert (DEPLOY / service["build"]["context"]).resolve() == ROOT
        assert (ROOT / service["build"]["dockerfile"]).is_file()
        deps = service["depends_on"]
        assert deps["postgres"]["condition"] == deps["redis"]["condition"] == "service_healthy"
        if name != "migrate":
            assert deps["migrate"]["condition"] == "service_completed_successfully"
        assert service["environment"]["DJANGO_SECRET_KEY"] == "${DJANGO_SECRET_KEY:?set it}"
    assert services["migrate"]["command"] == shlex.split(procfile()["release"])


def test_compose_commands_match_the_procfile():
    services = compose()["services"]
    commands = [services[name]["command"] for name in CHATFORGE_SERVICES]
    for command in commands:
        check_command(command)
    check_queues_covered(commands)
    for name in WORKERS:
        assert services[name]["command"] == shlex.split(procfile()[name])
    beat = shlex.split(procfile()["beat"])
    assert services["beat"]["command"][: len(beat)] == beat
    assert services["web"]["command"][:6] == ["python", "manage.py", "serve", "--host", "0.0.0.0", "--port"]


def duration_s(text: str) -> int:
    """A compose duration such as 150s, 16m or 1m30s, in seconds."""
    assert re.fullmatch(r"(\d+h)?(\d+m)?(\d+s)?", text) and text, text
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([hms])", text))


def test_compose_workers_get_a_grace_period_above_their_time_limit():
    services = compose()["services"]
    defaults = env_example()
    for name in WORKERS:
        assert GRACE_ABOVE[name] not in services[name]["environment"], "the default limit applies"
        hard_limit = int(defaults[GRACE_ABOVE[name]])
        assert duration_s(services[name]["stop_grace_period"]) > hard_limit, name


def test_compose_runs_one_llm_worker_per_core_by_default():
    """A gevent worker uses at most one core: compose runs two (a 2-core host)."""
    worker = compose()["services"]["worker-llm"]
    assert worker["deploy"]["replicas"] == "${CHATFORGE_LLM_WORKERS:-2}"


def test_compose_shares_one_files_volume_between_web_and_every_worker():
    """Web and workers read and write the same files (docs/files.md): with
    local storage, the named volume holds CHATFORGE_FILES_DIR in each."""
    config = compose()
    services = config["services"]
    assert "chatforge-files" in config["volumes"]
    for name in ("web", *WORKERS):
        environment = services[name]["environment"]
        assert environment["CHATFORGE_FILES_STORAGE"] == "${CHATFORGE_FILES_STORAGE:-local}"
        mounts = dict(volume.split(":", 1) for volume in services[name]["volumes"])
        files_dir = environment["CHATFORGE_FILES_DIR"].rstrip("/")
        mounted = mounts["chatforge-files"].rstrip("/")
        assert files_dir == mounted or files_dir.startswith(mounted + "/"), name


def test_compose_sets_only_variables_chatforge_reads():
    services = compose()["services"]
    for name in CHATFORGE_SERVICES:
        unknown = set(services[name]["environment"]) - SETTINGS_VARS - BOTO3_VARIABLES
        assert not unknown, f"{name} sets variables no setting reads: {unknown}"
    text = (DEPLOY / "docker-compose.yml").read_text()
    interpolated = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", text))
    assert interpolated - SETTINGS_VARS - BOTO3_VARIABLES == COMPOSE_ONLY_VARIABLES


# --- Kubernetes -----------------------------------------------------------------


def pod_specs() -> dict[str, dict]:
    specs = {}
    for doc in k8s_docs():
        if doc["kind"] in {"Deployment", "Job"}:
            specs[doc["metadata"]["name"]] = doc["spec"]["template"]["spec"]
    return specs


def test_k8s_inventory():
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in k8s_docs() if d["kind"] != "Kustomization")
    assert kinds == sorted([
        ("Namespace", "chatforge"),
        ("ConfigMap", "chatforge-config"),
        ("Secret", "chatforge-secrets"),
        ("Deployment", "chatforge-web"),
        ("Deployment", "chatforge-worker-llm"),
        ("Deployment", "chatforge-worker-tools"),
        ("Deployment", "chatforge-worker-tools-io"),
        ("Deployment", "chatforge-worker-sandbox"),
        ("Deployment", "chatforge-beat"),
        ("Deployment", "chatforge-flower"),
        ("Service", "chatforge-flower"),
        ("Job", "chatforge-migrate"),
        ("Service", "chatforge-web"),
        ("PodDisruptionBudget", "chatforge-worker-llm"),
        ("PodDisruptionBudget", "chatforge-worker-tools"),
        ("PodDisruptionBudget", "chatforge-worker-tools-io"),
        ("PodDisruptionBudget", "chatforge-worker-sandbox"),
        ("HorizontalPodAutoscaler", "chatforge-worker-llm"),
    ])
    for doc in k8s_docs():
        if doc["kind"] not in {"Namespace", "Kustomization"}:
            assert doc["metadata"]["namespace"] == "chatforge", doc["metadata"]["name"]


def test_k8s_kustomization_lists_everything_but_the_secret_template_and_the_job():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files - {"secret.example.yaml", "migrate-job.yaml"}


def test_k8s_pods_run_the_same_image_and_real_commands():
    commands = []
    for name, spec in pod_specs().items():
        assert spec["securityContext"]["runAsNonRoot"] is True
        for container in spec["containers"]:
            assert container["image"] == IMAGE, name
            check_command(container["command"])
            commands.append(container["command"])
            assert {"memory"} <= set(container["resources"]["limits"]), name
            refs = {next(iter(ref)): ref[next(iter(ref))]["name"] for ref in container["envFrom"]}
            assert refs == {"configMapRef": "chatforge-config", "secretRef": "chatforge-secrets"}, name
            assert all(e["name"] in SETTINGS_VARS for e in container.get("env", [])), name
    check_queues_covered(commands)
    specs = pod_specs()
    for name in WORKERS:
        assert specs[f"chatforge-{name}"]["containers"][0]["command"] == shlex.split(procfile()[name])
    assert specs["chatforge-migrate"]["containers"][0]["command"] == shlex.split(procfile()["release"])


def test_k8s_config_and_secret_hold_only_chatforge_variables_and_placeholders():
    config = k8s_named("ConfigMap", "chatforge-config")["data"]
    secret = k8s_named("Secret", "chatforge-secrets")["stringData"]
    assert set(config) <= SETTINGS_VARS and set(secret) <= SETTINGS_VARS | FLOWER_VARIABLES | BOTO3_VARIABLES
    assert not set(config) & set(secret)
    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "OPENAI_API_KEY"} <= set(secret)
    assert secret["DJANGO_SECRET_KEY"] == secret["OPENAI_API_KEY"] == "CHANGE_ME"
    assert ":CHANGE_ME@" in secret["DATABASE_URL"]
    assert "secret store" in (K8S / "secret.example.yaml").read_text()


def test_k8s_web_probes():
    web = k8s_named("Deployment", "chatforge-web")["spec"]["template"]
    container = web["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    allowed = k8s_named("ConfigMap", "chatforge-config")["data"]["DJANGO_ALLOWED_HOSTS"].split(",")
    for probe in ("readinessProbe", "livenessProbe"):
        headers = {h["name"]: h["value"] for h in container[probe]["httpGet"]["httpHeaders"]}
        assert headers["Host"] in allowed, "Django answers 400 to a Host it does not allow"
    service = k8s_named("Service", "chatforge-web")
    assert service["spec"]["selector"].items() <= web["metadata"]["labels"].items()
    port_names = {p["name"] for p in container["ports"]}
    assert all(p["targetPort"] in port_names for p in service["spec"]["ports"])


def test_k8s_workers_liveness_and_shutdown():
    config = k8s_named("ConfigMap", "chatforge-config")["data"]
    for name in WORKERS:
        hard_limit = int(config[GRACE_ABOVE[name]])
        spec = pod_specs()[f"chatforge-{name}"]
        container = spec["containers"][0]
        node = option(container["command"], "-n").replace("%h", "$HOSTNAME")
        probe = container["livenessProbe"]
        assert probe["exec"]["command"][:2] == ["sh", "-c"]
        assert shlex.split(probe["exec"]["command"][2])[:7] == [
            "celery", "-A", "chatforge", "inspect", "ping", "-d", node,
        ]
        assert probe["periodSeconds"] >= 30 and probe["timeoutSeconds"] >= 10
        assert spec["terminationGracePeriodSeconds"] > hard_limit, name
        assert "preStop" not in str(container.get("lifecycle", {}))


def test_k8s_beat_is_a_singleton():
    beat = k8s_named("Deployment", "chatforge-beat")["spec"]
    assert beat["replicas"] == 1
    assert beat["strategy"]["type"] == "Recreate"


def pod_labels(workload: dict) -> dict:
    return workload["spec"]["template"]["metadata"]["labels"]


def test_k8s_pdbs_and_hpa_target_the_workers():
    deployments = {d["metadata"]["name"]: d for d in k8s_docs() if d["kind"] == "Deployment"}
    pdb_targets = set()
    for pdb in (d for d in k8s_docs() if d["kind"] == "PodDisruptionBudget"):
        selector = pdb["spec"]["selector"]["matchLabels"].items()
        matched = [n for n, d in deployments.items() if selector <= pod_labels(d).items()]
        assert len(matched) == 1, pdb["metadata"]["name"]
        pdb_targets |= set(matched)
    assert pdb_targets == {f"chatforge-{name}" for name in WORKERS}
    hpa = k8s_named("HorizontalPodAutoscaler", "chatforge-worker-llm")["spec"]
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chatforge-worker-llm"}
    assert hpa["scaleTargetRef"] == target
    # Utilization targets are relative to requests: the container needs one.
    container = deployments["chatforge-worker-llm"]["spec"]["template"]["spec"]["containers"][0]
    assert "cpu" in container["resources"]["requests"]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_manifests_validate_strictly_against_the_api_schemas(version):
    for doc in k8s_docs():
        if doc["apiVersion"].startswith("kustomize.config.k8s.io/"):
            continue
        kubernetes_validate.validate(doc, version, strict=True)


def test_k8s_strict_validation_rejects_unknown_fields():
    deployment = k8s_named("Deployment", "chatforge-worker-tools")
    deployment["spec"]["template"]["spec"]["terminationGracePeriodSecond"] = 150
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[0], strict=True)


# --- Files: a bucket, or the files-volume component ------------------------------

FILES_VOLUME = K8S / "files-volume"
FILES_PODS = {"chatforge-web", *(f"chatforge-{name}" for name in WORKERS)}


def test_k8s_files_are_in_a_bucket_by_default():
    """The pods' root filesystems are read-only and every node must see the
    same files: the ConfigMap names a bucket, the Secret its credentials."""
    config = k8s_named("ConfigMap", "chatforge-config")["data"]
    secret = k8s_named("Secret", "chatforge-secrets")["stringData"]
    assert config["CHATFORGE_FILES_STORAGE"] == "s3" and config["CHATFORGE_FILES_S3_BUCKET"]
    assert BOTO3_VARIABLES <= set(secret) and {secret[name] for name in BOTO3_VARIABLES} == {"CHANGE_ME"}
    for name in FILES_PODS:
        assert pod_specs()[name]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def files_volume_rendered() -> dict[str, dict]:
    """The base manifests with the files-volume component's patches applied as
    kustomize applies strategic merge patches to these fields (maps merged,
    containers matched by name, volumes and mounts appended), by name."""
    import copy

    component = yaml.safe_load((FILES_VOLUME / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    docs = {(d["kind"], d["metadata"]["name"]): copy.deepcopy(d) for d in k8s_docs() if d["kind"] != "Kustomization"}
    for resource in component["resources"]:
        for doc in load_all(FILES_VOLUME / resource):
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
    for patch_ref in component["patches"]:
        patch = yaml.safe_load((FILES_VOLUME / patch_ref["path"]).read_text())
        target = patch_ref.get("target", {"kind": patch["kind"], "name": patch["metadata"]["name"]})
        matched = [key for key in docs if key[0] == target["kind"] and re.fullmatch(target["name"], key[1])]
        assert matched, f"{patch_ref['path']} matches nothing"
        for key in matched:
            doc = docs[key]
            if patch["kind"] == "ConfigMap":
                doc["data"].update(patch["data"])
                continue
            pod, pod_patch = doc["spec"]["template"]["spec"], patch["spec"]["template"]["spec"]
            pod["securityContext"].update(pod_patch["securityContext"])
            pod["volumes"] = pod.get("volumes", []) + pod_patch["volumes"]
            for container_patch in pod_patch["containers"]:
                [container] = [c for c in pod["containers"] if c["name"] == container_patch["name"]]
                container["volumeMounts"] = container.get("volumeMounts", []) + container_patch["volumeMounts"]
    return {f"{kind}/{name}": doc for (kind, name), doc in docs.items()}


def test_k8s_files_volume_component_mounts_one_claim_in_web_and_every_worker():
    rendered = files_volume_rendered()
    config = rendered["ConfigMap/chatforge-config"]["data"]
    assert config["CHATFORGE_FILES_STORAGE"] == "local"
    claim = rendered["PersistentVolumeClaim/chatforge-files"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"], "pods on every node read the same files"
    assert claim["metadata"]["namespace"] == "chatforge"
    for name in FILES_PODS:
        pod = rendered[f"Deployment/{name}"]["spec"]["template"]["spec"]
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]
                  if "persistentVolumeClaim" in v}
        assert claims == {"files": "chatforge-files"}, name
        mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
        assert mounts[config["CHATFORGE_FILES_DIR"]] == "files", name
        assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"], name
    for name, doc in rendered.items():
        if name.startswith("Deployment/") and doc["metadata"]["name"] not in FILES_PODS:
            assert "files" not in {v["name"] for v in doc["spec"]["template"]["spec"]["volumes"]}, name
    # The base's kustomization offers the component (commented out: a bucket is the default).
    assert "#   - files-volume" in (K8S / "kustomization.yaml").read_text()


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_files_volume_component_validates_strictly(version):
    for name, doc in files_volume_rendered().items():
        if name.split("/")[1] in FILES_PODS | {"chatforge-files", "chatforge-config"}:
            kubernetes_validate.validate(doc, version, strict=True)


def test_settings_load_with_the_files_volume_component():
    values = {**_k8s_env(), **files_volume_rendered()["ConfigMap/chatforge-config"]["data"],
              **_secret_placeholder_env()}
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.STORAGES['chatforge_files']['BACKEND'], settings.CHATFORGE_FILES_DIR)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=base_env(**values),
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.core.files.storage.FileSystemStorage", "/var/lib/chatforge/files"]


# --- Autoscaling on queue depth (optional manifests) ----------------------------

AUTOSCALING = K8S / "autoscaling"


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_queue_depth_autoscalers_validate_and_scale_each_pool_on_its_queue(version):
    from chatforge.observability.metrics import QUEUE_DEPTH_NAME

    hpas = load_all(AUTOSCALING / "hpa-queue-depth.yaml")
    deployments = {d["metadata"]["name"]: d for d in k8s_docs() if d["kind"] == "Deployment"}
    scaled = {}
    for hpa in hpas:
        kubernetes_validate.validate(hpa, version, strict=True)
        target = hpa["spec"]["scaleTargetRef"]["name"]
        [metric] = hpa["spec"]["metrics"]
        assert metric["type"] == "External" and metric["external"]["metric"]["name"] == QUEUE_DEPTH_NAME
        scaled[target] = metric["external"]["metric"]["selector"]["matchLabels"]["queue"]
    assert scaled == {
        "chatforge-worker-llm": "llm",
        "chatforge-worker-tools": "tools",
        "chatforge-worker-tools-io": "tools_io",
    }
    for deployment, queue in scaled.items():
        command = deployments[deployment]["spec"]["template"]["spec"]["containers"][0]["command"]
        assert queue in option(command, "-Q").split(","), (deployment, queue)
    rules = yaml.safe_load((AUTOSCALING / "prometheus-adapter-rules.yaml").read_text())
    [rule] = rules["rules"]["external"]
    assert rule["seriesQuery"].startswith(QUEUE_DEPTH_NAME) and rule["name"]["as"] == QUEUE_DEPTH_NAME


# --- The sandbox worker: bubblewrap's exceptions, only there ----------------------

SANDBOX_WORKER = "worker-sandbox"
# What bubblewrap needs in Docker (deploy/README.md, "The sandbox worker"):
# namespaces past the default seccomp profile, mounts past docker-default's
# AppArmor profile, and an unmasked /proc so that each sandbox gets its own.
SANDBOX_SECURITY_OPT = {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"}


def test_compose_opens_bubblewraps_needs_for_the_sandbox_worker_alone():
    services = compose()["services"]
    sandbox = services[SANDBOX_WORKER]
    assert SANDBOX_SECURITY_OPT <= set(sandbox["security_opt"])
    assert "no-new-privileges:true" in sandbox["security_opt"]
    assert sandbox["cap_drop"] == ["ALL"] and "cap_add" not in sandbox
    assert "privileged" not in sandbox
    limits = sandbox["deploy"]["resources"]["limits"]
    assert {"cpus", "memory"} <= set(limits), "its own budget, apart from the tools worker's"
    assert int(sandbox["pids_limit"]) > 0
    for name, service in services.items():
        assert not service.get("privileged"), name
        if name != SANDBOX_WORKER:
            assert not set(service.get("security_opt", [])) & SANDBOX_SECURITY_OPT, name


def test_k8s_sandbox_pod_has_bubblewraps_exceptions_and_no_privilege():
    specs = pod_specs()
    pod = specs[f"chatforge-{SANDBOX_WORKER}"]
    container = pod["containers"][0]
    context = container["securityContext"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    assert pod["securityContext"]["appArmorProfile"] == {"type": "Unconfined"}
    # The API allows an unmasked /proc only in a pod with its own user namespace.
    assert context["procMount"] == "Unmasked" and pod["hostUsers"] is False
    # bubblewrap is not setuid: it needs neither privilege escalation nor a capability.
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert not context.get("privileged")
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    for name, spec in specs.items():
        if name != f"chatforge-{SANDBOX_WORKER}":
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
            for other in spec["containers"]:
                assert "procMount" not in other.get("securityContext", {}), name


def test_dockerfile_builds_the_sandboxes_python_where_the_setting_says():
    """bubblewrap from Debian, and the sandbox's own virtualenv built as the
    Makefile's .sandbox-python rule builds it (with matplotlib's font cache
    where the runner seeds each sandbox's from), named by CHATFORGE_SANDBOX_PYTHON."""
    text = (DEPLOY / "Dockerfile").read_text()
    joined = re.sub(r"\\\n\s*", " ", text)
    assert re.search(r"apt-get install -y --no-install-recommends bubblewrap", joined)
    env = re.search(r"^ENV CHATFORGE_SANDBOX_PYTHON=(\S+)$", text, re.MULTILINE)[1]
    assert env == "/opt/chatforge-sandbox" == env_example()["CHATFORGE_SANDBOX_PYTHON"]
    assert f"python -m venv {env}" in joined
    assert f"{env}/bin/pip install -r requirements-sandbox.txt" in joined
    assert f'MPLCONFIGDIR={env}/{MPL_SEED} {env}/bin/python -c "import matplotlib.pyplot"' in joined
    assert "COPY requirements-sandbox.txt" in text
    makefile = (ROOT / "Makefile").read_text()
    assert 'MPLCONFIGDIR=$(SANDBOX_HOME)/mplconfig $(SANDBOX_HOME)/bin/python -c "import matplotlib.pyplot"' in makefile
    assert "-m pip install --quiet --disable-pip-version-check -r requirements-sandbox.txt" in makefile
    # Built as root, before the image drops to its user, who must be able to read it.
    lines = text.splitlines()
    build = next(i for i, line in enumerate(lines) if f"python -m venv {env}" in line)
    assert build < next(i for i, line in enumerate(lines) if line.startswith("USER"))
    assert f"chmod -R a+rX {env}" in joined


def test_makefile_runs_the_sandbox_benchmark():
    makefile = (ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", makefile, re.MULTILINE)[1].split()
    assert "bench-sandbox" in phony
    assert "\nbench-sandbox: install-dev sandbox\n\t$(PY) -m bench.sandbox" in makefile
    assert (ROOT / "bench" / "sandbox.py").is_file()
