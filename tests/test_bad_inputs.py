"""The README's table of bad inputs is what the checks say now: every row is run and must fail."""

from __future__ import annotations

import re

import pytest
from bad_inputs import CASES, message, table
from conftest import REPO


@pytest.mark.parametrize("case", CASES, ids=[case.what for case in CASES])
def test_every_bad_input_gets_a_message_naming_the_field_or_file(case):
    text = message(case)
    field = r"\b(dataset|retrieval|examples|models|training|evaluation|fitting)(\.\w+|\[\d+\])+"
    file_line = r"…/\S+:(\d+:)? "
    option = r"^rerank-scaling \w+: --[a-z][a-z-]+ "
    named = re.search(field, text) or re.search(file_line, text) or re.search(option, text)
    assert "config field '" in text or named, text


def test_the_readme_table_is_current():
    readme = (REPO / "README.md").read_text()
    shown = re.search(r"<!-- bad-inputs:begin -->\n(.*?)<!-- bad-inputs:end -->", readme, re.S)
    assert shown, "README.md lost its bad-inputs table markers"
    assert shown.group(1) == table(), "regenerate the table: python tests/bad_inputs.py"
