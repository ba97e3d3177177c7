#!/usr/bin/env python3
"""An independent PyTorch LLaMA trainer: the other side of trident's LLaMA parity checks.

The model is Hugging Face's LlamaForCausalLM math written out in PyTorch 1.13 (Debian's
python3-torch) and numpy; nothing of trident's is imported, called or read. The run (data,
sampler, schedule, AdamW, clipping, evaluation) is gpt2_torch.py's, reused from it.

  model   embed_tokens; per layer: x + o_proj(attn(RoPE(q_proj(n1)), RoPE(k_proj(n1)), v_proj(n1)))
          with n1 = input_layernorm(x), then h + down_proj(silu(gate_proj(n2)) * up_proj(n2)) with
          n2 = post_attention_layernorm(h); norm; lm_head (or the embedding when tied).
          RMSNorm: x / sqrt(mean(x^2) + eps) * w (in float32). RoPE: HF's rotate-half form,
          inv_freq = 1 / theta^(2i / HS), cos/sin of position * inv_freq repeated twice, q*cos +
          rotate_half(q)*sin, inv_freq rescaled as Llama 3 with --rope-scaling-factor (HF's
          _compute_llama3_parameters). Grouped-query attention: each kv head repeated n_head / n_kv_heads
          times (repeat_kv), causal softmax(q k^T / sqrt(HS)) v; with --sliding-window W (Mistral)
          query i sees keys i - W < j <= i (HF's sliding_window_overlay). Linear weights (out, in); q, k,
          v biases with --qkv-bias (Qwen2). With --num-experts E, the MLP of every
          --decoder-sparse-step-th layer is transformers' MixtralSparseMoeBlock (Qwen2MoeSparseMoeBlock
          with --qkv-bias: --no-norm-topk-prob, a sigmoid-gated shared expert), a loop over the
          experts; the loss adds --router-aux-loss-coef x the mean over layers of
          load_balancing_loss_func on each layer's router logits, and --router-z-loss-coef x the
          mean z-loss. Weights from safetensors with HF names, "model."
          prefix optional (--init).

Usage: llama_torch.py (gpt2_torch.py's arguments) --n-kv-heads K --intermediate-size I
       --rope-theta R --rms-norm-eps E [--tie-word-embeddings] [--qkv-bias] [--sliding-window W]
       llama_torch.py ... --write-hf-dir DIR [--hf-dtype bf16|f32] [--hf-shards N] [--seed S]
         writes a random init as transformers' save_pretrained does: config.json (model_type
         llama, qwen2 with --qkv-bias, mistral with --sliding-window), the weights under HF names ("model." prefix, lm_head
         unless tied) in N shards model-0000k-of-0000N.safetensors with
         model.safetensors.index.json (N = 1: model.safetensors).
"""

