"""The bubblewrap command line of one sandboxed call (docs/sandbox.md, "What
the code sees").

Everything the code may see is listed here: the system's programs and
libraries (/usr) read-only, the sandbox's Python environment read-only, the
call's own files, and two small writable tmpfs directories. Nothing else of
the host is there: no /home, /root, /etc beyond the loader's cache and a
made-up passwd, no /sys, no project checkout, no settings or secrets (the
environment is replaced, not inherited).
"""

from __future__ import annotations

import os

from tools.sandbox.config import SandboxConfig
from tools.sandbox_limits import SandboxLimits

INPUT_DIR = "/mnt/data"  # the conversation's files, read-only
OUTPUT_DIR = "/mnt/output"  # the working directory: files left here are returned
SANDBOX_DIR = "/sandbox"  # the launcher, the job and the code, read-only
MPL_SEED = "mplconfig"  # in the sandbox's environment: matplotlib's font cache, built at install time
_TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("/etc/ld.so.cache", "/etc/localtime")
_DEV_SHM_MB = 64


def base_prefix(python_env: str) -> str | None:
    """The installation the environment's Python comes from (``home`` in its
    pyvenv.cfg, without the ``bin``), when it lies outside /usr."""
    try:
        with open(os.path.join(python_env, "pyvenv.cfg"), encoding="utf-8") as cfg:
            lines = cfg.read().splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home":
            home = value.strip().rstrip("/")
            prefix = os.path.dirname(home) if home.endswith("/bin") else home
            return None if prefix == "/usr" or prefix.startswith("/usr/") else prefix
    return None


def sandbox_environment(config: SandboxConfig) -> dict[str, str]:
    """The code's whole environment: none of the worker's variables."""
    return {
        "PATH": f"{config.python_env_path}/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        # One thread per numerical library: the process limit counts threads.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_MAX_THREADS": "1",
    }


def bwrap_argv(config: SandboxConfig, bwrap: str, job_dir: str, limits: SandboxLimits, *,
               info_fd: int) -> list[str]:
    """The whole command: bubblewrap's options, then the launcher.
    ``info_fd``: where bubblewrap says which host process is the sandbox's
    first (the runner kills that one to end them all)."""
    argv = [
        bwrap,
        "--info-fd", str(info_fd),
        # Own user, PID, IPC, UTS, cgroup and network namespaces (an empty
        # network: loopback only, nothing listening), and no way to make more.
        "--unshare-all", "--unshare-user", "--disable-userns",
        "--hostname", "sandbox",
        "--die-with-parent",  # the sandbox goes when the worker does
        "--new-session",  # no controlling terminal to push keystrokes into
        "--cap-drop", "ALL",
        "--clearenv",
        "--ro-bind", "/usr", "/usr",
    ]
    for path in _TOP_LEVEL:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for path in _ETC:
        argv += ["--ro-bind-try", path, path]
    argv += ["--ro-bind", os.path.join(job_dir, "passwd"), "/etc/passwd",
             "--ro-bind", os.path.join(job_dir, "group"), "/etc/group"]
    argv += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", str(_DEV_SHM_MB * 1024 * 1024), "--tmpfs", "/dev/shm",
        "--size", str(limits.work_mb * 1024 * 1024), "--tmpfs", "/tmp",
        "--size", str(limits.work_mb * 1024 * 1024), "--tmpfs", OUTPUT_DIR,
        "--ro-bind", os.path.join(job_dir, "inputs"), INPUT_DIR,
        "--ro-bind", os.path.join(job_dir, "launcher.py"), f"{SANDBOX_DIR}/launcher.py",
        "--ro-bind", os.path.join(job_dir, "job.json"), f"{SANDBOX_DIR}/job.json",
        "--ro-bind", os.path.join(job_dir, "main.py"), f"{SANDBOX_DIR}/main.py",
    ]
    # After the tmpfs mounts, so that an environment under /tmp is not hidden.
    env_path = config.python_env_path
    prefix = base_prefix(env_path)
    if prefix is not None:
        argv += ["--ro-bind", prefix, prefix]
    # At its own path: its scripts and matplotlib's font cache name it so.
    argv += ["--ro-bind", env_path, env_path, "--chdir", OUTPUT_DIR]
    # Last: the root bubblewrap built its tree on becomes read-only too, so
    # only the tmpfs directories above are writable.
    argv += ["--remount-ro", "/"]
    for name, value in sandbox_environment(config).items():
        argv += ["--setenv", name, value]
    # -I: no user site, no PYTHON* variables, no script directory on sys.path.
    argv += ["--", config.python, "-I", "-B", f"{SANDBOX_DIR}/launcher.py"]
    return argv
