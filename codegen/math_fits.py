#!/usr/bin/env python3
"""Regenerates the f32 minimax coefficients of codegen/llvm_math.cpp (highest
degree first, as M::poly takes them) and prints each fit's maximum relative
error. Needs mpmath only; about a minute.

Each fit minimises relative error over Chebyshev nodes by Lawson's iteration
of weighted least squares (the weights converge towards the minimax ones),
against mpmath at 30 digits. A rational P/Q is linearised as P - t Q with
Q(0) = 1, reweighted by the last Q. Coefficients are then rounded to float
by LLVM, which the accuracy tests (tests/codegen/math_accuracy_test.cpp)
measure together with the evaluation's own rounding.
"""
import mpmath as mp

mp.mp.dps = 30


def fit(target, lo, hi, dp, dq=0, squared=True, odd=False, nodes=300, iters=20):
    """target(x) ~ (x if odd else 1) * P(u) / Q(u), u = x^2 if squared else x."""
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    xs = [(lo + hi) / 2 + (hi - lo) / 2 * mp.cos(mp.pi * (k + 0.5) / nodes) for k in range(nodes)]
    ts = [target(x) for x in xs]
    us = [x * x if squared else x for x in xs]
    pre = [x if odd else mp.mpf(1) for x in xs]
    w, qv, best = [mp.mpf(1)] * nodes, [mp.mpf(1)] * nodes, None
    for _ in range(iters):
        a, rhs = mp.matrix(nodes, dp + 1 + dq), mp.matrix(nodes, 1)
        for i in range(nodes):
            s = mp.sqrt(w[i]) / abs(ts[i] * qv[i])
            for j in range(dp + 1):
                a[i, j] = pre[i] * us[i] ** j * s
            for j in range(1, dq + 1):
                a[i, dp + j] = -ts[i] * us[i] ** j * s
            rhs[i] = ts[i] * s
        sol, _ = mp.qr_solve(a, rhs)
        p = [sol[j] for j in range(dp + 1)]
        q = [mp.mpf(1)] + [sol[dp + j] for j in range(1, dq + 1)]
        errs = []
        for i in range(nodes):
            qv[i] = mp.polyval(q[::-1], us[i])
            errs.append((pre[i] * mp.polyval(p[::-1], us[i]) / qv[i] - ts[i]) / ts[i])
        m = max(abs(e) for e in errs)
        if best is None or m < best[0]:
            best = (m, p, q)
        total = sum(w[i] * abs(errs[i]) for i in range(nodes))
        w = [w[i] * abs(errs[i]) / total * nodes for i in range(nodes)]
    return best


def show(name, result, rational=False):
    m, p, q = result
    print(f"{name}: max relative error {mp.nstr(m, 3)}")
    print("  P", [float(v) for v in p[::-1]])
    if rational:
        print("  Q", [float(v) for v in q[::-1]])


h = mp.log(2) / 2 * mp.mpf("1.0001")  # exp's reduced argument, with margin
s_max = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)  # log's s = f / (f + 2)
show("kExp32: e^r", fit(mp.exp, -h, h, 6, squared=False, nodes=200))
show("kExpm1Over32: (e^r - 1) / r",
     fit(lambda r: mp.expm1(r) / r, -h, h, 5, squared=False, nodes=200))
show("log1p_reduced (f32): (atanh(s) / s - 1) / s^2 in s^2",
     fit(lambda s: (mp.atanh(s) / s - 1) / s**2, "1e-4", s_max * mp.mpf("1.0001"), 2,
         nodes=150, iters=15))
show("kErfSmall32: erf(x) / x in x^2 on [0, 1/2]",
     fit(lambda x: mp.erf(x) / x, "1e-4", "0.5", 4, nodes=200))
show("kErfcxP32Erf / kErfcxQ32Erf: erfc(a) exp(a^2) on [1/2, 4]",
     fit(lambda a: mp.erfc(a) * mp.exp(a * a), "0.5", 4, 4, 3, squared=False), True)
show("sin32: (sin r - r) / r^3 in r^2", fit(lambda r: (mp.sin(r) - r) / r**3, "1e-3",
                                           mp.pi / 4 * mp.mpf("1.001"), 2, nodes=150, iters=15))
show("cos32: (cos r - 1 + r^2/2) / r^4 in r^2",
     fit(lambda r: (mp.cos(r) - 1 + r * r / 2) / r**4, "1e-3", mp.pi / 4 * mp.mpf("1.001"), 2,
         nodes=150, iters=15))
