"""The composition root: the services a command runs, wired together here and only here.

The packages import one way (``make lint`` checks it: ``[tool.importlinter]`` in pyproject.toml):
the analyzer never imports the schedulers, nor they the collector or the API. What runs only while
an analyzer leads (Slurm's executor, job discovery and maintenance windows) is built here and
handed to the analyzer as its :class:`~analyzer.executors.ActionExecutors`; their metrics are
registered beside the analyzer's.
"""

from __future__ import annotations

from prometheus_client.registry import Collector

from analyzer.metrics import AnalyzerMetrics
from analyzer.service import AnalyzerService
from config.model import Config
from fabric.model import Fabric
from schedulers.metrics import SchedulerMetrics
from schedulers.service import Schedulers
from store.db import Pool


def analyzer_service(config: Config, fabric: Fabric, pool: Pool) -> AnalyzerService:
    """The analyzer with the leader-scoped scheduler tasks its config asks for."""
    schedulers = Schedulers(config.schedulers, fabric.servers, pool)
    return AnalyzerService(config, fabric, pool, executors=schedulers)


def analyzer_metrics(service: AnalyzerService) -> list[Collector]:
    """What a running analyzer exposes on ``/metrics``: its own figures and its schedulers'."""
    out: list[Collector] = [AnalyzerMetrics(service)]
    if isinstance(service.schedulers, Schedulers):
        out.append(SchedulerMetrics(service.schedulers))
    return out


__all__ = ["analyzer_metrics", "analyzer_service"]
