#!/usr/bin/env python3
"""Footprint benchmark: opstatus beside the tools users pick today (a kubectl
apply loop, the official Python client), doing the same job against the same
real kube-apiserver, in one run. Run it with scripts/bench.sh.

Each writer runs "as in a pod" with its own ServiceAccount, so the audit log
attributes every request. Figures (steady state = heartbeats 5 onwards,
medians over --runs):

- size on disk; first write after process start (audit log);
- steady and peak RSS (/proc/PID/status);
- CPU per heartbeat: the process's scheduler run time (/proc/PID/task/*/
  schedstat, nanoseconds: no 10 ms tick accounting) for opstatus and
  Python; for the kubectl loop, the reaped children's CPU (cutime+cstime,
  ticks are fine at ~300 ms a call);
- API requests per heartbeat (audit log); bytes sent per heartbeat (the
  kernel's TCP counters for the process's connections, `ss -ti`);
- the stripped size of each platform's static binary (x86_64, arm64,
  armv7), and the arm64 binary's steady RSS under qemu-user: emulated (the
  emulator's own memory is included), so for information only;
- opstatus only: CPU per heartbeat after a 20 s idle (over ureq's default
  15 s idle-connection limit), and how soon a health change is published.

Then the real-settings table (--default-intervals, 1,30,60): at each
interval in turn, opstatus (and any --also LABEL=PATH builds of it), the
Python client and the kubectl loop all at once (--long-heartbeats each at 30
s and 60 s, at least 30 at 1 s; steady state from the second write), and
prints per tool and interval the median CPU per heartbeat (the process's
CPU between the completions of consecutive writes, which the audit log
times: no tool needs to print anything per write), RSS (the
process's median VmRSS over the second half; for the kubectl loop, the
median peak of its kubectl processes), API requests per heartbeat (audit
log) and TLS handshakes per heartbeat (new TCP connections to the API
server of the process or its children: `ss -tnp` sampled every 0.1 s, each
connection seen by its socket inode; every connection is one handshake; a
kubectl connection shorter than 0.1 s can be missed, so its figure is a
floor). Each interval is run --repeat times (5), the tools started in a
rotated order each time; each cell gives the median of the runs' medians
and the least and most of them. --intervals 30,60 runs only that table, at
those intervals.

Before it, with 1 s among the intervals: user-space instructions per steady
heartbeat at 1 s for opstatus (and the --also builds) and the peers, every
tool at once, each under `valgrind --tool=callgrind` (all threads, one
count per process): the count is zeroed half an interval after the fifth
write and dumped half an interval after write 5 + --instruction-heartbeats
(20), by PID (`callgrind_control`), so it holds exactly those heartbeats;
--instruction-runs (3) runs, the start order rotated. An instruction count
does not depend on what else the machine runs, unlike CPU time.
--instructions-only prints only that table; --callgrind-out DIR keeps the
dumps for `callgrind_annotate`.
"""
import argparse
import http.server
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CM = "kube9-operator-status"


def parse_time(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


class ControlPlane:
    def __init__(self, state):
        self.state = state
        subprocess.run([f"{ROOT}/scripts/control-plane.sh", "start", state, "--watch-pid", str(os.getpid())], check=True)
        self.env = dict(line.split("=", 1) for line in open(f"{state}/env").read().split())

    def stop(self):
        subprocess.run([f"{ROOT}/scripts/control-plane.sh", "stop", self.state], check=False)

    def kubectl(self, *args, stdin=None):
        return subprocess.run(["kubectl", "--kubeconfig", self.env["KUBECONFIG"], *args], input=stdin, text=True,
                              check=True, capture_output=True).stdout

    def audit(self, user):
        events = []
        with open(self.env["AUDIT_LOG"]) as f:
            for line in f:
                if user in line:
                    e = json.loads(line)
                    if e["user"]["username"] == user and e["stage"] == "ResponseComplete":
                        events.append(e)
        return events

    def identity(self, ns, sa, rules_yaml, workdir):
        """A namespace, a ServiceAccount bound to a Role, and a pod-style
        service-account directory plus a kubeconfig for it."""
        self.kubectl("create", "namespace", ns)
        self.kubectl("-n", ns, "create", "serviceaccount", sa)
        role = (f"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {sa}, namespace: {ns}}}\n"
                f"rules:\n{rules_yaml}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n"
                f"metadata: {{name: {sa}, namespace: {ns}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {sa}}}\n"
                f"subjects: [{{kind: ServiceAccount, name: {sa}, namespace: {ns}}}]\n")
        self.kubectl("apply", "-f", "-", stdin=role)
        token = self.kubectl("create", "token", sa, "-n", ns, "--duration=3600s",
                             "--audience=https://kubernetes.default.svc").strip()
        sa_dir = os.path.join(workdir, f"sa-{ns}")
        os.makedirs(sa_dir)
        shutil.copy(self.env["CA_CERT"], f"{sa_dir}/ca.crt")
        open(f"{sa_dir}/token", "w").write(token)
        open(f"{sa_dir}/namespace", "w").write(ns)
        kubeconfig = f"{sa_dir}/kubeconfig"
        open(kubeconfig, "w").write(
            f"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: '{self.env['APISERVER_URL']}', "
            f"certificate-authority: '{sa_dir}/ca.crt'}}\nusers:\n- name: u\n  user: {{token: '{token}'}}\n"
            f"contexts:\n- name: x\n  context: {{cluster: c, user: u, namespace: {ns}}}\ncurrent-context: x\n")
        return sa_dir, kubeconfig, f"system:serviceaccount:{ns}:{sa}"


def proc_tasks_cpu_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except FileNotFoundError:
            pass
    return total


def children_cpu_ns(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[13]) + int(fields[14])) * 1e9 / ticks  # cutime + cstime


