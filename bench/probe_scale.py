#!/usr/bin/env python3
"""Probe-scale benchmark: what opstatus's OLM probes cost as the custom
resources grow, beside the peers doing the same job: a kube-rs reflector
(bench/peers/src/kube_reflector.rs) and a client-go shared informer
(bench/peers/client-go/informer.go). Run it with `scripts/bench.sh
--probe-scale [options]` (it builds the peers), or directly:

    python3 bench/probe_scale.py --opstatus PATH [--peer kube-rs=PATH]
        [--peer client-go=PATH] [--scales 1000,10000] [--window 120]
        [--flips 6] [--opstatus-also LABEL=PATH[,FLAG...]]

One real kube-apiserver (scripts/control-plane.sh, audit log at Metadata
level) and, per scale N, a namespace holding N Foos
(tests/fixtures/crds/foos.example.com.yaml) as users have them: a spec of
~1 KiB and a `status.conditions` of three entries (`Migrating=False`,
`Ready=True`, `Available=True`). Every tool runs at once, each as its own
ServiceAccount in its own namespace with the same RBAC: list + watch on
the Foos in their namespace (manifests/olm), OLM's grant on its own
OperatorCondition (get, update, patch by name), and manifests/base's on
the status ConfigMap and events (which only opstatus uses):

    opstatus run --interval 60s --probe example.com/v1/foos:Upgradeable=!Migrating
        --probe-namespace foos-N --operator-condition demo-operator.v2.0.0
    kube-reflector foos-N demo-operator.v2.0.0
    informer foos-N demo-operator.v2.0.0

(opstatus's default check interval: 5 s; `--opstatus-also` runs another
opstatus beside them, its flags added: two builds, or a flag on and off,
measured over the same Foos at once). Each evaluates
`Upgradeable=!Migrating` and writes its OperatorCondition's `Upgradeable`
(`update`) when it flips. Per scale and tool, from the audit log (the API
server's own clock) and /proc:

- initial list: from the process's start to its first OperatorCondition
  write (`Upgradeable=True`, "N checked"), and the list requests it made
  before it;
- flip -> OperatorCondition: one Foo's `Migrating` patched to `True` and
  back (--flips, alternating), each timed from the admin's PATCH to each
  tool's OperatorCondition `update`, both as the API server received them;
  median and max;
- then a steady window (--window s) with nothing changing: requests per
  minute (every request of the process, counted by requestReceivedTimestamp
  once the tools stopped: kube-apiserver v1.20 audits a watch of a custom
  resource only when it ends), CPU seconds per minute (all threads,
  /proc/PID/task/*/schedstat), steady RSS (median VmRSS sampled each
  second) and peak RSS (VmHWM at the end of the window).

Then the growth: steady RSS per 1,000 Foos between the smallest and the
largest scale. The tools start in a rotated order per scale. Prints
Markdown tables on stdout, progress on stderr.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import ROOT, ControlPlane, parse_time, proc_tasks_cpu_ns, status_kib  # noqa: E402

OC_NAME = "demo-operator.v2.0.0"
FOOS = "/apis/example.com/v1"
PROBE = "example.com/v1/foos:Upgradeable=!Migrating"
# manifests/base's Role (the ConfigMap by name, events) and OLM's grant on
# the OperatorCondition by name.
OPSTATUS_RULES = (
    "- {apiGroups: [''], resources: [configmaps], resourceNames: [kube9-operator-status], verbs: [get, patch, create]}\n"
    "- {apiGroups: [''], resources: [events], verbs: [create, patch]}\n"
    f"- {{apiGroups: [operators.coreos.com], resources: [operatorconditions], resourceNames: ['{OC_NAME}'], "
    "verbs: [get, update, patch]}")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def condition(kind, status):
    return {"type": kind, "status": status, "reason": "SetByBench", "message": "Set by the benchmark.",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}


class Admin:
    """The cluster admin over one kept HTTPS connection (thousands of
    kubectl processes would take many minutes)."""

    def __init__(self, env):
        self.host, self.port = "127.0.0.1", int(env["APISERVER_PORT"])
        self.ctx = ssl.create_default_context(cafile=env["CA_CERT"])
        self.token = env["ADMIN_TOKEN"]
        self.conn = None

    def request(self, method, path, body=None, content_type="application/json", ok=(200, 201)):
        for attempt in range(3):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
            try:
                data = json.dumps(body).encode() if body is not None else None
                headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
                if data is not None:
                    headers["Content-Type"] = content_type
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                payload = r.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
                continue
            if r.status not in ok:
                raise RuntimeError(f"{method} {path}: {r.status} {payload[:300]!r}")
            return json.loads(payload) if payload else None
        raise AssertionError("unreachable")

    def set_conditions(self, ns, name, conditions):
        self.request("PATCH", f"{FOOS}/namespaces/{ns}/foos/{name}/status",
                     {"status": {"conditions": [condition(k, s) for k, s in conditions]}},
                     content_type="application/merge-patch+json")


CALM = [("Migrating", "False"), ("Ready", "True"), ("Available", "True")]


def foo_spec(i):
    """~1 KiB of spec, as an operator's resources carry."""
    return {"replicas": 3, "image": f"registry.example.com/team/app:v1.{i % 50}",
            "config": {f"setting-{k:02d}": f"value-{i}-{k:02d}-" + "x" * 24 for k in range(20)}}


