"""The test suite's time: run pytest recording each test's time and the machine's load, then tabulate.

    python benchmarks/suite_time.py run --label before --out /tmp/suite-before -- -n 2 --dist loadfile
    python benchmarks/suite_time.py report /tmp/suite-before /tmp/suite-after \
        --out benchmarks/results/test_suite_time.md
    python benchmarks/suite_time.py costs /tmp/suite-after   # tests/module_seconds.json

``run`` starts ``python -m pytest -p no:cacheprovider --junitxml ... --durations=40`` with the given
arguments (plus the ``suite_time_log`` plugin: every test phase's report, as it arrives), samples the
1-minute load average every 15 s and writes ``meta.json`` (wall time, CPU time of pytest and the
processes it waited for, load samples, CPU, commit). ``report`` reads those folders: each run's wall
time, its sum of per-test durations (setup + call + teardown), its CPU time (both less sensitive to
the load than the wall time on a shared machine), when each worker finished its last test, its 40
slowest tests and slowest modules. ``costs`` writes a run's seconds per test module (the larger,
where ``--durations-log`` names pytest's output of another run: its ``slowest N durations`` lines,
a lower bound for the modules they name, e.g. those a stopped run did not reach) to
``tests/module_seconds.json``, which ``tests/conftest.py`` reads to start the slowest modules first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from benchmark_output import REPO, emit

HERE = Path(__file__).resolve().parent
TOP_TESTS = 40
COMPLETE = (0, 1)  # pytest's exit status after a whole run (1: some tests failed); else stopped or killed
TOP_MODULES = 15


def _load() -> float:
    return os.getloadavg()[0]


def run(label: str, out: Path, pytest_args: list[str]) -> None:
    """Run the suite once with ``pytest_args``; write junit.xml, reports.jsonl, pytest.log and
    meta.json to ``out``."""
    from rerank_scaling.precision import cpu_name

    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "suite_time_log"]
    command += [f"--junitxml={out / 'junit.xml'}", "--durations=40", *pytest_args]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    env["SUITE_TIME_LOG"] = str(out / "reports.jsonl")
    (out / "reports.jsonl").unlink(missing_ok=True)  # the plugin appends: a reused folder mixed two runs
    start = time.monotonic()
    meta = {
        "label": label,
        "command": " ".join(["python", *command[1:]]).replace(str(out), "OUT"),
        "commit": commit.stdout.strip(),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "started": time.time(),
        "load_start": _load(),
        "load_samples": [],
    }
    done = threading.Event()

    def sample() -> None:  # meta.json is current every 15 s: a run stopped early is still read
        while not done.wait(15):
            meta["load_samples"].append(_load())
            meta["wall_s"] = round(time.monotonic() - start, 1)
            (out / "meta.json").write_text(json.dumps(meta, indent=1))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    with open(out / "pytest.log", "w") as log:
        finished = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    done.set()
    thread.join()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    meta["wall_s"] = round(time.monotonic() - start, 1)
    # pytest, its workers and every process they waited for (Snakemake and its jobs; not the SLURM
    # test's job steps, which slurmd starts): the work done, whatever the load
    meta["cpu_s"] = round(children.ru_utime + children.ru_stime, 1)
    meta["load_end"], meta["returncode"] = _load(), finished.returncode
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps({k: v for k, v in meta.items() if k != "load_samples"}, indent=1))


def junit_reports(junit: Path) -> dict[str, dict]:
    """Test id -> seconds (setup + call + teardown) and outcome from pytest's junit XML (a run
    recorded before the ``suite_time_log`` plugin: no workers, no end times)."""
    tests = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/")
        problems = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(next(iter(problems), ""))
        tests[f"{path}.py::{case.get('name')}"] = {"seconds": float(case.get("time", 0.0))}
        tests[f"{path}.py::{case.get('name')}"]["outcome"] = outcome or "passed"
    return tests


def test_reports(folder: Path) -> dict[str, dict]:
    """Test id -> its seconds (setup + call + teardown), outcome, worker and the time its last phase
    ended, from the ``suite_time_log`` plugin's lines (or the junit XML without them)."""
    if not (folder / "reports.jsonl").exists():
        return junit_reports(folder / "junit.xml") if (folder / "junit.xml").exists() else {}
    tests: dict[str, dict] = {}
    for line in (folder / "reports.jsonl").read_text().splitlines():
        report = json.loads(line)
        test = tests.setdefault(report["test"], {"seconds": 0.0, "outcome": "passed"})
        test["seconds"] += report["seconds"]
        test["worker"], test["end"] = report["worker"], report["end"]
        if "cpu_s" in report:  # on the teardown line (suite_time_log.tree_cpu_seconds)
            test["cpu_s"] = report["cpu_s"]
        if report["outcome"] != "passed" and test["outcome"] == "passed":
            # a skip (pytest.skip / skipif) is reported at setup; any other non-pass there is an error
            setup_only = report["when"] != "call" and report["outcome"] != "skipped"
            test["outcome"] = "error" if setup_only else report["outcome"]
    return tests


