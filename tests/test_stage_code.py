"""The code inputs of each stage, derived from the imports: what they hold and what they leave out,
and the digest file that stands for them (what changes it and what does not).

tests/workflow/test_workflow.py checks the same on Snakemake's own plan of the real DAG (slow); these check
the derivation itself, on the library and on a small made-up package.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest
from conftest import REPO

from rerank_scaling.stage_code import (
    module_digest,
    record_stage_digest,
    running_code_digest,
    stage_code,
    stage_digest,
)

SOURCE = REPO / "src"


def code(entry: str) -> set[str]:
    """The stage's code as paths inside the package."""
    return {
        Path(path).relative_to(SOURCE / "rerank_scaling").as_posix() for path in stage_code(entry, SOURCE)
    }


def rule_blocks() -> list[str]:
    """Every rule (and `use rule`) of the rule files, as text."""
    blocks = []
    for path in sorted((REPO / "rules").glob("*.smk")):
        blocks += re.split(r"\n(?=(?:use )?rule )", path.read_text())
    return blocks


def test_training_code_holds_the_sparse_encoder_and_the_extension():
    """Imported inside functions (windowed runs only), they still count: editing them re-runs training."""
    assert {
        "training/train.py",
        "training/trainer.py",
        "training/checkpoint_store.py",
        "families/models.py",
        "training/schedule.py",
        "training/sparse_encoder.py",
        "training/window_attention.py",
        "training/window_pattern.py",
        "training/window_ops.py",
        "training/window_masked.py",
        "compute/extension_build.py",
        "hub/cache.py",
        "atomic.py",
    } <= code("training.train")


def test_a_kernel_edit_changes_the_code_of_the_stages_that_build_it(tmp_path):
    """The C++ of kernels/ is code of every stage that imports the module building it (training,
    evaluation, and planning, whose cost profiles time the evaluation's fused encoder), whose digests
    change with any byte of it; a stage that never builds it (the fit) keeps its own."""
    import shutil

    checkout = tmp_path / "checkout"
    shutil.copytree(SOURCE, checkout / "src")
    shutil.copytree(REPO / "kernels", checkout / "kernels")
    stages = ("training.train", "evaluation.evaluate", "planning.plan", "forecast.fit_stage")
    before = {stage: stage_digest(stage, checkout / "src") for stage in stages}
    assert "kernels/window_attention/cpu/packed_attention_cpu.cpp" in before["evaluation.evaluate"]
    assert "kernels/" not in before["forecast.fit_stage"]
    kernel = checkout / "kernels" / "window_attention" / "cpu" / "packed_attention_cpu.cpp"
    kernel.write_text(kernel.read_text().replace("kRows = 4", "kRows = 2"))
    after = {stage: stage_digest(stage, checkout / "src") for stage in stages}
    assert after["training.train"] != before["training.train"]
    assert after["evaluation.evaluate"] != before["evaluation.evaluate"]
    assert after["planning.plan"] != before["planning.plan"]
    assert after["forecast.fit_stage"] == before["forecast.fit_stage"]


def test_a_report_only_module_is_code_of_the_report_alone():
    only_report = {"report/scaling_evidence.py", "report/write_report.py"}
    assert only_report <= code("report.write_report")
    others = (
        "training.train",
        "evaluation.evaluate",
        "evaluation.merge_metrics",
        "forecast.fit_stage",
        "planning.plan",
    )
    for entry in others:
        assert not only_report & code(entry), entry


def test_the_examples_job_checks_its_steps_without_depending_on_the_later_stages():
    """The step check it shares with the parse-time checks sits in the objective registry, below the
    data floor (registries/objectives.py); the workflow layer, which reaches into every family, is no
    stage's code."""
    examples = code("data.build_examples")
    assert "registries/objectives.py" in examples
    assert not {
        path
        for path in examples
        if path.startswith(("evaluation/", "laws/", "report/", "planning/", "training/", "workflow/"))
    }


def test_stages_of_one_family_have_their_own_code():
    """Editing the merge re-runs no evaluation job, and the reverse."""
    assert "evaluation/checkpoints.py" not in code("evaluation.merge_metrics")
    assert "evaluation/merge_metrics.py" not in code("evaluation.evaluate")
    assert "data/bm25.py" not in code("data.prepare_data")


def test_figures_drawn_by_other_stages_are_their_code():
    # the calibration figure, imported where drawn, and the shared plotting helpers below the stages
    assert {"laws/calibration_figure.py", "plotting.py"} <= code("forecast.fit_stage")
    plotted_and_costed = {
        "plotting.py",
        "planning/encoder_flops.py",
        "planning/measured_profiles.py",
        "families/models.py",
        "laws/forms.py",
    }
    assert plotted_and_costed <= code("planning.plan")
    for entry in ("forecast.fit_stage", "planning.plan"):  # no stage reaches into the report stage's figures
        assert "report/figures.py" not in code(entry), entry


