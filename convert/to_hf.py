"""Export a run to a Hugging Face Llama (Qwen2, Gemma 3) directory that transformers loads with no custom code.

    python -m convert.to_hf runs/tiny exports/tiny

Writes config.json (`LlamaForCausalLM`, `Qwen2ForCausalLM` for a model with q/k/v biases, or `Gemma3ForCausalLM`
for a model of Gemma 3's layout, hf/weights.py's is_gemma: q/k and post norms, GeGLU, layer types),
generation_config.json, model.safetensors, and the tokenizer: a run trained here gets tokenizer.json +
tokenizer_config.json made from its sentencepiece model (plus tokenizer.model for sentencepiece users); a run
converted from a pretrained checkpoint, or fine-tuned from one, gets its own tokenizer files back. Then
`AutoModelForCausalLM.from_pretrained(OUT_DIR)` and `AutoTokenizer.from_pretrained(OUT_DIR)` reproduce our
logits and token ids.

How our model maps onto Llama, exactly in float32 (hf/weights.py holds the mapping, both ways):
  - Llama does not scale its input embeddings; this repo's own models multiply them by sqrt(d_model) while the
    tied output projection uses the plain matrix. So the export unties them: embed_tokens holds the
    scaled matrix, lm_head the plain one. (A converted model does not scale them and stays as it came.)
  - We rotate interleaved pairs (0,1), (2,3), ... of a head; Llama rotates half-split pairs
    (i, i + d/2). Permuting the q and k output rows of each head to [0, 2, ..., d-2, 1, 3, ..., d-1]
    turns one into the other, and q.k scores do not change since both get the same permutation.
  - RoPE scaling goes to `rope_parameters` (transformers >= 5) and `rope_scaling` (4.x), with
    max_position_embeddings = the original length as in Hugging Face's scaled checkpoints
    (hf/rope.py's `rope_settings`, which loading hf:PATH with a scaling uses too); static NTK becomes
    plain RoPE with theta' = theta * s^(d/(d-2)).
  - A Gemma 3 run gets its layer types, a RoPE per layer type (rope_parameters: full_attention, sliding_attention)
    with the scaling on the layer types it acts on (scaling.layers), its window and query_pre_attn_scalar, and its
    norm weights unfolded to Gemma's (1 + w) form.
The tokenizer of a run trained here prepends BOS by default (`add_special_tokens=True`), as every training
document and generate.py's prompts begin with it; `add_special_tokens=False` gives exactly `Tokenizer.encode(text)`.
Learned, sinusoidal, ALiBi and NoPE models have no Llama equivalent and are refused (exit code 2).
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from checkpoint import atomic_write, atomic_write_text, load_model, load_tokenizer, model_config, pretrained_tokenizer
from config import ArgumentParser, ModelConfig, ScalingConfig, UserError, run_cli
from convert.tokenizer import tokenizer_config, tokenizer_json
from model.gpt import GPT
from model.rope import SCALINGS
from hf.checkpoints import is_hf
from hf.weights import is_gemma, to_transformers
from hf.rope import layer_rope_settings, rope_settings
from model.positions import scaled_layers

# transformers has a rope_type for these; static NTK is plain RoPE with a larger base. A dynamic scaling
# is not exported: transformers caches keys rotated at the length they were computed, this repo
# re-rotates the whole cache, so the two would decode differently past L.
EXPORTABLE_SCALINGS = ("ntk", *(name for name, method in SCALINGS.items() if method.hf_name and not method.dynamic))


def scaling_kind(scaling: ScalingConfig | None) -> str:
    return scaling.type if scaling else "none"


def check_exportable(cfg: ModelConfig) -> None:
    if cfg.position.type != "rope":
        raise UserError(f"cannot export a model with {cfg.position.type!r} positions: transformers' Llama has "
                        f"rotary positions only (learned, sinusoidal, alibi, t5, kerple, fire, fox and nope cannot be "
                        f"expressed)")
    if is_gemma(cfg):
        check_gemma(cfg)
    else:
        check_llama(cfg)
    if cfg.position.kept_frequencies != 1:
        raise UserError(f"cannot export p-RoPE (model.position.kept_frequencies={cfg.position.kept_frequencies:g}): "
                        "transformers' Llama rotates every frequency")
    if cfg.position.rotary_fraction != 1:
        raise UserError(f"cannot export partial RoPE (model.position.rotary_fraction="
                        f"{cfg.position.rotary_fraction:g}): transformers' Llama rotates every head dimension")
    kind = scaling_kind(cfg.position.scaling)
    if kind in SCALINGS and SCALINGS[kind].dynamic:
        raise UserError(f"RoPE scaling {kind!r} is not exported: transformers would decode it differently past L "
                        f"(it keeps keys rotated at the length they were computed); only static scalings export: "
                        f"{', '.join(EXPORTABLE_SCALINGS)}")
    if kind not in EXPORTABLE_SCALINGS:
        raise UserError(f"RoPE scaling {kind!r} has no transformers equivalent; "
                        f"exportable: {', '.join(EXPORTABLE_SCALINGS)}")


def check_llama(cfg: ModelConfig) -> None:
    layered = {"model.position.layer_pattern": cfg.position.layer_pattern, "model.sliding_window": cfg.sliding_window,
               "model.position.nope_temperature": cfg.position.nope_temperature or None,
               "model.layer_types": cfg.layer_types}
    for key, value in layered.items():
        if value is not None:
            raise UserError(f"cannot export {key}={value}: transformers' Llama gives every layer the same full "
                            "attention and RoPE")
    gemma = {"model.mlp_activation": (cfg.mlp_activation, "silu"),
             "model.attention_scalar": (cfg.attention_scalar, None)}
    for key, (value, llama) in gemma.items():
        if value != llama:
            raise UserError(f"cannot export {key}={value} as a Llama: it is Gemma 3's, exported with Gemma 3's "
                            f"layout (model.qk_norm and model.post_norms)")


# what a model of Gemma 3's layout must have: transformers' Gemma3ForCausalLM has no option for any other value
GEMMA = {"qk_norm": True, "post_norms": True, "mlp_activation": "gelu_tanh", "scale_embeddings": True,
         "qkv_bias": False}


def check_gemma(cfg: ModelConfig) -> None:
    for key, value in GEMMA.items():
        if getattr(cfg, key) != value:
            raise UserError(f"cannot export model.{key}={getattr(cfg, key)} with Gemma 3's layout (q/k and post "
                            f"norms), which has {key}={value}")
    p = cfg.position
    for key, value in (("layer_pattern", p.layer_pattern), ("nope_temperature", p.nope_temperature or None)):
        if value is not None:
            raise UserError(f"cannot export model.position.{key}={value}: Gemma 3's layers all apply RoPE")
    if cfg.attention_scalar is not None and not float(cfg.attention_scalar).is_integer():
        raise UserError(f"cannot export model.attention_scalar={cfg.attention_scalar:g}: Gemma 3's "
                        f"query_pre_attn_scalar is a whole number")


def gemma_config(cfg: ModelConfig, scaling: ScalingConfig | None, bos_id: int | None, eos_id: int | None) -> dict:
    """config.json of a model of Gemma 3's layout: its layer types (every layer full, or every layer sliding where a
    window applies to all, for a model without them) and a RoPE per layer type."""
    types = cfg.layer_types or ["sliding_attention" if cfg.sliding_window else "full_attention"] * cfg.n_layers
    p = cfg.position
    rope, max_positions = layer_rope_settings(p.theta, p.local_theta or p.theta, cfg.head_dim, cfg.max_seq_len, scaling,
                                              scaled_layers(cfg))
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.ffn_hidden,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": int(cfg.attention_scalar or cfg.head_dim),
        "max_position_embeddings": max_positions,
        "rms_norm_eps": cfg.norm_eps,
        "rope_parameters": rope,
        "layer_types": types,
        "sliding_window": cfg.sliding_window or cfg.max_seq_len,  # transformers builds the sliding mask in any case
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_logit_softcapping": None,
        "final_logit_softcapping": None,
        "use_bidirectional_attention": False,
        "tie_word_embeddings": cfg.tie_embeddings,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "pad_token_id": None,
        "initializer_range": 0.02,
        "use_cache": True,
        "dtype": "float32",
    }


def llama_config(cfg: ModelConfig, scaling: ScalingConfig | None, bos_id: int | None, eos_id: int | None) -> dict:
    """config.json of the model: a Llama, or a Qwen2 where q, k and v have biases (Llama's attention_bias would
    add one to the output projection too)."""
    rope, legacy_scaling, max_positions = rope_settings(cfg.position.theta, cfg.head_dim, cfg.max_seq_len, scaling)
    kind = "qwen2" if cfg.qkv_bias else "llama"
    return {
        "architectures": ["Qwen2ForCausalLM" if cfg.qkv_bias else "LlamaForCausalLM"],
        "model_type": kind,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.ffn_hidden,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": max_positions,
        "rms_norm_eps": cfg.norm_eps,
        "rope_theta": rope["rope_theta"],  # transformers 4.x
        "rope_parameters": rope,
        "rope_scaling": legacy_scaling,  # transformers 4.x; version 5 also prefers it to rope_parameters
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        **({"use_sliding_window": False, "sliding_window": None} if cfg.qkv_bias else {}),
        "tie_word_embeddings": cfg.tie_embeddings and not cfg.scale_embeddings,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "initializer_range": 0.02,
        "use_cache": True,
        "dtype": "float32",
        "torch_dtype": "float32",
    }


def llama_weights(model: GPT) -> dict[str, torch.Tensor]:
    return to_transformers(model.state_dict(), model.cfg, model.embed_scale)


EXPORT_FILES = ("model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
                "tokenizer_config.json", "tokenizer.model")
# what transformers' save_pretrained may write beside a pretrained tokenizer, copied with it
TOKENIZER_EXTRAS = ("special_tokens_map.json", "chat_template.jinja", "added_tokens.json", "vocab.json", "merges.txt")


def export(run_dir: Path, out_dir: Path) -> Path:
    """Write the Hugging Face directory for the latest checkpoint of `run_dir`; returns `out_dir`."""
    if is_hf(run_dir):
        raise UserError(f"{run_dir} is a transformers checkpoint already; export takes a run directory")
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"out_dir {out_dir} is an existing file, not a directory")
    foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in EXPORT_FILES + TOKENIZER_EXTRAS) \
        if out_dir.is_dir() else []
    if foreign:  # an earlier export is replaced; anything else (a run directory, say) is never written into
        raise UserError(f"out_dir {out_dir} is not empty (it holds {foreign[0]}"
                        f"{f' and {len(foreign) - 1} more' if len(foreign) > 1 else ''}); choose a new directory")
    check_exportable(model_config(run_dir))
    tokenizer = load_tokenizer(run_dir)
    model = load_model(run_dir)
    cfg = model.cfg
    if tokenizer.vocab_size > cfg.vocab_size:
        raise UserError(f"{run_dir}: its tokenizer has {tokenizer.vocab_size} tokens but the model {cfg.vocab_size}")
    make_config = gemma_config if is_gemma(cfg) else llama_config
    config = make_config(cfg, model.position.scaling, tokenizer.bos_id, tokenizer.eos_id)
    scaled = config.get("rope_scaling") or config["rope_parameters"].get("full_attention") or {}
    context = round(config["max_position_embeddings"] * scaled.get("factor", 1.0))
    # EOS pads finished rows of a batch (and silences transformers 4.x's warning).
    generation = {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id, "pad_token_id": tokenizer.eos_id}
    out_dir.mkdir(parents=True, exist_ok=True)
    weights = llama_weights(model)
    atomic_write(out_dir / "model.safetensors", lambda tmp: save_file(weights, tmp, metadata={"format": "pt"}))
    files = {"config.json": config, "generation_config.json": generation}
    folder = pretrained_tokenizer(run_dir)
    if folder is None:  # sentencepiece, trained here
        files.update({"tokenizer.json": tokenizer_json(tokenizer.sp), "tokenizer_config.json": tokenizer_config(tokenizer.sp, context)})
        atomic_write(out_dir / "tokenizer.model", lambda tmp: shutil.copyfile(tokenizer.path, tmp))
    for name, content in files.items():
        atomic_write_text(out_dir / name, json.dumps(content, indent=2, ensure_ascii=False) + "\n")
    for path in sorted(folder.iterdir()) if folder else []:  # the pretrained tokenizer's own files
        atomic_write(out_dir / path.name, lambda tmp, path=path: shutil.copyfile(path, tmp))
    return out_dir


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="a run directory written by train.py")
    parser.add_argument("out_dir", type=Path, help="where to write the Hugging Face files")
    args = parser.parse_args(argv)
    out = run_cli(lambda: export(args.run_dir, args.out_dir))
    architecture = json.loads((out / "config.json").read_text())["architectures"][0]
    print(f"exported {args.run_dir} to {out} ({architecture})")


if __name__ == "__main__":
    main()