def status_kib(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key):
            return int(line.split()[1])
    return 0


def tcp_bytes_sent(pid, port):
    """Bytes sent on `pid`'s established connections to the API server, from
    the kernel's TCP counters (`ss -ti`: bytes_sent, retransmissions
    included): what goes on the wire, TLS and HTTP framing included."""
    out = subprocess.run(["ss", "-tinpH", "state", "established", f"( dport = :{port} )"], capture_output=True,
                         text=True).stdout.splitlines()
    total, mine = 0, False
    for line in out:
        if not line.startswith((" ", "\t")):
            mine = f"pid={pid}," in line
        elif mine:
            total += next((int(f.split(":")[1]) for f in line.split() if f.startswith("bytes_sent:")), 0)
    return total


def writes(cp, user):
    """The status writes of `user`: not opstatus's labelling apply at start
    (field manager opstatus-init), which carries no status."""
    return [e for e in cp.audit(user) if e["verb"] in ("patch", "create", "update")
            and "fieldManager=opstatus-init" not in e["requestURI"]]


def wait_writes(cp, user, n, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if len(writes(cp, user)) >= n:
            return True
        time.sleep(0.05)
    return False


def run_process_writer(cp, argv, env, user, n, log_path):
    """opstatus or the Python writer: one long-lived process."""
    log = open(log_path, "wb")
    port = cp.env["APISERVER_PORT"]
    start = time.time()
    p = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
    try:
        assert wait_writes(cp, user, 5, 60), f"{argv[0]}: no 5 writes ({open(log_path).read()[-500:]})"
        cpu5, sent5 = proc_tasks_cpu_ns(p.pid), tcp_bytes_sent(p.pid, port)
        rss = []
        while len(writes(cp, user)) < n:
            rss.append(status_kib(p.pid, "VmRSS"))
            time.sleep(0.25)
        cpu_n, sent_n = proc_tasks_cpu_ns(p.pid), tcp_bytes_sent(p.pid, port)
        peak = status_kib(p.pid, "VmHWM")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)
    events = cp.audit(user)
    written = writes(cp, user)
    first_write = parse_time(written[0]["requestReceivedTimestamp"]) - start
    beats = n - 5
    # Steady state, as the CPU: the requests after the fifth write per write
    # after it (opstatus's start adds two: the lock's first look).
    fifth = parse_time(written[4]["requestReceivedTimestamp"])
    steady = [e for e in events if parse_time(e["requestReceivedTimestamp"]) > fifth]
    return {
        "first_write_ms": first_write * 1000,
        "rss_steady_kib": statistics.median(rss),
        "rss_peak_kib": peak,
        "cpu_ms": (cpu_n - cpu5) / beats / 1e6,
        "requests": len(steady) / max(1, len([e for e in written if parse_time(e["requestReceivedTimestamp"]) > fifth])),
        "bytes": (sent_n - sent5) / beats,
    }


def descendants(pid):
    out, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        try:
            kids = open(f"/proc/{p}/task/{p}/children").read().split()
        except FileNotFoundError:
            continue
        out += [int(k) for k in kids]
        frontier += [int(k) for k in kids]
    return out


def run_kubectl_loop(cp, kubeconfig, user, n, log_path):
    env = dict(os.environ, KUBECONFIG=kubeconfig)
    log = open(log_path, "wb")
    start = time.time()
    p = subprocess.Popen(["bash", f"{ROOT}/bench/kubectl_loop.sh", "1"], env=env, stdout=log, stderr=log,
                         start_new_session=True)
    peaks = {}
    try:
        assert wait_writes(cp, user, 5, 120), f"kubectl loop: no 5 writes ({open(log_path).read()[-500:]})"
        iterations5 = open(log_path).read().count("wrote")
        cpu5 = children_cpu_ns(p.pid)
        while open(log_path).read().count("wrote") < n:
            for child in descendants(p.pid):
                try:
                    if "kubectl" in open(f"/proc/{child}/comm").read():
                        peaks[child] = max(peaks.get(child, 0), status_kib(child, "VmHWM"))
                except (FileNotFoundError, ProcessLookupError):
                    pass
            time.sleep(0.02)
        iterations = open(log_path).read().count("wrote")
        cpu_n = children_cpu_ns(p.pid)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(10)
    events = [e for e in cp.audit(user) if parse_time(e["requestReceivedTimestamp"]) >= start]
    first_write = parse_time(writes(cp, user)[0]["requestReceivedTimestamp"]) - start
    return {
        "first_write_ms": first_write * 1000,
        "rss_steady_kib": statistics.median(peaks.values()) if peaks else float("nan"),
        "rss_peak_kib": max(peaks.values()) if peaks else float("nan"),
        "cpu_ms": (cpu_n - cpu5) / (iterations - iterations5) / 1e6,
        "requests": len(events) / iterations,
        "bytes": float("nan"),
    }


