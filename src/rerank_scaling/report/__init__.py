"""Report stage: the figures and the summary with its scaling evidence.

Entry point: :mod:`.write_report`.
"""
