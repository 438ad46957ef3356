#!/usr/bin/env python3
"""Writes build/text-order.ld: the functions a steady opstatus runs, placed
first in the static binary's code, so that the pages of code it never runs
(other commands, other signals and sinks, error paths, the backtrace
printer) stay on disk.

Why: the kernel maps a file's pages around each page fault (64 KiB
fault-around, whole large folios), so a page of code run once at start
brings in its neighbours for good, and with the functions in the compiler's
order nearly every 64 KiB of the binary's code holds one that runs: the
steady RSS is then close to the binary's size (docs/footprint.md, "Steady
RSS").

How: the static x86_64 release build, linked with a link map (which names
each function's place), runs at the 60 s default with no probes, with the
probe endpoint (each path asked for once) and the ready file as the
shipped manifests run it, against a real kube-apiserver on loopback
(scripts/control-plane.sh), under `valgrind --tool=callgrind
--dump-instr=yes` until its second status write; every function with an
instruction run is listed. Names are written
without their hashes (legacy `17h…E`, v0 crate disambiguators) where that
still names one function, so the list holds while the code changes and for
each target; the instances of a generic function keep theirs. A function
it no longer names is placed as the compiler placed it. Run again when the steady path
changes much:

    python3 bench/text_order.py
"""
import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMED_RULES = ("- {apiGroups: [''], resources: [configmaps], resourceNames: [kube9-operator-status], "
               "verbs: [get, patch, create]}")
HEADER = """/* Linked into the static (musl) release binaries by build.rs: the functions
   a steady opstatus runs (start, heartbeats at the 60 s default, no probes,
   the probe endpoint and the ready file as the shipped manifests have them),
   first in the code, so that the code it never runs shares no page with
   them and is not mapped. Written by bench/text_order.py (how and why:
   there); a function this does not name is placed as the compiler placed
   it. Names without their hashes, so that it holds as the code changes. */
SECTIONS
{
  .text.steady :
  {
"""
FOOTER = """  }
}
INSERT BEFORE .text;
"""


def executed_addresses(callgrind_out):
    """Every instruction address with a cost (--dump-instr=yes): absolute
    (0x…) or relative (+n, -n) to the one before."""
    addresses, current = set(), 0
    for line in open(callgrind_out):
        token = line.split(maxsplit=1)[0] if line.strip() else ""
        try:
            if token.startswith("0x"):
                current = int(token, 16)
            elif token.startswith("+"):
                current += int(token[1:], 0)
            elif token.startswith("-"):
                current -= int(token[1:], 0)
            elif token != "*":
                continue
        except ValueError:
            continue
        addresses.add(current)
    return addresses


def input_sections(link_map):
    """(address, size, function) of each function's own input section
    (`.text.NAME`, `.text.unlikely.NAME`) in GNU ld's link map, by address."""
    sections, pending = [], None
    for line in open(link_map):
        m = re.match(r"^ \.text(?:\.unlikely)?\.(\S+)(?:\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s.*)?$", line)
        if m and m.group(2):
            sections.append((int(m.group(2), 16), int(m.group(3), 16), m.group(1)))
        elif m:
            pending = m.group(1)
            continue
        else:
            m = re.match(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s", line)
            if m and pending:
                sections.append((int(m.group(1), 16), int(m.group(2), 16), pending))
        pending = None
    return sorted(s for s in sections if s[1] > 0)


def pattern(name):
    """A section-name pattern for `name` that holds across builds: the
    legacy mangling's hash and v0's crate disambiguators wildcarded."""
    name = re.sub(r"17h[0-9a-f]{16}E(\.[0-9]+)?$", "17h*", name)
    name = re.sub(r"\.[0-9]+$", "*", name)
    if name.startswith("_R"):
        name = re.sub(r"Cs[0-9A-Za-z]*_", "Cs*_", name)
    return name


def run_under_callgrind(binary, out, writes):
    work = tempfile.mkdtemp(prefix="opstatus-text-order-")
    cp = bench.ControlPlane(f"{work}/control-plane")
    try:
        sa_dir, _, user = cp.identity("text-order", "writer", NAMED_RULES, work)
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=cp.env["APISERVER_PORT"],
                   OPSTATUS_SERVICE_ACCOUNT_DIR=sa_dir)
        # As the shipped manifests run it: the probe endpoint and the ready
        # file too, each endpoint path asked for once after the first write.
        argv = ["valgrind", "-q", "--tool=callgrind", "--dump-instr=yes", f"--callgrind-out-file={out}",
                binary, "run", "--interval", "60s", "--no-final-status", "--listen", "127.0.0.1:0",
                "--ready-file", f"{work}/ready"]
        log = open(f"{work}/log", "wb")
        p = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
        try:
            deadline = time.time() + 60 * writes + 120
            asked = False
            while len(bench.writes(cp, user)) < writes and time.time() < deadline and p.poll() is None:
                time.sleep(1)
                served = re.search(r"on http://(127\.0\.0\.1:[0-9]+)", open(f"{work}/log", errors="replace").read())
                if served and not asked and bench.writes(cp, user):
                    for path in ("/healthz", "/readyz", "/status", "/metrics"):
                        with urllib.request.urlopen(f"http://{served.group(1)}{path}", timeout=10) as answer:
                            answer.read()
                    asked = True
            assert len(bench.writes(cp, user)) >= writes, "opstatus made too few status writes under callgrind"
            assert asked, "the probe endpoint was not asked"
            time.sleep(2)
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(60)
    finally:
        cp.stop()
        shutil.rmtree(work, ignore_errors=True)


def build_with_map(link_map):
    """The static x86_64 release build as scripts/static-build.sh makes it,
    with GNU ld's link map (which names each function's place)."""
    subprocess.run(["cargo", "auditable", "rustc", "--locked", "--release", "--target", "x86_64-unknown-linux-musl",
                    "--bin", "opstatus", "--", "-C", f"link-arg=-Wl,-Map,{link_map}"], cwd=ROOT, check=True)
    return f"{ROOT}/target/x86_64-unknown-linux-musl/release/opstatus"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writes", type=int, default=2, help="status writes to run for (the first and a steady one)")
    ap.add_argument("--out", default=f"{ROOT}/build/text-order.ld")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="opstatus-text-order-")
    link_map, out = f"{work}/link.map", f"{work}/callgrind.out"
    binary = build_with_map(link_map)
    run_under_callgrind(binary, out, args.writes)
    addresses = sorted(executed_addresses(out))
    sections = input_sections(link_map)
    # A name that stands for one function alone is written without its
    # hashes; one shared by instances of a generic function (which the hash
    # tells apart) keeps them, so that the instances it never runs stay out.
    shared = collections.Counter(pattern(name) for _, _, name in sections)
    names, i = set(), 0
    for start, size, name in sections:
        while i < len(addresses) and addresses[i] < start:
            i += 1
        if i < len(addresses) and addresses[i] < start + size:
            names.add(pattern(name) if shared[pattern(name)] == 1 else name)
    with open(args.out, "w") as f:
        f.write(HEADER)
        for name in sorted(names):
            f.write(f"    *(.text.{name} .text.unlikely.{name})\n")
        f.write(FOOTER)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{args.out}: {len(names)} functions run of {len(sections)}", file=sys.stderr)


if __name__ == "__main__":
    main()
