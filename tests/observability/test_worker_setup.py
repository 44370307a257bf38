"""A worker that serves metrics counts in a fresh multiprocess directory, even
when prometheus-client was imported before ChatForge's code ran (the celery
command loads Flower, which imports it)."""

from __future__ import annotations

import os

from prometheus_client import values

from chatforge.observability.worker_setup import MULTIPROC_ENV, prepare_worker_metrics_dir


def test_an_already_imported_client_switches_to_files_in_a_fresh_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("CHATFORGE_WORKER_METRICS_PORT", "9100")
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    (tmp_path / "counter_1.db").write_bytes(b"left from an earlier run")
    monkeypatch.setattr(values, "ValueClass", values.MutexValue)  # as imported before the directory was set

    prepare_worker_metrics_dir(["celery", "-A", "chatforge", "worker", "-Q", "tools"])

    assert values.ValueClass is not values.MutexValue  # file-backed from now on
    assert os.listdir(tmp_path) == []  # emptied


def test_other_commands_and_workers_without_a_port_are_left_alone(monkeypatch):
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    monkeypatch.setenv("CHATFORGE_WORKER_METRICS_PORT", "9100")
    prepare_worker_metrics_dir(["celery", "-A", "chatforge", "beat"])
    assert MULTIPROC_ENV not in os.environ
    monkeypatch.delenv("CHATFORGE_WORKER_METRICS_PORT")
    prepare_worker_metrics_dir(["celery", "-A", "chatforge", "worker"])
    assert MULTIPROC_ENV not in os.environ