def module_sums(folder: Path, key: str = "seconds") -> dict[str, float]:
    """Test module path -> the summed ``key`` of its tests (``seconds``: wall; ``cpu_s``: the CPU
    seconds of their process trees, which runs recorded before the plugin measured them lack),
    most first."""
    modules: dict[str, float] = defaultdict(float)
    for test, report in test_reports(folder).items():
        if key in report:
            modules[test.split("::")[0]] += report[key]
    return dict(sorted(((m, round(s, 1)) for m, s in modules.items()), key=lambda i: -i[1]))


def module_seconds(folder: Path) -> dict[str, float]:
    """Test module path -> summed seconds of its tests, slowest first."""
    return module_sums(folder, "seconds")


def folder_sums(modules: dict[str, float]) -> dict[str, float]:
    """Module sums (:func:`module_sums`) per test folder (``tests/workflow``; ``tests`` for the
    top-level modules), most first."""
    folders: dict[str, float] = defaultdict(float)
    for module, value in modules.items():
        folders[str(Path(module).parent)] += value
    return dict(sorted(folders.items(), key=lambda item: -item[1]))


def cpu_table(folder: Path) -> list[str]:
    """The modules that cost the most CPU, with their summed wall seconds beside it: a module whose
    wall seconds far exceed its CPU seconds waits (for SLURM's polling, a sleep), one near them works."""
    cpu, wall = module_sums(folder, "cpu_s"), module_seconds(folder)
    if not cpu:
        return []
    total = sum(cpu.values())
    return [
        f"Summed CPU seconds of the tests' process trees (`suite_time_log.tree_cpu_seconds`, setup to"
        f" teardown; not the SLURM test's jobs, which slurmd runs): **{total / 60:.1f} min**.",
        "",
        f"| most CPU: {TOP_MODULES} modules | CPU seconds | summed test seconds |",
        "|---|---|---|",
        *(f"| {m} | {s:.0f} | {wall.get(m, 0.0):.0f} |" for m, s in list(cpu.items())[:TOP_MODULES]),
        "",
        "| test folder | CPU seconds | share |",
        "|---|---|---|",
        *(
            f"| {name} | {seconds:.0f} | {seconds / total:.0%} |"
            for name, seconds in folder_sums(cpu).items()
        ),
        "",
    ]


def logged_module_seconds(log: Path) -> dict[str, float]:
    """Test module path -> summed seconds of the phases pytest's ``--durations`` lines list for it
    (``501.51s setup    tests/workflow/test_workflow.py::test_...``)."""
    modules: dict[str, float] = defaultdict(float)
    for seconds, module in re.findall(
        r"^([\d.]+)s (?:setup|call|teardown) +([^:\s]+)::", log.read_text(), re.M
    ):
        modules[module] += float(seconds)
    return {module: round(seconds, 1) for module, seconds in modules.items()}


def simulated_wall(modules: list[list[float]], workers: int = 2) -> float:
    """When the last worker would finish the modules (each a list of its tests' seconds), handed out
    in this order as pytest-xdist's loadfile scheduler does: one module per worker at the start, the
    next to a worker whose pending tests drop to 2 or fewer. A model: each test keeps the seconds it
    took in the measured run, whatever else runs beside it."""
    queue = [list(tests) for tests in modules if tests]
    pending: list[list[float]] = [[] for _ in range(workers)]
    clock = [0.0] * workers
    for worker in range(workers):
        if queue:
            pending[worker] += queue.pop(0)
    for worker in range(workers):
        if queue and len(pending[worker]) <= 2:
            pending[worker] += queue.pop(0)
    while any(pending):
        worker = min((w for w in range(workers) if pending[w]), key=lambda w: clock[w] + pending[w][0])
        clock[worker] += pending[worker].pop(0)
        if queue and len(pending[worker]) <= 2:
            pending[worker] += queue.pop(0)
    return max(clock)


