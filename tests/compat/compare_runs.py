#!/usr/bin/env python3
"""Runs a compat program eagerly (KILN_JIT=0) and traced (KILN_JIT=1) and
checks that both print the same lines with the same numbers (to a relative
tolerance of 1e-4, for the order of float operations in fused kernels).

usage: compare_runs.py PROGRAM [ARGS...]
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


def close(a, b):
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return abs(x - y) <= 1e-4 * max(abs(x), abs(y)) + 1e-5


eager, traced = run("0"), run("1")
print("\n".join(traced))
if len(eager) != len(traced):
    sys.exit("eager printed %d lines, traced %d" % (len(eager), len(traced)))
bad = 0
for i, (e, t) in enumerate(zip(eager, traced)):
    if NUMBER.sub("#", e) != NUMBER.sub("#", t) or not all(
        close(a, b) for a, b in zip(NUMBER.findall(e), NUMBER.findall(t))
    ):
        print("line %d differs:\n  eager:  %s\n  traced: %s" % (i + 1, e, t))
        bad += 1
if bad:
    sys.exit("%d lines differ between eager and traced runs" % bad)
print("eager and traced runs agree (%d lines)" % len(eager))
