#!/usr/bin/env python3
"""An independent PyTorch GPT-2 trainer: the other side of trident's parity checks.

Written from scratch in nanoGPT's style against PyTorch 1.13 (Debian's python3-torch) and
numpy only; it does not import, call or read anything of trident's. What it shares with
trident is the *definition* of the run, stated here so either side can be checked on its own:

  model      Hugging Face's GPT2LMHeadModel: wte + wpe, pre-LN blocks (ln_1, causal
             self-attention with a fused c_attn (C, 3C) split q|k|v, c_proj; ln_2, MLP c_fc
             (C, 4C), tanh-GELU, c_proj), ln_f, LM head tied to wte. Conv1D weights are
             [in, out] (y = x @ W + b). LayerNorm eps 1e-5, attention scale 1/sqrt(HS), no
             dropout. Weights come from a safetensors file with HF names (--init).
  data       uint16 little-endian token files with no header (nanoGPT's train.bin).
  sampler    sequential: W = (N - 1) // T windows; batch p, row b uses r = (p*B + b) % W,
             x = tokens[r*T : r*T + T], y = tokens[r*T + 1 : r*T + T + 1]. Training batches
             are numbered 0, 1, 2, ... across micro-batches (step s, micro-batch m is batch
             s*accum + m). Evaluation: mean loss of val batches 0..eval_batches-1 (the same
             sampler over the val file), after every eval_interval steps and at the end.
  step       lr = schedule(s) (s from 0); for each micro-batch, (loss / accum).backward();
             clip_grad_norm_(all params, grad_clip) (grad_clip 0: only measure the norm);
             torch.optim.AdamW with two groups (weight decay on params with >= 2 dims, none
             on the others); zero the gradients. The step's loss is the mean micro-batch loss.
  schedule   s < warmup: lr * (s + 1) / warmup; then cosine from lr to min_lr over
             [warmup, decay_steps) (decay_steps 0: the run's steps); min_lr from decay_steps.

Modes:
  --write-init FILE   write a random GPT-2 init (N(0, 0.02); residual c_proj weights
                      N(0, 0.02 / sqrt(2 L)); LayerNorm weight 1, bias 0; biases 0) seeded by
                      --seed, in HF layout, as a safetensors file; then exit.
  --write-lora-adapter DIR   write a random PEFT LoRA adapter for the model (peft_lora.py); exit.
  --init FILE ...     train from FILE (with --lora-adapter DIR: only that adapter trains, the
                      base frozen, peft_lora.py) and write --out (JSON):
                      {"train_loss": [...], "lr": [...], "grad_norm": [...] (one per step,
                       step 1 first), "val_loss": {"<step>": loss}, "tokens_per_s": overall,
                       "elapsed_s": ..., "config": {...}}

Run with OMP_WAIT_POLICY=PASSIVE on a shared machine; --threads sets torch's thread count.
"""

import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------
# safetensors, by hand (format: 8-byte LE header length, JSON header, raw row-major data)

_NP_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32,
              "I64": np.int64, "U16": np.uint16}


def read_safetensors(path):
    """name -> float32 torch tensor (F32, F64, F16 and BF16 files)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        raw = data[begin:end]
        shape = tuple(e["shape"])
        if e["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif e["dtype"] in _NP_DTYPES:
            arr = np.frombuffer(raw, dtype=np.dtype(_NP_DTYPES[e["dtype"]]).newbyteorder("<"))
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {e['dtype']}")
        out[name] = torch.from_numpy(arr.astype(np.float32).reshape(shape).copy())
    return out


def write_safetensors(path, tensors, metadata=None, dtype="F32"):
    """tensors: list of (name, tensor), written in that order as F32 or BF16 (rounded to nearest even)."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    blobs = []
    for name, t in tensors:
        t = t.detach().contiguous()
        if dtype == "BF16":
            b = t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
        else:
            b = t.to(torch.float32).numpy().astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# ---------------------------------------------------------------------------------------
# the model


