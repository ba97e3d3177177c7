#!/usr/bin/env python3
"""Hugging Face PEFT's LoRA, written out in PyTorch 1.13 for the parity runs of
gpt2_torch.py and llama_torch.py (the PEFT package itself is not on these machines; the GPU
machine checks the files against it). Nothing of trident's is imported, called or read.

  math     a target linear layer y = base(x) becomes base(x) + lora_B(lora_A(x)) * scaling, with
           lora_A = Linear(in, r, bias=False), lora_B = Linear(r, out, bias=False), scaling =
           lora_alpha / r (use_rslora: lora_alpha / sqrt(r)); every parameter of the base model
           is frozen (requires_grad False), only lora_A and lora_B train (PEFT's LoraLayer with
           bias="none", no dropout).
  targets  PEFT's rule for a list: a module whose name is the target or ends with "." + target;
           a string is a regular expression matched against the whole name (re.fullmatch).
  files    adapter_config.json (LoraConfig's fields) and adapter_model.safetensors whose tensors
           are "base_model.model." + the module's path in transformers' *ForCausalLM +
           ".lora_A.weight" / ".lora_B.weight" (GPT2LMHeadModel: "transformer.h.0.attn.c_attn";
           LlamaForCausalLM: "model.layers.0.self_attn.q_proj").
  init     (--write-lora-adapter) lora_A: kaiming_uniform_(a=sqrt(5)) as PEFT; lora_B: PEFT
           zeroes it, here N(0, --lora-b-std) so that the adapter changes the logits from the
           first step and a loader that drops it is caught.
"""

import json
import math
import os
import re

import torch
import torch.nn as nn

import gpt2_torch

PEFT_PREFIX = "base_model.model."


class LoraLinear(nn.Module):
    def __init__(self, base, r, alpha, rslora):
        super().__init__()
        self.base = base
        w = base.weight
        # torch.nn.Linear: (out, in); HF's Conv1D (gpt2_torch.Conv1D): (in, out)
        n_in, n_out = (w.shape[1], w.shape[0]) if isinstance(base, nn.Linear) else (w.shape[0], w.shape[1])
        self.lora_A = nn.Linear(n_in, r, bias=False)
        self.lora_B = nn.Linear(r, n_out, bias=False)
        self.scaling = alpha / (math.sqrt(r) if rslora else r)

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x)) * self.scaling


def targeted(name, targets):
    if isinstance(targets, str):
        return re.fullmatch(targets, name) is not None
    return any(name == t or name.endswith("." + t) for t in targets)


def apply(model, hf_prefix, targets, r, alpha, rslora):
    """Freezes `model` and wraps its targeted linear layers; returns {HF module path: LoraLinear}."""
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped = {}
    for name, module in list(model.named_modules()):
        hf = hf_prefix + name
        # by name: gpt2_torch's Conv1D is __main__.Conv1D when that script runs
        linear = isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D"
        if not (linear and (targeted(hf, targets) or targeted(name, targets))):
            continue
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        lora = LoraLinear(module, r, alpha, rslora)
        setattr(parent, child, lora)
        wrapped[hf] = lora
    if not wrapped:
        raise ValueError(f"target_modules {targets} match no linear layer")
    return wrapped


def write_adapter(model, hf_prefix, args):
    torch.manual_seed(args.seed + 1)
    targets = [t.strip() for t in args.lora_targets.split(",") if t.strip()]
    wrapped = apply(model, hf_prefix, targets, args.lora_r, args.lora_alpha, args.lora_rslora)
    tensors = []
    with torch.no_grad():
        for hf, lora in wrapped.items():
            nn.init.kaiming_uniform_(lora.lora_A.weight, a=math.sqrt(5))
            lora.lora_B.weight.normal_(0.0, args.lora_b_std)
            tensors.append((PEFT_PREFIX + hf + ".lora_A.weight", lora.lora_A.weight))
            tensors.append((PEFT_PREFIX + hf + ".lora_B.weight", lora.lora_B.weight))
    os.makedirs(args.write_lora_adapter, exist_ok=True)
    gpt2_torch.write_safetensors(os.path.join(args.write_lora_adapter, "adapter_model.safetensors"), tensors,
                                 {"format": "pt"})
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": args.lora_r, "lora_alpha": args.lora_alpha,
              "lora_dropout": 0.0, "target_modules": targets, "bias": "none", "use_rslora": args.lora_rslora,
              "use_dora": False, "fan_in_fan_out": not isinstance(next(iter(wrapped.values())).base, nn.Linear),
              "modules_to_save": None, "base_model_name_or_path": None, "inference_mode": True,
              "init_lora_weights": True, "rank_pattern": {}, "alpha_pattern": {}, "layers_to_transform": None,
              "layers_pattern": None}
    with open(os.path.join(args.write_lora_adapter, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2)


def load_adapter(model, hf_prefix, path):
    """Applies the adapter directory `path` (PEFT's files) to `model` and loads its weights."""
    with open(os.path.join(path, "adapter_config.json")) as f:
        config = json.load(f)
    if config.get("peft_type") != "LORA":
        raise ValueError(f"{path}: peft_type {config.get('peft_type')!r} is not LORA")
    wrapped = apply(model, hf_prefix, config["target_modules"], config["r"], config["lora_alpha"],
                    config.get("use_rslora", False))
    tensors = gpt2_torch.read_safetensors(os.path.join(path, "adapter_model.safetensors"))
    params = {}
    for hf, lora in wrapped.items():
        params[PEFT_PREFIX + hf + ".lora_A.weight"] = lora.lora_A.weight
        params[PEFT_PREFIX + hf + ".lora_B.weight"] = lora.lora_B.weight
    if set(params) != set(tensors):
        raise ValueError(f"{path}: tensors {sorted(set(tensors) ^ set(params))} do not match the targeted layers")
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(tensors[n])
    return wrapped


def add_arguments(ap):
    ap.add_argument("--lora-adapter", default="", help="train a LoRA adapter from this PEFT directory")
    ap.add_argument("--write-lora-adapter", default="", help="write a random PEFT adapter here and exit")
    ap.add_argument("--lora-r", type=int, default=8)
    ap.add_argument("--lora-alpha", type=float, default=16.0)
    ap.add_argument("--lora-targets", default="")
    ap.add_argument("--lora-rslora", action="store_true")
    ap.add_argument("--lora-b-std", type=float, default=0.02)
