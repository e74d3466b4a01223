"""The docs page's table of bad inputs is what the checks say now: every row is run and must fail."""

from __future__ import annotations

import re

import pytest
from bad_inputs import CASES, PAGE, message, shown, table


@pytest.mark.parametrize("case", CASES, ids=[case.what for case in CASES])
def test_every_bad_input_gets_a_message_naming_the_field_or_file(case):
    text = message(case)
    field = r"\b(dataset|retrieval|examples|models|training|evaluation|fitting)(\.\w+|\[\d+\])+"
    file_line = r"…/\S+:(\d+:)? "
    option = r"^rerank-scaling \w+: --[a-z][a-z-]+ "
    named = re.search(field, text) or re.search(file_line, text) or re.search(option, text)
    assert "config field '" in text or named, text


def test_the_docs_table_is_current():
    copy = shown()
    assert copy is not None, f"{PAGE} lost its bad-inputs table markers"
    assert copy == table(), (
        f"regenerate the table: python tests/bad_inputs.py {PAGE.relative_to(PAGE.parents[1])}"
    )
