#!/usr/bin/env python3
"""Probe-scale benchmark: what opstatus's OLM probes
cost with many custom resources and nothing changing. Run it with
`scripts/bench.sh --probe-scale [options]`, or directly:

    python3 bench/probe_scale.py --opstatus PATH [--scales 100,2000,10000]
        [--window 120] [--flips 6] [--also before=PATH [--also-at 2000]]

One real kube-apiserver (scripts/control-plane.sh, audit log at Metadata
level) and, per scale N, a namespace holding N Foos (tests/fixtures/crds/
foos.example.com.yaml) whose status says `Migrating=False`. opstatus runs
as its own ServiceAccount in its own namespace, as in a pod, with exactly
the RBAC of manifests/base (its ConfigMap by name, events), manifests/olm
(list + watch on the Foos, granted in the Foos' namespace) and OLM's grant
on its OperatorCondition (get, update, patch by name):

    opstatus run --interval 60s --probe example.com/v1/foos:Upgradeable=!Migrating
        --probe-namespace foos-N --operator-condition demo-operator.v2.0.0

(default check interval: 5 s). Per scale and build, from the audit log
(the API server's own clock):

- initial list: from start to the first OperatorCondition write
  (`Upgradeable=True`, "N checked"): the list's pages and the API server's
  time serving them;
- flip -> OperatorCondition: one Foo's `status.conditions` patched to
  `Migrating=True` and back (--flips, alternating), each timed from the
  admin's PATCH to opstatus's OperatorCondition `update`, both as the API
  server received them; median and max;
- then a steady window (--window s) with nothing changing: requests on the
  Foos (lists, watches) and every request of the process (heartbeats
  included), per minute. kube-apiserver v1.20 audits a watch of a custom
  resource only when it ends (and the policy omits RequestReceived), so
  opstatus is stopped at the end of the window and the requests are then
  counted by their requestReceivedTimestamp in the window;
- API-server time serving them, from the ResponseComplete events
  (stageTimestamp - requestReceivedTimestamp): summed over the window's
  lists per minute; for watches, the time the watch was open within the
  window (idle streaming: a held connection, not work);
- opstatus peak RSS (VmHWM, just before it is stopped) and steady RSS
  (median VmRSS sampled each second over the window).

--also LABEL=PATH runs another build the same way at the --also-at scales
(e.g. the build before watches, which re-lists every check).
Prints a Markdown table on stdout, progress on stderr.
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
from bench import ROOT, ControlPlane, parse_time, status_kib  # noqa: E402

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


def create_foos(env, ns, count, threads=3):
    """`count` Foos in `ns`, each created and its status set (two requests:
    the status subresource ignores a status in the create)."""
    errors = []

    def worker(indices):
        admin = Admin(env)
        try:
            for i in indices:
                name = f"foo-{i:05d}"
                admin.request("POST", f"{FOOS}/namespaces/{ns}/foos",
                              {"apiVersion": "example.com/v1", "kind": "Foo",
                               "metadata": {"name": name, "namespace": ns}, "spec": {}})
                admin.set_conditions(ns, name, [("Migrating", "False")])
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


def run_one(cp, audit, admin, args, work, label, binary, n, data_ns):
    ns = f"{label}-{n}".replace("_", "-").lower()
    sa_dir, _, user = cp.identity(ns, "opstatus", OPSTATUS_RULES, work)
    # manifests/olm's probe reader, in the Foos' namespace.
    cp.kubectl("apply", "-f", "-", stdin=(
        f"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: probe-reader-{ns}, namespace: {data_ns}}}\n"
        "rules:\n- {apiGroups: [example.com], resources: [foos], verbs: [list, watch]}\n---\n"
        f"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: probe-reader-{ns}, namespace: {data_ns}}}\n"
        f"roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: probe-reader-{ns}}}\n"
        f"subjects: [{{kind: ServiceAccount, name: opstatus, namespace: {ns}}}]\n"))
    cp.kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": OC_NAME, "namespace": ns},
        "spec": {"deployments": ["demo-operator"], "serviceAccounts": ["opstatus"], "conditions": []}}))
    audit.watch_user(user)
    audit.poll()
    env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=cp.env["APISERVER_PORT"],
               OPSTATUS_SERVICE_ACCOUNT_DIR=sa_dir)
    env.pop("OPERATOR_CONDITION_NAME", None)
    argv = ["nice", "-n", "5", binary, "run", "--interval", "60s", "--probe", PROBE, "--probe-namespace", data_ns,
            "--operator-condition", OC_NAME]
    logf = open(f"{work}/{ns}.log", "wb")
    start = time.time()
    p = subprocess.Popen(argv, env=env, stdout=logf, stderr=logf)
    r = {"label": label, "n": n}
    try:
        first = wait_for(lambda: oc_updates(audit.of(user), start), 180, 0.05)
        assert first, f"{label} at {n}: no OperatorCondition write ({open(f'{work}/{ns}.log').read()[-800:]})"
        ready = first[0]["_received"]
        oc = admin.request("GET", f"/apis/operators.coreos.com/v2/namespaces/{ns}/operatorconditions/{OC_NAME}")
        up = next((c for c in oc["spec"]["conditions"] if c["type"] == "Upgradeable"), {})
        assert up.get("status") == "True" and f"({n} checked)" in up.get("message", ""), up
        lists = [e for e in audit.of(user) if e["verb"] == "list" and "/foos" in e["requestURI"]
                 and start <= e["_received"] < ready]
        r["initial_s"] = ready - start
        r["initial_pages"] = len(lists)
        r["initial_list_api_s"] = sum(e["_completed"] - e["_received"] for e in lists)
        log(f"{label} {n}: Upgradeable=True written {r['initial_s']:.2f} s after start "
            f"({len(lists)} list pages, {r['initial_list_api_s']:.2f} s API-server time)")

        # Flips: one Foo's condition, alternately blocking and not.
        one = f"foo-{n * 617 // 1000:05d}"
        latencies = []
        for i in range(args.flips):
            time.sleep(1.0 + (i * 0.37) % 1.0)  # land at different points of the check cycle
            blocking = i % 2 == 0
            before = time.time()
            admin.set_conditions(data_ns, one, [("Migrating", "True" if blocking else "False")])
            patched = wait_for(lambda: [e for e in audit.of("admin") if e["verb"] == "patch" and
                                        f"/foos/{one}/status" in e["requestURI"] and e["_received"] >= before - 0.005],
                               5)
            assert patched, "the admin's patch is not in the audit log"
            t_patch = patched[-1]["_received"]
            written = wait_for(lambda: oc_updates(audit.of(user), t_patch), 30)
            assert written, f"{label} at {n}: flip {i} never reached the OperatorCondition"
            latencies.append(written[0]["_received"] - t_patch)
            log(f"{label} {n}: flip {i + 1}/{args.flips} ({'block' if blocking else 'unblock'}) -> "
                f"OperatorCondition update {latencies[-1] * 1000:.0f} ms later")
        r["flips"] = latencies
        time.sleep(5)  # anything the flips started (events, a check) is over

        # The steady window: nothing changes.
        w0 = time.time()
        rss = []
        while time.time() < w0 + args.window:
            rss.append(status_kib(p.pid, "VmRSS"))
            time.sleep(1)
        w1 = time.time()
        r["peak_rss_kib"] = status_kib(p.pid, "VmHWM")
        r["steady_rss_kib"] = statistics.median(rss)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    assert p.returncode is not None

    # A watch is audited once it ended; the agent stopped, so all have.
    def settled():
        ev = audit.of(user)
        watches = [e for e in ev if e["verb"] == "watch" and "/foos" in e["requestURI"]]
        return ev if (watches or label_relists(ev)) else None

    def label_relists(ev):  # a build that never watches (re-lists each check)
        return any(e["verb"] == "list" and "/foos" in e["requestURI"] and e["_received"] >= w0 for e in ev)

    ev = wait_for(settled, 15, 0.1) or audit.of(user)
    time.sleep(1)
    ev = audit.of(user)
    minutes = (w1 - w0) / 60
    in_window = [e for e in ev if w0 <= e["_received"] < w1]
    foo_lists = [e for e in in_window if e["verb"] == "list" and "/foos" in e["requestURI"]]
    foo_watches_new = [e for e in in_window if e["verb"] == "watch" and "/foos" in e["requestURI"]]
    all_watches = [e for e in ev if e["verb"] == "watch" and "/foos" in e["requestURI"]]
    watch_open = sum(max(0.0, min(w1, e["_completed"]) - max(w0, e["_received"])) for e in all_watches)
    r.update({
        "window_s": w1 - w0,
        "foo_lists_per_min": len(foo_lists) / minutes,
        "foo_watches_per_min": len(foo_watches_new) / minutes,
        "foo_requests": len(foo_lists) + len(foo_watches_new),
        "foo_per_min": (len(foo_lists) + len(foo_watches_new)) / minutes,
        "list_api_s_per_min": sum(e["_completed"] - e["_received"] for e in foo_lists) / minutes,
        "watch_open_s_per_min": watch_open / minutes,
        "all_per_min": len(in_window) / minutes,
        "verbs": sorted({f"{e['verb']} {e['objectRef'].get('resource', '?')}" for e in in_window
                         if e.get("objectRef")}),
        "watch_uris": [e["requestURI"] for e in all_watches],
        "watch_timeouts": [int(q.split("=", 1)[1]) for e in all_watches
                           for q in e["requestURI"].split("?", 1)[-1].split("&") if q.startswith("timeoutSeconds=")],
    })
    log(f"{label} {n}: window {r['window_s']:.0f} s: {len(foo_lists)} lists + {len(foo_watches_new)} watches "
        f"on the Foos, {len(in_window)} requests in all ({', '.join(r['verbs'])}); lists "
        f"{r['list_api_s_per_min']:.3f} s/min API-server time, watch open {r['watch_open_s_per_min']:.1f} s/min; "
        f"peak RSS {r['peak_rss_kib']} KiB, steady {r['steady_rss_kib']} KiB; "
        f"watches: {[u.split('?', 1)[-1] for u in r['watch_uris']]}")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opstatus", required=True, help="the (static) opstatus binary")
    ap.add_argument("--scales", type=lambda v: [int(x) for x in v.split(",")], default=[100, 2000, 10000])
    ap.add_argument("--window", type=float, default=120, help="seconds of nothing changing, counted (≥ 120)")
    ap.add_argument("--flips", type=int, default=6, help="condition flips per scale (alternating)")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=PATH",
                    help="another opstatus build, run the same way (repeatable)")
    ap.add_argument("--also-at", type=lambda v: [int(x) for x in v.split(",")], default=[2000],
                    help="the scales at which the --also builds run (default 2000)")
    args = ap.parse_args()
    builds = [("opstatus", os.path.abspath(args.opstatus))]
    builds += [(a.split("=", 1)[0], os.path.abspath(a.split("=", 1)[1])) for a in args.also]

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
            log(f"created {n} Foos with status in {time.time() - t:.1f} s")
            audit.skip_to_end()
            audit.watch_user("admin")
            for label, binary in builds:
                if label != "opstatus" and n not in args.also_at:
                    continue
                try:
                    results.append(run_one(cp, audit, admin, args, work, label, binary, n, data_ns))
                except AssertionError as e:  # reported in the table; the other runs go on
                    log(f"{label} {n}: FAILED: {e}")
                    results.append({"label": label, "n": n, "failed": str(e)[:200]})
                audit.events["admin"] = []
    finally:
        cp.stop()
        shutil.rmtree(work, ignore_errors=True)

    flavor = cp.env.get("KUBE_FLAVOR", "1.20")
    server = "v1.20.2 (the Debian build)" if flavor == "1.20" else cp.env.get("KUBE_GIT_VERSION", flavor)
    print(f"\nopstatus `run --interval 60s --probe {PROBE} --operator-condition NAME` (check interval 5 s), one probed "
          f"type, against kube-apiserver {server} on loopback; the Foos' "
          f"status holds one condition. Nothing changing: a {args.window:.0f} s window after {args.flips} flips, "
          f"counted from the audit log once opstatus stopped (v1.20 audits a watch when it ends).\n")
    print("| CRs | build | initial list (pages, API-server time) | requests / min on the Foos, nothing changing "
          "| API-server time / min: lists | watch open / min (idle streaming) | all requests / min of the process "
          "| peak RSS | steady RSS | flip → OperatorCondition, median (max) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "failed" in r:
            print(f"| {r['n']:,} | {r['label']} | failed: {r['failed']} |||||||")
            continue
        lw = f"{r['foo_per_min']:.2f} ({r['foo_lists_per_min']:.1f} lists, {r['foo_watches_per_min']:.1f} watches)"
        if r["watch_timeouts"]:
            lo, hi = min(r["watch_timeouts"]), max(r["watch_timeouts"])
            lw += f"; the watch renews every {lo} s" if lo == hi else f"; the watch renews every {lo}–{hi} s"
        pages = f"{r['initial_pages']} page{'s' if r['initial_pages'] != 1 else ''}"
        print(f"| {r['n']:,} | {r['label']} | {pages}, {r['initial_list_api_s']:.2f} s "
              f"| {lw} | {r['list_api_s_per_min']:.3f} s | {r['watch_open_s_per_min']:.0f} s "
              f"| {r['all_per_min']:.2f} | {r['peak_rss_kib'] / 1024:.1f} MiB | {r['steady_rss_kib'] / 1024:.1f} MiB "
              f"| {statistics.median(r['flips']) * 1000:.0f} ms ({max(r['flips']) * 1000:.0f} ms) |")
    top = max((r for r in results if r["label"] == "opstatus" and "failed" not in r), key=lambda r: r["n"],
              default=None)
    if top:
        flip = statistics.median(top["flips"])
        print(f"\nGoals at {top['n']:,} CRs (opstatus): ≤ 1 request per minute per probed type: "
              f"{top['foo_per_min']:.2f} — {'met' if top['foo_per_min'] <= 1 else 'NOT met'}; peak RSS ≤ 8 MiB: "
              f"{top['peak_rss_kib'] / 1024:.1f} MiB — {'met' if top['peak_rss_kib'] <= 8192 else 'NOT met'}; "
              f"flip → OperatorCondition ≤ 1 s: median {flip * 1000:.0f} ms, max {max(top['flips']) * 1000:.0f} ms — "
              f"{'met' if max(top['flips']) <= 1 else ('met (median)' if flip <= 1 else 'NOT met')}.")


if __name__ == "__main__":
    main()
