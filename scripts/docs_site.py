"""Build hooks of the docs site (``mkdocs.yml``: ``hooks``): the generated files join the site as they are.

The benchmarks' reports (``benchmarks/results/*``) and the README's figures (``results/figures/``)
live outside ``docs/``, where the scripts that generate them write. Rather than copies that could
drift, the build adds those files to the site unchanged (:func:`on_files`), and a page links them by
their path from the repository root, ``../benchmarks/results/NAME.md``, which also works when the
page is read on a code host; :func:`on_page_markdown` points those links, and every
`` `benchmarks/results/NAME.md` `` named in prose, at the site's copy. The benchmarks page lists
every report there is (its ``<!-- benchmark-reports -->`` line), so a new report needs no edit.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
#: Folders of generated files the site shows as they are, relative to the repository root.
GENERATED = {"benchmarks/results": "*", "results/figures": "readme_*.png"}
REPORTS_LINE = "<!-- benchmark-reports -->"
REPO_LINK = re.compile(r"\]\(\.\./((?:benchmarks/results|results/figures)/[^)#\s]+)")
NAMED_REPORT = re.compile(r"(?<!\[)`(benchmarks/results/[\w.-]+\.md)`")


def generated_files() -> list[str]:
    """Every generated file the site shows, as a path from the repository root."""
    return sorted(
        str(path.relative_to(REPO))
        for folder, pattern in GENERATED.items()
        for path in (REPO / folder).glob(pattern)
        if path.is_file()
    )


def on_config(config):
    """The benchmark reports join the navigation, one entry each, in name order."""
    reports = [path for path in generated_files() if path.endswith(".md")]
    config.nav.append({"Benchmark reports": reports})
    return config


def on_files(files: Files, config) -> Files:
    for path in generated_files():
        files.append(File.generated(config, path, abs_src_path=str(REPO / path)))
    return files


def relative(target: str, page_uri: str) -> str:
    """``target`` (a site path) as a link from the page at ``page_uri``."""
    depth = page_uri.count("/")
    return "../" * depth + target


def link_prose(markdown: str, page_uri: str) -> str:
    """Backticked report paths in prose become links; code blocks are left as written."""
    out, fenced = [], False
    for line in markdown.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and not line.startswith("    "):
            line = NAMED_REPORT.sub(lambda m: f"[`{m[1]}`]({relative(m[1], page_uri)})", line)
        out.append(line)
    return "".join(out)


def report_list(page_uri: str) -> str:
    reports = [path for path in generated_files() if path.startswith("benchmarks/results/")]
    return "\n".join(f"* [`{path}`]({relative(path, page_uri)})" for path in reports)


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    uri = page.file.src_uri
    if uri.startswith("benchmarks/results/"):
        note = f"*Generated report `{uri}`, shown as committed (the command that writes it is in it).*"
        return f"{note}\n\n{markdown}"
    markdown = REPO_LINK.sub(lambda m: "](" + relative(m[1], uri), markdown)
    markdown = markdown.replace(REPORTS_LINE, report_list(uri))
    return link_prose(markdown, uri)