def create_foos(env, ns, count, threads=8):
    """`count` Foos in `ns`, each created with its spec and its status set
    (two requests: the status subresource ignores a status in the create)."""
    errors = []

    def worker(indices):
        admin = Admin(env)
        try:
            for i in indices:
                name = f"foo-{i:05d}"
                admin.request("POST", f"{FOOS}/namespaces/{ns}/foos",
                              {"apiVersion": "example.com/v1", "kind": "Foo",
                               "metadata": {"name": name, "namespace": ns}, "spec": foo_spec(i)})
                admin.set_conditions(ns, name, CALM)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(range(k, count, threads),)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


class Audit:
    """The audit log read incrementally: ResponseComplete events of the
    users asked for, parsed once (the log holds every Foo's creation)."""

    def __init__(self, path):
        self.path, self.offset, self.events, self.partial = path, 0, {}, ""

    def skip_to_end(self):
        self.offset = os.path.getsize(self.path)
        self.partial = ""

    def watch_user(self, user):
        self.events.setdefault(user, [])

    def poll(self):
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        self.offset += len(chunk)
        text = self.partial + chunk.decode("utf-8", "replace")
        lines = text.split("\n")
        self.partial = lines.pop()
        for line in lines:
            for user, out in self.events.items():
                if f'"username":"{user}"' in line:
                    e = json.loads(line)
                    if e["user"]["username"] == user and e["stage"] == "ResponseComplete":
                        e["_received"] = parse_time(e["requestReceivedTimestamp"])
                        e["_completed"] = parse_time(e["stageTimestamp"])
                        out.append(e)
        return self.events

    def of(self, user):
        return self.poll()[user]


def wait_for(fn, timeout, step=0.02):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return None


def oc_updates(events, since):
    return [e for e in events if e["verb"] == "update" and "/operatorconditions/" in e["requestURI"]
            and e["_received"] >= since]


def argv_of(binary, flags, data_ns):
    """An opstatus (`flags` a list, maybe empty) or a peer (`flags` None)."""
    if flags is not None:
        return [binary, "run", "--interval", "60s", "--probe", PROBE, "--probe-namespace", data_ns,
                "--operator-condition", OC_NAME] + flags
    return [binary, data_ns, OC_NAME]


