// NCCL, loaded at run time (libnccl.so.2 via dlopen, one table of entry
// points; nccl_comm.cpp is the one file that includes nccl.h): collectives over
// CUDA device buffers, one GPU per rank. The communicator itself is made by
// make_nccl_communicator (collective.h); this header says whether NCCL can be
// used and why not, and how a call maps onto NCCL's types. No NCCL header
// appears here.
#pragma once

#include <string>
#include <vector>

#include "runtime/collective.h"
#include "runtime/cuda_driver.h"

namespace kiln {

/// Whether libnccl.so.2 loaded and provides every function Kiln calls (it needs
/// no GPU for that; a communicator does). Never throws.
bool nccl_available();
/// Why not ("" when available).
std::string nccl_unavailable_reason();
/// NCCL's version code (ncclGetVersion: 22809 for 2.28.9), 0 when unavailable.
int nccl_version();
/// "NCCL 2.28.9 (libnccl.so.2)", or the reason it is unavailable.
std::string nccl_info();
/// Every NCCL function Kiln calls, in table order.
std::vector<cuda::EntryPoint> nccl_entry_points();

/// How `c` runs on NCCL, in NCCL's names: "ncclAllReduce(ncclFloat32, ncclAvg)",
/// "ncclBroadcast(ncclInt64, root 1)". Throws the kiln::Error the call itself
/// would (a bool tensor; avg over integers).
std::string nccl_call_str(const CollectiveCall& c);

/// This process's rank among the ranks on its machine, and how many there are,
/// from the MPI launcher's environment (Open MPI, MPICH, Slurm); {rank, world}
/// when the launcher says nothing.
struct LocalRank {
  int rank = 0, size = 1;
};
LocalRank local_rank(int rank, int world);

/// Tests only: forgets the loaded library and loads `library` instead on next use
/// ("" restores the default: KILN_NCCL_LIBRARY, else libnccl.so.2).
void reload_nccl_for_testing(const std::string& library);

}  // namespace kiln
