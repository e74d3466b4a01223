"""Training stage: cross-encoder models, the training run and its checkpoints, the sparse
(windowed-attention) encoder and the compiled extension's Python side.

Entry point: :mod:`.train`.
"""