def test_every_rule_lists_the_code_of_the_module_its_shell_runs():
    called = {}
    for block in rule_blocks():
        entries = re.findall(r'stage_code_digest\("([\w.]+)"\)', block)
        # rules call rerank_python (training, scoring: rerank_python_exec), shell functions of common.smk
        modules = re.findall(r"python(?:_exec)? -m rerank_scaling\.([\w.]+)", block)
        if modules:
            assert entries == modules[:1], block[:200]
            called[modules[0]] = block
    # 10 + split_texts, split_tokens, answer_page, annotation_examples, fraction_check, annotation_files,
    # evaluate_bundle
    assert len(called) == 18
    for entry in called:
        files = stage_code(entry, SOURCE)
        assert str(SOURCE / "rerank_scaling" / f"{entry.replace('.', '/')}.py") in files
        assert all(Path(path).is_file() for path in files)


def test_package_inits_hold_only_a_docstring():
    """They are left out of the stage code, so they must not hold code (the version aside)."""
    for path in sorted((SOURCE / "rerank_scaling").rglob("__init__.py")):
        body = ast.parse(path.read_text()).body
        assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), path
        version = [
            node for node in body[1:] if isinstance(node, ast.Assign) and node.targets[0].id == "__version__"
        ]
        assert len(body) == 1 + len(version), (
            f"{path}: code in a package __init__ would not count as any stage's code"
        )


@pytest.fixture
def package(tmp_path):
    """rerank_scaling with a shared module, a family with an entry point, and another family."""
    files = {
        "__init__.py": '"""Top."""\n',
        "shared.py": "def check():\n    from rerank_scaling.other import helper\n",
        "other/__init__.py": '"""Other."""\n',
        "other/unused.py": "",
        "other/helper.py": "",
        "fam/__init__.py": '"""Family."""\n',
        "fam/entry.py": (
            "from rerank_scaling import shared\n"
            "from rerank_scaling.other import helper as h\n"
            "from .part import thing\n\n"
            "def main():\n    from rerank_scaling.fam import optional\n"
        ),
        "fam/part.py": "from . import deep\nthing = 1\n",
        "fam/deep.py": "import rerank_scaling.shared\n",
        "fam/optional.py": "",
        "fam/unimported.py": "",
    }
    for name, text in files.items():
        path = tmp_path / "rerank_scaling" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_imports_are_followed_relative_nested_and_across_families(package):
    files = stage_code("fam.entry", package)
    assert [Path(path).relative_to(package / "rerank_scaling").as_posix() for path in files] == [
        "fam/deep.py",
        "fam/entry.py",
        "fam/optional.py",
        "fam/part.py",
        "other/helper.py",
        "shared.py",
    ]


def test_a_module_that_does_not_exist_fails_at_parse_time(package):
    (package / "rerank_scaling" / "fam" / "entry.py").write_text("from rerank_scaling.nowhere import x\n")
    with pytest.raises(FileNotFoundError, match="rerank_scaling.nowhere"):
        stage_code("fam.entry", package)


def test_the_package_reads_docstrings_only_into_help_texts():
    """The code digests leave docstrings out: no output may depend on one (module_digest)."""
    for path in sorted((SOURCE / "rerank_scaling").rglob("*.py")):
        text = path.read_text()
        for use in re.finditer(r"[\w.]*__doc__|getdoc", text):
            line = text[text.rfind("\n", 0, use.start()) + 1 : text.find("\n", use.end())]
            assert re.search(r"description=__doc__\b", line), f"{path}: {line.strip()}"


MODULE = '''"""A module."""

import math


def area(radius: float) -> float:
    """The disc's area."""
    return math.pi * radius**2  # pi r^2
'''


@pytest.mark.parametrize(
    ("edit", "same"),
    [
        (lambda text: text + "\n# a comment\n", True),
        (lambda text: text.replace("The disc's area.", "Area of the disc (Euclid XII.2)."), True),
        (lambda text: text.replace('"""A module."""', '"""A module,\n\nnow with more words."""'), True),
        (lambda text: text.replace("radius**2", "radius ** 2").replace("\n\n\ndef", "\n\ndef"), True),
        (lambda text: text.replace('    """The disc\'s area."""\n', ""), True),
        (lambda text: text.replace("radius**2", "radius**3"), False),
        (lambda text: text + "\nLIMIT = 1\n", False),
        (lambda text: text.replace("import math", "import math\nimport os"), False),
    ],
    ids=[
        "comment",
        "docstring",
        "module docstring",
        "layout",
        "docstring removed",
        "code",
        "a new name",
        "import",
    ],
)
def test_a_module_digest_changes_with_code_not_with_comments_docstrings_or_layout(tmp_path, edit, same):
    path = tmp_path / "module.py"
    path.write_text(MODULE)
    before = module_digest(path)
    path.write_text(edit(MODULE))
    os.utime(path, ns=(1, 1))  # another version of the file for the per-process cache, whatever the clock
    assert (module_digest(path) == before) is same


