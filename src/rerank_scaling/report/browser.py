"""Open a report page as a reader would: headless Chromium, its DOM after the scripts ran, a screenshot.

Snakemake's report is a JavaScript app (React): its landing page exists only after the scripts
ran, so the page is loaded by a real browser (Debian's ``chromium``), given virtual time for the
scripts (``--virtual-time-budget``), and read back with ``--dump-dom`` (the DOM as rendered,
without any click) or ``--screenshot``. Used by the browser tests and by
``scripts/readme_screenshot.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Flags for a root user in a container without a display or a session bus.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run")
INSTALL_HINT = "install it with scripts/install_browser_test_deps.sh (apt-get install chromium, as root)"


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) executable on PATH, or None."""
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


def _run(page: Path, *flags: str, timeout: float) -> str:
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError(f"no Chromium on PATH ({', '.join(CANDIDATES)}): {INSTALL_HINT}")
    command = [chromium, *FLAGS, *flags, Path(page).resolve().as_uri()]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout


def rendered_dom(page: Path, budget_ms: int = 5000, timeout: float = 120) -> str:
    """The page's DOM after its scripts ran for ``budget_ms`` of virtual time (no click)."""
    return _run(page, f"--virtual-time-budget={budget_ms}", "--dump-dom", timeout=timeout)


def screenshot(
    page: Path, png: Path, width: int = 1600, height: int = 1400, budget_ms: int = 5000, timeout: float = 120
) -> Path:
    """A PNG of the page's first ``width`` x ``height`` pixels, as a reader sees it on opening."""
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    _run(
        page,
        f"--window-size={width},{height}",
        f"--virtual-time-budget={budget_ms}",
        f"--screenshot={png}",
        timeout=timeout,
    )
    if not png.exists():
        raise RuntimeError(f"Chromium wrote no screenshot of {page} to {png}")
    return png


#: What a reader must see on the landing page without a click (name, pattern in the rendered DOM).
LANDING = (
    (
        "the answer first, one sentence per objective",
        r'<h2>The answer</h2>\s*<(ul|p) id="answer-headline">\s*\S',
    ),
    ("the question", r'<p id="answer-question">Fitted on .+ forecast: .+\(N = '),
    ("a forecast table with rows", r'<table[^>]*id="answer-forecasts"[^>]*>.*?<tbody>\s*<tr'),
    ("the planning verdicts", r'<(table|p) [^>]*id="answer-verdicts"[^>]*>\s*\S'),
    ("the embedded figure", r'<figure id="answer-figure">\s*<img [^>]*src="data:image/png;base64,'),
)


def landing_problems(dom: str, table: bool = True) -> list[str]:
    """What of ``LANDING`` the rendered page lacks (the forecast table only where ``table``)."""
    return [
        f"missing: {name}"
        for name, pattern in LANDING
        if (table or "table" not in name) and not re.search(pattern, dom, re.S)
    ]
