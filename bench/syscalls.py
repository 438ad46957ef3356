#!/usr/bin/env python3
"""System calls per steady heartbeat (not a test): each opstatus binary given
runs `run --interval 1s` against one real kube-apiserver on loopback, as in
a pod (its own ServiceAccount); after its fifth write, `strace -c -f` is
attached for --seconds, and the counts are divided by the writes the audit
log saw meanwhile.

  python3 bench/syscalls.py [--seconds 20] LABEL=BINARY [LABEL=BINARY ...]
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ControlPlane, wait_writes, writes  # noqa: E402

RULES = ("- {apiGroups: [''], resources: [configmaps], resourceNames: [kube9-operator-status], "
         "verbs: [get, patch, create]}")


def measure(cp, work, label, binary, seconds):
    sa_dir, _, user = cp.identity(f"sys-{label}", "writer", RULES, work)
    env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=cp.env["APISERVER_PORT"],
               OPSTATUS_SERVICE_ACCOUNT_DIR=sa_dir)
    p = subprocess.Popen([binary, "run", "--interval", "1s", "--no-final-status"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = f"{work}/{label}.strace"
    try:
        assert wait_writes(cp, user, 5, 60), f"{label}: no 5 writes"
        before = len(writes(cp, user))
        s = subprocess.Popen(["strace", "-c", "-f", "-o", out, "-p", str(p.pid)], stderr=subprocess.DEVNULL)
        time.sleep(seconds)
        s.send_signal(signal.SIGINT)
        s.wait(10)
        beats = len(writes(cp, user)) - before
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)
    counts = {}
    for line in open(out):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] not in ("total",):
            counts[f[-1]] = int(f[3])
    return beats, counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("binaries", nargs="+", help="LABEL=PATH")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="opstatus-syscalls-")
    cp = ControlPlane(f"{work}/control-plane")
    try:
        results = [(label, *measure(cp, work, label, path, args.seconds))
                   for label, path in (b.split("=", 1) for b in args.binaries)]
    finally:
        cp.stop()
    names = sorted({n for _, _, c in results for n in c}, key=lambda n: -max(c.get(n, 0) for _, _, c in results))
    print("| system call per heartbeat | " + " | ".join(f"{label} ({beats} heartbeats)" for label, beats, _ in results)
          + " |")
    print("|---|" + "---|" * len(results))
    for n in names:
        print(f"| {n} | " + " | ".join(f"{c.get(n, 0) / beats:.1f}" for _, beats, c in results) + " |")
    print("| **total** | " + " | ".join(f"**{sum(c.values()) / beats:.1f}**" for _, beats, c in results) + " |")


if __name__ == "__main__":
    main()
