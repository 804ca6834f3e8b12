// NCCL, the backend for collectives on CUDA tensors (runtime/nccl.h). What
// needs no GPU runs everywhere: loading libnccl.so.2 and its table of entry
// points, how a call maps onto NCCL's types, the backend init() chooses, and
// the errors of asking for NCCL where it cannot run. The collectives on the
// device need a GPU for each rank and skip, saying why, without one: started
// alone they run in a world of one NCCL rank, and under mpirun -np 2 (the
// suite's second CTest run) on two GPUs across both ranks.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "frontend/kiln/kiln.h"
#include "runtime/collective.h"
#include "runtime/nccl.h"

using namespace kiln;
namespace dist = kiln::distributed;

namespace {

#define KILN_REQUIRE_NCCL_BUILD()                                                 \
  do {                                                                            \
    if (nccl_entry_points().empty()) {                                            \
      MESSAGE("skipped: this build has no NCCL support (" << nccl_info() << ")"); \
      return;                                                                     \
    }                                                                             \
  } while (0)

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string read_source(const std::string& rel) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Loads `library` instead of libnccl.so.2 for the life of the object.
struct NcclOverride {
  explicit NcclOverride(const std::string& library) { reload_nccl_for_testing(library); }
  ~NcclOverride() { reload_nccl_for_testing(""); }
};

// Sets (or, with nullptr, unsets) an environment variable for the life of the object.
struct EnvOverride {
  EnvOverride(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~EnvOverride() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> old_;
};

CollectiveCall call(OpKind op, DType dt, ReduceOp r = ReduceOp::sum, int root = 0) {
  CollectiveCall c;
  c.op = op;
  c.dtype = dt;
  c.reduce = r;
  c.root = root;
  c.count = 4;
  c.what = std::string(op_name(op)) + " of a test buffer";
  return c;
}

}  // namespace

TEST_CASE("NCCL loads without a GPU, reports its version and resolves every entry point") {
  KILN_REQUIRE_NCCL_BUILD();
  if (!nccl_available()) {
    MESSAGE("skipped: " << nccl_unavailable_reason());
    return;
  }
  const int v = nccl_version();
  CHECK(v >= 21000);
  const std::string version = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) +
                              "." + std::to_string(v % 100);
  CHECK(nccl_info().find("NCCL " + version + " (") == 0);
  CHECK(nccl_info().find("libnccl.so.2") != std::string::npos);
  CHECK(nccl_unavailable_reason().empty());

  std::vector<cuda::EntryPoint> table = nccl_entry_points();
  std::set<std::string> names;
  for (const auto& e : table) {
    CHECK_MESSAGE(names.insert(e.name).second, "listed twice: ", std::string(e.name));
    CHECK_MESSAGE(e.resolved, "unresolved: ", std::string(e.name));
  }
  // Every nccl* function the communicator calls goes through the table.
  const std::string source = read_source("runtime/nccl_comm.cpp");
  std::regex re("api(?:_->|\\.|->)(nccl[A-Za-z0-9_]*)\\(");
  std::set<std::string> used;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), re);
       it != std::sregex_iterator(); ++it)
    used.insert((*it)[1]);
  CHECK(used.size() >= 10);
  for (const std::string& n : used)
    CHECK_MESSAGE(names.count(n), "called but not in the table: ", n);
  for (const char* must :
       {"ncclGetUniqueId", "ncclCommInitRank", "ncclCommAbort", "ncclCommGetAsyncError",
        "ncclAllReduce", "ncclBroadcast", "ncclAllGather", "ncclReduceScatter"})
    CHECK_MESSAGE(used.count(must), "not called: ", must);

  // NCCL's unique id is made on the host: no GPU needed (what rank 0 sends at init).
  void* h = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = ::dlopen("/usr/local/cuda/lib64/libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h != nullptr);
  auto get_id = reinterpret_cast<int (*)(void*)>(::dlsym(h, "ncclGetUniqueId"));
  REQUIRE(reinterpret_cast<void*>(get_id) != nullptr);
  char id[128] = {};
  CHECK(get_id(id) == 0);  // ncclSuccess
  CHECK(std::string(id, sizeof(id)) != std::string(sizeof(id), '\0'));
  ::dlclose(h);
}

