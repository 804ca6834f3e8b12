// ScopeExit: clean-up that runs when a scope ends, by return or by throw, in
// place of the same lines written once after the work and once in a
// catch-and-rethrow around it.
#pragma once

#include <utility>

namespace kiln {

/// Calls `f` when destroyed. `f` must not throw: it may run while an exception unwinds.
template <class F>
class ScopeExit {
 public:
  explicit ScopeExit(F f) : f_(std::move(f)) {}
  ~ScopeExit() { f_(); }
  ScopeExit(const ScopeExit&) = delete;
  ScopeExit& operator=(const ScopeExit&) = delete;

 private:
  F f_;
};

}  // namespace kiln
