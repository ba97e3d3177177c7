#!/usr/bin/env python3
"""QLoRA through the CLI (issue #48): a tiny GPT-2 pre-trains and is exported; LoRA runs start
from the export with [quantization] base = "nf4" (every frozen linear layer but the head in NF4).
  - the run says how many base weights are in NF4 and their bytes (about 0.516 each);
  - a run stopped at a checkpoint and resumed gives the uninterrupted run's losses bit for bit;
  - `eval` of its checkpoint (which holds the dequantized base) gives the run's own last
    validation loss, and it is close to, but not, plain LoRA's from the same start;
  - `export --merge-lora` of it evaluates to the same loss;
  - a resume whose train.init_from holds another base is refused, naming the weight;
  - refused, saying why: NF4 with ZeRO-3, and NF4 on a base that trains (no [lora], no freeze).

    qlora_cli_test.py TRIDENT
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import Cli, metrics, prepare_corpus, report, tiny_args  # noqa: E402


def main():
    trident = sys.argv[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cli = Cli(trident, env)
    failures, run, loss_of, refused = cli.failures, cli.run, cli.loss_of, cli.refused

    with tempfile.TemporaryDirectory(prefix="trident_qlora_cli_") as d:
        prepare_corpus(trident, d, env)
        base, export, other = os.path.join(d, "base"), os.path.join(d, "base_hf"), os.path.join(d, "other_hf")
        run(["train"] + tiny_args(d) + ["--train.steps=6", f"--train.out_dir={base}"])
        run(["export", "--checkpoint", base, "--out", export])
        run(["train"] + tiny_args(d) + ["--train.steps=7", f"--train.out_dir={base}7"])
        run(["export", "--checkpoint", base + "7", "--out", other])
        if failures:
            return report("qlora_cli", failures)

        def lora_args(out, steps, quantized=True, init_from=export):
            return tiny_args(d) + [f"--train.steps={steps}", "--train.checkpoint_interval=4", "--train.eval_interval=4",
                                   f"--train.out_dir={out}", f"--train.init_from={init_from}", "--lora.r=4",
                                   "--lora.alpha=8", "--lora.target_modules=c_attn,c_fc", "--optim.lr=0.01",
                                   "--lr_schedule.decay_steps=8"] + \
                (["--quantization.base=nf4"] if quantized else [])

        whole, part, plain = os.path.join(d, "whole"), os.path.join(d, "part"), os.path.join(d, "plain")
        p = run(["train"] + lora_args(whole, 8))
        line = [ln for ln in p.stderr.splitlines() if ln.startswith("model:")]
        # 2 blocks x (c_attn 64x192 + c_proj 64x64 + c_fc 64x256 + mlp c_proj 256x64) = 98,304 weights.
        if not line or "98304 base weights in NF4" not in line[0] or "(0.516 bytes each)" not in line[0]:
            failures.append(f"the model line does not report the NF4 base: {line}")
        run(["train"] + lora_args(part, 4))
        run(["train"] + lora_args(part, 8) + ["--train.resume=true"])
        run(["train"] + lora_args(plain, 8, quantized=False))
        if failures:
            return report("qlora_cli", failures)
        (tw, vw), (tp, vp), (tl, vl) = metrics(whole), metrics(part), metrics(plain)
        print("losses, uninterrupted:", tw, "\nresumed:", tp, "\nplain LoRA:", tl)
        if tw != tp or vw != vp or len(tw) != 8:
            failures.append(f"the resumed run's losses differ from the uninterrupted run's: {tw} {vw} vs {tp} {vp}")
        if tw == tl:
            failures.append("the NF4 run's losses equal plain LoRA's: the base was not quantized")
        elif max(abs(a - b) / b for a, b in zip(tw, tl)) > 0.05:
            failures.append(f"the NF4 run's losses are more than 5% from plain LoRA's: {tw} vs {tl}")

        val = ["--val-file", os.path.join(d, "data", "val.bin"), "--batches", "2", "--batch-size", "4",
               "--seq-len", "64"]
        ckpt_loss = loss_of(["--checkpoint", whole] + val)
        # With the run's own evaluation settings (the checkpoint's config): the run's last
        # validation loss, computed there with the NF4 products, here with the plain ones.
        own = loss_of(["--checkpoint", whole, "--val-file", os.path.join(d, "data", "val.bin")])
        if own is None or not vw or abs(own - vw[-1]) > 1e-5 * abs(vw[-1]):
            failures.append(f"eval of the NF4 run's checkpoint gives {own}, the run's own last validation loss was {vw[-1:]}")
        merged = os.path.join(d, "merged")
        run(["export", "--checkpoint", whole, "--out", merged, "--merge-lora"])
        merged_loss = loss_of(["--checkpoint", merged] + val)
        print("eval of the checkpoint:", ckpt_loss, "of the merged export:", merged_loss, "with the run's settings:", own,
              "the run's last:", vw[-1:])
        if ckpt_loss is None or merged_loss is None or abs(ckpt_loss - merged_loss) > 1e-4 * abs(ckpt_loss):
            failures.append(f"eval of the NF4 run's checkpoint {ckpt_loss} and of its merged export {merged_loss} differ")

        refused(["train"] + lora_args(part, 12, init_from=other) + ["--train.resume=true"],
                "differs from the one this run quantized to NF4")
        refused(["train"] + lora_args(os.path.join(d, "z3"), 2) + ["--parallel.zero_stage=3"], "ZeRO-3 shards the frozen base")
        refused(["train"] + tiny_args(d) + ["--train.steps=2", f"--train.out_dir={d}/full", "--quantization.base=nf4"],
                "no linear layer of the model is frozen")
    return report("qlora_cli", failures)


if __name__ == "__main__":
    sys.exit(main())
