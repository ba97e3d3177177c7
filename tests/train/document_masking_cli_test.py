#!/usr/bin/env python3
"""Packed documents through the CLI (issue #48): `data.document_masking = true` with
`data.end_of_document = 10` (the byte tokenizer's newline) makes every line of the corpus its own
document. A run trains with it, and its losses differ from the same run without it (same seed,
same batches); `eval` of its checkpoint reads the masking from the checkpoint's config and gives
the loss the run printed for its last evaluation. Misuse is refused, naming why: the byte
tokenizer has no end-of-text token to end documents by default; an end_of_document outside the
vocabulary; an end_of_document without document_masking.

    document_masking_cli_test.py TRIDENT
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import Cli, prepare_corpus, report, tiny_args  # noqa: E402


def losses_of(out_dir):
    """(train losses, last val_loss) from the run's metrics.jsonl."""
    train, val = [], None
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        for line in f:
            m = json.loads(line)
            if "loss" in m:
                train.append(m["loss"])
            if m.get("val_loss") is not None:
                val = m["val_loss"]
    return train, val


def main():
    trident = sys.argv[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cli = Cli(trident, env)
    failures, run, loss_of, refused = cli.failures, cli.run, cli.loss_of, cli.refused

    with tempfile.TemporaryDirectory(prefix="trident_documents_cli_") as d:
        prepare_corpus(trident, d, env)  # lines of 20-30 bytes: two or three documents per 64-token row
        common = tiny_args(d) + ["--train.steps=4", "--train.eval_interval=4", "--train.eval_batches=2"]
        masked, plain = os.path.join(d, "masked"), os.path.join(d, "plain")
        run(["train"] + common + [f"--train.out_dir={masked}", "--data.document_masking=true",
                                  "--data.end_of_document=10"])
        run(["train"] + common + [f"--train.out_dir={plain}"])
        if failures:
            return report("document_masking_cli", failures)
        (masked_train, masked_val), (plain_train, _) = losses_of(masked), losses_of(plain)
        print("masked:", masked_train, masked_val, "plain:", plain_train)
        if len(masked_train) != 4 or len(plain_train) != 4:
            failures.append(f"expected 4 losses each: {masked_train} {plain_train}")
        elif masked_train[0] == plain_train[0]:
            failures.append(f"document masks left the first loss unchanged ({masked_train[0]})")
        got = loss_of(["--checkpoint", masked, "--batches", "2"])
        if got is None or masked_val is None or abs(got - masked_val) > 1e-6 * abs(masked_val):
            failures.append(f"eval of the masked checkpoint gives {got}, the run's last evaluation {masked_val}")

        refused(["train"] + common + [f"--train.out_dir={d}/a", "--data.document_masking=true"],
                "has no end-of-text token: set data.end_of_document")
        refused(["train"] + common + [f"--train.out_dir={d}/b", "--data.document_masking=true",
                                      "--data.end_of_document=300"], "data.end_of_document = 300 is not a token id")
        refused(["train"] + common + [f"--train.out_dir={d}/c", "--data.end_of_document=10"],
                "ends documents only with data.document_masking = true")
    return report("document_masking_cli", failures)


if __name__ == "__main__":
    sys.exit(main())
