#!/usr/bin/env python3
"""Stop early, with one clear line, where a folder's disk has less free space than a job needs.

``./test.sh`` runs it before the suite: the end-to-end tests write GBs of workflow copies and
checkpoints under the temporary folder, and a full disk fails them all at once, each with an
``OSError: [Errno 28] No space left on device`` deep in a Snakemake log (CI, stop 37). Standard
library only: it runs before the install.

    scripts/check_free_space.py --path /tmp --need-gb 6 --for "the test suite"
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

GB = 1024**3


def shortfall(path: Path, need_gb: float) -> str | None:
    """Why ``path``'s disk cannot hold ``need_gb`` GB more, or None where it can. A path that does
    not exist yet is judged by its nearest existing parent (the disk it will be made on)."""
    existing = path
    while not existing.exists():
        existing = existing.parent
    free_gb = shutil.disk_usage(existing).free / GB
    if free_gb >= need_gb:
        return None
    return f"{free_gb:.1f} GB free on the disk of {path}, {need_gb:g} GB needed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, required=True, help="the folder the job writes under")
    parser.add_argument("--need-gb", type=float, required=True, help="what the job writes at its peak")
    parser.add_argument("--for", dest="job", required=True, help="the job, for the message")
    parser.add_argument("--fix", default="", help="what the user can do, for the message")
    args = parser.parse_args(argv)
    problem = shortfall(args.path, args.need_gb)
    if problem is None:
        return 0
    print(f"{args.job}: {problem}. {args.fix}".rstrip(), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