class Operator(http.server.BaseHTTPRequestHandler):
    code = 200

    def do_GET(self):
        self.send_response(Operator.code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def health_change_latency(cp, binary, env, user, flips):
    """Flip a watched health URL and time until the status write reaches the
    API server. Detection happens at the next check (interval 1 s), so this
    is an upper bound of detection-to-publish plus up to one check interval."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Operator)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/healthz"
    p = subprocess.Popen([binary, "run", "--interval", "60s", "--check-interval", "1s", "--watch-url", url,
                          "--no-final-status"], env=env, stderr=subprocess.DEVNULL)
    latencies = []
    try:
        assert wait_writes(cp, user, 1, 30)
        for i in range(flips):
            time.sleep(1.3)  # Land the flips at different points of the check cycle.
            before = len(writes(cp, user))
            Operator.code = 500 if i % 2 == 0 else 200
            flipped = time.time()
            assert wait_writes(cp, user, before + 1, 10), "the change was not published"
            latencies.append(parse_time(writes(cp, user)[before]["requestReceivedTimestamp"]) - flipped)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)
        server.shutdown()
    return latencies


def handshake_cpu(cp, binary, env, user, interval, beats):
    """CPU per write after `interval` idle (opstatus keeps its connection for
    the interval, so no handshake), from the scheduler's run time between
    writes 2 and N."""
    p = subprocess.Popen([binary, "run", "--interval", f"{interval}s", "--no-final-status"], env=env,
                         stderr=subprocess.DEVNULL)
    try:
        assert wait_writes(cp, user, 2, 60)
        cpu2 = proc_tasks_cpu_ns(p.pid)
        assert wait_writes(cp, user, beats + 2, interval * (beats + 2))
        cpu_n = proc_tasks_cpu_ns(p.pid)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)
    return (cpu_n - cpu2) / beats / 1e6


def sample_connections(pid, port, seen, stop, rss):
    """Adds (socket inode, first seen) of the TCP connections to the API
    server of `pid` and its descendants (the kubectl loop's kubectl
    processes) to `seen`, and their RSS to `rss` (pid -> KiB samples), until
    `stop` is set."""
    while not stop.is_set():
        pids = {pid, *descendants(pid)}
        out = subprocess.run(["ss", "-tnepH", "state", "all", f"( dport = :{port} )"], capture_output=True,
                             text=True).stdout.splitlines()
        now = time.time()
        for line in out:
            if any(f"pid={p}," in line for p in pids):
                inode = next((f for f in line.split() if f.startswith("ino:")), None)
                if inode and inode != "ino:0":
                    seen.setdefault(inode, now)
        for p in pids:
            try:
                if open(f"/proc/{p}/comm").read().strip() in ("bash", "sh", "sleep"):
                    continue
                rss.setdefault(p, []).append(status_kib(p, "VmRSS"))
            except (FileNotFoundError, ProcessLookupError):
                pass
        stop.wait(0.1)


def long_interval_writer(cp, argv, env, user, interval, beats, log_path, result, children=False):
    """One writer at a real interval. Its CPU time is sampled all along
    (every 10 ms at 1 s, 50 ms at longer intervals); its writes come from
    the audit log afterwards (no tool prints anything per write). CPU per
    heartbeat is the CPU between one write's completion and the next's
    (each taken a moment after the write ended: 0.3 s, or a third of the
    interval, whichever is less), so a log line a tool writes per write
    counts if it writes one, and nothing else does. Connections and RSS are
    sampled, requests come from the audit log. With `children` (the kubectl loop), the CPU is
    the loop's and its reaped children's (each `kubectl` is a new process)
    and the RSS each kubectl's."""
    port = cp.env["APISERVER_PORT"]
    log = open(log_path, "wb")
    started = time.time()
    p = subprocess.Popen(argv, env=env, stdout=log, stderr=log, start_new_session=children)
    seen, rss, stop = {}, {}, threading.Event()
    sampler = threading.Thread(target=sample_connections, args=(p.pid, port, seen, stop, rss), daemon=True)
    sampler.start()

    def cpu():
        return proc_tasks_cpu_ns(p.pid) + (children_cpu_ns(p.pid) if children else 0)

    samples = []  # (time, cpu ns)
    period = 0.01 if interval <= 1 else 0.05
    try:
        # The first write comes within seconds of the start; then one per
        # interval. Past the expected end, the audit log says whether all
        # writes were made (read once a second: it is large).
        expected = time.time() + interval * (beats + 2) + 3
        deadline = expected + interval * 3 + 60
        next_look = expected
        while time.time() < deadline:
            samples.append((time.time(), cpu()))
            if time.time() >= next_look:
                if len(writes(cp, user)) >= beats + 2:
                    break
                next_look = time.time() + 1
            time.sleep(period)
        samples.append((time.time(), cpu()))
    finally:
        stop.set()
        if children:
            os.killpg(p.pid, signal.SIGTERM)
        else:
            p.send_signal(signal.SIGTERM)
        p.wait(10)
        sampler.join()
    written = writes(cp, user)
    assert len(written) >= beats + 2, f"{argv[0]}: {len(written)} writes ({open(log_path).read()[-500:]})"
    ends = [parse_time(e["stageTimestamp"]) for e in written[:beats + 2]]
    settle = min(0.3, interval / 3)

    def cpu_after(t):
        return next(c for at, c in samples if at >= t + settle)

    marks = [(t, cpu_after(t)) for t in ends]
    # Steady state: from the second write on (the first opens the connection).
    (t0, _), (t1, _) = marks[1], marks[-1]
    per_beat = [(b[1] - a[1]) / 1e6 for a, b in zip(marks[1:], marks[2:])]
    events = [e for e in cp.audit(user) if t0 < parse_time(e["requestReceivedTimestamp"]) <= t1]
    new_connections = [t for t in seen.values() if t0 < t <= t1]
    if children:
        rss_kib = statistics.median(max(v) for v in rss.values()) if rss else float("nan")
    else:
        samples_kib = rss.get(p.pid, [])
        rss_kib = statistics.median(samples_kib[len(samples_kib) // 2:]) if samples_kib else float("nan")
    result.update({
        "cpu_ms": statistics.median(per_beat),
        "cpu_ms_all": per_beat,
        "requests": len(events) / beats,
        "handshakes": len(new_connections) / beats,
        "connections_total": len(seen),
        # Seconds after the start: each connection first seen, each write's end.
        "connections_seen_at": sorted(round(t - started, 1) for t in seen.values()),
        "writes_at": [round(t - started, 1) for t in ends],
        "rss_kib": rss_kib,
    })


def ratio(x):
    return f"{x:.1f}×" if x >= 1 else f"{x:.3f}×"


def tool_commands(args):
    """The tools of the --intervals mode: (label, kind, path), kind one of
    opstatus, peer, python, kubectl."""
    tools = [("opstatus", "opstatus", args.opstatus)]
    tools += [(label, "opstatus", path) for label, path in (a.split("=", 1) for a in args.also)]
    tools += [(label, "peer", path) for label, path in (p.split("=", 1) for p in args.peer)]
    tools += [("python", "python", args.python)] if args.python else []
    tools += [("kubectl", "kubectl", "kubectl")] if args.kubectl else []
    return tools


def tool_run(cp, args, work, tool, interval, ns, named_rules, writer_rules):
    """A tool's identity, command line and environment: (argv, env, user,
    children)."""
    label, kind, path = tool
    rules = named_rules if kind == "opstatus" else writer_rules
    sa_dir, kubeconfig, user = cp.identity(ns, "writer", rules, work)
    env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1",
               KUBERNETES_SERVICE_PORT=cp.env["APISERVER_PORT"], OPSTATUS_SERVICE_ACCOUNT_DIR=sa_dir)
    for spec in args.also_env:
        also, var, value = spec.split("=", 2)
        if also == label:
            env[var] = value
    children = False
    if kind == "peer":
        # A peer of bench/peers: the same job, silent.
        argv = [path, str(interval)]
    elif kind == "python":
        argv = [path, f"{ROOT}/bench/python_writer.py", str(interval)]
    elif kind == "kubectl":
        argv, children = ["bash", f"{ROOT}/bench/kubectl_loop.sh", str(interval)], True
        env["KUBECONFIG"] = kubeconfig
    else:
        # As users run it: opstatus's default log (a line when the
        # status changes, not on every heartbeat).
        argv = [path, "run", "--interval", f"{interval}s", "--no-final-status"]
        if args.shipped:
            # As the shipped sidecar runs it (manifests/components/opstatus):
            # the operator's health URL checked every 5 s, the endpoint for
            # kubelet, the ready file.
            os.makedirs(f"{work}/{ns}", exist_ok=True)
            argv += [f"--listen=127.0.0.1:{free_port()}", f"--watch-url={operator_url()}",
                     f"--ready-file={work}/{ns}/ready"]
    return argv, env, user, children


class KeptAliveOperator(http.server.BaseHTTPRequestHandler):
    """An operator's /healthz as controller-runtime serves it: 200, the
    connection kept between checks (HTTP/1.1)."""
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


_operator = []


def operator_url():
    """The one operator endpoint every shipped-workload opstatus checks."""
    if not _operator:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), KeptAliveOperator)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        _operator.append(f"http://127.0.0.1:{server.server_address[1]}/healthz")
    return _operator[0]


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rotated(items, by):
    """`items` started from its `by`-th: each run starts the tools in
    another order, so none is always the first to wake."""
    by %= len(items)
    return items[by:] + items[:by]


