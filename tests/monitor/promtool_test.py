#!/usr/bin/env python3
"""deploy/prometheus/ is what Prometheus accepts: `promtool check config` on the scrape
config, `promtool check rules` on the alerting rules, and `promtool test rules` on their unit
tests (each rule fires on the series that should trip it and not on healthy ones). Skips,
saying so, where promtool is missing (Debian: apt-get install prometheus).

    promtool_test.py DEPLOY_DIR
"""
import os
import shutil
import subprocess
import sys

SKIP = 77


def main():
    deploy = sys.argv[1]
    promtool = shutil.which("promtool")
    if promtool is None:
        print("SKIP: promtool not found (Debian package prometheus: scripts/install-deps.sh installs it)")
        return SKIP
    failures = []
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", "trident_rules.yml"],
                 ["test", "rules", "trident_rules_test.yml"]):
        r = subprocess.run([promtool] + args, cwd=deploy, capture_output=True, text=True, timeout=120)
        print("promtool", " ".join(args), "->", r.returncode)
        if r.returncode != 0:
            failures.append(f"promtool {' '.join(args)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
