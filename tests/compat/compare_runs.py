#!/usr/bin/env python3
"""Runs a compat program eagerly (KILN_JIT=0) and traced (KILN_JIT=1) and
checks that both print the same lines with the same numbers (to a relative
tolerance of 1e-4, for the order of float operations in fused kernels).

With --expect FILE, the eager run must also print FILE's lines to a relative
tolerance of 1e-3: FILE is what the same source printed built against real
libtorch (a program whose every number is determined: parameters from
formulas, no random draws; against_libtorch.sh checks that libtorch still
prints it). --outputs EXPECTED ACTUAL compares two saved outputs that way.

usage: compare_runs.py [--expect FILE] PROGRAM [ARGS...]
       compare_runs.py --outputs EXPECTED ACTUAL
"""
import os
import re
import subprocess
import sys

NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")


def run(jit):
    env = dict(os.environ, KILN_JIT=jit)
    p = subprocess.run(sys.argv[1:], env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.stdout.write(p.stdout)
        sys.stderr.write(p.stderr)
        sys.exit("%s with KILN_JIT=%s exited with status %d" % (sys.argv[1], jit, p.returncode))
    return p.stdout.splitlines()


def close(a, b, rel=1e-4):
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return abs(x - y) <= rel * max(abs(x), abs(y)) + 1e-5


def differences(want, got, what_want, what_got, rel):
    """The number of lines that differ (printed), or all when the counts differ."""
    if len(want) != len(got):
        print("%s printed %d lines, %s %d" % (what_want, len(want), what_got, len(got)))
        return max(len(want), len(got))
    bad = 0
    for i, (w, g) in enumerate(zip(want, got)):
        if NUMBER.sub("#", w) != NUMBER.sub("#", g) or not all(
            close(a, b, rel) for a, b in zip(NUMBER.findall(w), NUMBER.findall(g))
        ):
            print("line %d differs:\n  %s: %s\n  %s: %s" % (i + 1, what_want, w, what_got, g))
            bad += 1
    return bad


def read_lines(path):
    with open(path) as f:
        return f.read().splitlines()


if sys.argv[1:2] == ["--outputs"]:
    bad = differences(read_lines(sys.argv[2]), read_lines(sys.argv[3]), "expected", "got", 1e-3)
    if bad:
        sys.exit("%d lines differ from %s" % (bad, sys.argv[2]))
    print("the output agrees with %s (%d lines)" % (sys.argv[2], len(read_lines(sys.argv[2]))))
    sys.exit(0)
expect = None
if sys.argv[1:2] == ["--expect"]:
    expect = read_lines(sys.argv[2])
    del sys.argv[1:3]

eager, traced = run("0"), run("1")
print("\n".join(traced))
bad = differences(eager, traced, "eager", "traced", 1e-4)
if bad:
    sys.exit("%d lines differ between eager and traced runs" % bad)
print("eager and traced runs agree (%d lines)" % len(eager))
if expect is not None:
    bad = differences(expect, eager, "libtorch", "eager", 1e-3)
    if bad:
        sys.exit("%d lines differ from what libtorch printed" % bad)
    print("and agree with what libtorch printed (%d lines)" % len(expect))
