#!/usr/bin/env python3
"""Soak: opstatus "as in a pod" against a real kube-apiserver for many
heartbeats, with a fault injected every --fault-every heartbeats, in turn:
restart the API server, rotate the token to a second ServiceAccount (and
delete the first), revoke the RoleBinding (restored one fault later).
Run it with scripts/soak.sh.

Heartbeats are opstatus's: it runs at --interval 1s, so heartbeat N is due
N seconds after it started, and the loop wakes at each of those instants
(a fault that takes 5 s to inject does not stretch the count; the loop
catches up). Prints a summary and exits non-zero unless: opstatus never exited, every
fault was recovered from (a successful write after it), and its anonymous
memory (heap, stacks: what a leak grows) stayed flat, the median of the
last tenth of samples within 256 KiB of the first tenth. The whole RSS is
printed beside it: it also grows by the binary's pages that only the fault
paths run (the code a steady agent runs is linked apart from the rest:
docs/footprint.md), which are read from the binary, at most its size, and
are no leak.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench import ControlPlane, parse_time, status_kib  # noqa: E402

ROLE_RULES = ("- {apiGroups: [''], resources: [configmaps], resourceNames: [kube9-operator-status], "
              "verbs: [get, patch, create]}")


def bind(cp, ns):
    """Binds both identities to the writer Role (the RBAC a revoke removes)."""
    for sa in ("writer-a", "writer-b"):
        cp.kubectl("-n", ns, "create", "rolebinding", sa, "--role=writer-a", f"--serviceaccount={ns}:{sa}")


def successful_writes(cp, users):
    events = []
    for user in users:
        events += [e for e in cp.audit(user) if e["verb"] == "patch" and e["responseStatus"]["code"] in (200, 201)]
    return sorted(parse_time(e["requestReceivedTimestamp"]) for e in events)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opstatus", required=True)
    ap.add_argument("--heartbeats", type=int, default=10000)
    ap.add_argument("--fault-every", type=int, default=180, help="heartbeats between faults")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="opstatus-soak-")
    cp = ControlPlane(f"{work}/control-plane")
    ns = "soak"
    try:
        sa_dir, _, user_a = cp.identity(ns, "writer-a", ROLE_RULES, work)
        # A second identity to rotate to, bound to the same permissions.
        cp.kubectl("-n", ns, "create", "serviceaccount", "writer-b")
        cp.kubectl("-n", ns, "delete", "rolebinding", "writer-a")
        bind(cp, ns)
        user_b = f"system:serviceaccount:{ns}:writer-b"
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=cp.env["APISERVER_PORT"],
                   OPSTATUS_SERVICE_ACCOUNT_DIR=sa_dir, RUST_LOG="warn")
        log = open(f"{work}/opstatus.log", "wb")
        p = subprocess.Popen([args.opstatus, "run", "--interval", "1s", "--no-final-status"], env=env, stderr=log)
        faults, rss, anon, revoked = [], [], [], False
        kinds = ["restart the API server", "rotate the token", "revoke RBAC"]
        started = time.time()
        next_fault = args.fault_every
        beat = 0
        while beat < args.heartbeats:
            beat += 1
            time.sleep(max(0.0, started + beat - time.time()))
            if p.poll() is not None:
                break
            rss.append(status_kib(p.pid, "VmRSS"))
            anon.append(status_kib(p.pid, "RssAnon"))
            if beat < next_fault:
                continue
            next_fault += args.fault_every
            kind = kinds[len(faults) % len(kinds)]
            at = time.time()
            if kind == "restart the API server":
                subprocess.run([f"{ROOT}/scripts/control-plane.sh", "stop-apiserver", cp.state], check=True)
                time.sleep(5)
                subprocess.run([f"{ROOT}/scripts/control-plane.sh", "start-apiserver", cp.state], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            elif kind == "rotate the token":
                current_b = os.path.exists(f"{work}/.rotated")
                sa = "writer-a" if current_b else "writer-b"
                token = cp.kubectl("create", "token", sa, "-n", ns, "--duration=3600s",
                                   "--audience=https://kubernetes.default.svc").strip()
                with open(f"{sa_dir}/.token.tmp", "w") as f:
                    f.write(token)
                os.rename(f"{sa_dir}/.token.tmp", f"{sa_dir}/token")
                if current_b:
                    os.remove(f"{work}/.rotated")
                else:
                    open(f"{work}/.rotated", "w").close()
            elif revoked:
                bind(cp, ns)
                revoked = False
                kind = "restore RBAC"
            else:
                cp.kubectl("-n", ns, "delete", "rolebinding", "writer-a", "writer-b")
                revoked = True
            faults.append((kind, at))
            print(f"heartbeat {beat}: {kind}", file=sys.stderr, flush=True)
        exited = p.poll()
        if revoked:
            bind(cp, ns)
        time.sleep(6)  # Let the last fault recover before judging it.
        alive = p.poll() is None
        p.send_signal(signal.SIGTERM)
        p.wait(10)
        writes = successful_writes(cp, [user_a, user_b])
    finally:
        cp.stop()

    recovered = []
    for kind, at in faults:
        after = [t for t in writes if t > at + (5 if kind == "restart the API server" else 0)]
        recovered.append((kind, after[0] - at if after else None))
    tenth = max(1, len(rss) // 10)
    rss_first, rss_last = statistics.median(rss[:tenth]), statistics.median(rss[-tenth:])
    anon_first, anon_last = statistics.median(anon[:tenth]), statistics.median(anon[-tenth:])
    elapsed = time.time() - started
    print(f"\nsoak: {beat} heartbeats at 1 s in {elapsed / 60:.1f} min, {len(writes)} successful writes, "
          f"{len(faults)} faults")
    print(f"opstatus exits: {0 if exited is None and alive else 1}")
    print(f"RSS median, first tenth {rss_first:.0f} KiB, last tenth {rss_last:.0f} KiB; of it anonymous, "
          f"{anon_first:.0f} and {anon_last:.0f} KiB")
    for kind, delay in recovered:
        shown = f"{delay:.1f} s" if delay is not None else "NOT RECOVERED"
        print(f"  {kind}: next successful write after {shown}")
    ok = exited is None and alive and all(d is not None for _, d in recovered) and anon_last - anon_first <= 256
    shutil.rmtree(work, ignore_errors=True)
    print("soak: " + ("pass" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
