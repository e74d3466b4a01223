"""The summary's data-check lines: each count the prepare_data stage recorded becomes a warning."""

from rerank_scaling.report.summary import data_check_lines


def _row(**changed):
    row = {
        "split": "test",
        "queries": 225,
        "judged_queries": 225,
        "judgements": 1837,
        "unknown_documents": 0,
        "unknown_queries": 0,
        "dropped_share": 0.0,
        "judged_empty_documents": 0,
    }
    return {**row, **changed}


def test_judged_documents_without_text_are_a_warning_in_the_summary():
    lines = data_check_lines({"splits": [_row(judged_empty_documents=2)]})
    assert any("2 relevant judgements name documents without text" in line for line in lines), lines


def test_a_clean_split_gets_its_table_and_no_warning():
    lines = data_check_lines({"splits": [_row()]})
    assert not any("Warning" in line for line in lines), lines