def run_scale(cp, audit, admin, args, work, tools, n, data_ns):
    """Every tool at once over the `n` Foos of `data_ns`; one result each."""
    runs = []
    for label, binary, flags in tools:
        ns = f"{label}-{n}".replace("_", "-").lower()
        sa_dir, _, user = cp.identity(ns, "prober", OPSTATUS_RULES, work)
        # manifests/olm's probe reader, in the Foos' namespace.
        cp.kubectl("apply", "-f", "-", stdin=(
            f"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: probe-reader-{ns}, namespace: {data_ns}}}\n"
            "rules:\n- {apiGroups: [example.com], resources: [foos], verbs: [list, watch]}\n---\n"
            f"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: probe-reader-{ns}, namespace: {data_ns}}}\n"
            f"roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: probe-reader-{ns}}}\n"
            f"subjects: [{{kind: ServiceAccount, name: prober, namespace: {ns}}}]\n"))
        cp.kubectl("create", "-f", "-", stdin=json.dumps({
            "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
            "metadata": {"name": OC_NAME, "namespace": ns},
            "spec": {"deployments": ["demo-operator"], "serviceAccounts": ["prober"], "conditions": []}}))
        audit.watch_user(user)
        runs.append({"label": label, "n": n, "ns": ns, "user": user, "sa_dir": sa_dir, "binary": binary,
                     "flags": flags})
    audit.poll()
    # A rotated start order per scale: none always starts first.
    shift = args.scales.index(n) % len(runs)
    order = runs[shift:] + runs[:shift]
    for r in order:
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=cp.env["APISERVER_PORT"],
                   OPSTATUS_SERVICE_ACCOUNT_DIR=r["sa_dir"])
        env.pop("OPERATOR_CONDITION_NAME", None)
        r["log"] = f"{work}/{r['ns']}.log"
        logf = open(r["log"], "wb")
        r["start"] = time.time()
        r["proc"] = subprocess.Popen(argv_of(r["binary"], r["flags"], data_ns), env=env, stdout=logf, stderr=logf)
    try:
        for r in runs:
            first = wait_for(lambda: oc_updates(audit.of(r["user"]), r["start"]), args.initial_timeout, 0.05)
            if not first:
                r["failed"] = f"no OperatorCondition write in {args.initial_timeout:.0f} s: " + \
                    open(r["log"], errors="replace").read()[-300:]
                log(f"{r['label']} {n}: FAILED: {r['failed']}")
                continue
            ready = first[0]["_received"]
            lists = [e for e in audit.of(r["user"]) if e["verb"] == "list" and "/foos" in e["requestURI"]
                     and e["_received"] < ready]
            r["initial_s"] = ready - r["start"]
            r["initial_pages"] = len(lists)
            oc = admin.request("GET", f"/apis/operators.coreos.com/v2/namespaces/{r['ns']}/operatorconditions/{OC_NAME}")
            up = next((c for c in oc["spec"]["conditions"] if c["type"] == "Upgradeable"), {})
            if up.get("status") != "True" or f"({n} checked)" not in up.get("message", ""):
                r["failed"] = f"first write: {up}"
            log(f"{r['label']} {n}: Upgradeable=True written {r['initial_s']:.2f} s after start "
                f"({len(lists)} list requests before)")
        live = [r for r in runs if "failed" not in r]
        one = f"foo-{n * 617 // 1000:05d}"
        for r in live:
            r["flips"] = []
        for i in range(args.flips):
            time.sleep(2.0 + (i * 0.37) % 1.0)  # land at different points of opstatus's check cycle
            blocking = i % 2 == 0
            before = time.time()
            admin.set_conditions(data_ns, one, [("Migrating", "True" if blocking else "False")] + CALM[1:])
            patched = wait_for(lambda: [e for e in audit.of("admin") if e["verb"] == "patch" and
                                        f"/foos/{one}/status" in e["requestURI"] and e["_received"] >= before - 0.005],
                               5)
            assert patched, "the admin's patch is not in the audit log"
            t_patch = patched[-1]["_received"]
            for r in live:
                written = wait_for(lambda: oc_updates(audit.of(r["user"]), t_patch), 60)
                r["flips"].append(written[0]["_received"] - t_patch if written else float("inf"))
            log(f"{n}: flip {i + 1}/{args.flips} ({'block' if blocking else 'unblock'}) -> " +
                ", ".join(f"{r['label']} {r['flips'][-1] * 1000:.0f} ms" for r in live))
        time.sleep(5)  # anything the flips started (events, a check) is over

        # The steady window: nothing changes.
        w0 = time.time()
        for r in live:
            r["rss"], r["cpu0"] = [], proc_tasks_cpu_ns(r["proc"].pid)
        while time.time() < w0 + args.window:
            for r in live:
                r["rss"].append(status_kib(r["proc"].pid, "VmRSS"))
            time.sleep(1)
        w1 = time.time()
        for r in live:
            r["cpu_s_per_min"] = (proc_tasks_cpu_ns(r["proc"].pid) - r["cpu0"]) / 1e9 / ((w1 - w0) / 60)
            r["peak_rss_kib"] = status_kib(r["proc"].pid, "VmHWM")
            r["steady_rss_kib"] = statistics.median(r["rss"])
    finally:
        for r in runs:
            if "proc" in r:
                r["proc"].send_signal(signal.SIGTERM)
        for r in runs:
            if "proc" in r:
                try:
                    r["proc"].wait(15)
                except subprocess.TimeoutExpired:
                    r["proc"].kill()
                    r["proc"].wait(5)

    # Watches are audited once they ended; the tools stopped, so all have.
    time.sleep(2)
    for r in live:
        ev = audit.of(r["user"])
        in_window = [e for e in ev if w0 <= e["_received"] < w1]
        r["window_s"] = w1 - w0
        r["all_per_min"] = len(in_window) / ((w1 - w0) / 60)
        r["foo_per_min"] = len([e for e in in_window if "/foos" in e["requestURI"]]) / ((w1 - w0) / 60)
        r["verbs"] = sorted({f"{e['verb']} {e['objectRef'].get('resource', '?')}" for e in in_window
                             if e.get("objectRef")})
        log(f"{r['label']} {n}: window {r['window_s']:.0f} s: {len(in_window)} requests ({', '.join(r['verbs'])}); "
            f"CPU {r['cpu_s_per_min']:.3f} s/min; peak RSS {r['peak_rss_kib']} KiB, steady {r['steady_rss_kib']} KiB")
    for r in runs:
        r.pop("proc", None)
        # opstatus says each change of the published health in its log.
        r["health"] = [line.split("health=", 1)[1].split(",", 1)[0] for line in open(r["log"], errors="replace")
                       if "Status updated:" in line and "health=" in line]
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opstatus", required=True, help="the (static) opstatus binary")
    ap.add_argument("--peer", action="append", default=[], metavar="LABEL=PATH",
                    help="a peer run beside opstatus: kube-reflector or the client-go informer (repeatable)")
    ap.add_argument("--scales", type=lambda v: [int(x) for x in v.split(",")], default=[1000, 10000])
    ap.add_argument("--window", type=float, default=120, help="seconds of nothing changing, counted")
    ap.add_argument("--flips", type=int, default=6, help="condition flips per scale (alternating)")
    ap.add_argument("--initial-timeout", type=float, default=300, help="seconds to wait for a first answer")
    ap.add_argument("--opstatus-also", action="append", default=[], metavar="LABEL=PATH[,FLAG...]",
                    help="another opstatus beside the first, with these flags added (repeatable), e.g. "
                         "off=target/x86_64-unknown-linux-musl/release/opstatus,--condition-metrics-max-types=0; "
                         "LABEL names its namespace (lower case, digits, '-')")
    args = ap.parse_args()
    tools = [("opstatus", os.path.abspath(args.opstatus), [])]
    for also in args.opstatus_also:
        label, rest = also.split("=", 1)
        binary, *flags = rest.split(",")
        tools.append((label, os.path.abspath(binary), flags))
    tools += [(a.split("=", 1)[0], os.path.abspath(a.split("=", 1)[1]), None) for a in args.peer]

    work = tempfile.mkdtemp(prefix="opstatus-probe-scale-")
    cp = ControlPlane(f"{work}/control-plane")
    results = []
    try:
        for name in ("foos.example.com", "operatorconditions.operators.coreos.com"):
            crd = open(f"{ROOT}/tests/fixtures/crds/{name}.yaml").read()
            if cp.env.get("KUBE_FLAVOR", "1.20") == "1.20":  # as tests/support/control_plane.rs does
                crd = crd.replace("group: {type: string}", "group: {type: string, nullable: true}")
            cp.kubectl("apply", "-f", "-", stdin=crd)
            cp.kubectl("wait", "--for=condition=Established", "--timeout=30s", f"crd/{name}")
        admin = Admin(cp.env)
        audit = Audit(cp.env["AUDIT_LOG"])
        for n in args.scales:
            data_ns = f"foos-{n}"
            cp.kubectl("create", "namespace", data_ns)
            t = time.time()
            create_foos(cp.env, data_ns, n)
            log(f"created {n} Foos (~1 KiB spec, 3 conditions) in {time.time() - t:.1f} s")
            audit.skip_to_end()
            audit.watch_user("admin")
            results += run_scale(cp, audit, admin, args, work, tools, n, data_ns)
            audit.events = {"admin": []}
            # The next scale's tools start on a quiet server.
            cp.kubectl("delete", "namespace", data_ns, "--wait=false")
    finally:
        cp.stop()
        shutil.rmtree(work, ignore_errors=True)

    flavor = cp.env.get("KUBE_FLAVOR", "1.20")
    server = "v1.20.2 (the Debian build)" if flavor == "1.20" else cp.env.get("KUBE_GIT_VERSION", flavor)
    print(f"\nAll tools at once against kube-apiserver {server} on loopback, one namespace of N Foos (~1 KiB spec, "
          f"3 conditions), each probing `Upgradeable=!Migrating` and updating its OperatorCondition on a flip; "
          f"{args.flips} flips, then a {args.window:.0f} s window with nothing changing.\n")
    print("| Foos | tool | initial list → first answer | steady RSS | peak RSS | CPU / min idle | requests / min idle "
          "(on the Foos) | flip → OperatorCondition, median (max) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        if "failed" in r:
            print(f"| {r['n']:,} | {r['label']} | failed: {r['failed'][:160]} ||||||")
            continue
        flips = f"{statistics.median(r['flips']) * 1000:.0f} ms ({max(r['flips']) * 1000:.0f} ms)"
        print(f"| {r['n']:,} | {r['label']} | {r['initial_s']:.1f} s ({r['initial_pages']} list requests) "
              f"| {r['steady_rss_kib'] / 1024:.1f} MiB | {r['peak_rss_kib'] / 1024:.1f} MiB "
              f"| {r['cpu_s_per_min'] * 1000:.1f} ms | {r['all_per_min']:.2f} ({r['foo_per_min']:.2f}) | {flips} |")
    ok = [r for r in results if "failed" not in r]
    print("\nopstatus's published health from start to stop: " + "; ".join(
        f"{r['n']:,}: {' → '.join(r['health']) or 'none'}" for r in results if r["label"] == "opstatus"))
    print("\nGrowth (steady RSS per 1,000 Foos, smallest to largest scale):")
    for label, _, _ in tools:
        mine = sorted((r for r in ok if r["label"] == label), key=lambda r: r["n"])
        if len(mine) >= 2 and mine[-1]["n"] > mine[0]["n"]:
            per = (mine[-1]["steady_rss_kib"] - mine[0]["steady_rss_kib"]) / ((mine[-1]["n"] - mine[0]["n"]) / 1000)
            print(f"- {label}: {per:.0f} KiB per 1,000 Foos ({mine[0]['n']:,} → {mine[-1]['n']:,})")
    top = max((r["n"] for r in ok), default=None)
    at_top = {r["label"]: r for r in ok if r["n"] == top}
    me = at_top.get("opstatus")
    peers = [r for label, r in at_top.items() if dict((t[0], t[2]) for t in tools)[label] is None]
    if me and peers:
        rss = min(p["steady_rss_kib"] for p in peers) / me["steady_rss_kib"]
        fastest = min(p["initial_s"] for p in peers)
        print(f"\nGoals at {top:,} Foos: steady RSS ≥ 5× below both peers: {rss:.1f}× — "
              f"{'met' if rss >= 5 else 'NOT met'}; flip median ≤ 1 s: "
              f"{statistics.median(me['flips']) * 1000:.0f} ms — "
              f"{'met' if statistics.median(me['flips']) <= 1 else 'NOT met'}; initial list within 1.2× of the "
              f"faster peer: {me['initial_s']:.1f} s vs {fastest:.1f} s ({me['initial_s'] / fastest:.2f}×) — "
              f"{'met' if me['initial_s'] <= 1.2 * fastest else 'NOT met'}; 0 requests / min idle on the Foos: "
              f"{me['foo_per_min']:.2f} — {'met' if me['foo_per_min'] == 0 else 'NOT met'} (all requests, the "
              f"60 s heartbeat included: {me['all_per_min']:.2f}).")


if __name__ == "__main__":
    main()
