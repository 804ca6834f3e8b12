// ScopeExit (runtime/scope_exit.h): its function runs once when the scope
// ends, by return or by throw.
#include <doctest/doctest.h>

#include <stdexcept>

#include "runtime/scope_exit.h"

using namespace kiln;

TEST_CASE("ScopeExit runs its function once when the scope ends, by return or by throw") {
  int runs = 0;
  {
    const ScopeExit count([&] { ++runs; });
    CHECK(runs == 0);
  }
  CHECK(runs == 1);
  CHECK_THROWS_AS(
      [&] {
        const ScopeExit count([&] { ++runs; });
        throw std::runtime_error("the work failed");
      }(),
      std::runtime_error);
  CHECK(runs == 2);
}
