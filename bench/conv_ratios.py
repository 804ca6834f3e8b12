#!/usr/bin/env python3
"""bench_conv's roofline ratios over several rounds, one or more builds
interleaved: each round runs every binary once (one repetition each, in turn),
so a comparison of two builds sees the same minutes of a shared machine.

Prints, per benchmark row and binary, cpu_roofline_ratio as the median of the
rounds with its spread [min - max], the spread of its two sides (the floor and
the best chunk's time) and the mean time, all in the calling thread's CPU time
(microseconds); with two or more binaries, each later one's mean CPU time over
the first's, per round and as their median.

Usage: python3 bench/conv_ratios.py [--rounds R] [--filter REGEX] BENCH_CONV [BENCH_CONV...]
The filter defaults to the fused rows ('/2/'); the runs get KILN_NUM_THREADS=1
unless the environment sets it (cpu_roofline_ratio counts one thread's time).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_once(binary, filt, min_time):
    """One run of `binary`: {row name: (cpu_roofline_ratio, mean cpu time, floor, best
    cpu time)}, times in us."""
    env = dict(os.environ)
    env.setdefault("KILN_NUM_THREADS", "1")
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([binary, "--benchmark_filter=" + filt, "--benchmark_min_time=" + min_time,
                        "--benchmark_out=" + out.name, "--benchmark_out_format=json"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        rows = json.load(open(out.name))["benchmarks"]
    result = {}
    for r in rows:
        if r.get("run_type") != "iteration" or "cpu_roofline_ratio" not in r:
            continue
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[r["time_unit"]]
        result[r["name"]] = (r["cpu_roofline_ratio"], r["cpu_time"] * scale, r["cpu_floor_us"],
                             r["cpu_best_us"])
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--filter", default="/2/")
    p.add_argument("--min-time", default="0.2")
    p.add_argument("binaries", nargs="+")
    a = p.parse_args()
    runs = {b: [] for b in a.binaries}
    for r in range(a.rounds):
        for b in a.binaries:
            runs[b].append(run_once(b, a.filter, a.min_time))
            print(f"round {r + 1}: {b} done", file=sys.stderr, flush=True)
    names = [n for n in runs[a.binaries[0]][0]]
    for n in names:
        print(n)
        first = None
        for i, b in enumerate(a.binaries):
            ratios = [run[n][0] for run in runs[b] if n in run]
            times = [run[n][1] for run in runs[b] if n in run]
            floors = [run[n][2] for run in runs[b] if n in run]
            bests = [run[n][3] for run in runs[b] if n in run]
            line = (f"  [{i}] cpu_roofline_ratio {statistics.median(ratios):.2f} "
                    f"[{min(ratios):.2f} - {max(ratios):.2f}]  floor {min(floors):.1f}-{max(floors):.1f} us"
                    f"  best {min(bests):.1f}-{max(bests):.1f} us  mean {statistics.median(times):.1f} us")
            if i == 0:
                first = times
            elif len(times) == len(first):
                per_round = [t / f for t, f in zip(times, first)]
                line += (f"  time / [0]: {statistics.median(per_round):.2f} "
                         f"({', '.join(f'{x:.2f}' for x in per_round)})")
            print(line)
    for i, b in enumerate(a.binaries):
        print(f"[{i}] {b}")


if __name__ == "__main__":
    main()
