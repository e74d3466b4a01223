"""Stage: fit every law with every held-out protocol; allocation and paper tables.

    python -m rerank_scaling.stages.fit_laws --metrics all.parquet --settings JSON --out-dir DIR

Writes into DIR: fits.parquet, forecasts.parquet, allocation.parquet, equal_compute.parquet and
tables/<name>.{csv,md,tex} for each name in TABLES. A group whose fit fails yields a row with
status "failed" and its reason; the stage itself does not fail.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pandas as pd

from rerank_scaling import law_tables
from rerank_scaling.allocation import allocation_table, equal_compute
from rerank_scaling.atomic import write_table
from rerank_scaling.protocols import FitSettings, prepare, run_protocols
from rerank_scaling.settings import parse_json_arg, settings_from_dict

TABLES = (
    "forecast_errors",
    "diagnostics",
    "observed_vs_forecast",
    "exponents",
    "allocation",
    "equal_compute",
)
log = logging.getLogger(__name__)


def fit_everything(table: pd.DataFrame, settings: FitSettings, out_dir: Path, workers: int = 1) -> None:
    fits, forecasts = run_protocols(table, settings, workers)
    allocation = allocation_table(fits, forecasts) if not forecasts.empty else pd.DataFrame()
    pair = settings.equal_compute
    compared = equal_compute(prepare(table, settings), *pair, settings.step_axis) if pair else pd.DataFrame()
    failed = fits[fits["status"] != "ok"] if len(fits) else fits
    log.info("%d fits (%d failed), %d forecast rows", len(fits), len(failed), len(forecasts))
    for name, frame in (
        ("fits", fits),
        ("forecasts", forecasts),
        ("allocation", allocation),
        ("equal_compute", compared),
    ):
        write_table(frame, out_dir / f"{name}.parquet")
    law_tables.write_all(
        {
            "forecast_errors": law_tables.forecast_errors_by_axis(fits) if len(fits) else pd.DataFrame(),
            "diagnostics": law_tables.diagnostics(fits) if len(fits) else pd.DataFrame(),
            "observed_vs_forecast": law_tables.observed_vs_forecast(forecasts)
            if len(forecasts)
            else pd.DataFrame(),
            "exponents": law_tables.exponents(fits) if len(fits) else pd.DataFrame(),
            "allocation": allocation,
            "equal_compute": compared,
        },
        out_dir / "tables",
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--settings", required=True, help="JSON of the config's fitting section")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--threads", type=int, default=1, help="groups fitted in parallel")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_from_dict(FitSettings, parse_json_arg(args.settings), "fitting")
    fit_everything(pd.read_parquet(args.metrics), settings, Path(args.out_dir), args.threads)


if __name__ == "__main__":
    main()
