#!/usr/bin/env python3
"""A LoRA fine-tune through the CLI (issue #48): a tiny GPT-2 pre-trains and is exported; a LoRA
run starts from the export (train.init_from) with [lora] on c_attn and c_fc and writes PEFT's
files in <out_dir>/adapter after every checkpoint. Then the same model is evaluated four ways,
which must give one loss (the printed 6 digits):
  - the LoRA run's checkpoint (its config's [lora] rebuilds the adapters);
  - the base checkpoint with --adapter <out_dir>/adapter (PEFT's files);
  - the base export (a Hugging Face directory) with --adapter;
  - `export --merge-lora`'s directory (a plain model, no adapter);
and it differs from the base's own loss (the adapters trained). `sample` of the LoRA checkpoint
and of the base with --adapter print the same text. Misuse is refused, naming why: --merge-lora
of a run without adapters, --adapter on a LoRA run's checkpoint, an adapter of another rank
than [lora] says, a target that is no layer; `export` without --merge-lora says the adapters
were not merged.

    lora_cli_test.py TRIDENT
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import Cli, prepare_corpus, report, tiny_args  # noqa: E402


def main():
    trident = sys.argv[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cli = Cli(trident, env)
    failures, run, loss_of, refused = cli.failures, cli.run, cli.loss_of, cli.refused

    with tempfile.TemporaryDirectory(prefix="trident_lora_cli_") as d:
        prepare_corpus(trident, d, env)
        base, lora, export = os.path.join(d, "base"), os.path.join(d, "lora"), os.path.join(d, "base_hf")
        run(["train"] + tiny_args(d) + ["--train.steps=6", f"--train.out_dir={base}"])
        run(["export", "--checkpoint", base, "--out", export])
        lora_args = tiny_args(d) + ["--train.steps=8", "--train.checkpoint_interval=4", f"--train.out_dir={lora}",
                                    f"--train.init_from={export}", "--lora.r=4", "--lora.alpha=8",
                                    "--lora.target_modules=c_attn,c_fc", "--optim.lr=0.01"]
        run(["train"] + lora_args)
        if failures:
            return report("lora_cli", failures)
        adapter = os.path.join(lora, "adapter")
        with open(os.path.join(adapter, "adapter_config.json")) as f:
            config = json.load(f)
        for key, want in (("peft_type", "LORA"), ("r", 4), ("lora_alpha", 8), ("target_modules", ["c_attn", "c_fc"]),
                          ("fan_in_fan_out", True), ("task_type", "CAUSAL_LM"), ("base_model_name_or_path", export)):
            if config.get(key) != want:
                failures.append(f"adapter_config.json: {key} = {config.get(key)!r}, wanted {want!r}")

        merged = os.path.join(d, "merged")
        p = run(["export", "--checkpoint", lora, "--out", merged, "--merge-lora"])
        if '"merged_layers": 4' not in p.stdout:  # c_attn and c_fc in 2 blocks
            failures.append(f"export --merge-lora: {p.stdout}")
        p = run(["export", "--checkpoint", lora, "--out", os.path.join(d, "plain")])
        if "not merged" not in p.stdout:
            failures.append(f"export without --merge-lora does not say the adapters were left out: {p.stdout}")

        val = ["--val-file", os.path.join(d, "data", "val.bin"), "--batches", "2", "--batch-size", "4",
               "--seq-len", "64"]
        losses = {
            "lora checkpoint": loss_of(["--checkpoint", lora] + val),
            "base checkpoint + --adapter": loss_of(["--checkpoint", base, "--adapter", adapter] + val),
            "base export + --adapter": loss_of(["--checkpoint", export, "--adapter", adapter] + val),
            "merged export": loss_of(["--checkpoint", merged] + val),
        }
        base_loss = loss_of(["--checkpoint", base] + val)
        print("val losses:", json.dumps(losses), "base:", base_loss)
        if len(set(losses.values())) != 1:
            failures.append(f"the adapted model's losses differ: {losses}")
        if base_loss is not None and base_loss == losses["lora checkpoint"]:
            failures.append(f"the LoRA run's loss equals the base's ({base_loss}): the adapters did nothing")

        text = [run(["sample", "--checkpoint", c, "--tokens", "40", "--prompt", "line 3"] + extra).stdout
                for c, extra in ((lora, []), (base, ["--adapter", adapter]))]
        if text[0] != text[1] or not text[0]:
            failures.append(f"sample differs: {text!r}")

        refused(["export", "--checkpoint", base, "--out", os.path.join(d, "x"), "--merge-lora"], "has no LoRA adapters")
        refused(["eval", "--checkpoint", lora, "--adapter", adapter] + val, "carries its own adapters")
        refused(["train"] + tiny_args(d) + ["--train.steps=2", f"--train.out_dir={d}/other",
                                            f"--train.init_from={export}", f"--train.init_adapter={adapter}",
                                            "--lora.r=8", "--lora.target_modules=c_attn"],
                "the config's [lora] says r = 8")
        refused(["train"] + tiny_args(d) + ["--train.steps=2", f"--train.out_dir={d}/typo", "--lora.r=4",
                                            "--lora.target_modules=c_atn"], "'c_atn' matches no layer")
    return report("lora_cli", failures)


if __name__ == "__main__":
    sys.exit(main())
