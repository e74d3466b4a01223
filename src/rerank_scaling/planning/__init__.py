"""Plan stage: cost profiles, budget allocation (Fang et al., Scaling Laws for Dense Retrieval eq. 11) and
ROI-constrained choice (Scaling Laws for Online Advertisement Retrieval eqs. 5-6) from the fitted joint law.

Entry point: :mod:`.plan`.
"""
