#!/usr/bin/env python3
"""`trident report` as a browser draws it (issue #47 item 5): headless Chromium (Debian's
`chromium`, scripts/install-deps.sh) screenshots the report of a synthetic run (60 steps, a
rollback from step 40 to 30, lr around 5e-4, step times near 0) in a 1280-pixel window, and the
image must be non-trivial (many colours, a fair share of non-white pixels) with the charts
spanning the page's width (the plot areas' grey reaches past 90% of the width). Exits 77
(skipped) with a message when chromium is not installed.

    report_screenshot_test.py TRIDENT
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77


def read_png(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG, without PIL."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat, width = 8, b"", 0
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        chunk = data[at + 8:at + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and color in (2, 6), f"PNG depth {depth} colour type {color}"
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        at += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def synthetic_run(d):
    lines = []
    for s in range(1, 41):
        lines.append({"step": s, "loss": 5.0 - 0.05 * s, "lr": 5.275e-4, "grad_norm": 1.0 + s % 3,
                      "tokens_per_s": 20000 + 37 * s, "step_s": 0.012, "data_s": 0.0004, "forward_backward_s": 0.009,
                      "comm_wait_s": 0.0, "optimizer_s": 0.002, "elapsed_s": 0.012 * s})
    lines.append({"rollback": {"from_step": 40, "to_step": 30}})
    for s in range(31, 61):
        lines.append({"step": s, "loss": 3.6 - 0.02 * s, "lr": 5.275e-4 * (60 - s) / 30, "grad_norm": 1.5,
                      "tokens_per_s": 21000, "step_s": 0.011, "data_s": 0.0003, "forward_backward_s": 0.008,
                      "comm_wait_s": 0.0, "optimizer_s": 0.002, "elapsed_s": 0.5 + 0.011 * s})
        if s % 20 == 0:
            lines.append({"step": s, "val_loss": 3.7 - 0.02 * s})
    os.makedirs(d)
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))


def main():
    trident = sys.argv[1]
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print("report_screenshot: skipped: no chromium (scripts/install-deps.sh installs Debian's)")
        return SKIP
    with tempfile.TemporaryDirectory() as d:
        run = os.path.join(d, "run")
        synthetic_run(run)
        r = subprocess.run([trident, "report", run], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            print(f"FAIL: report: exit {r.returncode}: {r.stderr}", file=sys.stderr)
            return 1
        png = os.path.join(d, "report.png")
        r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            f"--user-data-dir={d}/profile", "--window-size=1280,1600", f"--screenshot={png}",
                            "file://" + os.path.join(run, "report.html")],
                           capture_output=True, text=True, timeout=120)
        if not os.path.exists(png):
            print(f"FAIL: chromium wrote no screenshot: exit {r.returncode}: {r.stderr[-2000:]}", file=sys.stderr)
            return 1
        shutil.copy(png, os.environ.get("TRIDENT_SCREENSHOT_OUT", os.devnull)) \
            if os.environ.get("TRIDENT_SCREENSHOT_OUT") else None
        width, height, rows = read_png(png)
    failures = []
    colours = {p for row in rows[::4] for p in row[::4]}
    ink = sum(1 for row in rows[::4] for p in row[::4] if sum(p) < 720) / max(1, len(rows[::4]) * len(rows[0][::4]))
    if width < 1000 or len(colours) < 20 or ink < 0.03:
        failures.append(f"a trivial screenshot: {width}x{height}, {len(colours)} colours, {ink:.1%} non-white")
    # The plot areas' fill (#fafafa) and border (#bbb): how far right do they reach?
    right = max((x for row in rows for x, p in enumerate(row) if p in ((250, 250, 250), (187, 187, 187))), default=0)
    if right < 0.9 * width:
        failures.append(f"the charts reach {right} of {width} pixels: not the page's width")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    if not failures:
        print(f"report_screenshot: ok ({width}x{height}, {len(colours)} colours, {ink:.1%} ink, charts to x={right})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