def hf_parameter_shapes(L, C, V, block_size):
    """(name, shape) of every GPT-2 parameter, HF names and order."""
    shapes = [("wte.weight", (V, C)), ("wpe.weight", (block_size, C))]
    for i in range(L):
        p = f"h.{i}."
        shapes += [
            (p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
            (p + "attn.c_attn.weight", (C, 3 * C)), (p + "attn.c_attn.bias", (3 * C,)),
            (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
            (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
            (p + "mlp.c_fc.weight", (C, 4 * C)), (p + "mlp.c_fc.bias", (4 * C,)),
            (p + "mlp.c_proj.weight", (4 * C, C)), (p + "mlp.c_proj.bias", (C,)),
        ]
    shapes += [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
    return shapes


class Conv1D(nn.Module):
    """HF's Conv1D: a linear layer whose weight is stored [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return torch.matmul(x, self.weight) + self.bias


class CausalSelfAttention(nn.Module):
    def __init__(self, C, NH, block_size):
        super().__init__()
        self.n_head = NH
        self.c_attn = Conv1D(C, 3 * C)
        self.c_proj = Conv1D(C, C)
        mask = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, block_size, block_size), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        NH = self.n_head
        HS = C // NH
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, NH, HS).transpose(1, 2)  # (B, NH, T, HS)
        k = k.view(B, T, NH, HS).transpose(1, 2)
        v = v.view(B, T, NH, HS).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))  # (B, NH, T, T)
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v)  # (B, NH, T, HS)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = Conv1D(C, 4 * C)
        self.c_proj = Conv1D(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, NH, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = CausalSelfAttention(C, NH, block_size)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    HF_PREFIX = "transformer."  # GPT2LMHeadModel's path to these modules (PEFT's names)

    def __init__(self, L, NH, C, block_size, V):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(block_size, C)
        self.h = nn.ModuleList([Block(C, NH, block_size) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)

    def forward(self, idx, targets):
        B, T = idx.shape
        assert T <= self.block_size, f"sequence length {T} exceeds block_size {self.block_size}"
        pos = torch.arange(T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        logits = torch.matmul(x, self.wte.weight.t())  # tied LM head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    def load_hf(self, tensors, path):
        def rename(n):
            m = n[len("transformer."):] if n.startswith("transformer.") else n
            ignored = m == "lm_head.weight" or m.endswith(".attn.bias") or m.endswith(".attn.masked_bias")
            return None if ignored else m
        load_parameters(self, tensors, path, rename, "GPT-2")


def load_parameters(module, tensors, path, rename, family):
    """Copies a file's tensors into module's parameters. rename(file name) gives the parameter's
    name, or None for a tensor to skip; every parameter must be given once, shapes equal."""
    params = dict(module.named_parameters())
    names = {}
    for n in tensors:
        m = rename(n)
        if m is None:
            continue
        if m not in params:
            raise ValueError(f"{path}: tensor {n} is not a {family} parameter")
        names[m] = n
    missing = [n for n in params if n not in names]
    if missing:
        raise ValueError(f"{path}: missing parameters: {', '.join(missing)}")
    with torch.no_grad():
        for m, n in names.items():
            if tuple(tensors[n].shape) != tuple(params[m].shape):
                raise ValueError(f"{path}: {n} has shape {tuple(tensors[n].shape)}, "
                                 f"the model has {tuple(params[m].shape)}")
            params[m].copy_(tensors[n])


def write_init(args):
    torch.manual_seed(args.seed)
    L, C = args.n_layer, args.n_embd
    residual_std = 0.02 / math.sqrt(2 * L)
    tensors = []
    for name, shape in hf_parameter_shapes(L, C, args.vocab_size, args.block_size):
        if ".ln_" in name or name.startswith("ln_f"):
            t = torch.ones(shape) if name.endswith(".weight") else torch.zeros(shape)
        elif name.endswith(".bias"):
            t = torch.zeros(shape)
        else:
            std = residual_std if name.endswith("c_proj.weight") else 0.02
            t = torch.randn(shape) * std
        tensors.append((name, t))
    write_safetensors(args.write_init, tensors, {"format": "pt"})
    n = sum(t.numel() for _, t in tensors)
    print(f"wrote {args.write_init}: {n} parameters (seed {args.seed})", file=sys.stderr)


# ---------------------------------------------------------------------------------------
# data, schedule, training


def read_tokens(path):
    arr = np.fromfile(path, dtype="<u2")
    if arr.size == 0:
        raise ValueError(f"{path}: empty token file")
    return torch.from_numpy(arr.astype(np.int64))


class SequentialSampler:
    def __init__(self, tokens, B, T):
        self.tokens, self.B, self.T = tokens, B, T
        self.W = (tokens.numel() - 1) // T
        if self.W < 1:
            raise ValueError(f"token file of {tokens.numel()} tokens holds no window of {T + 1}")

    def batch_at(self, p):
        T = self.T
        rows = [(p * self.B + b) % self.W for b in range(self.B)]
        x = torch.stack([self.tokens[r * T:r * T + T] for r in rows])
        y = torch.stack([self.tokens[r * T + 1:r * T + T + 1] for r in rows])
        return x, y


def lr_at(step, args):
    warmup = args.warmup
    decay_steps = args.decay_steps if args.decay_steps > 0 else args.steps
    if step < warmup:
        return args.lr * (step + 1) / warmup
    if args.constant:
        return args.lr
    if step >= decay_steps or decay_steps <= warmup:
        return args.min_lr
    progress = (step - warmup) / (decay_steps - warmup)
    coeff = 0.5 * (1.0 + math.cos(math.pi * progress))
    return args.min_lr + coeff * (args.lr - args.min_lr)


@torch.no_grad()
def evaluate(model, val, n_batches):
    model.eval()
    total = 0.0
    for i in range(n_batches):
        x, y = val.batch_at(i)
        total += model(x, y).item()
    model.train()
    return total / n_batches


def save_checkpoint(args, model, opt, result, done, position, train_time):
    """Everything the loop needs to continue bit-identically: a long comparison run can stop
    and resume (in another session). Written to a temporary name, then renamed."""
    state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": done, "position": position,
             "train_time": train_time, "result": result, "config": checkpoint_config(args)}
    tmp = args.checkpoint + ".tmp"
    torch.save(state, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, args.checkpoint)
    print(f"step {done}: checkpoint {args.checkpoint}", file=sys.stderr, flush=True)


def checkpoint_config(args):
    """The run's definition; a checkpoint of another run is refused rather than continued."""
    skip = {"out", "checkpoint", "checkpoint_interval", "log_interval", "threads"}
    return {k: v for k, v in vars(args).items() if k not in skip}


def resume(args, model, opt, result):
    state = torch.load(args.checkpoint)
    want = checkpoint_config(args)
    if state["config"] != want:
        diff = {k: (state["config"].get(k), v) for k, v in want.items() if state["config"].get(k) != v}
        raise ValueError(f"{args.checkpoint}: checkpoint of another run; differs in (saved, now): {diff}")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    result.update(state["result"])
    result["config"] = vars(args)
    print(f"resumed from {args.checkpoint} at step {state['step']}", file=sys.stderr, flush=True)
    return state["step"], state["position"], state["train_time"]


def train(args, model=None):
    """The run (the module docstring's definition) of `model` (default: the GPT-2 of args),
    which must have forward(idx, targets) -> mean loss and load_hf(tensors, path)."""
    if model is None:
        model = GPT2(args.n_layer, args.n_head, args.n_embd, args.block_size, args.vocab_size)
    model.load_hf(read_safetensors(args.init), args.init)
    if args.lora_adapter:  # the base frozen, the adapter's layers wrapped (peft_lora.py)
        import peft_lora
        peft_lora.load_adapter(model, model.HF_PREFIX, args.lora_adapter)
    model.train()
    train_tokens, val_tokens = read_tokens(args.train), read_tokens(args.val)
    for path, toks in ((args.train, train_tokens), (args.val, val_tokens)):
        if int(toks.max()) >= args.vocab_size:
            raise ValueError(f"{path}: token id {int(toks.max())} >= vocab_size {args.vocab_size}")
    sampler = SequentialSampler(train_tokens, args.batch_size, args.seq_len)
    val = SequentialSampler(val_tokens, args.batch_size, args.seq_len)

    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)

    result = {"train_loss": [], "lr": [], "grad_norm": [], "val_loss": {}, "config": vars(args)}
    accum = args.grad_accum
    tokens_per_step = args.batch_size * args.seq_len * accum
    position = 0
    train_time = 0.0
    first_step = 0
    if args.checkpoint and os.path.exists(args.checkpoint):
        first_step, position, train_time = resume(args, model, opt, result)
    start = time.time() - (result.get("elapsed_s") or 0.0)
    for step in range(first_step, args.steps):
        t0 = time.time()
        lr = lr_at(step, args)
        for g in opt.param_groups:
            g["lr"] = lr
        loss_sum = 0.0
        for _ in range(accum):
            x, y = sampler.batch_at(position)
            position += 1
            loss = model(x, y)
            loss_sum += loss.item()
            (loss / accum).backward()
        if args.grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
        else:
            norm = torch.norm(torch.stack([p.grad.detach().norm(2) for p in params if p.grad is not None]), 2)
        opt.step()
        opt.zero_grad(set_to_none=True)
        train_time += time.time() - t0
        done = step + 1
        result["train_loss"].append(loss_sum / accum)
        result["lr"].append(lr)
        result["grad_norm"].append(float(norm))
        if done % args.log_interval == 0 or done == 1 or done == args.steps:
            el = time.time() - start
            print(f"step {done}/{args.steps} loss {loss_sum / accum:.6f} lr {lr:.3e} norm {float(norm):.4f} "
                  f"{tokens_per_step * done / max(train_time, 1e-9):.0f} tok/s {el:.0f}s", file=sys.stderr, flush=True)
        if (args.eval_interval > 0 and done % args.eval_interval == 0) or done == args.steps:
            v = evaluate(model, val, args.eval_batches)
            result["val_loss"][str(done)] = v
            print(f"step {done}: val_loss {v:.6f}", file=sys.stderr, flush=True)
        if args.checkpoint and args.checkpoint_interval > 0 and done % args.checkpoint_interval == 0 \
                and done < args.steps:
            result["elapsed_s"] = time.time() - start
            save_checkpoint(args, model, opt, result, done, position, train_time)
    result["elapsed_s"] = time.time() - start
    result["tokens_per_s"] = tokens_per_step * args.steps / max(train_time, 1e-9)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


def main():
    ap = argument_parser()
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.write_init:
        write_init(args)
        return
    if args.write_lora_adapter:
        import peft_lora
        model = GPT2(args.n_layer, args.n_head, args.n_embd, args.block_size, args.vocab_size)
        peft_lora.write_adapter(model, model.HF_PREFIX, args)
        return
    check_training_args(ap, args)
    train(args)


def check_training_args(ap, args):
    for k in ("init", "train", "val", "out"):
        if not getattr(args, k):
            ap.error(f"--{k} is required for training")
    if args.seq_len > args.block_size:
        ap.error(f"--seq-len {args.seq_len} exceeds --block-size {args.block_size}")


def argument_parser():
    """The run's arguments (llama_torch.py adds its family's)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write-init", default="", help="write a random GPT-2 init here and exit")
    ap.add_argument("--seed", type=int, default=1337, help="seed for --write-init")
    ap.add_argument("--init", default="", help="safetensors weights (HF GPT-2 names) to train from")
    ap.add_argument("--train", default="")
    ap.add_argument("--val", default="")
    ap.add_argument("--out", default="", help="JSON results")
    ap.add_argument("--n-layer", type=int, required=True)
    ap.add_argument("--n-head", type=int, required=True)
    ap.add_argument("--n-embd", type=int, required=True)
    ap.add_argument("--block-size", type=int, required=True)
    ap.add_argument("--vocab-size", type=int, required=True)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--min-lr", type=float, default=0.0)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--decay-steps", type=int, default=0, help="0: --steps")
    ap.add_argument("--constant", action="store_true", help="constant lr after warmup")
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0, help="0: no clipping")
    ap.add_argument("--eval-interval", type=int, default=0, help="0: only at the end")
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--log-interval", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--checkpoint", default="",
                    help="save the run here every --checkpoint-interval steps; resume from it if present")
    ap.add_argument("--checkpoint-interval", type=int, default=100)
    import peft_lora
    peft_lora.add_arguments(ap)
    return ap


if __name__ == "__main__":
    main()
