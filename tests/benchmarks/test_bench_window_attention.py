"""The windowed-attention benchmark's bookkeeping: the load monitor sees other processes' CPU use,
the target check reports what a run missed, and the README block is replaced, not appended."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import bench_window_attention as bench
import pytest


def test_load_monitor_counts_a_busy_child_process() -> None:
    monitor = bench.LoadMonitor()
    spin = "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass"
    subprocess.run([sys.executable, "-c", spin], check=True)
    time.sleep(0.1)
    loaded, text = monitor.summary(max_load=0.3)
    assert loaded, text  # the child spun one core for most of the window


def _row(s: int, w: int, window: tuple, **baselines: tuple) -> dict:
    return {"s": s, "w": w, **baselines, "window": window}


def test_targets_name_each_miss() -> None:
    fast_small = (1.0, 0.9, 1.1, 100)
    levels = {
        "attention step": [
            _row(256, 4, fast_small, sdpa_masked=(0.5, 0, 0, 10)),  # below s = 512: not a target
            _row(512, 64, fast_small, sdpa_masked=(2.0, 0, 0, 90), flex=(0.8, 0, 0, 500)),
        ],
        "training step": [_row(1024, 4, fast_small, sdpa_full=(3.0, 0, 0, 400))],
    }
    (line,) = bench.target_lines(levels)
    assert "s=256" not in line
    assert "attention step s=512 w=64: 1.25× the time of flex" in line
    assert "attention step s=512 w=64: 1.111× sdpa_masked's memory" in line
    assert "training step" not in line
    levels["attention step"].pop()
    assert bench.target_lines(levels)[0].startswith("Targets met")


def test_readme_block_is_replaced(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{bench.README_BEGIN}\nold numbers\n{bench.README_END}\nrest\n")
    rows = {"attention step": [_row(512, 4, (1.0, 0, 0, 100), sdpa_masked=(2.0, 0, 0, 200))]}
    for _ in range(2):
        bench.update_readme(str(readme), bench.readme_block(rows, "results.md", loaded=True, minutes=1.0))
    text = readme.read_text()
    assert text.count(bench.README_BEGIN) == 1 and "old numbers" not in text
    assert "| attention step | 512 | 4 | 2.00× | 2.00× |" in text and "LOADED" in text
    assert text.startswith("intro\n") and text.endswith("rest\n")
    readme.write_text("no markers\n")
    with pytest.raises(SystemExit, match="no <!-- window-attention-benchmark:begin -->"):
        bench.update_readme(str(readme), "block")