import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_torch  # noqa: E402  (the run: data, sampler, schedule, optimizer, loop)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def llama3_inv_freq(inv_freq, a):
    """Hugging Face's _compute_llama3_parameters."""
    factor, low, high = a.rope_scaling_factor, a.rope_low_freq_factor, a.rope_high_freq_factor
    old_context_len = a.rope_original_max_position
    low_freq_wavelen = old_context_len / low
    high_freq_wavelen = old_context_len / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low) / (high - low)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, a):
        super().__init__()
        C, self.NH, self.NKV = a.n_embd, a.n_head, a.n_kv_heads
        self.HS = C // self.NH
        self.q_proj = nn.Linear(C, self.NH * self.HS, bias=a.qkv_bias)
        self.k_proj = nn.Linear(C, self.NKV * self.HS, bias=a.qkv_bias)
        self.v_proj = nn.Linear(C, self.NKV * self.HS, bias=a.qkv_bias)
        self.o_proj = nn.Linear(self.NH * self.HS, C, bias=False)
        self.window = a.sliding_window
        inv_freq = 1.0 / (a.rope_theta ** (torch.arange(0, self.HS, 2).float() / self.HS))
        if a.rope_scaling_factor > 0:
            inv_freq = llama3_inv_freq(inv_freq, a)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.NH, self.HS).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.NKV, self.HS).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.NKV, self.HS).transpose(1, 2)
        freqs = torch.outer(torch.arange(T, dtype=torch.float32), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        groups = self.NH // self.NKV
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.HS)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        if self.window > 0:  # Mistral: key j is seen by queries i with i - window < j <= i
            mask &= ~torch.ones(T, T, dtype=torch.bool).tril(-self.window)
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, self.NH * self.HS)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.gate_proj = nn.Linear(a.n_embd, a.intermediate_size, bias=False)
        self.up_proj = nn.Linear(a.n_embd, a.intermediate_size, bias=False)
        self.down_proj = nn.Linear(a.intermediate_size, a.n_embd, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Expert(nn.Module):
    """MixtralBlockSparseTop2MLP (w1 gate, w3 up, w2 down) or Qwen2MoeMLP (gate/up/down_proj)."""

    def __init__(self, C, width, mixtral):
        super().__init__()
        self.names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
        # Hugging Face's registration order: Mixtral's w1, w2, w3.
        order = ("w1", "w2", "w3") if mixtral else self.names
        shapes = {self.names[0]: (C, width), self.names[1]: (C, width), self.names[2]: (width, C)}
        for n in order:
            setattr(self, n, nn.Linear(*shapes[n], bias=False))

    def forward(self, x):
        g, u, d = (getattr(self, n) for n in self.names)
        return d(F.silu(g(x)) * u(x))


def load_balancing_loss_func(gate_logits, num_experts, top_k):
    """transformers' load_balancing_loss_func (Mixtral, Qwen2-MoE) without an attention mask."""
    concatenated_gate_logits = torch.cat(list(gate_logits), dim=0)
    routing_weights = torch.nn.functional.softmax(concatenated_gate_logits, dim=-1)
    _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    expert_mask = torch.nn.functional.one_hot(selected_experts, num_experts)
    tokens_per_expert = torch.mean(expert_mask.float(), dim=0)
    router_prob_per_expert = torch.mean(routing_weights, dim=0)
    overall_loss = torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0))
    return overall_loss * num_experts


