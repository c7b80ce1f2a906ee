"""The ``fabric`` configuration section: generate an AIPod fabric, or read an inventory file."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from config.base import Section


class GenerateConfig(Section):
    """Parameters of a generated AIPod fabric (SPEC §6)."""

    gpus: int = Field(512, gt=0)
    rails: int = Field(8, ge=1)
    radix: int = Field(128, ge=4)
    speed_gbps: int = Field(400, gt=0)
    #: Port names: ``swp`` (swp1.., nic1..), a NOS's (``eos``, ``sonic``, ``junos``...) or ``mixed``.
    naming: Literal["swp", "openconfig", "eos", "sonic", "junos", "xr", "srlinux", "cumulus", "mixed"] = "swp"


class FabricConfig(Section):
    """Which fabric fabricmon watches. Neither key given: a generated 512-GPU fabric."""

    generate: GenerateConfig | None = None
    inventory: Path | None = None

    @model_validator(mode="after")
    def _one_source(self) -> FabricConfig:
        if self.generate is not None and self.inventory is not None:
            raise ValueError("give either 'generate' or 'inventory', not both")
        return self
