#!/usr/bin/env python3
"""How long each test of a libtest run took, from its output alone.

libtest (stable) prints a test's name when it ends, not when it starts, and
no duration. It starts the tests of a run in the order `--list` gives them,
at most THREADS at once, the next one as soon as one ends. So with the time
each line was printed, each test's start is the run's start (the first
THREADS) or the end of the test whose slot it took, and its duration
follows.

    ts() { python3 -c 'import sys, time
    for l in sys.stdin: print(f"{time.time():.3f}", l, end="", flush=True)'; }
    BIN --test-threads=6 FILTERS 2>&1 | ts >run.log
    BIN --list FILTERS >list.txt
    scripts/lib/test-times.py 6 list.txt run.log      # slowest first

Lines of run.log are `EPOCH-SECONDS LINE` (as `ts` above writes them).
"""
import re
import sys


def main():
    threads, list_file, log_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    order = [l.rsplit(": test", 1)[0] for l in open(list_file) if l.rstrip().endswith(": test")]
    start_of_run = None
    ends = {}
    for line in open(log_file):
        stamp, _, text = line.partition(" ")
        if start_of_run is None and text.startswith("running "):
            start_of_run = float(stamp)
        m = re.match(r"^test (\S+) \.\.\. (ok|FAILED|ignored)", text)
        if m:
            ends[m.group(1)] = (float(stamp), m.group(2))
    if start_of_run is None:
        sys.exit("no `running N tests` line in the log")
    finished = sorted(ends.items(), key=lambda kv: kv[1][0])
    starts = {}
    # The first THREADS tests start with the run; each later one when the
    # k-th test (in order of ending) ends.
    for i, name in enumerate(order):
        if i < threads:
            starts[name] = start_of_run
        elif i - threads < len(finished):
            starts[name] = finished[i - threads][1][0]
    rows = []
    for name, (end, result) in ends.items():
        start = starts.get(name, start_of_run)
        rows.append((end - start, start - start_of_run, end - start_of_run, result, name))
    rows.sort(reverse=True)
    print(f"{'took':>7} {'from':>7} {'to':>7}  result  test")
    for took, frm, to, result, name in rows:
        print(f"{took:7.1f} {frm:7.1f} {to:7.1f}  {result:6}  {name}")
    print(f"{len(rows)} tests; the run took {max(r[2] for r in rows):.1f} s; sum of the tests {sum(r[0] for r in rows):.1f} s")


if __name__ == "__main__":
    main()
