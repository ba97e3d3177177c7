#!/usr/bin/env python3
"""`trident report` (issue #23 item 6; src/monitor/run_report.h): on a tiny run with an alert
(memory_high with a fraction every host exceeds: one event at step 1) and a rollback
(not_finite + rollback_and_skip on an injected NaN at step 25), the HTML file is
self-contained (no script, no link, no URL but SVG's namespace), has the loss, lr, gradient
norm, throughput and step-time charts, the train-loss line has one point per step (30, the
rolled-back steps counted once) and the val-loss line one per evaluation (3), the alert and
the rollback are marked at their steps, and the alert table names the rule. metrics.jsonl
carries the allocator's bytes per category after every step, read back here: parameters 4 x the
model's parameter count, AdamW's state twice that, gradients (freed at the step's end) with a
peak of the parameters' size, activations with a peak above 0, the in-use peak, reserved bytes
and RSS; the report draws them (one point per step) in its memory panel. On a run still
writing (a last line cut mid-write) it still works; a directory without metrics.jsonl is an
error naming it, and so is a line whose key holds another type than the report reads (the file,
the line, the key and the type), and an --out that is the metrics.jsonl or alerts.jsonl it reads.
Issue #47 item 5: a summary table above the charts (final and best losses, median tokens/s,
wall time, layout, model, batch), a row for the rollback (25 -> 20, its 5 discarded steps, the
NaN loss, the rule), the discarded steps as their own dashed series, y ticks that are 1-2-5
numbers with few digits (no negative times), a "step" x axis and charts as wide as the page.
Issue #51 item 7: the same run's lines given "moe_layers" (train/moe_metrics.h) get the
expert-load panel: a heatmap per layer with a column per step of the trajectory whose cells hold
the tokens per expert, the last step's counts in words, the busiest expert's share, the dropped
choices (some layer drops) and the load-balancing loss as lines, the all_to_all time where a layer
has one; a malformed "moe_layers" is refused
naming the key.

    report_test.py TRIDENT
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import prepare_corpus, report, tiny_args, write_alerts  # noqa: E402


def memory_ok(m, params):
    """A step line's memory: fp32 parameters, AdamW's two moments, the freed gradients' peak."""
    now, peak = m.get("memory_bytes", {}), m.get("memory_peak_bytes", {})
    return now.get("parameter") == 4 * params and now.get("optimizer_state") == 8 * params and \
        now.get("gradient") == 0 and peak.get("gradient") == 4 * params and peak.get("activation", 0) > 0 and \
        now.get("peak", 0) >= 4 * params + peak["activation"] and now.get("reserved", 0) > 0 and \
        now.get("rss", 0) > now["reserved"]