TEST_CASE("a missing NCCL says what was looked for and what was found") {
  KILN_REQUIRE_NCCL_BUILD();
  {
    NcclOverride missing("/nonexistent/libnccl.so.2");
    CHECK_FALSE(nccl_available());
    CHECK(nccl_version() == 0);
    const std::string why = nccl_unavailable_reason();
    CHECK(why.find("NCCL is not available: /nonexistent/libnccl.so.2 could not be loaded "
                   "(dlopen: ") == 0);
    CHECK(why.find("KILN_NCCL_LIBRARY") != std::string::npos);
    CHECK(nccl_info() == why);
    for (const auto& e : nccl_entry_points()) CHECK_FALSE(e.resolved);
    // A library that is not NCCL: the first missing function is named.
    NcclOverride wrong("libm.so.6");
    CHECK(nccl_unavailable_reason() ==
          "NCCL is not available: libm.so.6 has no ncclGetVersion (needed by Kiln)");
  }
  CHECK(nccl_entry_points().size() >= 10);
}

TEST_CASE("each collective maps onto NCCL's call, type and reduction") {
  KILN_REQUIRE_NCCL_BUILD();
  CHECK(nccl_call_str(call(OpKind::all_reduce, DType::f32, ReduceOp::avg)) ==
        "ncclAllReduce(ncclFloat32, ncclAvg)");
  CHECK(nccl_call_str(call(OpKind::all_reduce, DType::f64, ReduceOp::sum)) ==
        "ncclAllReduce(ncclFloat64, ncclSum)");
  CHECK(nccl_call_str(call(OpKind::all_reduce, DType::i32, ReduceOp::max)) ==
        "ncclAllReduce(ncclInt32, ncclMax)");
  CHECK(nccl_call_str(call(OpKind::reduce_scatter, DType::f32, ReduceOp::min)) ==
        "ncclReduceScatter(ncclFloat32, ncclMin)");
  CHECK(nccl_call_str(call(OpKind::broadcast, DType::i64, ReduceOp::sum, 1)) ==
        "ncclBroadcast(ncclInt64, root 1)");
  CHECK(nccl_call_str(call(OpKind::all_gather, DType::f64)) == "ncclAllGather(ncclFloat64)");
  // What MPI refuses, NCCL refuses with the same words.
  CHECK(error_of([] { nccl_call_str(call(OpKind::all_reduce, DType::b8)); }) ==
        "distributed: all_reduce of a test buffer: expected a numeric tensor, got bool");
  CHECK(error_of([] { nccl_call_str(call(OpKind::all_reduce, DType::i64, ReduceOp::avg)); }) ==
        "distributed: all_reduce of a test buffer: avg needs a floating-point tensor");
  CHECK(nccl_call_str(call(OpKind::broadcast, DType::i32, ReduceOp::avg)) ==
        "ncclBroadcast(ncclInt32, root 0)");
}

