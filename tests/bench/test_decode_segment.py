"""bench.decode_segment: (b) runs the package of the tree it is given, not the checkout's."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench import decode_segment


def test_decode_runs_the_asked_trees_package_from_the_checkouts_directory(tmp_path: Path) -> None:
    # A tree whose `exporter` only says where it is and what it was asked.
    (tmp_path / "exporter").mkdir()
    (tmp_path / "exporter" / "__init__.py").write_text("")
    (tmp_path / "exporter" / "__main__.py").write_text("import sys\nprint(__file__, sys.argv[1:])\n")
    cmd, env = decode_segment.decode_run(str(decode_segment.ROOT / ".venv" / "bin" / "python"), tmp_path, Path("SEG"))
    # From the checkout's directory, where `-m` would otherwise find the checkout's package first.
    out = subprocess.run(cmd, env=env, cwd=decode_segment.ROOT, capture_output=True, text=True, check=True).stdout
    assert out == f"{tmp_path / 'exporter' / '__main__.py'} ['decode', 'SEG']\n"
