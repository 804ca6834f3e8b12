// Data parallelism when ranks fail or disagree: the arrival records that
// ranks compare before each collective, and the failure cases that
// tests/distributed/failure.sh runs under mpirun with two ranks (a rank that
// never arrives, dies, exits, or calls a collective that differs from the
// other's). Alone, or in the plain `mpirun -np 2` run, the failure cases do
// nothing (KILN_TEST_FAILURE is unset).
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include "frontend/kiln/kiln.h"
#include "runtime/arrival.h"
#include "runtime/collective.h"

using namespace kiln;
namespace dist = kiln::distributed;

TEST_CASE("arrival records: calls that differ across ranks are named with both lines") {
  auto call = [](OpKind op, DType dt, Shape shape, ReduceOp reduce = ReduceOp::sum, int root = 0,
                 uint32_t line = 10) {
    CollectiveCall c;
    c.op = op;
    c.dtype = dt;
    c.reduce = reduce;
    c.root = root;
    c.count = 1;
    for (int64_t d : shape) c.count *= d;
    c.shapes = shape_str(shape);
    c.what = std::string(op_name(op)) + " of " + TensorType{dt, shape, {}}.str();
    c.loc = SourceLoc("/src/train.cpp", line);
    return c;
  };
  const Arrival a = arrival_of(call(OpKind::all_reduce, DType::f32, {4}), 2);
  CHECK(arrival_mismatch(
            a, 0, arrival_of(call(OpKind::all_reduce, DType::f32, {4}, ReduceOp::sum, 0, 11), 2), 1)
            .empty());  // the line may differ
  const std::string shape = arrival_mismatch(
      a, 0, arrival_of(call(OpKind::all_reduce, DType::f32, {5}, ReduceOp::sum, 0, 12), 2), 1);
  CHECK(shape ==
        "the ranks disagree on collective #2 (shape): rank 0 called all_reduce of f32[4] at "
        "train.cpp:10, "
        "but rank 1 called all_reduce of f32[5] at train.cpp:12; every rank must run the same "
        "collectives in the same order, with the same dtypes, shapes, reduce ops and roots "
        "(nothing was sent)");
  // The same number of elements in another shape is a mismatch too.
  CHECK(arrival_mismatch(arrival_of(call(OpKind::all_gather, DType::f32, {2, 3}), 1), 1,
                         arrival_of(call(OpKind::all_gather, DType::f32, {3, 2}), 1), 0)
            .find("(shape): rank 1 called all_gather of f32[2,3]") != std::string::npos);
  CHECK(arrival_mismatch(a, 0, arrival_of(call(OpKind::all_reduce, DType::f64, {4}), 2), 1)
            .find("(dtype)") != std::string::npos);
  CHECK(arrival_mismatch(a, 0, arrival_of(call(OpKind::all_reduce, DType::f64, {2}), 2), 1)
            .find("(dtype and shape)") != std::string::npos);
  CHECK(arrival_mismatch(a, 0,
                         arrival_of(call(OpKind::all_reduce, DType::f32, {4}, ReduceOp::max), 2), 1)
            .find("(reduce op)") != std::string::npos);
  CHECK(arrival_mismatch(a, 0, arrival_of(call(OpKind::broadcast, DType::f32, {4}), 2), 1)
            .find("(the collective)") != std::string::npos);
  CollectiveCall bar;
  bar.what = "barrier";
  CHECK(arrival_mismatch(a, 0, arrival_of(bar, 2, /*barrier=*/true), 1)
            .find("but rank 1 called barrier;") != std::string::npos);
  const Arrival b0 = arrival_of(call(OpKind::broadcast, DType::i64, {3}, ReduceOp::sum, 0), 5);
  CHECK(arrival_mismatch(
            b0, 0, arrival_of(call(OpKind::broadcast, DType::i64, {3}, ReduceOp::max, 1), 5), 1)
            .find("(root)") != std::string::npos);  // a broadcast has no reduce op
  CHECK(arrival_mismatch(
            b0, 0, arrival_of(call(OpKind::broadcast, DType::i64, {3}, ReduceOp::max, 0), 5), 1)
            .empty());
  // A rank that left: its exit status, and whether it had arrived.
  CHECK(
      departure_message(a, 0, 2, departure(1, 1, 3), 1) ==
      "all_reduce of f32[4] on rank 0 of 2 cannot complete: rank 1 left (it exited with status 3) "
      "after its collective #1, before arriving at this one (collective #2)");
  CHECK(departure_message(a, 0, 2, departure(2, 1, -1), 1)
            .find("rank 1 left (it called distributed::finalize()) after its collective #1, during "
                  "this one") != std::string::npos);
  // Long names are cut to fit the fixed-size record.
  CollectiveCall big = call(OpKind::all_reduce, DType::f32, {4});
  big.what = std::string(1000, 'x');
  CHECK(std::string(arrival_of(big, 1).what).size() == sizeof(Arrival::what) - 1);
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Ends a rank of a failure case as a program whose collective failed ends:
// exit() with status 1 (failure.sh checks every rank's status), after saying
// what failed when the checks held.
[[noreturn]] void end_failed(bool ok, double s, const std::string& what) {
  if (ok)
    std::fprintf(stderr, "KILN_FAILURE_OK rank %d after %.1f s: %s\n", dist::rank(), s,
                 what.c_str());
  std::fflush(stderr);
  std::exit(1);
}

bool has(const std::string& text, const std::string& part) {
  const bool found = text.find(part) != std::string::npos;
  if (!found) MESSAGE("expected to find '" << part << "' in: " << text);
  return found;
}

}  // namespace

