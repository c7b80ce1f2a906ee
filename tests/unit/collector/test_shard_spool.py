"""Each shard process spools into a directory of its own, configured spool_dir or not."""

from __future__ import annotations

from pathlib import Path

from collector.runner import default_spool_dir, spool_dir_for


def test_shards_never_share_a_spool_directory(tmp_path: Path) -> None:
    assert spool_dir_for(tmp_path, None) == tmp_path
    dirs = {spool_dir_for(tmp_path, (i, 3)) for i in range(3)}
    assert len(dirs) == 3 and all(d.parent == tmp_path for d in dirs)
    assert spool_dir_for(tmp_path, (1, 3)).name == "shard-1-of-3"
    assert default_spool_dir((0, 2)).name == "shard-0-of-2" and default_spool_dir((0, 2)) != default_spool_dir((1, 2))
