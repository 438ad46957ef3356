#!/usr/bin/env python3
"""The latencies the tests do not assert (they judge time by order and
count, so that a busy machine cannot fail them): measured here, against a
real kube-apiserver on loopback, on whatever machine runs it.

- the first status write after the process starts (the API server's audit
  log against the moment of the spawn);
- the gaps between heartbeats at a 1 s interval (median, least, most);
- a probe's answer time (`GET /healthz` on the endpoint), while heartbeats
  go on.

Run by `scripts/bench.sh --timings [--runs 3] [--heartbeats 20]
[--probes 200]`; prints a Markdown table, one row per run.
"""

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import CM, ControlPlane, parse_time  # noqa: E402

RULES = ("- {apiGroups: [''], resources: [configmaps], resourceNames: [kube9-operator-status], "
         "verbs: [get, patch, create]}")


def endpoint(log_path, deadline):
    """The endpoint's address, from the log line "... on http://ADDR"."""
    while time.monotonic() < deadline:
        for line in open(log_path, errors="replace"):
            if "on http://" in line:
                host, port = line.split("on http://", 1)[1].strip().rsplit(":", 1)
                return host, int(port)
        time.sleep(0.05)
    raise SystemExit("opstatus logged no endpoint address")


def probe_ms(host, port):
    started = time.monotonic()
    c = http.client.HTTPConnection(host, port, timeout=5)
    c.request("GET", "/healthz")
    c.getresponse().read()
    c.close()
    return (time.monotonic() - started) * 1000


def one_run(cp, args, work, n):
    ns = f"timings-{n}"
    sa_dir, _, user = cp.identity(ns, "writer", RULES, work)
    env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=cp.env["APISERVER_PORT"],
               OPSTATUS_SERVICE_ACCOUNT_DIR=sa_dir)
    log_path = f"{work}/opstatus-{n}.log"
    spawned = time.time()
    proc = subprocess.Popen([args.opstatus, "run", "--interval", "1s", "--listen", "127.0.0.1:0"], env=env,
                            stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))
    try:
        host, port = endpoint(log_path, time.monotonic() + 30)
        probes = [probe_ms(host, port) for _ in range(args.probes)]
        deadline = time.monotonic() + args.heartbeats * 3 + 30
        writes = []
        while time.monotonic() < deadline:
            writes = [parse_time(e["requestReceivedTimestamp"]) for e in cp.audit(user)
                      if e["verb"] == "patch" and "force=true" in e["requestURI"] and CM in e["requestURI"]]
            if len(writes) >= args.heartbeats:
                break
            time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    if len(writes) < args.heartbeats:
        raise SystemExit(f"run {n}: {len(writes)} heartbeats, wanted {args.heartbeats}")
    gaps = [(b - a) * 1000 for a, b in zip(writes, writes[1:])]
    return {
        "first": (writes[0] - spawned) * 1000,
        "gap_median": statistics.median(gaps), "gap_min": min(gaps), "gap_max": max(gaps),
        "probe_median": statistics.median(probes), "probe_max": max(probes),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--opstatus", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--heartbeats", type=int, default=20)
    parser.add_argument("--probes", type=int, default=200)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="opstatus-timings-")
    cp = ControlPlane(f"{work}/control-plane")
    try:
        rows = [one_run(cp, args, work, n) for n in range(args.runs)]
    finally:
        cp.stop()
    load = open("/proc/loadavg").read().split()[0]
    print(f"Timings at a 1 s interval ({args.heartbeats} heartbeats, {args.probes} probes a run; "
          f"load average {load} at the end):\n")
    print("| run | first write after spawn | heartbeat gap median (least–most) | probe median (most) |")
    print("|---|---|---|---|")
    for n, r in enumerate(rows, 1):
        print(f"| {n} | {r['first']:.0f} ms | {r['gap_median']:.0f} ms ({r['gap_min']:.0f}–{r['gap_max']:.0f}) "
              f"| {r['probe_median']:.2f} ms ({r['probe_max']:.1f}) |")


if __name__ == "__main__":
    main()