def schedules(folder: Path) -> list[str]:
    """The modelled wall time of the run's tests in xdist's default order (modules by their number
    of tests, most first) and slowest module first (tests/conftest.py with tests/module_seconds.json)."""
    by_module: dict[str, list[float]] = defaultdict(list)
    for test, report in test_reports(folder).items():
        by_module[test.split("::")[0]].append(report["seconds"])
    paths = sorted(by_module)
    by_count = sorted(paths, key=lambda m: -len(by_module[m]))
    slowest_first = sorted(paths, key=lambda m: -sum(by_module[m]))
    walls = {
        name: simulated_wall([by_module[m] for m in order])
        for name, order in (
            ("by number of tests (xdist's default)", by_count),
            ("slowest module first", slowest_first),
        )
    }
    return [
        "- modelled wall time of these tests on 2 workers (`simulated_wall`: xdist's hand-out, each test"
        " at its measured seconds): "
        + "; ".join(f"{name}: {wall / 60:.1f} min" for name, wall in walls.items())
        + ".",
    ]


def progress(log: Path) -> str:
    """How far a run without test reports (killed: no junit XML) got, from pytest's progress dots."""
    text = log.read_text()
    items = re.search(r"\[(\d+) items\]", text)
    after = text[items.end() :] if items else ""
    done = sum(len(re.sub(r"\s*\[\s*\d+%\]", "", line)) for line in after.splitlines() if line.strip())
    total = int(items.group(1)) if items else 0
    return f"- no test reports (killed before pytest wrote them): progress: {done} of {total} tests."


def logged_table(log: Path) -> list[str]:
    """A table of the module seconds in another run's ``--durations`` lines (a lower bound each)."""
    rows = sorted(logged_module_seconds(log).items(), key=lambda item: -item[1])
    return [
        f"## The slowest phases of {log.name} (pytest's --durations lines, summed per module: a lower bound)",
        "",
        "| module | seconds |",
        "|---|---|",
        *(f"| {module} | {seconds:.0f} |" for module, seconds in rows),
        "",
    ]


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")


def describe(folder: Path) -> list[str]:
    """One run's section of the report."""
    meta = json.loads((folder / "meta.json").read_text())
    tests = test_reports(folder)
    outcomes: dict[str, int] = defaultdict(int)
    last: dict[str, float] = defaultdict(float)
    for report in tests.values():
        outcomes[report["outcome"]] += 1
        if "end" in report:
            last[report["worker"]] = max(last[report["worker"]], report["end"] - meta["started"])
    total = sum(report["seconds"] for report in tests.values())
    loads = meta["load_samples"] or [meta["load_start"]]
    wall = meta.get("wall_s", 0.0)
    slowest = sorted(tests.items(), key=lambda item: -item[1]["seconds"])[:TOP_TESTS]
    if meta.get("returncode") in COMPLETE:
        ending = f"{meta.get('load_end', loads[-1]):.1f} at the end"
        timing = [
            f"- wall time: **{wall / 60:.1f} min** ({wall:.0f} s); sum of per-test durations (setup + call + "
            f"teardown): **{total / 60:.1f} min** ({total:.0f} s).",
            f"- CPU time of pytest and the processes it waited for: **{meta['cpu_s'] / 60:.1f} min** "
            f"({meta['cpu_s'] / wall:.2f} cores busy on average).",
        ]
    else:
        ending = f"{loads[-1]:.1f} at the last sample"
        timing = [
            f"- **stopped unfinished** after {wall / 60:.1f} min ({wall:.0f} s), the load above:"
            f" {len(tests)} tests reported,"
            f" their durations summing to {total / 60:.1f} min ({total:.0f} s).",
        ]
    lines = [
        f"## {meta['label']} (commit {meta['commit']})",
        "",
        f"`{meta['command']}`",
        "",
        f"- CPU: {meta['cpu']}; {meta['cores']} logical cores.",
        f"- 1-min load average: {meta['load_start']:.1f} at the start, {ending}, median {_median(loads):.1f}"
        f" (max {max(loads):.1f}) of {len(meta['load_samples'])} samples 15 s apart.",
        *timing,
        "- each worker's last test ended at: "
        + (
            ", ".join(f"{worker} {end / 60:.1f} min" for worker, end in sorted(last.items()))
            or "(not recorded)"
        )
        + " after the start.",
        f"- tests: {', '.join(f'{n} {k}' for k, n in sorted(outcomes.items())) or 'none reported'}; "
        f"pytest's exit status {meta.get('returncode', '(none: still running or killed)')}.",
        *([] if tests else [progress(folder / "pytest.log")]),
        *(schedules(folder) if tests else []),
        "",
        f"| slowest {TOP_MODULES} modules | summed test seconds |",
        "|---|---|",
        *(f"| {m} | {s:.0f} |" for m, s in list(module_seconds(folder).items())[:TOP_MODULES]),
        "",
        *cpu_table(folder),
        f"| slowest {TOP_TESTS} tests | seconds (setup + call + teardown) | CPU seconds | outcome |",
        "|---|---|---|---|",
        *(
            f"| {test} | {report['seconds']:.1f} | {report.get('cpu_s', float('nan')):.1f}"
            f" | {report['outcome']} |"
            for test, report in slowest
        ),
        "",
    ]
    return (
        lines if tests else lines[: lines.index(f"| slowest {TOP_MODULES} modules | summed test seconds |")]
    )