class SparseMoeBlock(nn.Module):
    """MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock's forward, as transformers writes it (a loop
    over the experts, index_add_ back into the tokens), returning the router logits beside."""

    def __init__(self, a):
        super().__init__()
        C, self.E, self.top_k = a.n_embd, a.num_experts, a.top_k
        self.norm_topk_prob = a.norm_topk_prob
        mixtral = not a.qkv_bias
        self.gate = nn.Linear(C, self.E, bias=False)
        self.experts = nn.ModuleList([Expert(C, a.moe_intermediate_size, mixtral) for _ in range(self.E)])
        self.shared_expert = None
        if a.shared_expert_intermediate_size > 0:
            self.shared_expert = Expert(C, a.shared_expert_intermediate_size, False)
            self.shared_expert_gate = nn.Linear(C, 1, bias=False)

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        if self.norm_topk_prob:
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final_hidden_states = torch.zeros((batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype)
        expert_mask = F.one_hot(selected_experts, num_classes=self.E).permute(2, 1, 0)
        for expert_idx in range(self.E):
            idx, top_x = torch.where(expert_mask[expert_idx])
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = self.experts[expert_idx](current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        if self.shared_expert is not None:
            shared = F.sigmoid(self.shared_expert_gate(hidden_states)) * self.shared_expert(hidden_states)
            final_hidden_states = final_hidden_states + shared
        return final_hidden_states.reshape(batch_size, sequence_length, hidden_dim), router_logits


class Block(nn.Module):
    def __init__(self, a, layer):
        super().__init__()
        self.input_layernorm = RMSNorm(a.n_embd, a.rms_norm_eps)
        self.self_attn = Attention(a)
        self.post_attention_layernorm = RMSNorm(a.n_embd, a.rms_norm_eps)
        self.sparse = a.num_experts > 0 and (layer + 1) % a.decoder_sparse_step == 0
        if not self.sparse:
            self.mlp = MLP(a)
        elif a.qkv_bias:  # Qwen2-MoE keeps the name "mlp"
            self.mlp = SparseMoeBlock(a)
        else:
            self.block_sparse_moe = SparseMoeBlock(a)

    def forward(self, x, router_logits):
        h = x + self.self_attn(self.input_layernorm(x))
        n = self.post_attention_layernorm(h)
        if not self.sparse:
            return h + self.mlp(n)
        y, logits = (self.mlp if hasattr(self, "mlp") else self.block_sparse_moe)(n)
        router_logits.append(logits)
        return h + y


class Llama(nn.Module):
    HF_PREFIX = "model."  # LlamaForCausalLM's path to these modules (PEFT's names)

    def __init__(self, a):
        super().__init__()
        self.block_size = a.block_size
        self.embed_tokens = nn.Embedding(a.vocab_size, a.n_embd)
        self.layers = nn.ModuleList([Block(a, i) for i in range(a.n_layer)])
        self.moe = a
        self.norm = RMSNorm(a.n_embd, a.rms_norm_eps)
        self.lm_head = None if a.tie_word_embeddings else nn.Linear(a.n_embd, a.vocab_size, bias=False)

    def forward(self, idx, targets):
        assert idx.shape[1] <= self.block_size
        x = self.embed_tokens(idx)
        router_logits = []
        for layer in self.layers:
            x = layer(x, router_logits)
        x = self.norm(x)
        logits = self.lm_head(x) if self.lm_head is not None else torch.matmul(x, self.embed_tokens.weight.t())
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        if not router_logits:
            return loss
        # The router's losses, each layer's by transformers' function on that layer's logits,
        # the mean over the layers times the coefficient; and ST-MoE's z-loss likewise. They
        # join the gradient, not the reported value (trident reports the LM loss): aux - aux.detach()
        # is exactly 0.
        L = len(router_logits)
        aux = sum(load_balancing_loss_func((g,), self.moe.num_experts, self.moe.top_k) for g in router_logits) / L
        z = sum(torch.logsumexp(g, dim=-1).pow(2).mean() for g in router_logits) / L
        extra = self.moe.router_aux_loss_coef * aux + self.moe.router_z_loss_coef * z
        return loss + (extra - extra.detach())

    def load_hf(self, tensors, path):
        def rename(n):
            m = n[len("model."):] if n.startswith("model.") else n
            return None if m == "lm_head.weight" and self.lm_head is None else m  # tied: skipped
        gpt2_torch.load_parameters(self, tensors, path, rename, "LLaMA")


def write_hf_dir(args):
    torch.manual_seed(args.seed)
    model = Llama(args)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape))  # not all ones: the load must be checked
            else:
                p.copy_(0.02 * torch.randn(p.shape))
    tensors = [(n if n.startswith("lm_head.") else "model." + n, p) for n, p in model.named_parameters()]
    os.makedirs(args.write_hf_dir, exist_ok=True)
    dtype = "BF16" if args.hf_dtype == "bf16" else "F32"
    n = args.hf_shards
    per = (len(tensors) + n - 1) // n
    weight_map = {}
    for k in range(n):
        part = tensors[k * per:(k + 1) * per]
        name = "model.safetensors" if n == 1 else f"model-{k + 1:05d}-of-{n:05d}.safetensors"
        gpt2_torch.write_safetensors(os.path.join(args.write_hf_dir, name), part, {"format": "pt"}, dtype)
        weight_map.update({t: name for t, _ in part})
    if n > 1:
        size = sum(p.numel() * (2 if dtype == "BF16" else 4) for _, p in tensors)
        with open(os.path.join(args.write_hf_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": size}, "weight_map": weight_map}, f, indent=2)
    qwen2, mistral = args.qkv_bias, not args.qkv_bias and args.sliding_window > 0
    moe = args.num_experts > 0
    model_type = ("qwen2_moe" if qwen2 else "mixtral") if moe else "qwen2" if qwen2 else "mistral" if mistral else "llama"
    architecture = {"qwen2_moe": "Qwen2MoeForCausalLM", "mixtral": "MixtralForCausalLM", "qwen2": "Qwen2ForCausalLM",
                    "mistral": "MistralForCausalLM", "llama": "LlamaForCausalLM"}[model_type]
    config = {"model_type": model_type, "architectures": [architecture],
              "num_hidden_layers": args.n_layer, "num_attention_heads": args.n_head,
              "num_key_value_heads": args.n_kv_heads, "hidden_size": args.n_embd,
              "intermediate_size": args.intermediate_size, "max_position_embeddings": args.block_size,
              "vocab_size": args.vocab_size, "rope_theta": args.rope_theta, "rms_norm_eps": args.rms_norm_eps,
              "hidden_act": "silu", "tie_word_embeddings": args.tie_word_embeddings,
              "rope_scaling": None if args.rope_scaling_factor == 0 else {
                  "rope_type": "llama3", "factor": args.rope_scaling_factor,
                  "low_freq_factor": args.rope_low_freq_factor, "high_freq_factor": args.rope_high_freq_factor,
                  "original_max_position_embeddings": args.rope_original_max_position},
              "initializer_range": 0.02, "torch_dtype": "bfloat16" if dtype == "BF16" else "float32",
              "transformers_version": "4.46.0"}
    if moe and qwen2:  # Qwen2MoeConfig's fields; intermediate_size is the dense layers' width
        config.update({"num_experts": args.num_experts, "num_experts_per_tok": args.top_k,
                       "moe_intermediate_size": args.moe_intermediate_size,
                       "shared_expert_intermediate_size": args.shared_expert_intermediate_size,
                       "norm_topk_prob": args.norm_topk_prob, "decoder_sparse_step": args.decoder_sparse_step,
                       "mlp_only_layers": [], "output_router_logits": args.router_aux_loss_coef > 0,
                       "router_aux_loss_coef": args.router_aux_loss_coef})
    elif moe:  # MixtralConfig's: intermediate_size is each expert's width
        assert args.moe_intermediate_size == args.intermediate_size and args.decoder_sparse_step == 1
        config.update({"num_local_experts": args.num_experts, "num_experts_per_tok": args.top_k,
                       "output_router_logits": args.router_aux_loss_coef > 0,
                       "router_aux_loss_coef": args.router_aux_loss_coef, "router_jitter_noise": 0.0,
                       "sliding_window": args.sliding_window or None})
    if qwen2:
        config.update({"use_sliding_window": False, "sliding_window": 4096})
    elif mistral:
        config.update({"sliding_window": args.sliding_window})
    elif not moe:
        config.update({"attention_bias": False, "mlp_bias": False})
    with open(os.path.join(args.write_hf_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    print(f"wrote {args.write_hf_dir}: {len(tensors)} tensors in {n} file(s), {dtype}", file=sys.stderr)


def main():
    ap = gpt2_torch.argument_parser()
    ap.description = __doc__.split("\n")[0]
    ap.add_argument("--n-kv-heads", type=int, required=True)
    ap.add_argument("--intermediate-size", type=int, required=True)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--rms-norm-eps", type=float, default=1e-6)
    ap.add_argument("--tie-word-embeddings", action="store_true")
    ap.add_argument("--qkv-bias", action="store_true")
    ap.add_argument("--rope-scaling-factor", type=float, default=0.0, help="Llama 3's rope_scaling factor (0: none)")
    ap.add_argument("--rope-low-freq-factor", type=float, default=1.0)
    ap.add_argument("--rope-high-freq-factor", type=float, default=4.0)
    ap.add_argument("--rope-original-max-position", type=int, default=8192)
    ap.add_argument("--sliding-window", type=int, default=0, help="Mistral's sliding window (0: none)")
    ap.add_argument("--num-experts", type=int, default=0, help="a sparse MoE MLP with E experts (0: dense)")
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--moe-intermediate-size", type=int, default=0)
    ap.add_argument("--shared-expert-intermediate-size", type=int, default=0)
    ap.add_argument("--no-norm-topk-prob", dest="norm_topk_prob", action="store_false")
    ap.add_argument("--decoder-sparse-step", type=int, default=1)
    ap.add_argument("--router-aux-loss-coef", type=float, default=0.0)
    ap.add_argument("--router-z-loss-coef", type=float, default=0.0)
    ap.add_argument("--write-hf-dir", default="", help="write a random init as a Hugging Face directory and exit")
    ap.add_argument("--hf-dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--hf-shards", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.write_init:
        ap.error("--write-init is GPT-2's; the LLaMA parity test writes its init from trident")
    if args.write_hf_dir:
        write_hf_dir(args)
        return
    if args.write_lora_adapter:
        import peft_lora
        model = Llama(args)
        peft_lora.write_adapter(model, model.HF_PREFIX, args)
        return
    gpt2_torch.check_training_args(ap, args)
    gpt2_torch.train(args, Llama(args))


if __name__ == "__main__":
    main()