def callgrind_writer(cp, argv, env, user, warm, beats, out_prefix, result):
    """One writer at a 1 s interval under `valgrind --tool=callgrind`: the
    user-space instructions it executes (all threads: one count for the
    process) over `beats` steady heartbeats, from `warm` writes on. The
    count is zeroed, then dumped (`callgrind_control -z` / `-d` by PID),
    each between two heartbeats: after a write (the audit log), once the
    process has used no CPU for 0.1 s (done with the answer, asleep until
    the next heartbeat). The run is clean when both marks came before the
    next write reached the API server; on a machine so loaded that the
    process takes longer than its interval, it may not be."""
    log = open(f"{out_prefix}.log", "wb")
    # Names uncompressed: a dump after a zero cannot refer to names
    # defined before it.
    p = subprocess.Popen(["valgrind", "--tool=callgrind", "--vgdb=yes", "--compress-strings=no",
                          f"--callgrind-out-file={out_prefix}.%p", *argv], env=env, stdout=log, stderr=log)

    def quiet_after(nth, timeout):
        assert wait_writes(cp, user, nth, timeout), f"{argv[0]} under callgrind: fewer than {nth} writes"
        used, deadline = proc_tasks_cpu_ns(p.pid), time.time() + 10
        while time.time() < deadline:
            time.sleep(0.1)
            now = proc_tasks_cpu_ns(p.pid)
            if now == used:
                return True
            used = now
        return False

    def mark(flag):
        subprocess.run(["callgrind_control", flag, str(p.pid)], check=True, capture_output=True)
        return time.time()

    try:
        quiet = quiet_after(warm, 180)
        zeroed = mark("-z")
        quiet = quiet_after(warm + beats, beats * 4 + 60) and quiet
        dumped = mark("-d")
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
    received = [parse_time(e["requestReceivedTimestamp"]) for e in writes(cp, user)]
    marks = ((warm, zeroed), (warm + beats, dumped))
    clean = quiet and all(len([t for t in received if t <= at]) == n for n, at in marks)
    dumps = sorted(f for f in os.listdir(os.path.dirname(out_prefix))
                   if f.startswith(f"{os.path.basename(out_prefix)}.{p.pid}.") and not f.endswith(".log"))
    assert dumps, f"{argv[0]}: no callgrind dump"
    with open(os.path.join(os.path.dirname(out_prefix), dumps[0])) as f:
        total = next(int(line.split()[1]) for line in f if line.startswith(("totals:", "summary:")))
    result.update({"instructions": total / beats, "clean": clean})