TEST_CASE("the local rank comes from the launcher's environment") {
  EnvOverride r1("OMPI_COMM_WORLD_LOCAL_RANK", "3"), s1("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
  EnvOverride r2("MPI_LOCALRANKID", nullptr), s2("MPI_LOCALNRANKS", nullptr);
  CHECK(local_rank(7, 8).rank == 3);
  CHECK(local_rank(7, 8).size == 4);
  {
    EnvOverride u1("OMPI_COMM_WORLD_LOCAL_RANK", nullptr),
        u2("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr);
    EnvOverride m1("MPI_LOCALRANKID", "1"), m2("MPI_LOCALNRANKS", "2");
    CHECK(local_rank(5, 8).rank == 1);
    CHECK(local_rank(5, 8).size == 2);
  }
  EnvOverride u1("OMPI_COMM_WORLD_LOCAL_RANK", nullptr), u2("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr);
  CHECK(local_rank(5, 8).rank == 5);  // nothing said: every rank on one machine
  CHECK(local_rank(5, 8).size == 8);
}

TEST_CASE("init chooses NCCL under mpirun only with a GPU for each rank") {
  dist::BackendProbe p;
  p.have_mpi = true;
  p.cuda = p.nccl = true;
  p.devices = 2;
  p.local_ranks = 2;
  CHECK(dist::resolve_backend("auto", p) == "self");  // started alone
  p.launched_by_mpi = true;
  CHECK(dist::resolve_backend("auto", p) == "nccl");
  p.local_ranks = 3;  // ranks would share a GPU: NCCL cannot
  CHECK(dist::resolve_backend("auto", p) == "mpi");
  p.local_ranks = 2;
  p.nccl = false;
  p.nccl_why = "NCCL is not available: (why)";
  CHECK(dist::resolve_backend("auto", p) == "mpi");
  CHECK(error_of([&] { dist::resolve_backend("nccl", p); }) ==
        "distributed::init: backend nccl, but NCCL is not available: (why)");
  p.nccl = true;
  p.cuda = false;
  p.cuda_why = "CUDA is not available: no CUDA device found";
  CHECK(dist::resolve_backend("auto", p) == "mpi");
  CHECK(error_of([&] { dist::resolve_backend("nccl", p); }) ==
        "distributed::init: backend nccl needs a CUDA device for each rank, but CUDA is not "
        "available: no CUDA device found");
  p.cuda = true;
  CHECK(dist::resolve_backend("nccl", p) == "nccl");
  CHECK(dist::resolve_backend("mpi", p) == "mpi");
  CHECK(dist::resolve_backend("self", p) == "self");
  p.have_mpi = false;
  CHECK(error_of([&] { dist::resolve_backend("nccl", p); }).find("built without MPI") !=
        std::string::npos);
  p.launched_by_mpi = false;
  CHECK(dist::resolve_backend("nccl", p) == "nccl");  // alone: a world of one NCCL rank
  CHECK(error_of([&] { dist::resolve_backend("gloo", p); }) ==
        "distributed::init: expected backend auto, mpi, nccl or self, got 'gloo'");
}

TEST_CASE("init with backend nccl and no GPU fails saying what it needs and what it found") {
  if (cuda::available()) {
    MESSAGE("skipped: a GPU is present (the NCCL collectives below run instead)");
    return;
  }
  dist::InitOptions o;
  o.backend = "nccl";
  const bool was = dist::is_initialized();
  const std::string what = error_of([&] { dist::init(o); });
  CHECK(what.find("distributed::init: backend nccl needs a CUDA device for each rank, but CUDA "
                  "is not available: ") == 0);
  CHECK(what.find(cuda::unavailable_reason()) != std::string::npos);
  CHECK(dist::is_initialized() == was);  // nothing was started
}

// ---- on GPUs ----

namespace {

// Runs `body` with backend nccl: in the suite's world when it already is nccl
// (mpirun on a GPU per rank), or started alone in a world of one NCCL rank
// (then back to the default world). Returns why not, when it cannot.
std::string with_nccl(const std::function<void()>& body) {
  if (!cuda::available()) return "no CUDA device (" + cuda::unavailable_reason() + ")";
  if (!nccl_available()) return nccl_unavailable_reason();
  if (dist::is_initialized() && dist::backend() == "nccl") {
    body();
    return "";
  }
  if (launched_by_mpi())
    return "under mpirun the suite's backend is " +
           (dist::is_initialized() ? dist::backend() : std::string("not started")) +
           " (ranks share a GPU, or no NCCL)";
  const bool was = dist::is_initialized();
  if (was) dist::finalize();
  dist::InitOptions o;
  o.backend = "nccl";
  dist::init(o);
  try {
    body();
  } catch (...) {
    dist::finalize();
    if (was) dist::init();
    throw;
  }
  dist::finalize();
  if (was) dist::init();
  return "";
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return (a.cpu().to(kDouble) - b.cpu().to(kDouble)).abs().max().item<double>();
}

}  // namespace

TEST_CASE("collectives on CUDA tensors run over NCCL and agree with MPI, eagerly and traced") {
  const std::string skipped = with_nccl([] {
    REQUIRE(dist::backend() == "nccl");
    const int world = dist::world_size(), r = dist::rank();
    CHECK(dist::device() >= 0);
    const Device gpu(kCUDA, dist::device());
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
      CAPTURE(reduce_op_name(op));
      Tensor host = arange(6, TensorOptions(kFloat)) * float(r + 1);
      Tensor dev = host.to(gpu);
      dist::all_reduce(host, op);  // MPI (or a world of one)
      dist::all_reduce(dev, op);   // NCCL
      CHECK(dev.device() == gpu);
      CHECK(max_abs_diff(host, dev) == 0);
    }
    Tensor b = full({2, 3}, int64_t(r * 10), TensorOptions(kLong)).to(gpu);
    dist::broadcast(b, world - 1);
    CHECK(b.cpu()[1][2].item<int64_t>() == (world - 1) * 10);
    Tensor g = dist::all_gather(full({2}, double(r), TensorOptions(kDouble)).to(gpu));
    REQUIRE(g.sizes() == Shape{2 * world});
    for (int k = 0; k < world; ++k) CHECK(g.cpu()[2 * k + 1].item<double>() == double(k));
    Tensor s = dist::reduce_scatter(arange(2 * world, TensorOptions(kFloat)).to(gpu));
    REQUIRE(s.sizes() == Shape{2});
    CHECK(s.cpu()[0].item<float>() == float(2 * r * world));

    // In a trace: the same values from one CUDA plan.
    auto f = jit([&](Tensor x) {
      Tensor y = x * 2;
      dist::all_reduce(y, ReduceOp::sum);
      return dist::reduce_scatter(dist::all_gather(y + 1), ReduceOp::avg) - 1;
    });
    Tensor x = full({world * 2}, double(r), TensorOptions(kDouble));
    Tensor on_host = f(x);
    Tensor on_gpu = f(x.to(gpu));
    CHECK(on_gpu.device() == gpu);
    CHECK(max_abs_diff(on_host, on_gpu) == 0);
    CHECK(max_abs_diff(on_host, f(x.to(gpu))) == 0);  // the cached plan

    // What cannot run says so, with the user's line.
    Tensor ints = full({2}, int64_t(1), TensorOptions(kLong)).to(gpu);
    CHECK(error_of([&] { dist::all_reduce(ints, ReduceOp::avg); }).find("nccl_test.cpp") !=
          std::string::npos);
  });
  if (!skipped.empty()) MESSAGE("skipped: " << skipped);
}

TEST_CASE("data parallel gradients of a CUDA model are averaged over NCCL, eager and traced") {
  const std::string skipped = with_nccl([] {
    const int world = dist::world_size(), r = dist::rank();
    const Device gpu(kCUDA, dist::device());
    for (bool traced : {false, true}) {
      CAPTURE(traced);
      manual_seed(0);
      nn::Linear lin(8, 4);
      lin->to(gpu);
      dist::DistributedDataParallel ddp(lin);
      manual_seed(1);
      Tensor xs = randn({2 * world, 8}), ys = randn({2 * world, 4});
      Tensor x = xs.narrow(0, 2 * r, 2).to(gpu), y = ys.narrow(0, 2 * r, 2).to(gpu);
      auto step = [&](Tensor xi, Tensor yi) {
        Tensor loss = (lin(xi) - yi).pow(2).mean();
        loss.backward();
        return loss;
      };
      if (traced) {
        auto f = jit(step);
        f(x, y);
      } else {
        step(x, y);
      }
      // The reference: each rank's own gradient averaged over MPI on the host.
      manual_seed(0);
      nn::Linear ref(8, 4);
      Tensor loss = (ref(x.cpu()) - y.cpu()).pow(2).mean();
      loss.backward();
      std::vector<Tensor> got = lin->parameters(), want = ref->parameters();
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        Tensor avg = want[i].grad().clone();
        dist::all_reduce(avg, ReduceOp::avg);
        REQUIRE(got[i].grad().defined());
        CHECK(got[i].grad().device() == gpu);
        CHECK(max_abs_diff(got[i].grad(), avg) < 1e-5);
      }
    }
  });
  if (!skipped.empty()) MESSAGE("skipped: " << skipped);
}
