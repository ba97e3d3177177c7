#!/usr/bin/env python3
"""Checks that every #include in src/ points to the same layer or one below it, and that only
models/ includes a model family's headers, and that train/ sees parallel/ only through its seam.

The layer order is the architecture (docs/architecture.md); CMake links each layer only to
the ones below, and this test catches header-only upward dependencies that linking misses.
A family (models/<family>/) is seen from outside models/ only through the model contract
(models/causal_lm.h) and the registry (models/registry.h): src/ outside models/ and apps/
must not include a family's header (issue #22).
"""
import pathlib
import re
import sys

# Lower index = lower layer. A file may include its own layer or any lower one.
LAYERS = [
    "core",
    "config",  # generic typed option tables and TOML: a utility beside core
    "offload",  # the NVMe tier's files (io_uring, checksums): storage for ZeRO-Infinity, on core alone
    "kernels/reference",
    "kernels/cpu",
    "kernels/device",  # the kernel table non-host backends register for the op front ends
    "kernels/cuda",
    "ops",
    "autograd",
    "nn",
    "moe",  # mixture-of-experts layers, routing and grouped expert products: what families build with
    "models",
    "quantization",  # quantized weights (QLoRA's NF4 base), applied to a model from outside it
    "infer",  # generation with a KV cache: runs models; training never includes it (FORBIDDEN)
    "comm",
    "amp",
    "optim",
    "parallel",  # strategies wrap models and optimizers (ZeRO shards the optimizer)
    "data",
    "checkpoint",
    "monitor",  # metrics registry, sinks, HTTP server, alerts: below the trainer that publishes
    "adapters",  # LoRA and PEFT's files: applied to a model from outside it, below the trainer
    "train",
    "planner",
    # model loading for the commands (checkpoints, Hugging Face and quantized directories): it
    # reads train/'s configs and checkpoints, so it sits above train/ and planner/ (which cannot
    # see it) and below serve/ and apps/ (Note [The loading layer] in loading/model_source.h)
    "loading",
    "export",  # other tools' formats (Hugging Face directories, GGUF): only the commands see it
    "serve",  # the OpenAI-compatible server over infer/: nothing below sees it
]
# Siblings that must not see each other even though both sit above core.
FORBIDDEN = {("kernels/cpu", "kernels/reference"), ("kernels/cuda", "kernels/reference"),
             ("kernels/device", "kernels/reference"), ("kernels/device", "kernels/cpu"),
             ("kernels/cuda", "kernels/cpu"), ("train", "infer"), ("planner", "infer"),
             ("train", "serve"), ("planner", "serve"), ("train", "loading"), ("planner", "loading"),
             ("train", "export"), ("planner", "export")}


def layer_of(path: str):
    best = None
    for name in LAYERS:
        if path == name or path.startswith(name + "/"):
            if best is None or len(name) > len(best):
                best = name
    return best


# A model family's own headers: models/<family>/<file>.
FAMILY_HEADER = re.compile(r"^models/[^/]+/")


def family_includes(root: pathlib.Path, shown: str, include, skip_models: bool):
    """Errors for files under `root` (shown as `shown`/...) that include a family's header."""
    errors = []
    for f in sorted(root.rglob("*")):
        if f.suffix not in {".h", ".cc", ".cu", ".cuh"}:
            continue
        rel = f.relative_to(root).as_posix()
        if skip_models and (rel == "models" or rel.startswith("models/")):
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            m = include.match(line)
            if m and FAMILY_HEADER.match(m.group(1)):
                errors.append(f"{shown}/{rel}:{n}: includes the model family header '{m.group(1)}': "
                              "use models/causal_lm.h and models/registry.h")
    return errors


# What the trainer may see of parallel/: the seam (Note [The order of strategies] in
# parallel/parallelize.h), never a particular strategy's header (issue #46): a new strategy is
# one more implementation behind these, not an edit in train/.
PARALLEL_SEAM = {"parallel/parallelize.h", "parallel/update_strategy.h", "parallel/mesh.h", "parallel/placement.h",
                 "parallel/micro_batch_runner.h", "parallel/parallel_options.h"}


def strategy_includes(src: pathlib.Path, include):
    errors = []
    for f in sorted((src / "train").rglob("*")):
        if f.suffix not in {".h", ".cc"}:
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            m = include.match(line)
            if m and m.group(1).startswith("parallel/") and m.group(1) not in PARALLEL_SEAM:
                errors.append(f"src/train/{f.relative_to(src / 'train').as_posix()}:{n}: includes the strategy header "
                              f"'{m.group(1)}': train/ sees parallelism through {', '.join(sorted(PARALLEL_SEAM))}")
    return errors


def main() -> int:
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    include = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
    errors = family_includes(src, "src", include, skip_models=True)
    errors += strategy_includes(src, include)
    apps = src.parent / "apps"
    if apps.is_dir():
        errors += family_includes(apps, "apps", include, skip_models=False)
    for f in sorted(src.rglob("*")):
        if f.suffix not in {".h", ".cc", ".cu", ".cuh"}:
            continue
        rel = f.relative_to(src).as_posix()
        here = layer_of(rel)
        if here is None:
            errors.append(f"{rel}: not in any known layer (add it to tests/layering_test.py)")
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            m = include.match(line)
            if not m:
                continue
            there = layer_of(m.group(1))
            if there is None:
                continue  # a third-party or same-folder header
            if LAYERS.index(there) > LAYERS.index(here) or (here, there) in FORBIDDEN:
                errors.append(f"{rel}:{n}: layer '{here}' includes '{m.group(1)}' from layer '{there}'")
    for e in errors:
        print(e)
    print(f"layering: {len(errors)} violation(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
