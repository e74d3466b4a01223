"""Regenerate the README's screenshot of the report's landing page, as a reader first sees it.

    python scripts/readme_screenshot.py results/report.html results/figures/readme_report_landing.png

Opens the report (built by ``./run.sh``: ``snakemake --report results/report.html``) in headless
Chromium (:mod:`rerank_scaling.report.browser`), refuses a landing page that lacks the question, the
forecast table, the verdicts or the figure, and writes the screenshot (the README embeds it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rerank_scaling.report.browser import landing_problems, rendered_dom, screenshot


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("report", type=Path, help="the Snakemake report (results/report.html)")
    parser.add_argument("png", type=Path, help="where the screenshot goes (results/figures/readme_*.png)")
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=1500)
    args = parser.parse_args(argv)
    problems = landing_problems(rendered_dom(args.report))
    if problems:
        sys.exit(f"{args.report}: the landing page is not the answer: {'; '.join(problems)}")
    screenshot(args.report, args.png, args.width, args.height)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
