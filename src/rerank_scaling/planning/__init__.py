"""Plan stage: cost profiles, budget allocation (seed 001 eq. 11) and ROI-constrained choice
(seed 003 eqs. 5-6) from the fitted joint law.

Entry point: :mod:`.plan`.
"""
