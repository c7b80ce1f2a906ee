"""The whole configuration tree; each package owns the section it reads."""

from __future__ import annotations

from analyzer.config import AlertsConfig, AnalyzerConfig
from api.config import ApiConfig
from collector.config import CollectorConfig, TargetConfig
from config.base import Section
from fabric.config import FabricConfig
from schedulers.config import SchedulersConfig
from store.config import DatabaseConfig


class Config(Section):
    """fabricmon's configuration (SPEC §3). Every section has working defaults."""

    database: DatabaseConfig = DatabaseConfig()
    fabric: FabricConfig = FabricConfig()
    targets: list[TargetConfig] = []
    collector: CollectorConfig = CollectorConfig()
    analyzer: AnalyzerConfig = AnalyzerConfig()
    alerts: AlertsConfig = AlertsConfig()
    api: ApiConfig = ApiConfig()
    schedulers: SchedulersConfig = SchedulersConfig()
