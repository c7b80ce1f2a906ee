from collections.abc import Sequence
from typing import Any

def encode(rows: Sequence[tuple[Any, ...]], kinds: str, /) -> bytes | None: ...
