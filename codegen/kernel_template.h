// Kernel templates: one compiled kernel for a group at every size of a dynamic
// dimension.
//
// A traced function whose batch size changes lowers each group again at the new
// size (lowering is cheap), and most kernels come out identical but for a few
// constants: the outer range, a loop trip count over the batch, a 1/B of a mean,
// a stride. Kernels that print the same with those left out share a *skeleton*.
// generalize() turns the constants in which two kernels of one skeleton differ
// into run-time parameters (kernel_ir.h); bind() checks that another kernel is an
// instance of a template, equal at every other constant, and returns the
// parameter values that make the template compute it. The template, run with
// those values, computes the instance's kernel IR: nothing about the sizes is
// guessed. (As for any kernel, the backend may reassociate sums, and a run-time
// trip count may split a sum differently than a static one: the last bits of a
// reduction can differ from the kernel compiled for the sizes.)
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/kernel_ir.h"

namespace kiln::kir {

/// The kernel's text with its constants, trip counts, range and buffer shapes left out.
std::string skeleton(const Kernel& k);

/// How many constants and trip counts of two kernels of one skeleton differ.
int64_t count_differences(const Kernel& a, const Kernel& b);

/// A template of `a` whose constants and trip counts are parameters wherever `a`
/// and `b` (a kernel of the same skeleton) differ, and wherever `also` (a template
/// of the same skeleton, or null) has them. Buffers whose shapes differ are sized
/// at run time.
Kernel generalize(const Kernel& a, const Kernel& b, const Kernel* also = nullptr);

/// The parameter values (i64, or the bits of an f64) with which template `t`
/// computes `k`, or nullopt when k differs from t anywhere but t's parameters.
std::optional<std::vector<int64_t>> bind(const Kernel& t, const Kernel& k);

/// Kernels of one plan that differ only in constants and sizes (the Adam update
/// of each parameter, the bias gradient of each layer): one template computes
/// every member, each with its own parameters.
struct Family {
  Kernel templ;
  std::vector<size_t> members;               // indices into the kernels given, ascending
  std::vector<std::vector<int64_t>> params;  // per member: bind(templ, that kernel)
};

/// The families among `kernels`: two or more of them with one skeleton and the
/// same strides and divisors in their index arithmetic (as parameters, those
/// cost a hardware division per element and strided loads). The template is
/// generalised only where members differ (no parameters when they are all the
/// same kernel).
std::vector<Family> families(const std::vector<const Kernel*>& kernels);

}  // namespace kiln::kir

namespace kiln {

/// Kernels lowered before, by content, to make templates from when a size
/// changes (a traced function with a dynamic dimension): per skeleton (a
/// *family*), the last few kernels seen at distinct sizes and the templates made
/// so far. Kernel IR only; the templates' code is shared like any other kernel's.
/// The CPU backend owns one (cpu_compile.cpp); every function's kernels meet in
/// it, so what the cache promises holds whoever lowered a kernel:
///   - never wrong: a kernel runs a template only when it is an instance of it
///     (kir::bind checks every constant, trip count and buffer shape);
///   - never a template that fits with more parameters than one already made:
///     a kernel runs the narrowest template it is an instance of (fewest
///     parameters), and templates are never changed or widened in place, so a
///     template widened for other kernels (another function's sizes) is chosen
///     only where no narrower one fits, and code already compiled never changes;
///   - a new template varies only where the new kernel differs from the seen
///     kernel nearest to it (fewest differing sites) and where the narrowest
///     template of that kernel varies: never where two unrelated kernels differ.
/// Thread-safe. Bounded by the bytes of kernel IR it keeps: past `max_bytes`,
/// the least recently used families go (a family in use was just touched).
class KernelTemplateCache {
 public:
  static constexpr size_t kDefaultMaxBytes = size_t{32} << 20;
  explicit KernelTemplateCache(size_t max_bytes = kDefaultMaxBytes) : max_bytes_(max_bytes) {}
  KernelTemplateCache(const KernelTemplateCache&) = delete;
  KernelTemplateCache& operator=(const KernelTemplateCache&) = delete;

  /// Remembers k (whose skeleton is `skeleton`, kir::skeleton) to generalise later sizes against.
  void remember(const std::string& skeleton, const kir::Kernel& k);

  /// A template that computes k with *params: the narrowest one made before
  /// that k is an instance of, or one made now from the kernel seen before that
  /// is nearest to k. nullopt when k is the first of its skeleton (or equal to
  /// every kernel seen).
  std::optional<kir::Kernel> find_or_make(const std::string& skeleton, const kir::Kernel& k,
                                          std::vector<int64_t>* params);

  size_t families() const;  // how many skeletons are kept
  size_t bytes() const;     // the kernel IR kept, estimated; at most max_bytes()
  size_t max_bytes() const { return max_bytes_; }

 private:
  static constexpr size_t kSeen = 4, kTemplates = 8;
  struct Family {
    std::vector<kir::Kernel> seen;
    std::vector<kir::Kernel> templates;
    size_t bytes = 0;                              // of seen, templates and the key
    std::list<const std::string*>::iterator used;  // its place in used_
  };
  Family& family(const std::string& skeleton);
  void add_seen(Family& f, const kir::Kernel& k);
  void add_template(Family& f, kir::Kernel t);
  void shrink(const Family* keep);

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Family> map_;
  std::list<const std::string*> used_;  // map_'s keys, most recently used first
  size_t bytes_ = 0;
};

}  // namespace kiln