def test_the_digest_file_is_rewritten_only_when_the_code_changes(package, tmp_path):
    out = tmp_path / "code"
    digest = record_stage_digest("fam.entry", out, package)
    assert digest.name == "fam.entry.code"
    lines = digest.read_text().splitlines()
    assert [line.split("  ")[1] for line in lines] == [
        Path(path).relative_to(package).as_posix() for path in stage_code("fam.entry", package)
    ]
    os.utime(digest, ns=(1, 1))
    part = package / "rerank_scaling" / "fam" / "part.py"
    part.write_text(part.read_text() + "# a comment\n")
    assert record_stage_digest("fam.entry", out, package).stat().st_mtime_ns == 1, "no change: not rewritten"
    part.write_text(part.read_text() + "other = 2\n")
    assert record_stage_digest("fam.entry", out, package).stat().st_mtime_ns > 1
    assert digest.read_text() != "\n".join(lines) + "\n"


def test_a_digest_can_leave_modules_out(package):
    """What the evaluation's scores cache keys by: its stage's code without the metrics."""
    whole = stage_digest("fam.entry", package)
    without = stage_digest("fam.entry", package, leave_out=("fam.optional",))
    assert "fam/optional.py" in whole and "fam/optional.py" not in without
    assert without.splitlines() == [line for line in whole.splitlines() if "fam/optional.py" not in line]


def test_the_running_code_digest_is_the_installed_packages_stage_digest():
    """The digest the trainer's state and the evaluation caches carry: of the package this process
    imports (here the checkout's src), leaving out what it is told to."""
    import hashlib

    import rerank_scaling

    source = Path(rerank_scaling.__file__).resolve().parent.parent
    for leave_out in ((), ("evaluation.metrics",)):
        text = stage_digest("evaluation.evaluate", source, leave_out)
        expected = hashlib.sha256(text.encode()).hexdigest()
        assert running_code_digest("evaluation.evaluate", leave_out) == expected
    assert running_code_digest("evaluation.evaluate") != running_code_digest(
        "evaluation.evaluate", ("evaluation.metrics",)
    )


def test_a_parsed_module_is_kept_by_its_bytes_for_later_processes(tmp_path, monkeypatch):
    """What a module's parse gave (digest, imports) is kept under the cache folder by the hash of the
    module's bytes (and of the reader's code): a later process reads it there instead of parsing;
    an edit is other bytes, so other code never gets an old entry; a broken entry is parsed again."""
    from rerank_scaling import stage_code as module

    def fresh_process() -> None:  # the per-process caches forgotten, as in a new Snakemake start
        module._parsed.cache_clear()
        module._package_imports.cache_clear()

    monkeypatch.setenv("RERANK_SCALING_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "module.py"
    path.write_text(MODULE)
    digest = module_digest(path)
    (entry,) = (tmp_path / "cache" / "stage-code").rglob("*.json")
    parsed = json.loads(entry.read_text())
    assert parsed["digest"] == digest and parsed["imports"] == [[False, 0, "", ["math"], False]]

    entry.write_text(json.dumps({**parsed, "digest": "kept"}))
    fresh_process()
    assert module_digest(path) == "kept", "a later process reads the entry, not the file's syntax tree"
    path.write_text(MODULE.replace("radius**2", "radius**3"))
    os.utime(path, ns=(1, 1))
    fresh_process()
    assert module_digest(path) not in ("kept", digest), "edited bytes: another entry, parsed afresh"

    path.write_text(MODULE)
    os.utime(path, ns=(2, 2))
    entry.write_text("{broken")
    fresh_process()
    assert module_digest(path) == digest and json.loads(entry.read_text())["digest"] == digest


def test_stage_code_without_a_writable_cache_still_reads_the_code(package, tmp_path, monkeypatch):
    """A cache folder that cannot be made (here under a file) costs the parse, not the run."""
    from rerank_scaling import stage_code as module

    monkeypatch.setenv("RERANK_SCALING_CACHE", str(tmp_path / "cache"))
    expected = stage_digest("fam.entry", package)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("RERANK_SCALING_CACHE", str(tmp_path / "file" / "cache"))
    module._parsed.cache_clear()
    module._package_imports.cache_clear()
    module.stage_modules.cache_clear()
    assert stage_digest("fam.entry", package) == expected and "fam/optional.py" in expected
