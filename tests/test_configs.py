"""Every shipped config loads, resolves and builds the model it describes."""
from pathlib import Path

import pytest
import yaml

from config import Config, from_dict, load_config, to_dict
from model.gpt import GPT
from train import resolve

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_resolves(path):
    # A fine-tune's base run (or hf: checkpoint) is not on a fresh clone: it resolves on its own, with the
    # original length its base would supply stated.
    raw = yaml.safe_load(path.read_text())
    overrides = ["train.init_from=null", "model.position.scaling.original_max_position_embeddings="
                 f"{raw['model']['max_seq_len'] // 4}"] if raw.get("train", {}).get("init_from") else []
    cfg = resolve(load_config(Config, path, overrides))
    # What train.py writes as config.yaml reads back as the same config.
    assert from_dict(Config, yaml.safe_load(yaml.safe_dump(to_dict(cfg)))) == cfg


def test_named_sizes():
    sizes = {}
    for name in ("tiny", "minimind-26m", "gpt2-124m"):
        cfg = resolve(load_config(Config, CONFIGS[0].parent / f"{name}.yaml"))
        sizes[name] = GPT(cfg.model).num_params()
    assert sizes["tiny"] == pytest.approx(1.31e6, rel=0.01)
    assert sizes["minimind-26m"] == pytest.approx(25.8e6, rel=0.05)  # MiniMind2-Small: 26M
    assert sizes["gpt2-124m"] == pytest.approx(110e6, rel=0.1)  # GPT-2 small without its 50k vocab
