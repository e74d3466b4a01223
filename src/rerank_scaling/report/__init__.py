"""Report stage: the answer first (question, forecasts, verdict, one figure), then the figures and
the summary with its scaling evidence.

Entry points: :mod:`.answer_page` (the answer) and :mod:`.write_report` (figures and summary).
"""