def instructions_table(cp, args, work, named_rules, writer_rules):
    """User-space instructions per steady heartbeat at 1 s (opstatus, the
    --also builds and the peers; not the Python client nor the kubectl
    loop), every tool at once under callgrind, --instruction-runs times,
    the start order rotated between runs."""
    tools = [t for t in tool_commands(args) if t[1] in ("opstatus", "peer")]
    warm, beats = 5, args.instruction_heartbeats
    runs = {label: [] for label, _, _ in tools}
    # A run that is not clean (see callgrind_writer) is not counted, and
    # run again, a few times at most.
    attempt = 0
    while attempt < args.instruction_runs + 3 and any(len(r) < args.instruction_runs for r in runs.values()):
        group = []
        for tool in rotated(tools, attempt):
            ns = f"cg-{tool[0]}-{attempt}".replace("_", "-").replace(".", "-").lower()
            argv, env, user, _ = tool_run(cp, args, work, tool, 1, ns, named_rules, writer_rules)
            result = {}
            t = threading.Thread(target=callgrind_writer,
                                 args=(cp, argv, env, user, warm, beats, f"{args.callgrind_out or work}/{ns}",
                                       result))
            group.append((tool[0], result, t))
            t.start()
            time.sleep(0.3)
        for label, result, t in group:
            t.join()
            if result:
                counted = result["clean"] and len(runs[label]) < args.instruction_runs
                if counted:
                    runs[label].append(result)
                print(f"callgrind run {attempt + 1} {label}: {result['instructions']:.0f} instructions per heartbeat"
                      + ("" if result["clean"] else " (not counted: a mark fell during a heartbeat)"),
                      file=sys.stderr, flush=True)
        attempt += 1
    print(f"\nUser-space instructions per steady heartbeat at a 1 s interval (`valgrind --tool=callgrind`, all "
          f"threads; counted over heartbeats {warm + 1}–{warm + beats}, every tool at once; "
          f"{args.instruction_runs} runs, start order rotated; a run with a mark during a heartbeat is run "
          f"again):\n")

    def median(label):
        values = [r["instructions"] for r in runs[label]]
        return statistics.median(values) if values else float("nan")

    refs = [label for label in ("kube-rs", "floor") if runs.get(label)]
    print("| tool | runs | instructions per heartbeat (median) | min – max | spread | "
          + " | ".join("tool ÷ floor" if ref == "floor" else f"{ref} ÷ tool" for ref in refs) + " |")
    print("|---|---|---|---|---|" + "---|" * len(refs))
    for label in runs:
        values = [r["instructions"] for r in runs[label]]
        if not values:
            print(f"| {label} | 0 | failed | | |" + " |" * len(refs))
            continue
        m = median(label)
        ratios = [m / median(ref) if ref == "floor" else median(ref) / m for ref in refs]
        print(f"| {label} | {len(values)} | {m:,.0f} | {min(values):,.0f} – {max(values):,.0f} | "
              f"{(max(values) - min(values)) / m * 100:.2f} % | " + " | ".join(f"{x:.2f}×" for x in ratios) + " |")
    sys.stdout.flush()