def moe_layers(step):
    """Synthetic "moe_layers" for a step: layer 1 even, layer 3 collapsing onto expert 2, with an
    exchange's cost."""
    busy = min(200, 60 + 5 * step)
    return [{"layer": 1, "tokens": [64, 64, 64, 64], "dropped": 0, "aux_loss": 2.0},
            {"layer": 3, "tokens": [(256 - busy) // 3, (256 - busy) // 3, busy, 256 - busy - 2 * ((256 - busy) // 3)],
             "dropped": step, "all_to_all_bytes": 4096, "all_to_all_s": 0.002}]


def check_expert_load(failures, trident, d, run):
    moe = os.path.join(d, "moe")
    shutil.copytree(run, moe, ignore=shutil.ignore_patterns("step_*", "rolled_back"))
    with open(os.path.join(moe, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    with open(os.path.join(moe, "metrics.jsonl"), "w") as f:
        for m in lines:
            if "loss" in m:
                m["moe_layers"] = moe_layers(m["step"])
            f.write(json.dumps(m) + "\n")
    r = subprocess.run([trident, "report", moe], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        failures.append(f"report with moe_layers: exit {r.returncode}\n{r.stderr}")
        return
    html = open(os.path.join(moe, "report.html")).read()
    figures = re.findall(r'<figure class="expert-load" data-layer="(\d+)" data-experts="(\d+)" data-columns="(\d+)">',
                         html)
    if figures != [("1", "4", "30"), ("3", "4", "30")]:  # the trajectory's 30 steps, rolled-back ones once
        failures.append(f"expert-load heatmaps {figures}, want layers 1 and 3, 4 experts, 30 columns")
    last = re.findall(r'<g class="column" data-step="30">(.*?)</g>', html)
    tokens = [[int(t) for t in re.findall(r'data-tokens="(\d+)"', g)] for g in last]
    if tokens != [moe_layers(30)[0]["tokens"], moe_layers(30)[1]["tokens"]]:
        failures.append(f"step 30's cells hold {tokens}, want {[l['tokens'] for l in moe_layers(30)]}")
    if "step 30: tokens per expert [18, 18, 200, 20]; the busiest expert took 78.1% (even: 25.0%); dropped 30" \
            not in html:
        failures.append("no words for layer 3's last step: " + str(re.findall(r'<p class="expert-load-last">.*?</p>', html)))
    points = re.findall(r'<figcaption>([^<]*)</figcaption>', html)
    for caption in ("Busiest expert's share of the choices (%)", "Dropped choices per step",
                    "Load-balancing loss per layer (even load: k)",
                    "Expert-parallel all_to_all time per step (ms, mean over ranks)"):
        if caption not in points:
            failures.append(f"no chart '{caption}' in the expert-load panel: {points}")


def main():
    trident = sys.argv[1]
    failures = []
    env = dict(os.environ, OMP_NUM_THREADS="1", TRIDENT_TEST_NAN_BATCH="24")
    with tempfile.TemporaryDirectory() as d:
        prepare_corpus(trident, d, env)
        config = write_alerts(os.path.join(d, "alerts.toml"), [
            {"name": "memory", "condition": "memory_high", "memory_fraction": 0.0001, "actions": "log"},
            {"name": "nan", "condition": "not_finite", "actions": "log,rollback_and_skip"}])
        run = os.path.join(d, "run")
        r = subprocess.run([trident, "train", "--config", config] + tiny_args(d) +
                           ["--train.steps=30", "--train.eval_interval=10", "--train.eval_batches=2",
                            "--train.checkpoint_interval=10", f"--train.out_dir={run}"],
                           env=env, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            failures.append(f"training: exit {r.returncode}\n{r.stderr[-2000:]}")
            return report("report", failures)
        params = re.search(r"model: (\d+) parameters", r.stderr + r.stdout)
        with open(os.path.join(run, "metrics.jsonl")) as f:
            rows = [m for m in map(json.loads, f) if "loss" in m]
        bad = [m["step"] for m in rows if not memory_ok(m, int(params.group(1)) if params else 0)]
        if not params or not rows or bad:
            failures.append(f"memory in metrics.jsonl: parameters {params and params.group(1)}, "
                            f"steps with wrong or missing memory_bytes {bad[:5]}: {rows[-1] if rows else None}")
        out = os.path.join(d, "report.html")
        r = subprocess.run([trident, "report", run, "--out", out], capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or not os.path.exists(out):
            failures.append(f"report: exit {r.returncode}\n{r.stderr}")
            return report("report", failures)
        html = open(out).read()
        urls = set(re.findall(r"https?://[^\"' <]+", html)) - {"http://www.w3.org/2000/svg"}
        if "<script" in html or "<link" in html or urls:
            failures.append(f"not self-contained: script {'<script' in html}, link {'<link' in html}, urls {urls}")
        for title in ("Loss", "Learning rate", "Gradient norm", "Throughput", "Step time split"):
            if f"<figcaption>{title}" not in html:
                failures.append(f"no chart '{title}'")
        points = dict(re.findall(r'data-name="([^"]+)" data-points="(\d+)"', html))
        if points.get("train loss") != "30" or points.get("val loss") != "3":
            failures.append(f"points per series {points}, want 30 train losses and 3 val losses")
        if "<figcaption>Memory by category" not in html or \
                any(points.get(name) != "30" for name in ("parameter", "optimizer", "peak", "reserved", "RSS")):
            failures.append(f"no memory panel with 30 points per line: {points}")
        if not re.search(r'class="alert" data-step="1"', html):
            failures.append("no alert marker at step 1")
        if not re.search(r'class="rollback" data-step="25"', html):
            failures.append("no rollback marker at step 25")
        if html.count('<td>memory_high</td>') != 1:  # quiet for `window` steps, a rollback or not
            failures.append(f"memory_high listed {html.count('<td>memory_high</td>')} times, not once")
        if not re.search(r'<tr class="alert-row"><td>1</td><td>memory</td><td>memory_high</td>', html) or \
                not re.search(r'<tr class="alert-row"><td>25</td><td>nan</td><td>not_finite</td>', html):
            failures.append("the alert table does not list both alerts")
        # Issue #47 item 5: a summary at the top, a row per rollback, the discarded steps drawn apart,
        # readable ticks on a step axis.
        summary = re.search(r'<table class="summary">(.*?)</table>', html, re.S)
        want = ("train loss", "val loss", "median throughput", "wall time", "rollbacks", "layout", "model", "batch")
        if not summary or any(f"<th>{k}</th>" not in summary.group(1) for k in want) or \
                html.index('class="summary"') > html.index("<figure>"):
            failures.append(f"no summary table above the charts with {want}: {summary and summary.group(1)[:800]}")
        elif "tp 1 x pp 1" not in summary.group(1) or not re.search(r"<th>train loss</th><td>\d+\.\d{4} at step 30; "
                                                                    r"best \d+\.\d{4} at step \d+", summary.group(1)):
            failures.append(f"summary without the layout or the final and best loss: {summary.group(1)[:800]}")
        if not re.search(r'<tr class="rollback-row"><td>25</td><td>20</td><td>21\.\.25 \(5 logged\)</td>'
                         r'<td>not finite</td><td>nan</td>', html):
            failures.append("no rollback row from step 25 to 20 with its 5 discarded steps, NaN loss and rule: " +
                            str(re.findall(r'<tr class="rollback-row">.*', html)))
        if points.get("discarded steps") != "4":  # 21..24 (25's loss is NaN)
            failures.append(f"discarded steps not drawn apart (want 4 points): {points}")
        labels = re.findall(r'<text class="ytick"[^>]*>([^<]*)</text>', html)
        bad_labels = [t for t in labels if not re.fullmatch(r"-?\d+(\.\d{1,4})?|\d(\.\d{1,2})?e-?\d+", t)]
        times = re.search(r"Step time split \(ms\)</figcaption>(.*?)</svg>", html, re.S)
        if not labels or bad_labels or not times or re.search(r'class="ytick"[^>]*>-', times.group(1)):
            failures.append(f"unreadable y ticks {bad_labels[:8]} (of {len(labels)}), or negative times")
        if html.count(">step</text>") < 5 or 'viewBox="0 0 1000' not in html or "svg{width:100%" not in html:
            failures.append("charts without a step axis label, or not as wide as the page")
        check_expert_load(failures, trident, d, run)
        # A run still writing: its last line cut mid-write.
        live = os.path.join(d, "live")
        shutil.copytree(run, live, ignore=shutil.ignore_patterns("step_*", "rolled_back"))
        with open(os.path.join(live, "metrics.jsonl"), "a") as f:
            f.write('{"step": 31, "loss": 1.2')
        r = subprocess.run([trident, "report", live], capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or not os.path.exists(os.path.join(live, "report.html")):
            failures.append(f"report of a run still writing: exit {r.returncode}\n{r.stderr}")
        # Not a run directory.
        r = subprocess.run([trident, "report", os.path.join(d, "nowhere")], capture_output=True, text=True, timeout=60)
        if r.returncode == 0 or "nowhere/metrics.jsonl" not in r.stderr:
            failures.append(f"report of a missing directory: exit {r.returncode}, {r.stderr}")
        # Over the files it reads.
        for name in ("metrics.jsonl", "alerts.jsonl"):
            with open(os.path.join(run, name)) as f:
                before = f.read()
            r = subprocess.run([trident, "report", run, "--out", os.path.join(run, ".", name)], capture_output=True,
                               text=True, timeout=60)
            with open(os.path.join(run, name)) as f:
                kept = f.read() == before
            if r.returncode == 0 or not kept or f"is the run's {name}" not in r.stderr:
                failures.append(f"report --out over {name}: exit {r.returncode}, kept {kept}: {r.stderr}")
        # A line whose key holds another type: the file, the line, the key and the type it must be.
        bad = os.path.join(d, "bad")
        os.makedirs(bad)
        good = '{"step": 1, "loss": null}'  # a NaN loss
        for metrics, alerts, want in (
                ([good, '{"step": "x", "loss": "y"}'], None, 'metrics.jsonl:2: key "step" must be an integer, not string "x"'),
                (['{"step": 1, "loss": "y"}'], None, 'metrics.jsonl:1: key "loss" must be a number or null, not string'),
                (['{"rollback": {"from_step": 2.5, "to_step": 1}}'], None,
                 'metrics.jsonl:1: key "rollback.from_step" must be an integer, not number 2.5'),
                (['{"step": 1, "memory_bytes": {"peak": "big"}}'], None, 'key "memory_bytes.peak" must be a number'),
                ([good, "[1, 2]"], None, "metrics.jsonl:2: not a JSON object"),
                ([good], ['{"step": 1, "rule": "r", "message": 3}'], 'alerts.jsonl:1: key "message" must be a string'),
                ([good], ['{"step": [1]}'], 'alerts.jsonl:1: key "step" must be an integer, not array [1]'),
                (['{"step": 1, "moe_layers": [{"layer": 1, "tokens": [1, "2"]}]}'], None,
                 'metrics.jsonl:1: key "moe_layers[layer 1].tokens[]" must be an integer, not string'),
                ([good], None, None)):
            with open(os.path.join(bad, "metrics.jsonl"), "w") as f:
                f.write("".join(line + "\n" for line in metrics))
            if alerts:
                with open(os.path.join(bad, "alerts.jsonl"), "w") as f:
                    f.write("".join(line + "\n" for line in alerts))
            elif os.path.exists(os.path.join(bad, "alerts.jsonl")):
                os.remove(os.path.join(bad, "alerts.jsonl"))
            r = subprocess.run([trident, "report", bad], capture_output=True, text=True, timeout=60)
            if (r.returncode != 1 or want not in r.stderr) if want else r.returncode != 0:
                failures.append(f"report of {metrics} {alerts}: exit {r.returncode}, want {want!r}: {r.stderr}")
    return report("report", failures)


if __name__ == "__main__":
    sys.exit(main())
