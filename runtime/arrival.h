// Arrival records: what a rank tells every other before each collective, and
// when it leaves (runtime/mpi_comm.cpp sends them). Ranks compare their
// records before any data moves, so ranks that run different collectives, or
// the same one with another dtype, shape, reduce op or root, all fail naming
// both calls, instead of MPI aborting the job; a rank that leaves tells the
// others at once. Kept apart from MPI so that the comparison and its messages
// are tested without it.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "runtime/collective.h"

namespace kiln {

/// What a rank tells every other before each collective (and when it leaves):
/// a fixed-size record, sent as bytes between copies of the same program.
struct Arrival {
  enum Kind : int32_t { Call = 0, Barrier = 1, Departure = 2 };
  int64_t seq = 0;        // the collective's number on the sender (Departure: the last it began)
  int64_t completed = 0;  // Departure: the last collective it completed
  int32_t kind = Call;
  int32_t op = 0, reduce = 0, root = 0, dtype = 0;
  int32_t exit_status = 0;  // Departure: the process's exit status, or -1 (finalize())
  int64_t count = 0;
  uint64_t shapes_hash = 0;  // of CollectiveCall::shapes
  char what[320] = {};       // CollectiveCall::what, cut to fit
  char where[160] = {};      // the user's line, "file.cpp:12"
};
static_assert(std::is_trivially_copyable_v<Arrival>, "arrival records travel as bytes");

/// The record for call `seq` (`barrier`: a barrier; `c` gives only its what).
Arrival arrival_of(const CollectiveCall& c, int64_t seq, bool barrier = false);
/// The record of a rank that leaves having begun `seq` collectives and completed `completed`.
Arrival departure(int64_t seq, int64_t completed, int exit_status);
/// Empty when rank `mine_rank`'s call and rank `peer`'s agree; else the error
/// (without the "distributed: " prefix) naming both calls, both lines and both
/// ranks. Departures are not calls: see departure_message.
std::string arrival_mismatch(const Arrival& mine, int mine_rank, const Arrival& theirs, int peer);
/// The error for rank `mine_rank`'s call `mine` when rank `peer` left (`theirs`
/// is its Departure) before arriving at it.
std::string departure_message(const Arrival& mine, int mine_rank, int world, const Arrival& theirs,
                              int peer);

}  // namespace kiln
