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


def fit(target, lo, hi, dp, dq=0, squared=True, odd=False, nodes=300, iters=20, weight=None):
    """target(x) ~ (x if odd else 1) * P(u) / Q(u), u = x^2 if squared else x; the
    relative error at x counted times weight(x) where one is given (the error it
    makes in the function the fit serves)."""
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    xs = [(lo + hi) / 2 + (hi - lo) / 2 * mp.cos(mp.pi * (k + 0.5) / nodes) for k in range(nodes)]
    ts = [target(x) for x in xs]
    us = [x * x if squared else x for x in xs]
    pre = [x if odd else mp.mpf(1) for x in xs]
    wt = [weight(x) if weight else mp.mpf(1) for x in xs]
    w, qv, best = [mp.mpf(1)] * nodes, [mp.mpf(1)] * nodes, None
    for _ in range(iters):
        a, rhs = mp.matrix(nodes, dp + 1 + dq), mp.matrix(nodes, 1)
        for i in range(nodes):
            s = mp.sqrt(w[i]) * wt[i] / abs(ts[i] * qv[i])
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
            errs.append((pre[i] * mp.polyval(p[::-1], us[i]) / qv[i] - ts[i]) / ts[i] * wt[i])
        m = max(abs(e) for e in errs)
        if best is None or m < best[0]:
            best = (m, p, q)
        total = sum(w[i] * abs(errs[i]) for i in range(nodes))
        w = [w[i] * abs(errs[i]) / total * nodes for i in range(nodes)]
    return best


def show(name, result, rational=False, last=0):
    m, p, q = result
    print(f"{name}: max relative error {mp.nstr(m, 3)}")
    print("  P", [float(v) for v in p[::-1]][:-1] + [float(p[0]) + last])
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
show("kExpm1Tail32: (e^r - 1 - r) / r^2, error counted in (e^r - 1) / r",
     fit(lambda r: (mp.expm1(r) - r) / r**2, -h, h, 4, squared=False, nodes=200, iters=30,
         weight=lambda r: abs((mp.expm1(r) - r) / r / (mp.expm1(r) / r))))
# q = -log(erfc(a)) = a (1 + A(a)); erf = 1 - e^-q, whose error is erfc(a) times
# q's: q's relative error counted times erfc(a) q / erf(a). A is P less 1.
erfc_q = lambda a: -mp.log(mp.erfc(a))
show("kErfLogErfc32: -log(erfc(a)) / a - 1 on [0, 3.92], error counted in erf",
     fit(erfc_q, "1e-6", "3.92", 8, squared=False, odd=True, iters=40,
         weight=lambda a: mp.erfc(a) * erfc_q(a) / mp.erf(a)), last=-1)
show("sin32: (sin r - r) / r^3 in r^2", fit(lambda r: (mp.sin(r) - r) / r**3, "1e-3",
                                           mp.pi / 4 * mp.mpf("1.001"), 2, nodes=150, iters=15))
show("cos32: (cos r - 1 + r^2/2) / r^4 in r^2",
     fit(lambda r: (mp.cos(r) - 1 + r * r / 2) / r**4, "1e-3", mp.pi / 4 * mp.mpf("1.001"), 2,
         nodes=150, iters=15))