def real_intervals(cp, args, work, named_rules, writer_rules):
    """--intervals: at each interval in turn, every tool at once; --repeat
    runs of each, the tools' start order rotated between runs. Before them
    (with 1 s among the intervals), the instructions table."""
    if args.callgrind_out:
        os.makedirs(args.callgrind_out, exist_ok=True)
    if 1 in args.intervals and args.instruction_runs > 0:
        instructions_table(cp, args, work, named_rules, writer_rules)
    if args.instructions_only:
        return
    tools = tool_commands(args)
    jobs = []
    for run, interval in enumerate(i for i in args.intervals for _ in range(args.repeat)):
        # Fewer heartbeats at 1 s would be noise; more at 60 s would be hours.
        beats = args.long_heartbeats if interval >= 10 else max(args.long_heartbeats, 30)
        group = []
        for tool in rotated(tools, run):
            ns = f"{tool[0]}-{interval}s-{len(jobs) + len(group)}".replace("_", "-").replace(".", "-").lower()
            argv, env, user, children = tool_run(cp, args, work, tool, interval, ns, named_rules, writer_rules)
            result = {}
            t = threading.Thread(target=long_interval_writer, args=(cp, argv, env, user, interval, beats,
                                                                   f"{work}/{ns}.log", result, children))
            group.append((tool[0], interval, beats, result, t))
            t.start()
        for *_, t in group:
            t.join()
        jobs += group
    load = open("/proc/loadavg").read().split()[:3]
    print(f"\nEach interval in turn, every tool at once against one kube-apiserver "
          f"{cp.env.get('KUBE_GIT_VERSION', '')} on loopback; medians per heartbeat over the heartbeats after the "
          f"second write ({', '.join(f'{b} at {i} s' for i, b in sorted({(i, b) for _, i, b, _, _ in jobs}))}); "
          f"{args.repeat} runs per interval, the start order rotated; load average at the end "
          f"{', '.join(load)}.\n")
    # Each cell is the median of the runs' medians, with the runs' least and most.
    cells = {}
    for label, interval, _, r, _ in jobs:
        cells.setdefault((label, interval), []).append(r)
    for label, _, _ in tools:
        for interval in args.intervals:
            cells.setdefault((label, interval), [])
    cells = dict(sorted(cells.items(), key=lambda kv: (args.intervals.index(kv[0][1]),
                                                       [t[0] for t in tools].index(kv[0][0]))))
    runs = {key: [r for r in rs if r] for key, rs in cells.items()}

    def median(key, field):
        values = [r[field] for r in runs.get(key, [])]
        return statistics.median(values) if values else float("nan")

    refs = [label for label in ("kube-rs", "floor", "python") if any(k[0] == label for k in runs)]
    print("| tool | interval | runs | CPU per heartbeat, median of the runs' medians | min – max | "
          + " | ".join(f"{'tool ÷ floor' if ref == 'floor' else ref + ' ÷ tool'}" for ref in refs)
          + " | RSS | API requests per heartbeat | TLS handshakes per heartbeat |")
    print("|---|---|---|---|---|" + "---|" * len(refs) + "---|---|---|")
    for (label, interval), rs in cells.items():
        if not runs[(label, interval)]:
            print(f"| {label} | {interval} s | 0 of {len(rs)} | failed | |" + " |" * (len(refs) + 3))
            continue
        cpu = median((label, interval), "cpu_ms")
        each = [r["cpu_ms"] for r in runs[(label, interval)]]
        ratios = [cpu / median((ref, interval), "cpu_ms") if ref == "floor" else
                  median((ref, interval), "cpu_ms") / cpu for ref in refs]
        print(f"| {label} | {interval} s | {len(each)} | {cpu:.3f} ms | {min(each):.3f} – {max(each):.3f} ms | "
              + " | ".join(f"{x:.2f}×" for x in ratios)
              + f" | {median((label, interval), 'rss_kib') / 1024:.1f} MiB ({median((label, interval), 'rss_kib'):,.0f} KiB) | "
              f"{median((label, interval), 'requests'):.2f} | {median((label, interval), 'handshakes'):.2f} |")
    for label, interval, _, r, _ in jobs:
        if r:
            print(f"{label} {interval} s: CPU per heartbeat " + ", ".join(f"{c:.3f}" for c in r["cpu_ms_all"]) +
                  f" ms; RSS {r['rss_kib']:.0f} KiB; {r['connections_total']} connections in all, first seen at "
                  + ", ".join(f"{t} s" for t in r["connections_seen_at"]) + " after the start; writes ended at "
                  + ", ".join(f"{t} s" for t in r["writes_at"]), file=sys.stderr)