def compare(first: Path, second: Path) -> list[str]:
    """Per module, the summed seconds of two runs, for the modules whose every test of the first
    run was reported by the second (all of them, unless the second was stopped early)."""
    before, after = test_reports(first), test_reports(second)
    modules: dict[str, list[str]] = defaultdict(list)
    for test in before:
        modules[test.split("::")[0]].append(test)
    rows = []
    for module, module_tests in modules.items():
        if all(test in after for test in module_tests):
            seconds = [sum(run[test]["seconds"] for test in module_tests) for run in (before, after)]
            rows.append((module, *seconds))
    rows.sort(key=lambda row: -row[1])
    totals = [sum(row[i] for row in rows) for i in (1, 2)]
    return [
        f"## Per module: {first.name} vs {second.name}",
        "",
        f"{len(rows)} of {len(modules)} modules had every test reported in both runs; their summed durations:"
        f" {totals[0] / 60:.1f} min vs {totals[1] / 60:.1f} min ({totals[1] / max(totals[0], 1e-9):.2f}x).",
        "",
        f"| module | {first.name} (s) | {second.name} (s) | ratio |",
        "|---|---|---|---|",
        *(f"| {m} | {b:.0f} | {a:.0f} | {a / b:.2f} |" for m, b, a in rows[:TOP_MODULES] if b > 0),
        "",
    ]


def report(folders: list[Path], out: str | None, durations_log: Path | None = None) -> None:
    heading = [
        "# Test suite time",
        "",
        f"Generated by `python benchmarks/suite_time.py report {' '.join(f.name for f in folders)}"
        + (f" --durations-log {durations_log.name}`" if durations_log else "`")
        + " from each run's test reports and load samples (`suite_time.py run`). The machine is shared:",
        "compare the sums of per-test durations and the CPU times as well as the wall times, and read",
        "each run's load beside it.",
        "",
    ]
    sections = [line for folder in folders for line in describe(folder)]
    if len(folders) == 2:
        sections += compare(*folders)
    if durations_log:
        sections += logged_table(durations_log)
    emit("\n".join(heading + sections), out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run the suite once, recording times and load")
    run_parser.add_argument("--label", required=True)
    run_parser.add_argument("--out", type=Path, required=True)
    run_parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: pytest's arguments")
    report_parser = commands.add_parser("report", help="tabulate recorded runs")
    report_parser.add_argument("folders", nargs="+", type=Path)
    report_parser.add_argument("--out")
    report_parser.add_argument("--durations-log", type=Path, help="pytest output with --durations lines")
    costs_parser = commands.add_parser("costs", help="write a run's seconds per module for tests/conftest.py")
    costs_parser.add_argument("folder", type=Path, nargs="?", help="a recorded run (optional)")
    costs_parser.add_argument("--durations-log", type=Path, help="pytest output with --durations lines")
    costs_parser.add_argument("--out", type=Path, default=REPO / "tests" / "module_seconds.json")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.label, args.out, [a for a in args.pytest_args if a != "--"])
    elif args.command == "report":
        report(args.folders, args.out, args.durations_log)
    else:
        costs = module_seconds(args.folder) if args.folder else {}
        if args.durations_log:
            for module, seconds in logged_module_seconds(args.durations_log).items():
                costs[module] = max(costs.get(module, 0.0), seconds)
        ordered = dict(sorted(costs.items(), key=lambda item: -item[1]))
        args.out.write_text(json.dumps(ordered, indent=1) + "\n")


if __name__ == "__main__":
    main()
