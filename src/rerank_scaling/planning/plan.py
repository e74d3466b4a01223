"""Stage: cost profiles, budget allocation (Fang et al., Scaling Laws for Dense Retrieval eq. 11) and
ROI-constrained choice (Scaling Laws for Online Advertisement Retrieval eqs. 5-6).

    python -m rerank_scaling.planning.plan --metrics all.parquet --fits fits.parquet --models JSON \
        --planning JSON --fitting JSON --training JSON --evaluation JSON --device auto \
        --cache results/profiles --out-dir results/<run>/planning --figures results/<run>/figures

Writes into --out-dir: decisions.csv (per fitted group x budget, and per group x law of the ROI
choice: verdict, candidate, P(best), expected regret, P(ROI >= lambda), reason;
:mod:`.decisions`), plan.parquet / plan.csv (one long table, column ``kind``: ``profile`` per
configured model, ``decision`` and ``candidate`` per question, ``budget`` per fitted group x
budget x cost scope, ``roi`` per fitted group x law, ``frontier`` per configured size when no value
per metric point is configured), plan.md (the verdicts first) and profiles.json; into --figures:
budget_curves.{png,pdf} and roi_frontier.{png,pdf} for one metric and split. Profiles are cached
under --cache per device. A group whose joint fit is missing or failed gets rows with that status
and the verdict ``cannot decide`` with the reason, and its figure panel shows that text instead of
a curve; the stage itself does not fail.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from rerank_scaling.atomic import write_json, write_table, write_text
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.planning.cost_model import collect_profiles
from rerank_scaling.planning.forecast import joint_fits, run_stats
from rerank_scaling.planning.plan_figures import budget_figure, roi_figure
from rerank_scaling.planning.plan_rows import make_plan
from rerank_scaling.planning.plan_settings import PlanSettings
from rerank_scaling.planning.plan_table import decisions_table, plan_markdown, plan_table
from rerank_scaling.plotting import save_figure
from rerank_scaling.settings import parse_json_arg, settings_from_dict, with_defaults

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--metrics", required=True, help="merged metrics table (all.parquet)")
    parser.add_argument("--fits", required=True, help="fits.parquet of the fit stage")
    parser.add_argument("--models", required=True, help="JSON of the config's models list")
    parser.add_argument("--planning", default="{}", help="JSON of the config's planning section")
    parser.add_argument("--fitting", default="{}", help="JSON of the config's fitting section")
    parser.add_argument("--training", default="{}", help="JSON of the config's training section")
    parser.add_argument("--evaluation", default="{}", help="JSON of the config's evaluation section")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--cache", required=True, help="profile cache directory (per device inside)")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--figures", required=True)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import torch

    from rerank_scaling.device import resolve_device

    if args.threads:
        torch.set_num_threads(args.threads)
    settings = settings_from_dict(PlanSettings, parse_json_arg(args.planning), "planning")
    fitting = settings_from_dict(FitSettings, parse_json_arg(args.fitting), "fitting")
    written_models = parse_json_arg(args.models)  # the profile cache is keyed by the specs as written
    models = with_defaults("models", written_models)
    training = with_defaults("training", parse_json_arg(args.training))
    evaluation = with_defaults("evaluation", parse_json_arg(args.evaluation))
    device = resolve_device(args.device)
    metrics, fits = pd.read_parquet(args.metrics), pd.read_parquet(args.fits)

    profiles = collect_profiles(written_models, settings, training, device, args.cache, evaluation)
    plan = make_plan(
        metrics,
        fits,
        models,
        profiles,
        settings,
        fitting,
        device,
        int(evaluation["rerank_depth"]),
        run_stats(metrics, training),
    )
    table = plan_table(plan.rows)
    out = Path(args.out_dir)
    write_table(table, out / "plan.parquet")
    write_table(table, out / "plan.csv")
    write_table(decisions_table(table), out / "decisions.csv")
    write_text(out / "plan.md", plan_markdown(table, plan.settings, profiles))
    write_json(
        out / "profiles.json",
        {"settings": asdict(plan.settings), "profiles": [p.as_record() for p in profiles]},
    )
    metric = settings.metric or fitting.metrics[0]
    fitted_splits = sorted(joint_fits(fits)["split"].dropna().unique())
    split = settings.split or (fitted_splits[0] if fitted_splits else "dev")
    figures = Path(args.figures)
    save_figure(budget_figure(plan, table, metric, split), figures / "budget_curves")
    save_figure(roi_figure(plan, table, metric, split), figures / "roi_frontier")
    status = table.groupby(["kind", "status"]).size()
    log.info("plan written to %s: %s", out, status.to_dict())


if __name__ == "__main__":
    main()
