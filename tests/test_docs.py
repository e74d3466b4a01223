"""The front door and the docs site: a short README whose three paths come first, a site that builds
with ``mkdocs build --strict``, a configuration reference that is the schema's, and papers cited by
name, never by a number only the project's history could resolve."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest
from conftest import REPO

README = REPO / "README.md"
#: Where a reader meets the text: what must cite papers and concepts by name.
CITING = ["README.md", "docs", "src", "tests", "benchmarks", "scripts", "rules", "Snakefile"]
#: A reference to the project's issues or to a paper by its place in a reading list.
UNRESOLVABLE = re.compile(r"issue [0-9]|seeds? (paper )?00[0-9]|paper 00[0-9]", re.I)


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short_and_opens_with_the_three_paths():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail to docs/"
    opening = "\n".join(lines[:60])
    for path in ("**Run the default**", "**Run the paper grid on a SLURM cluster**", "**Forecast or advise"):
        assert path in opening, f"{path} is not in the README's first 60 lines"
    for command in (
        "./run.sh",
        "--profile profiles/slurm",
        "rerank-scaling forecast",
        "rerank-scaling advise",
    ):
        assert command in opening, command
    assert "**Contents:**" in opening and "![" in README.read_text()


def test_the_readme_keeps_exactly_the_two_set_up_commands():
    section = README.read_text().split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    commands = [line.strip() for line in section.splitlines() if line.startswith("    ")]
    assert commands == ["./run.sh", "./test.sh"]


def test_the_readme_links_and_pictures_exist():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text()):
        if not target.startswith("http"):
            assert (REPO / target).exists(), target


def default_tables() -> list[dict[str, str]]:
    """The rows of the generated default-run block's tables, each as {column: cell}."""
    page = (REPO / "docs" / "default-run.md").read_text()
    block = page.split("<!-- default-results:begin -->", 1)[1].split("<!-- default-results:end -->", 1)[0]
    rows, header = [], None
    for line in block.splitlines():
        cells = (
            [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else None
        )
        if cells is None:
            header = None
        elif header is None:
            header = cells
        elif not set(line) <= set("|-: "):
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


def test_the_readme_says_what_the_generated_default_block_says():
    """The README's honest summary of the default (L6 below L4 on dev, the largest size below BM25) holds for
    the block scripts/readme_default.py wrote; a run that changes that must change the README too."""
    readme = " ".join(README.read_text().split())
    rows = default_tables()
    gaps = [
        row["gap to largest fitted"]
        for row in rows
        if "gap to largest fitted" in row and row["split"] == "dev"
    ]
    beats = [row["beats BM25"] for row in rows if "beats BM25" in row]
    assert gaps and beats
    if "held-out L6 ends *below* L4 on dev for every objective" in readme:
        assert all(gap.startswith("-") and gap.endswith("(L4)") for gap in gaps), gaps
    if '("beats BM25": worse in every row)' in readme:
        assert set(beats) == {"worse"}, beats


def test_the_configuration_reference_is_the_schemas():
    script = load_script("config_reference")
    assert script.PAGE.read_text() == script.generated(), "run python scripts/config_reference.py"
    schema = script.schema_path().read_text()
    for key in ("gradient_checkpointing", "max_setup_share", "value_reference"):
        assert key in schema and f".{key}`" in script.PAGE.read_text()


def test_every_script_says_where_it_writes():
    """docs/scripts.md names every script of scripts/ and benchmarks/, and what it writes."""
    page = (REPO / "docs" / "scripts.md").read_text()
    scripts = [
        *(REPO / "scripts").glob("*.py"),
        *(REPO / "scripts").glob("*.sh"),
        *(REPO / "benchmarks").glob("*.py"),
    ]
    missing = [str(path.relative_to(REPO)) for path in scripts if f"`{path.name}`" not in page]
    assert not missing, f"add them to docs/scripts.md: {missing}"


def test_papers_are_cited_by_name():
    found = []
    for name in CITING:
        path = REPO / name
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for file in files:
            if file.suffix in {".pyc", ".png", ".pdf", ".parquet", ".so"} or "__pycache__" in file.parts:
                continue
            for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
                if UNRESOLVABLE.search(line):
                    found.append(f"{file.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "cite the paper or say the concept:\n" + "\n".join(found)


def test_the_docs_site_builds_strict(tmp_path):
    """Every page renders, every link and anchor resolves, every generated report is on the site.
    mkdocs-material is a test dependency (pyproject's ``test`` extra, installed by scripts/install.sh)."""
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    for report in (REPO / "benchmarks" / "results").glob("*.md"):
        assert (site / "benchmarks" / "results" / report.stem / "index.html").exists(), report.name
    assert "--profile profiles/slurm" in (site / "cluster" / "index.html").read_text()
    assert "bad-inputs:begin" in (REPO / "docs" / "bad-inputs.md").read_text()


@pytest.mark.slow
def test_the_readme_forecast_path_runs_verbatim(tmp_path):
    """The README's third path as a user runs it: its table saved as runs.csv, its two command lines
    run by bash from a folder where .venv is this checkout's, each writing what the README says."""
    text = README.read_text()
    (tmp_path / "runs.csv").write_text(re.search(r"```\n(model,size,value\n.*?)```", text, re.S)[1])
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    commands = [line.strip() for line in text.splitlines() if line.startswith("    .venv/bin/rerank-scaling")]
    assert [command.split()[1] for command in commands] == ["forecast", "advise"]
    done = subprocess.run(["bash", "-c", "\n".join(["set -e", *commands])], cwd=tmp_path, capture_output=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "## The question" in (tmp_path / "forecast" / "answer.md").read_text()
    assert (tmp_path / "advice" / "advice.csv").read_text().startswith("candidate,")


def test_the_cpu_levers_are_quoted_from_their_reports():
    """docs/default-run.md's paragraph on dropout and the evaluation's batch size, built from the
    cells of the reports it names."""
    page = " ".join((REPO / "docs" / "default-run.md").read_text().split())
    dropout = (REPO / "benchmarks" / "results" / "dropout_rng_amx.md").read_text().splitlines()

    def cells(prefix: str) -> list[str]:
        return [c.strip() for c in next(x for x in dropout if x.startswith(prefix)).strip("|").split("|")]

    free = [cells(f"| {size} |")[6] for size in ("L1", "L4", "L6")]  # sdpa, dropout 0 / pipeline
    quotes = [
        f"takes {free[0]}, {free[1]} and {free[2]} of its time at L1, L4 and L6",
        f"mask at {cells('| attention-probability mask, bernoulli_')[2]} ns per element",
        f"16 random bits at {cells('| attention-probability mask, PCG64 bits')[2]}",
    ]
    batch = (REPO / "benchmarks" / "results" / "eval_batch_amx.md").read_text()
    quotes.append(batch_ratios(batch))
    for quote in quotes:
        assert quote in page, quote


def test_the_evaluation_scoring_changes_are_quoted_from_their_reports():
    """docs/default-run.md's paragraph on the fused encoder and the near-tie rounds, quoted from the
    before/after report it names."""
    page = " ".join((REPO / "docs" / "default-run.md").read_text().split())
    scoring = (REPO / "benchmarks" / "results" / "eval_scoring_amx.md").read_text()
    summary = " ".join(scoring.split("checkpoints: ", 1)[1].split())
    assert summary.rstrip(".") in page
    fused = (REPO / "benchmarks" / "results" / "fused_encoder_amx.md").read_text()
    gains = re.findall(r"over (?:fused|eager) \*\*([0-9.]+x)\*\*", fused)
    peak = fused.split("bf16 matmul peak, this run: **", 1)[1].split(" ", 1)[0]
    assert f"geometric mean of {gains[0]} ({gains[1]} over eager)" in page
    assert f"a median {peak} GFLOP/s" in page


def test_the_statistical_bar_is_quoted_from_its_report():
    """docs/default-run.md's statistical-bar sentences on the Xeon, from eval_precision_amx.md."""
    page = " ".join((REPO / "docs" / "default-run.md").read_text().split())
    report = (REPO / "benchmarks" / "results" / "eval_precision_amx.md").read_text()

    quotes = [
        f"worst ratio {bold_after(report, 'worst ratio |bf16 - fp32| / SE: ')}",
        f"{bold_after(report, '(calibration sample and near ties): ')} of the pairs are scored in fp32",
        f"{bold_after(report, 'metrics; 2 split(s)): median ').rstrip('x')}× faster than fp32",
        f"at most {bold_after(report, 'worst over 36 checkpoint-splits ')} e",
    ]
    for quote in quotes:
        assert quote in page, quote


def wall_and_load(block: str) -> tuple[str, str]:
    """A fresh run's wall time and load average at its end, from its generated block
    (scripts/readme_default.py): ("11.3 min", "1.74")."""
    wall = block.split("(`workflow_time.json`): **", 1)[1].split("**", 1)[0]
    load = block.split("load average at the end ", 1)[1].split(" ", 1)[0]
    return wall, load


def run_took(block: str) -> str:
    """What docs/default-run.md says of a fresh run: "took **<wall>** for 70 jobs, load average
    <load> at the end"."""
    wall, load = wall_and_load(block)
    return f"took **{wall}** for 70 jobs, load average {load} at the end"


def stage_minutes(block: str) -> dict[str, str]:
    """A generated block's summed job minutes of training and evaluation: {"train": "13.9 min", ...}."""
    return dict(re.findall(r"(train|eval) ([0-9.]+ min)", block))


def batch_ratios(report: str) -> str:
    """bench_eval_batch.py's geometric means relative to batch 64, as its report states them."""
    return report.split("relative to batch 64: ", 1)[1].split(".\n", 1)[0]


def gemm_rates(report: str) -> tuple[str, str]:
    """bench_fused_encoder.py --dtype fp32's GFLOP/s of the peak shape by library: (torch, oneDNN)."""
    return re.search(r"by library: torch (\d+), oneDNN (\d+)", report).groups()


def bar_timing(report: str) -> tuple[str, str, str]:
    """bench_fused_fp32_bar.py's evaluation-time ratio: (median, range, checkpoints)."""
    return re.search(r"median \*\*([0-9.]+x)\*\*, range (\S+) over (\d+) checkpoints", report).groups()


def run_quotes(block: str) -> list[str]:
    """What docs/default-run.md says of a fresh run: its wall time and load, and its training and
    evaluation jobs' summed minutes."""
    stages = stage_minutes(block)
    return [run_took(block), f"training jobs summed {stages['train']} and evaluation jobs {stages['eval']}"]


def bold_after(report: str, label: str) -> str:
    """The first bold value after ``label`` in a report."""
    return report.split(label, 1)[1].split("**", 2)[1]


def test_the_cpu_without_bf16_is_quoted_from_its_reports():
    """docs/default-run.md's paragraph on the AMD EPYC without bf16 units, from the run's generated
    blocks of its two fresh runs and the reports it names."""
    page = " ".join((REPO / "docs" / "default-run.md").read_text().split())
    results = REPO / "benchmarks" / "results"
    run = (results / "default_run_zen2.md").read_text()
    stages = stage_minutes(run)
    encoder = (results / "fused_encoder_fp32_zen2.md").read_text()
    torch_rate, onednn_rate = gemm_rates(encoder)
    dev_pass = encoder.split("fused over eager **", 1)[1].split("**", 1)[0]
    bar = (results / "fused_fp32_bar_zen2.md").read_text()
    assert "**met**" in bar
    median, spread, checkpoints = bar_timing(bar)
    quotes = [
        run_took(run),
        f"training jobs summed {stages['train']} and its evaluation jobs {stages['eval']}",
        f"ran at {torch_rate} GFLOP/s where oneDNN's ran at {onednn_rate}",
        f"its dev pass is **{dev_pass}** faster",
        f"{median} (median over {checkpoints} checkpoints, range {spread})",
        f"by at most {bar.split('worst ratio ', 1)[1].split(' ', 1)[0]} of its standard error",
        batch_ratios((results / "eval_batch_zen2.md").read_text()),
    ]
    compiled = (results / "compile_zen2.md").read_text()
    shares = [int(x) for x in re.findall(r"\| L\d \| [0-9.]+ \([0-9.-]+\) \| \d+ \((\d+)%\)", compiled)]
    speedups = [float(x) for x in re.findall(r"\| L\d \| ([0-9.]+)x \|", compiled)]
    quotes += [
        f"at {min(shares)}-{max(shares)}% of the same run's fp32 matmul peak",
        f"slower, {min(speedups):.2f}x-{max(speedups):.2f}x",
    ]
    assert len(shares) == len(speedups) == 5 and max(speedups) < 1
    fused_run = (results / "default_run_zen2_fused.md").read_text()
    fused_stages = stage_minutes(fused_run)
    train_ratio = float(fused_stages["train"].split()[0]) / float(stages["train"].split()[0])
    quotes += [
        f"scoring, {run_took(fused_run)}",
        f"training jobs summed {fused_stages['train']} and evaluation jobs {fused_stages['eval']}",
        f"took {train_ratio:.2f} of the earlier",
    ]
    resampled = (results / "default_run_zen2_b500.md").read_text()
    resampled_stages = dict(re.findall(r"(laws|planning) ([0-9.]+ min)", resampled))
    quotes += [
        run_took(resampled),
        f"the fit stage's job {resampled_stages['laws']} and planning's two {resampled_stages['planning']}",
    ]
    zen1 = (results / "default_run_zen1.md").read_text()
    quotes += run_quotes(zen1)
    assert "family 23 model 1" in zen1
    for quote in quotes:
        assert quote in page, quote


def geometric_16(report) -> str:
    """Batch 16's geometric-mean throughput relative to 64 in the ``bench_eval_batch.py`` report at
    path ``report``."""
    return re.search(r"relative to batch 64: 16: ([0-9.]+x)", report.read_text()).group(1)


def test_the_zen3_is_quoted_from_its_reports():
    """docs/default-run.md's paragraph on the AMD Zen 3 (no bf16 units, its own kind amd-zen3), from
    its four fresh runs' generated blocks and the reports it names."""
    page = " ".join((REPO / "docs" / "default-run.md").read_text().split())
    results = REPO / "benchmarks" / "results"
    zen3 = (results / "default_run_zen3.md").read_text()
    eager = (results / "default_run_zen3_eager.md").read_text()
    b16 = (results / "default_run_zen3_b16.md").read_text()
    frozen = (results / "default_run_zen3_frozen.md").read_text()
    torch_rate, onednn_rate = gemm_rates((results / "fused_encoder_fp32_zen3.md").read_text())
    after_run = (results / "fused_encoder_fp32_zen3_after_run.md").read_text()
    path_bar = bar_timing((results / "fused_fp32_bar_zen3.md").read_text())
    batch_bar = (results / "eval_batch_bar_zen3.md").read_text()
    batch_timing = bar_timing(batch_bar)
    quotes = [
        *run_quotes(zen3),
        f"bound it at least **{bold_after(zen3, 'needs at least ')}**",
        f"ran at {torch_rate} GFLOP/s where oneDNN's ran at {onednn_rate} in the same rounds",
        "fp32 dev pass ran "
        f"**{bold_after((results / 'fused_encoder_fp32_zen3.md').read_text(), 'fused over eager ')}**",
        *run_quotes(eager),
        f"bound at least **{bold_after(eager, 'needs at least ')}**",
        f"its fp32 matmul peak was {bold_after(after_run, 'matmul peak, this run: ')}",
        f"pass {bold_after(after_run, 'fused over eager ')} the eager one",
        "took {0} the fused one's time (median over {2} checkpoints, range {1}".format(*path_bar),
        batch_ratios((results / "eval_batch_zen3.md").read_text()),
        f"and 16: {geometric_16(results / 'eval_batch_zen3_16_64.md')} in a second run of 16 and 64 alone",
        "at 16 was {0} faster than at 64 (median over {2} checkpoints, range {1})".format(*batch_timing),
        *run_quotes(b16),
        f"16 was {geometric_16(results / 'eval_batch_zen3_beside_training.md')} faster than 64",
        f"{geometric_16(results / 'eval_batch_zen3_alone_same_hour.md')} with nothing beside it",
        *run_quotes(frozen),
    ]
    tables = [re.findall(r"^\| (?:dev|test) \|.*$", block, re.M) for block in (b16, frozen)]
    assert tables[0] and tables[0] == tables[1], "every row of its tables equals the batch-16 run's"
    assert "while another process trained L6" in (results / "eval_batch_zen3_beside_training.md").read_text()
    for block in (zen3, eager, b16, frozen):
        assert "family 25 model 1," in block and "bf16 units: none" in block
    assert "kind `amd-zen3`" in after_run and "batches of 16 pairs" in b16
    assert "values that changed at all: 0" in batch_bar and "score: 0\n" in batch_bar, "every score identical"
    for quote in quotes:
        assert quote in page, quote


def _shares(report: str, column: int) -> list[int]:
    """The percentages of the forward table's ``column``-th GFLOP/s cell, per size."""
    rows = re.findall(r"^\| L\d \|.*$", report.split("## Forward", 1)[1].split("##", 1)[0], re.M)
    return [int(re.findall(r"\((\d+)%\)", row)[column]) for row in rows]


def test_the_cpu_with_avx512_bf16_is_quoted_from_its_reports():
    """docs/default-run.md's paragraph on the AMD EPYC with AVX512-BF16 (Zen 4), from the run's
    generated block and the reports it names."""
    page = " ".join((REPO / "docs" / "default-run.md").read_text().split())
    results = REPO / "benchmarks" / "results"
    run = (results / "default_run_zen4.md").read_text()
    stages = stage_minutes(run)
    bf16 = (results / "fused_encoder_zen4.md").read_text()
    fp32 = (results / "fused_encoder_fp32_zen4.md").read_text()
    bar = (results / "fused_fp32_bar_zen4.md").read_text()
    precision = (results / "eval_precision_zen4.md").read_text()
    scoring = (results / "eval_scoring_zen4.md").read_text()
    assert "family 25 model 17" in run and "**met**" in bar and "**met**" in precision
    kernel, eager = _shares(bf16, 2), _shares(bf16, 0)
    calibration_ratio = precision.split("calibration sample's largest |bf16 - fp32|, worst ", 1)[1].split()[0]

    quotes = [
        run_took(run),
        f"training jobs summed {stages['train']} and evaluation jobs {stages['eval']}",
        f"peak is only **{bold_after(bf16, 'bf16 matmul peak, this run: ')}**",
        f"fp32's {bold_after(fp32, 'fp32 matmul peak, this run: ').split()[0]}",
        f"runs at **{min(kernel)}-{max(kernel)}%** of it (L1-L6; eager {min(eager)}-{max(eager)}%)",
        f"is {bold_after(bf16, 'kernel over eager ')} the eager one",
        "oneDNN's fp32 GEMM ({1} GFLOP/s) beats PyTorch's ({0})".format(
            *re.search(r"by library: torch (\d+), oneDNN (\d+)", fp32).groups()
        ),
        f"fp32 dev pass is **{bold_after(fp32, 'fused over eager ')}** the eager one",
        f"by at most {bar.split('worst ratio ', 1)[1].split(' ', 1)[0]} of its standard error",
        f"worst ratio {bold_after(precision, 'worst ratio |bf16 - fp32| / SE: ')}",
        f"at most {calibration_ratio} times its calibration",
        f"with {bold_after(precision, '(calibration sample and near ties): ')} of the pairs scored in fp32",
        f"it is {bold_after(precision, 'metrics; 2 split(s)): median ').rstrip('x')}× faster than fp32",
        f"dev scoring is **{bold_after(scoring, 's after (')}** faster",
    ]
    quotes.append(batch_ratios((results / "eval_batch_zen4.md").read_text()))
    profiled = (results / "default_run_zen4_profile.md").read_text()
    profiled_stages = stage_minutes(profiled)
    quotes += [
        run_took(profiled),
        f"training jobs summed {profiled_stages['train']} and evaluation jobs {profiled_stages['eval']}",
    ]
    ninja, repeat = (
        (results / name).read_text()
        for name in ("default_run_zen4_ninja.md", "default_run_zen4_ninja_repeat.md")
    )
    (wall, load), (wall_again, load_again) = wall_and_load(ninja), wall_and_load(repeat)
    stages, again = stage_minutes(ninja), stage_minutes(repeat)
    bounds = [bold_after(report, "needs at least ") for report in (ninja, repeat)]
    quotes += [
        f"took **{wall}** and **{wall_again}** for 70 jobs, load average {load} and {load_again} at the end",
        f"training jobs summed {stages['train']} and evaluation jobs {stages['eval']}, "
        f"then {again['train']} and {again['eval']}",
        f"at least **{bounds[0]}** and at least **{bounds[1]}**",
    ]
    compiled = (results / "compile_zen4.md").read_text()
    train_shares = [
        int(re.findall(r"\((\d+)%\)", row)[2]) for row in re.findall(r"^\| L\d \| \d.*%.*$", compiled, re.M)
    ]
    speedups = re.findall(r"\| L\d \| ([0-9.]+)x \| [0-9.]+ \| \w+ \| ([0-9.]+)x \|", compiled)
    evals, trains = ([float(x) for x in column] for column in zip(*speedups, strict=True))
    assert len(train_shares) == len(trains) == 5 and max(trains) < 1
    quotes += [
        f"runs at {min(train_shares)}-{max(train_shares)}% of the same run's bf16 peak",
        f"slower, {min(trains):.2f}x-{max(trains):.2f}x",
        f"({min(evals):.2f}x-{max(evals):.2f}x of eager)",
    ]
    for quote in quotes:
        assert quote in page, quote


def dag_ab_medians(report: str) -> list[list[str]]:
    """bench_dag_ab.py's medians, [before, after], each [wall, user, system, MB written]."""
    rows = re.findall(r"^\| (?:before|after) \(\w+\) \| (.*) \|$", report, re.M)
    return [[cell.split(" (")[0] for cell in row.split(" | ")] for row in rows]


def test_the_checkpoint_writes_are_quoted_from_their_reports():
    """docs/benchmarks.md's checkpoint-writes item: the tiny DAG's and the default-sized DAG's
    medians before and after from tiny_dag_ab_zen3.md and default_jobs_dag_ab_zen3.md, the suite's
    wall and CPU minutes from test_suite_time_cpu_zen3.md."""
    page = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())
    results = REPO / "benchmarks" / "results"
    (before_wall, _, before_sys, before_mb), (after_wall, _, after_sys, after_mb) = dag_ab_medians(
        (results / "tiny_dag_ab_zen3.md").read_text()
    )
    default_sized = (results / "default_jobs_dag_ab_zen3.md").read_text()
    (wall_a, user_a, sys_a, mb_a), (wall_b, user_b, sys_b, mb_b) = dag_ab_medians(default_sized)
    assert "--config benchmarks/configs/dag_ab_default_jobs.yaml" in default_sized
    suite = (results / "test_suite_time_cpu_zen3.md").read_text()
    walls = re.findall(r"^- wall time: \*\*([0-9.]+) min\*\*", suite, re.M)
    cpus = re.findall(
        r"^- CPU time of pytest and the processes it waited for: \*\*([0-9.]+) min\*\*", suite, re.M
    )
    quotes = [
        f"{before_wall} s against {after_wall} s wall, {before_sys} against {after_sys} system CPU seconds",
        f"{before_mb} against {after_mb} MB written",
        f"{walls[0]} min before, {walls[1]} after, {cpus[0]} and {cpus[1]} CPU minutes",
        f"took {wall_a} s against {wall_b} s wall, {sys_a} against {sys_b} system CPU seconds and "
        f"{user_a} against {user_b} user CPU seconds, {mb_a} against {mb_b} MB written",
    ]
    for quote in quotes:
        assert quote in page, quote
