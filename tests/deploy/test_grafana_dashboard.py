"""The Grafana dashboard in deploy/grafana is built on the metrics ChatForge
exports: every metric its queries name exists, and its important ones are
all shown."""

from __future__ import annotations

import json
import re
from pathlib import Path

from chatforge.observability import metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "chatforge-dashboard.json"
_METRIC = re.compile(r"\bchatforge_[a-z_]+")
_SUFFIXES = ("_bucket", "_count", "_sum")


def exported() -> set[str]:
    return {m._name + ("_total" if m._type == "counter" else "") for m in vars(metrics).values()
            if hasattr(m, "_name") and hasattr(m, "_documentation")} | metrics.SCRAPE_TIME_METRICS


def test_every_query_names_an_exported_metric_and_every_metric_has_a_panel():
    board = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in board["panels"] for target in panel["targets"]]
    named = set()
    for expr in exprs:
        for name in _METRIC.findall(expr):
            for suffix in _SUFFIXES:
                if name.endswith(suffix) and name.removesuffix(suffix) in exported():
                    name = name.removesuffix(suffix)
            named.add(name)
    assert named <= exported(), named - exported()
    assert named == exported(), f"metrics with no panel: {exported() - named}"
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)) and board["uid"] == "chatforge-fleet"