def du_bytes(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            fp = os.path.join(dirpath, f)
            if not os.path.islink(fp):
                total += os.path.getsize(fp)
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opstatus", required=True, help="the static opstatus binary")
    ap.add_argument("--python", help="the Python interpreter with the kubernetes client (the --intervals mode "
                    "runs without it when not given)")
    ap.add_argument("--heartbeats", type=int, default=30, help="heartbeats per run (1 s interval)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--idle-interval", type=int, default=20, help="seconds; over ureq's default 15 s idle limit")
    ap.add_argument("--static", action="append", default=[], metavar="LABEL=PATH",
                    help="a platform's static binary, for the sizes table (repeatable)")
    ap.add_argument("--qemu-arm64", help="qemu-aarch64-static, to measure the arm64 binary's RSS emulated")
    ap.add_argument("--intervals", type=lambda v: [int(x) for x in v.split(",")],
                    help="seconds, e.g. 30,60: run the real-settings mode (see above) instead")
    ap.add_argument("--default-intervals", type=lambda v: [int(x) for x in v.split(",") if x], default=[1, 30, 60],
                    help="seconds: the real-settings table that follows the 1 s table (empty: none)")
    ap.add_argument("--long-heartbeats", type=int, default=5,
                    help="heartbeats per tool at each of --intervals (5: 3.5 min at 30 s, 6.5 min at 60 s)")
    ap.add_argument("--kubectl", action=argparse.BooleanOptionalAction, default=True,
                    help="include the kubectl loop in the --intervals mode")
    ap.add_argument("--peer", action="append", default=[], metavar="LABEL=PATH",
                    help="in the --intervals mode, a writer of bench/peers (kube-rs, floor): PATH INTERVAL, "
                    "silent (repeatable)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="runs per interval of the real-intervals table, the tools' start order rotated between "
                    "runs; each cell is the median of the runs' medians, with their least and most")
    ap.add_argument("--instruction-runs", type=int, default=3,
                    help="runs of the instructions table (with 1 s among the intervals; 0: none)")
    ap.add_argument("--instruction-heartbeats", type=int, default=20,
                    help="steady heartbeats counted per run of the instructions table")
    ap.add_argument("--callgrind-out", metavar="DIR",
                    help="keep the instructions table's callgrind dumps in DIR (for callgrind_annotate)")
    ap.add_argument("--instructions-only", action="store_true",
                    help="only the instructions table (with --intervals 1)")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=PATH",
                    help="another opstatus build beside the first in the --intervals mode (repeatable)")
    ap.add_argument("--shipped", action="store_true",
                    help="in the --intervals mode, run every opstatus as the shipped sidecar does: --watch-url (an "
                    "operator endpoint served here, keeping its connections), --listen, --ready-file")
    ap.add_argument("--also-env", action="append", default=[], metavar="LABEL=VAR=VALUE",
                    help="an environment variable for the --also build LABEL only, e.g. "
                    "every-beat=RUST_LOG=info,opstatus::heartbeat=info (repeatable)")
    args = ap.parse_args()
    statics = dict(s.split("=", 1) for s in args.static)

    work = tempfile.mkdtemp(prefix="opstatus-bench-")
    cp = ControlPlane(f"{work}/control-plane")
    writer_rules = "- {apiGroups: [''], resources: [configmaps], verbs: [get, create, update, patch]}"
    named_rules = ("- {apiGroups: [''], resources: [configmaps], resourceNames: [kube9-operator-status], "
                   "verbs: [get, patch, create]}")
    if args.intervals:
        try:
            real_intervals(cp, args, work, named_rules, writer_rules)
        finally:
            cp.stop()
            shutil.rmtree(work, ignore_errors=True)
        return
    try:
        results = {"opstatus": [], "python": [], "kubectl": []}
        for run in range(args.runs):
            for name in results:
                ns = f"{name}-{run}"
                rules = named_rules if name == "opstatus" else writer_rules
                sa_dir, kubeconfig, user = cp.identity(ns, "writer", rules, work)
                env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1",
                           KUBERNETES_SERVICE_PORT=cp.env["APISERVER_PORT"], OPSTATUS_SERVICE_ACCOUNT_DIR=sa_dir)
                log = f"{work}/{ns}.log"
                if name == "opstatus":
                    r = run_process_writer(cp, [args.opstatus, "run", "--interval", "1s", "--no-final-status"], env, user,
                                           args.heartbeats, log)
                elif name == "python":
                    r = run_process_writer(cp, [args.python, f"{ROOT}/bench/python_writer.py", "1"], env, user,
                                           args.heartbeats, log)
                else:
                    r = run_kubectl_loop(cp, kubeconfig, user, args.heartbeats, log)
                results[name].append(r)
                print(f"run {run + 1}/{args.runs} {name}: " + ", ".join(f"{k}={v:.3f}" for k, v in r.items()),
                      file=sys.stderr, flush=True)
        sa_dir, _, user = cp.identity("opstatus-idle", "writer", named_rules, work)
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=cp.env["APISERVER_PORT"],
                   OPSTATUS_SERVICE_ACCOUNT_DIR=sa_dir)
        idle_cpu = handshake_cpu(cp, args.opstatus, env, user, args.idle_interval, 3)
        sa_dir, _, user = cp.identity("opstatus-change", "writer", named_rules, work)
        env["OPSTATUS_SERVICE_ACCOUNT_DIR"] = sa_dir
        change = health_change_latency(cp, args.opstatus, env, user, 6)
        arm64 = None
        if args.qemu_arm64 and "arm64" in statics:
            sa_dir, _, user = cp.identity("opstatus-arm64", "writer", named_rules, work)
            env["OPSTATUS_SERVICE_ACCOUNT_DIR"] = sa_dir
            arm64 = run_process_writer(cp, [args.qemu_arm64, statics["arm64"], "run", "--interval", "1s",
                                            "--no-final-status"], env, user, args.heartbeats, f"{work}/arm64.log")
    except BaseException:
        cp.stop()
        raise

    med = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in results.items()}
    venv = os.path.dirname(os.path.dirname(args.python))
    sizes = {"opstatus": os.path.getsize(args.opstatus), "python": du_bytes(venv),
             "kubectl": os.path.getsize(shutil.which("kubectl"))}
    kubectl_version = subprocess.run(["kubectl", "version", "--client", "-o", "json"], capture_output=True,
                                     text=True).stdout
    kubectl_version = json.loads(kubectl_version)["clientVersion"]["gitVersion"] if kubectl_version else "?"
    py_version = subprocess.run([args.python, "-c", "import kubernetes; print(kubernetes.__version__)"],
                                capture_output=True, text=True).stdout.strip()

    def mib(kib):
        return f"{kib / 1024:.1f} MiB"

    rows = [
        ("size on disk", lambda n: sizes[n] / 1048576, "{:.1f} MiB", 2.0, "≤ 2 MiB"),
        ("first write after start", lambda n: med[n]["first_write_ms"], "{:.0f} ms", 30, "≤ 30 ms"),
        ("steady RSS", lambda n: med[n]["rss_steady_kib"] / 1024, "{:.2f} MiB", 2.0, "≤ 2 MiB"),
        ("peak RSS", lambda n: med[n]["rss_peak_kib"] / 1024, "{:.1f} MiB", None, ""),
        ("CPU per heartbeat (1 s interval)", lambda n: med[n]["cpu_ms"], "{:.3f} ms", 0.25, "≤ 0.25 ms"),
        ("API requests per heartbeat", lambda n: med[n]["requests"], "{:.2f}", 1.0, "exactly 1"),
        ("bytes sent per heartbeat", lambda n: med[n]["bytes"], "{:.0f} B", None, ""),
    ]
    print(f"\nopstatus {args.opstatus}, Python client kubernetes=={py_version} ({os.path.basename(args.python)}), "
          f"kubectl {kubectl_version}; kube-apiserver v1.20.2 on loopback; {args.runs} runs of "
          f"{args.heartbeats} heartbeats at 1 s, medians, steady state from heartbeat 5.\n")
    print("| figure | opstatus | Python client | kubectl loop | best other ÷ opstatus | budget | met |")
    print("|---|---|---|---|---|---|---|")
    for label, get, fmt, budget, budget_text in rows:
        values = {n: get(n) for n in ("opstatus", "python", "kubectl")}
        others = [v for k, v in values.items() if k != "opstatus" and v == v]
        ratio = f"{min(others) / values['opstatus']:.0f}×" if others and values["opstatus"] else "–"
        met = "" if budget is None else ("yes" if (values["opstatus"] <= budget + 1e-9 if label != "API requests per heartbeat"
                                                 else abs(values["opstatus"] - 1) < 1e-9) else "**no**")
        cells = [fmt.format(values[n]) if values[n] == values[n] else "n/a" for n in ("opstatus", "python", "kubectl")]
        print(f"| {label} | {cells[0]} | {cells[1]} | {cells[2]} | {ratio} | {budget_text} | {met} |")
    print(f"\nopstatus CPU per heartbeat at a {args.idle_interval} s interval (over ureq's default 15 s idle limit; "
          f"the connection is kept): {idle_cpu:.3f} ms")
    print(f"opstatus health change, watched URL flip → status write at the API server (check interval 1 s, "
          f"{len(change)} flips): median {statistics.median(change) * 1000:.0f} ms, max {max(change) * 1000:.0f} ms")
    if statics:
        budget = 2 * 1048576
        print("\n| platform | static binary, stripped (bytes) | ≤ 2 MiB (2,097,152) |")
        print("|---|---|---|")
        for label, path in statics.items():
            size = os.path.getsize(path)
            print(f"| {label} | {size:,} | {'yes' if size <= budget else '**no**'} |")
    if arm64:
        print(f"\narm64 binary under qemu-user (emulated, for information only: the emulator's memory is included; "
              f"{args.heartbeats} heartbeats at 1 s): steady RSS {mib(arm64['rss_steady_kib'])}, "
              f"peak {mib(arm64['rss_peak_kib'])}, first write {arm64['first_write_ms']:.0f} ms after start")
    # Then the real settings: 1 s, and the 30 s and 60 s users run.
    sys.stdout.flush()
    args.intervals = args.default_intervals
    try:
        if args.intervals:
            real_intervals(cp, args, work, named_rules, writer_rules)
    finally:
        cp.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