// Run only by failure.sh, under mpirun with two ranks (KILN_TEST_FAILURE names
// the case). Every rank that sees the failure checks its error, prints
// KILN_FAILURE_OK and exits with status 1.
//   absent: rank 1 never arrives at the second all_reduce (it comes after
//     the timeout, 1 s): rank 0 fails within it, naming rank 1; then rank 1
//     fails at once, naming rank 0, which left meanwhile.
//   kill: rank 1 dies before it: the same.
//   exit, exit0: rank 1 calls exit(3) or exit(0) instead: it leaves at once,
//     and rank 0 fails at once (the timeout is long), naming it and its status.
//   busy: rank 1 calls exit(3) while another of its threads waits in a
//     collective: it still leaves at once.
//   shape, dtype, kind, root, traced: the ranks call collectives that differ:
//     both fail before any data moves, each naming both calls.
TEST_CASE("failure cases (run by failure.sh)") {
  const char* env = std::getenv("KILN_TEST_FAILURE");
  if (!env) return;
  const std::string mode = env;
  const bool slow = mode == "absent" || mode == "kill";
  dist::InitOptions o;
  o.timeout_s = slow ? 1 : 30;
  dist::init(o);
  REQUIRE(dist::world_size() == 2);
  const int r = dist::rank();
  Tensor t = full({4}, 1.f);
  dist::all_reduce(t);
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  bool ok = true;
  if (mode == "busy") {
    // Rank 1 exits while another of its threads waits in a collective that
    // rank 0 has not reached: the wait stops, and the rank leaves at once
    // (mpirun then ends rank 0 and reports rank 1's status).
    if (r == 1) {
      static float buf[4] = {1, 1, 1, 1};
      std::thread([] {
        CollectiveCall c;
        c.op = OpKind::all_reduce;
        c.dtype = DType::f32;
        c.count = 4;
        c.shapes = "[4]";
        c.what = "all_reduce on another thread";
        try {
          collectives::run(c, buf, buf);
        } catch (const Error&) {
        }
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // until the process ends
      }).detach();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::exit(3);
    }
    std::this_thread::sleep_for(std::chrono::seconds(10));
    end_failed(false, seconds_since(t0), "rank 0 outlived rank 1");
  }
  if (slow || mode == "exit" || mode == "exit0") {
    if (r == 1) {
      if (mode == "kill") std::raise(SIGKILL);
      if (mode == "exit") std::exit(3);
      if (mode == "exit0") std::exit(0);
      // absent: come back after rank 0 gave up (and, under --enable-recovery,
      // left): this call fails at once, naming rank 0.
      std::this_thread::sleep_for(std::chrono::seconds(2));
      const auto t1 = std::chrono::steady_clock::now();
      try {
        dist::all_reduce(t);
      } catch (const Error& e) {
        what = e.what();
      }
      // Rank 0 arrived at this call (and timed out in it) before it left.
      ok = has(what,
               "all_reduce of f32[4] (sum) on rank 1 of 2 cannot complete: rank 0 left (it exited "
               "with status 1) after its collective #1, during this one (collective #2)") &&
           seconds_since(t1) < 1;
      CHECK(ok);
      end_failed(ok, seconds_since(t1), what);
    }
    try {
      dist::all_reduce(t);
    } catch (const Error& e) {
      what = e.what();
    }
    const double s = seconds_since(t0);
    if (slow) {
      ok = has(what,
               "all_reduce of f32[4] (sum) timed out after 1 s on rank 0 of 2: rank 1 never "
               "arrived") &&
           s < 10;
    } else {
      ok = has(what,
               std::string(
                   "all_reduce of f32[4] (sum) on rank 0 of 2 cannot complete: rank 1 left (it "
                   "exited with status ") +
                   (mode == "exit" ? "3" : "0") +
                   ") after its collective #1, before arriving at this one (collective #2)") &&
           s < 5;  // at once, not after the 30 s timeout
    }
    ok = has(what, "failure_test.cpp") && ok;
    CHECK(ok);
    // The communicator is broken: later calls fail at once with the first error.
    try {
      dist::all_reduce(t);
      ok = false;
    } catch (const Error& e) {
      ok = has(e.what(), "failed earlier") && ok;
    }
    end_failed(ok, s, what);
  }

  // The ranks disagree: every rank fails, naming both calls.
  const std::string line = "failure_test.cpp:";
  try {
    if (mode == "shape") {
      Tensor x = full({4 + r}, 1.f);
      dist::all_reduce(x);
    } else if (mode == "dtype") {
      Tensor x = full({4}, 1.0, TensorOptions(r == 0 ? kFloat : kDouble));
      dist::all_reduce(x);
    } else if (mode == "kind") {
      Tensor x = full({4}, 1.f);
      if (r == 0)
        dist::all_reduce(x);
      else
        dist::broadcast(x, 0);
    } else if (mode == "root") {
      Tensor x = full({4}, 1.f);
      dist::broadcast(x, r);
    } else if (mode == "traced") {
      auto f = jit([](Tensor x) { return dist::all_gather(x * 2); });
      (void)f(full({2 + r, 3}, 1.f));
    } else {
      FAIL("unknown KILN_TEST_FAILURE " << mode);
    }
  } catch (const Error& e) {
    what = e.what();
  }
  const std::string me = "rank " + std::to_string(r), other = "rank " + std::to_string(1 - r);
  auto both = [&](const std::string& mine, const std::string& theirs) {
    return has(what, me + " called " + mine + " at " + line) &&
           has(what, "but " + other + " called " + theirs + " at " + line);
  };
  if (mode == "shape") {
    ok = has(what, "(shape)") &&
         both(r == 0 ? "all_reduce of f32[4] (sum)" : "all_reduce of f32[5] (sum)",
              r == 0 ? "all_reduce of f32[5] (sum)" : "all_reduce of f32[4] (sum)");
  } else if (mode == "dtype") {
    ok = has(what, "(dtype)") &&
         both(r == 0 ? "all_reduce of f32[4] (sum)" : "all_reduce of f64[4] (sum)",
              r == 0 ? "all_reduce of f64[4] (sum)" : "all_reduce of f32[4] (sum)");
  } else if (mode == "kind") {
    ok = has(what, "(the collective)") &&
         both(r == 0 ? "all_reduce of f32[4] (sum)" : "broadcast of f32[4] from rank 0",
              r == 0 ? "broadcast of f32[4] from rank 0" : "all_reduce of f32[4] (sum)");
  } else if (mode == "root") {
    ok = has(what, "(root)") && both("broadcast of f32[4] from rank " + std::to_string(r),
                                     "broadcast of f32[4] from rank " + std::to_string(1 - r));
  } else {
    ok = has(what, "(shape)") && both(r == 0 ? "all_gather of f32[2,3]" : "all_gather of f32[3,3]",
                                      r == 0 ? "all_gather of f32[3,3]" : "all_gather of f32[2,3]");
  }
  ok = has(what, "the ranks disagree on collective #2") && has(what, "\n  recorded at " + line) &&
       ok;
  CHECK(ok);
  end_failed(ok && seconds_since(t0) < 5, seconds_since(t0), what);
}
