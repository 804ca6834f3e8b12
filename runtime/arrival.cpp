// Arrival records and their comparison (arrival.h).
#include "runtime/arrival.h"

#include <cstring>
#include <vector>

namespace kiln {

namespace {

// Copies `s` into `dst` (NUL-terminated), cut with "..." when too long.
template <size_t N>
void put_text(char (&dst)[N], const std::string& s) {
  std::string t = s;
  if (t.size() >= N) t = t.substr(0, N - 4) + "...";
  std::memcpy(dst, t.data(), t.size());
  dst[t.size()] = 0;
}

template <size_t N>
std::string get_text(const char (&src)[N]) {
  return std::string(src, strnlen(src, N));
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

bool reduces(int32_t op) {
  const auto k = static_cast<OpKind>(op);
  return k == OpKind::all_reduce || k == OpKind::reduce_scatter;
}

// "all_reduce of f32[4] (sum) at train.cpp:12"
std::string call_str(const Arrival& a) {
  std::string where = get_text(a.where);
  return get_text(a.what) + (where.empty() ? "" : " at " + where);
}

std::string departed_str(const Arrival& d) {
  return d.exit_status < 0 ? "it called distributed::finalize()"
                           : "it exited with status " + std::to_string(d.exit_status);
}

}  // namespace

Arrival arrival_of(const CollectiveCall& c, int64_t seq, bool barrier) {
  Arrival a;
  a.seq = seq;
  put_text(a.what, c.what);
  if (c.loc.known()) put_text(a.where, c.loc.str());
  if (barrier) {
    a.kind = Arrival::Barrier;
    return a;
  }
  a.op = static_cast<int32_t>(c.op);
  // Only what the collective uses: a broadcast's reduce op means nothing.
  a.reduce = reduces(a.op) ? static_cast<int32_t>(c.reduce) : 0;
  a.root = c.op == OpKind::broadcast ? c.root : 0;
  a.dtype = static_cast<int32_t>(c.dtype);
  a.count = c.count;
  a.shapes_hash = fnv1a(c.shapes);
  return a;
}

Arrival departure(int64_t seq, int64_t completed, int exit_status) {
  Arrival a;
  a.kind = Arrival::Departure;
  a.seq = seq;
  a.completed = completed;
  a.exit_status = exit_status;
  return a;
}

std::string arrival_mismatch(const Arrival& mine, int mine_rank, const Arrival& theirs, int peer) {
  std::vector<std::string> differ;
  if (mine.kind != theirs.kind || mine.op != theirs.op) {
    differ.push_back("the collective");
  } else if (mine.kind == Arrival::Call) {
    if (mine.dtype != theirs.dtype) differ.push_back("dtype");
    if (mine.count != theirs.count || mine.shapes_hash != theirs.shapes_hash)
      differ.push_back("shape");
    if (mine.reduce != theirs.reduce) differ.push_back("reduce op");
    if (mine.root != theirs.root) differ.push_back("root");
  }
  if (differ.empty()) return "";
  std::string what;
  for (size_t i = 0; i < differ.size(); ++i)
    what += (i == 0 ? "" : i + 1 == differ.size() ? " and " : ", ") + differ[i];
  return "the ranks disagree on collective #" + std::to_string(mine.seq) + " (" + what +
         "): rank " + std::to_string(mine_rank) + " called " + call_str(mine) + ", but rank " +
         std::to_string(peer) + " called " + call_str(theirs) +
         "; every rank must run the same collectives in the same order, with the same dtypes, "
         "shapes, reduce ops and roots (nothing was sent)";
}

std::string departure_message(const Arrival& mine, int mine_rank, int world, const Arrival& theirs,
                              int peer) {
  return get_text(mine.what) + " on rank " + std::to_string(mine_rank) + " of " +
         std::to_string(world) + " cannot complete: rank " + std::to_string(peer) + " left (" +
         departed_str(theirs) + ") after its collective #" + std::to_string(theirs.completed) +
         (theirs.seq >= mine.seq ? ", during this one" : ", before arriving at this one") +
         " (collective #" + std::to_string(mine.seq) + ")";
}

}  // namespace kiln
