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
each function's place), runs as the shipped sidecar runs it
(manifests/components/opstatus: the 60 s default, the operator's health URL
checked every 5 s, the probe endpoint with each path asked for once, the
ready file; no probes), against a real kube-apiserver on loopback
(scripts/control-plane.sh), under `valgrind --tool=callgrind
--dump-instr=yes` until its second status write; every function with an
instruction run is listed, by a name that holds while the code changes and
for each target: without its hash (legacy `17h…E`), its crate
disambiguators (v0 `Cs…_`) and the numbers LTO appends to local copies
(`.123`). Where that name is shared by the instances of a generic function
(which only the hash told apart), all of them are placed first: a few KB
more than the ones run, and a list that a new toolchain, dependency or
change does not leave pointing at nothing. A function it no longer names is
placed as the compiler placed it. Run again when the steady path changes
much, or when the static build says the list names too few functions:

    python3 bench/text_order.py

`--rss [LABEL=]BINARY...` measures what the list is worth: each static
binary (natively, or under qemu-user when built for another machine) runs as the
shipped sidecar does (above), against one real kube-apiserver on loopback, all at
once, and 65 s after the last first write (the second heartbeat run) the
resident size of the binary's own mappings (/proc/PID/smaps) is printed,
and VmRSS. Under qemu-user VmRSS is the emulator's, its translated code
and the guest's heap together; the guest binary's pages are mapped from
the file as they are natively (4 KiB pages, the kernel's fault-around),
and those are what the order changes. Build the binaries without the list
with OPSTATUS_TEXT_ORDER=off (build.rs).

`--check MAP` is that check (scripts/static-build.sh runs it on each
binary's link map, which build.rs has the linker write): the share of the
list's entries that name a function in the link, against `--min-share`,
and that the linker placed them (`.text.steady`, which needs GNU ld or
lld). Exit 0 when it holds, 1 when not, with what to do.
"""
import argparse
import bisect
import fnmatch
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
HEADER = """/* Linked into the static binaries by build.rs, on the targets where it
   pays (docs/footprint.md): the functions a steady opstatus runs as the
   shipped sidecar runs it (start, heartbeats at the 60 s default, the
   operator's health URL checked every 5 s, the probe endpoint and the
   ready file; no probes), first in the code, so
   that the code it never runs shares no page with them and is not mapped.
   Written by bench/text_order.py (how and why: there); a function this
   does not name is placed as the compiler placed it. Names without
   hashes, so that it holds as the code changes; scripts/static-build.sh
   fails when too few of them still name a function. */
SECTIONS
{
  .text.steady :
  {
"""
# The least share of the list's entries that must name a function of the
# link (`--check`). A fresh list names all of them on x86_64, where it is
# written; the other targets lack a few (their own assembly, libc's
# architecture-specific functions). Code changes retire a few more; under
# this the list has lost touch with the code.
MIN_SHARE = 0.90
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
    sections, pending, linked = [], None, False
    for line in open(link_map):
        linked = linked or line.startswith("Linker script and memory map")
        if not linked:  # GNU ld's discarded input sections come first
            continue
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
    legacy mangling's hash, LTO's copy numbers and v0's crate
    disambiguators wildcarded."""
    # The machine outliner's functions (x86_64, .cargo/config.toml) are
    # numbered in the order it made them, which any change shifts: all of
    # them go first (about 30 KB), not the numbers one build ran.
    if name.startswith("OUTLINED_FUNCTION_"):
        return "OUTLINED_FUNCTION_*"
    name = re.sub(r"17h[0-9a-f]{16}E(\.[0-9]+)?$", "17h*", name)
    name = re.sub(r"\.[0-9]+$", "*", name)
    if name.startswith("_R"):
        name = re.sub(r"Cs[0-9A-Za-z]*_", "Cs*_", name)
    return name


def listed_patterns(order_ld):
    """Each entry of a text-order.ld: the globs of one `*(...)` line."""
    return [m.group(1).split() for m in re.finditer(r"^\s*\*\((.*)\)\s*$", open(order_ld).read(), re.M)]


def linked_text_sections(link_map):
    """The names of the code input sections in a link map (GNU ld's or
    lld's), and whether it has the `.text.steady` output section. GNU ld's
    list of discarded sections, before its memory map, is not the link."""
    names, steady, linked = set(), False, True
    for line in open(link_map, errors="replace"):
        if line.startswith("Discarded input sections"):
            linked = False
        elif line.startswith("Linker script and memory map"):
            linked = True
        if not linked:
            continue
        if re.match(r"^\.text\.steady(\s|$)", line) or re.search(r"\s\.text\.steady$", line.rstrip()):
            steady = True
        gnu = re.match(r"^ (\.text\.\S+)", line)
        lld = re.search(r":\((\.text\.[^)]+)\)$", line.rstrip())
        if gnu or lld:
            names.add((gnu or lld).group(1))
    return names, steady


def check(link_map, order_ld, min_share):
    """The share of the list's entries that name a linked function, and
    that the linker placed them: (ok, message)."""
    names, steady = linked_text_sections(link_map)
    names = sorted(names)
    entries = listed_patterns(order_ld)

    def found(glob):
        literal = re.split(r"[*?\[]", glob, maxsplit=1)[0]
        i = bisect.bisect_left(names, literal)
        while i < len(names) and names[i].startswith(literal):
            if fnmatch.fnmatchcase(names[i], glob):
                return True
            i += 1
        return False

    matched = sum(1 for globs in entries if any(found(g) for g in globs))
    share = matched / len(entries) if entries else 0.0
    fix = "write it again: python3 bench/text_order.py (docs/footprint.md, \"Steady RSS\")"
    if not names:
        return False, f"{link_map}: no code sections in the link map"
    if not steady:
        return False, (f"{link_map}: the linker did not apply {order_ld} (no .text.steady): link the static "
                       f"binaries with GNU ld or lld, not gold or mold (CONTRIBUTING.md)")
    summary = (f"{order_ld}: {matched} of {len(entries)} entries ({share:.1%}) name a function of the link "
               f"({len(names)} code sections)")
    if share < min_share:
        return False, f"{summary}, under {min_share:.0%}: the list is stale; {fix}"
    return True, summary


def run_under_callgrind(binary, out, writes):
    work = tempfile.mkdtemp(prefix="opstatus-text-order-")
    cp = bench.ControlPlane(f"{work}/control-plane")
    try:
        sa_dir, _, user = cp.identity("text-order", "writer", NAMED_RULES, work)
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=cp.env["APISERVER_PORT"],
                   OPSTATUS_SERVICE_ACCOUNT_DIR=sa_dir)
        # As the shipped sidecar runs it (shipped() below); each endpoint
        # path asked for once after the first write.
        argv = ["valgrind", "-q", "--tool=callgrind", "--dump-instr=yes", f"--callgrind-out-file={out}",
                binary, "run", "--no-final-status", *shipped(work, "profile")]
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


def shipped(work, name):
    """The flags of the shipped sidecar (manifests/components/opstatus):
    the operator's health URL (served by the benchmark, its connections
    kept), the probe endpoint, the ready file."""
    return [f"--watch-url={bench.operator_url()}", "--listen", "127.0.0.1:0", "--ready-file", f"{work}/ready-{name}"]


def build_with_map():
    """The static x86_64 release build as scripts/static-build.sh makes it,
    and GNU ld's link map of it (which names each function's place), which
    build.rs has the linker write beside it."""
    subprocess.run(["cargo", "auditable", "build", "--locked", "--release", "--target", "x86_64-unknown-linux-musl"],
                   cwd=ROOT, check=True)
    release = f"{ROOT}/target/x86_64-unknown-linux-musl/release"
    return f"{release}/opstatus", f"{release}/opstatus.map"


# ELF e_machine: the emulator that runs it on another host.
QEMU = {183: "/usr/bin/qemu-aarch64-static", 40: "/usr/bin/qemu-arm-static"}
HOST_MACHINE = {"x86_64": 62, "aarch64": 183, "armv7l": 40}.get(os.uname().machine)


def mapped_kib(pid, path):
    """The resident KiB of `pid`'s mappings of the file `path`."""
    total, mine = 0, False
    for line in open(f"/proc/{pid}/smaps"):
        fields = line.split()
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            mine = len(fields) >= 6 and fields[5] == path
        elif mine and fields[0] == "Rss:":
            total += int(fields[1])
    return total


def steady_rss(binaries, after):
    """[(label, binary, size, binary KiB, VmRSS KiB)] at the 60 s default."""
    work = tempfile.mkdtemp(prefix="opstatus-text-order-rss-")
    cp = bench.ControlPlane(f"{work}/control-plane")
    runs = []
    try:
        for i, (label, binary) in enumerate(binaries):
            sa_dir, _, user = cp.identity(f"rss-{i}", "writer", NAMED_RULES, work)
            env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1",
                       KUBERNETES_SERVICE_PORT=cp.env["APISERVER_PORT"], OPSTATUS_SERVICE_ACCOUNT_DIR=sa_dir)
            with open(binary, "rb") as f:
                machine = int.from_bytes(f.read(20)[18:20], "little")
            emulated = machine != HOST_MACHINE
            argv = ([QEMU[machine]] if emulated else []) + [binary, "run", "--no-final-status", *shipped(work, i)]
            log = open(f"{work}/log-{i}", "wb")
            runs.append((label, binary, user, subprocess.Popen(argv, env=env, stdout=log, stderr=log)))
        deadline = time.time() + 180
        while time.time() < deadline and not all(bench.writes(cp, user) for _, _, user, _ in runs):
            assert all(p.poll() is None for *_, p in runs), "an opstatus exited"
            time.sleep(1)
        assert all(bench.writes(cp, user) for _, _, user, _ in runs), "an opstatus made no first write in 180 s"
        time.sleep(after)
        heartbeats = 1 + after // 60
        assert all(len(bench.writes(cp, user)) >= heartbeats for _, _, user, _ in runs), "a heartbeat is missing"
        return [(label, binary, os.path.getsize(binary), mapped_kib(p.pid, os.path.realpath(binary)),
                 bench.status_kib(p.pid, "VmRSS:")) for label, binary, _, p in runs]
    finally:
        for *_, p in runs:
            p.send_signal(signal.SIGTERM)
            p.wait(60)
        cp.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writes", type=int, default=2, help="status writes to run for (the first and a steady one)")
    ap.add_argument("--out", default=f"{ROOT}/build/text-order.ld")
    ap.add_argument("--check", metavar="MAP", help="check the list (--out) against this link map, write nothing")
    ap.add_argument("--min-share", type=float, default=MIN_SHARE,
                    help="--check: the least share of the list's entries that name a linked function")
    ap.add_argument("--rss", nargs="+", metavar="[LABEL=]BINARY", help="measure these binaries' idle RSS, write nothing")
    ap.add_argument("--after", type=int, default=65, help="--rss: seconds after the last first write")
    args = ap.parse_args()
    if args.rss:
        binaries = [tuple(b.split("=", 1)) if "=" in b else (b, b) for b in args.rss]
        print("| binary | size (B) | the binary's pages resident (KiB) | VmRSS (KiB) |\n|---|---|---|---|")
        for label, _, size, binary_kib, vm_rss in steady_rss(binaries, args.after):
            print(f"| {label} | {size:,} | {binary_kib:,} | {vm_rss:,} |")
        return
    if args.check:
        ok, message = check(args.check, args.out, args.min_share)
        print(f"text order: {message}", file=sys.stderr)
        sys.exit(0 if ok else 1)
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="opstatus-text-order-")
    out = f"{work}/callgrind.out"
    binary, link_map = build_with_map()
    run_under_callgrind(binary, out, args.writes)
    addresses = sorted(executed_addresses(out))
    sections = input_sections(link_map)
    names, i = set(), 0
    for start, size, name in sections:
        while i < len(addresses) and addresses[i] < start:
            i += 1
        if i < len(addresses) and addresses[i] < start + size:
            names.add(pattern(name))
    with open(args.out, "w") as f:
        f.write(HEADER)
        for name in sorted(names):
            f.write(f"    *(.text.{name} .text.unlikely.{name})\n")
        f.write(FOOTER)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{args.out}: {len(names)} entries for the functions run, of {len(sections)} linked; "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
