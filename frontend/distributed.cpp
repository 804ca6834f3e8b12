// kiln::distributed (see distributed.h): init and the collectives as ops, the
// data-parallel wrapper and the sampler.
#include "frontend/distributed.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "frontend/autograd.h"
#include "frontend/data.h"
#include "frontend/dispatch.h"
#include "frontend/settings.h"
#include "frontend/trace_state.h"
#include "runtime/collective.h"
#include "runtime/cuda_driver.h"
#include "runtime/nccl.h"

namespace kiln::distributed {

namespace {

double default_timeout(double given) {
  if (const char* env = std::getenv("KILN_DIST_TIMEOUT")) {
    char* end = nullptr;
    double s = std::strtod(env, &end);
    if (end == env || *end || !(s > 0))
      throw Error(std::string("KILN_DIST_TIMEOUT: expected a number of seconds > 0, got '") + env +
                  "'");
    return s;
  }
  return given;
}

Attrs collective_attrs(std::initializer_list<std::pair<AttrKey, AttrValue>> extra) {
  Attrs a(extra);
  a.set(AttrKey::world, static_cast<int64_t>(collectives::world_size()));
  return a;
}

// A collective op on t's value (no gradient: collectives move data).
Tensor collective(OpKind k, const Tensor& t, Attrs attrs, SourceLoc loc) {
  if (!t.defined()) throw Error(std::string(op_name(k)) + ": expected a defined tensor", loc);
  if (!collectives::started())
    throw Error(std::string(op_name(k)) +
                    ": distributed is not initialised (call kiln::distributed::init() first)",
                loc);
  NoGradGuard no_grad;
  collectives::SiteScope site(loc);  // sent to the other ranks: a mismatch names each line
  return detail::apply(k, {t.detach()}, std::move(attrs), loc);
}

}  // namespace

BackendProbe probe_backends(const std::string& requested) {
  BackendProbe p;
  p.launched_by_mpi = launched_by_mpi();
  p.have_mpi = have_mpi();
  if (requested != "nccl" && !(requested == "auto" && p.launched_by_mpi)) return p;
  p.cuda = cuda::available();
  p.cuda_why = p.cuda ? "" : cuda::unavailable_reason();
  p.devices = cuda::device_count();
  p.nccl = nccl_available();
  p.nccl_why = p.nccl ? "" : nccl_unavailable_reason();
  p.local_ranks = p.launched_by_mpi ? local_rank(0, 1).size : 1;
  return p;
}

std::string resolve_backend(const std::string& requested, const BackendProbe& p) {
  const char* no_mpi =
      "distributed::init: backend mpi, but this Kiln was built without MPI (install "
      "libopenmpi-dev and openmpi-bin, then configure and build again)";
  if (requested == "auto") {
    if (!p.launched_by_mpi) return "self";
    const bool gpu_each = p.cuda && p.nccl && p.local_ranks <= p.devices;
    return p.have_mpi && gpu_each ? "nccl" : "mpi";
  }
  if (requested == "mpi") {
    if (!p.have_mpi) throw Error(no_mpi);
    return requested;
  }
  if (requested == "nccl") {
    if (!p.cuda)
      throw Error("distributed::init: backend nccl needs a CUDA device for each rank, but " +
                  p.cuda_why);
    if (!p.nccl) throw Error("distributed::init: backend nccl, but " + p.nccl_why);
    if (p.launched_by_mpi && !p.have_mpi)
      throw Error(
          "distributed::init: backend nccl under mpirun needs MPI to start NCCL, but this Kiln "
          "was built without MPI (install libopenmpi-dev and openmpi-bin, then configure and "
          "build again)");
    return requested;
  }
  if (requested == "self") return requested;
  throw Error("distributed::init: expected backend auto, mpi, nccl or self, got '" + requested +
              "'");
}

void init(const InitOptions& opts) {
  const double timeout = default_timeout(opts.timeout_s);
  const BackendProbe probe = probe_backends(opts.backend);
  const std::string b = resolve_backend(opts.backend, probe);
  if (b == "mpi") {
    collectives::start(make_mpi_communicator, timeout);
  } else if (b == "nccl") {
    // CPU tensors (and NCCL's unique id) go over MPI, or a world of one.
    const bool mpi = probe.launched_by_mpi;
    collectives::start(
        [mpi, timeout] {
          return make_nccl_communicator(mpi ? make_mpi_communicator() : make_self_communicator(),
                                        timeout);
        },
        timeout);
  } else {
    collectives::start(make_self_communicator, timeout);
  }
  if (log_enabled("distributed")) {
    const int device = collectives::device();
    const std::string on = device >= 0 ? ", cuda:" + std::to_string(device) : "";
    fprintf(stderr, "kiln distributed: rank %d of %d (%s%s), timeout %g s\n", collectives::rank(),
            collectives::world_size(), collectives::backend().c_str(), on.c_str(), timeout);
  }
}

bool is_initialized() {
  return collectives::started();
}
void finalize() {
  collectives::stop();
}
int rank() {
  return collectives::rank();
}
int world_size() {
  return collectives::world_size();
}
std::string backend() {
  return collectives::backend();
}
int device() {
  return collectives::device();
}
void barrier() {
  collectives::barrier();
}
void set_timeout(double seconds) {
  collectives::set_timeout_s(seconds);
}

void all_reduce(Tensor& t, ReduceOp op, Loc l) {
  SourceLoc loc = SourceLoc::from(l);
  Tensor r = collective(OpKind::all_reduce, t,
                        collective_attrs({{AttrKey::reduce, std::string(reduce_op_name(op))}}), loc);
  NoGradGuard no_grad;
  t.copy_(r, l);
}

void broadcast(Tensor& t, int root, Loc l) {
  SourceLoc loc = SourceLoc::from(l);
  Tensor r = collective(OpKind::broadcast, t, collective_attrs({{AttrKey::root, int64_t{root}}}), loc);
  NoGradGuard no_grad;
  t.copy_(r, l);
}

Tensor all_gather(const Tensor& t, Loc l) {
  return collective(OpKind::all_gather, t, collective_attrs({}), SourceLoc::from(l));
}

Tensor reduce_scatter(const Tensor& t, ReduceOp op, Loc l) {
  return collective(OpKind::reduce_scatter, t,
                    collective_attrs({{AttrKey::reduce, std::string(reduce_op_name(op))}}),
                    SourceLoc::from(l));
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 DDPOptions opts, Loc l)
    : module_(std::move(module)), opts_(opts) {
  SourceLoc loc = SourceLoc::from(l);
  if (!module_) throw Error("DistributedDataParallel: expected a module, got none", loc);
  if (!(opts_.bucket_cap_mb > 0))
    throw Error("DistributedDataParallel: expected bucket_cap_mb > 0, got " +
                    std::to_string(opts_.bucket_cap_mb),
                loc);
  if (!collectives::started())
    throw Error(
        "DistributedDataParallel: distributed is not initialised (call "
        "kiln::distributed::init() first)",
        loc);
  if (opts_.broadcast_parameters)
    for (Tensor& p : module_->parameters()) broadcast(p, 0, l);
  // Errors name the user's backward() line.
  hook_ = autograd::add_post_backward_hook(
      [this](SourceLoc at, const std::vector<Tensor>& accumulated) {
        after_backward(at, accumulated);
      });
}

DistributedDataParallel::~DistributedDataParallel() {
  autograd::remove_post_backward_hook(hook_);
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel* ddp)
    : ddp_(ddp), outside_(current_trace() == nullptr) {
  ddp_->no_sync_++;
  if (outside_) ddp_->no_sync_outside_++;
}

DistributedDataParallel::NoSync::~NoSync() {
  if (!ddp_) return;
  ddp_->no_sync_--;
  if (outside_) ddp_->no_sync_outside_--;
}

DistributedDataParallel::NoSync DistributedDataParallel::no_sync() {
  return NoSync(this);
}

void DistributedDataParallel::sync_gradients(Loc l) {
  sync(module_->parameters(), SourceLoc::from(l));
}

void DistributedDataParallel::after_backward(SourceLoc loc,
                                             const std::vector<Tensor>& accumulated) {
  // Only this module's parameters that the backward reached: a backward over
  // another graph (on one rank only, perhaps) must not communicate.
  std::vector<Tensor> reached;
  for (const Tensor& p : module_->parameters())
    if (std::any_of(accumulated.begin(), accumulated.end(),
                    [&](const Tensor& a) { return a.impl() == p.impl(); }))
      reached.push_back(p);
  if (reached.empty()) return;
  // A traced step all-reduces, or not, as no_sync() was open outside it when
  // traced; a call in the other state traces again. (A scope opened inside the
  // step is part of it.)
  guard_constants(alive_, [this] { return std::vector<double>{no_sync_outside_ > 0 ? 1.0 : 0.0}; },
                  "DistributedDataParallel's no_sync()", {"open"});
  if (no_sync_ > 0) return;
  sync(reached, loc);
}

void DistributedDataParallel::sync(const std::vector<Tensor>& params, SourceLoc loc) {
  const auto bucket_bytes = static_cast<int64_t>(opts_.bucket_cap_mb * 1024 * 1024);
  // The last layer's gradients are ready first: that order, as PyTorch's DDP.
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    Tensor g = it->grad();
    if (!g.defined()) continue;
    Tensor avg = collective(OpKind::all_reduce, g,
                            collective_attrs({{AttrKey::reduce, std::string("avg")},
                                              {AttrKey::bucket_bytes, bucket_bytes}}),
                            loc);
    NoGradGuard no_grad;
    detail::assign(g, avg, loc);
  }
}

DistributedSampler::DistributedSampler(int64_t size, bool shuffle, uint64_t seed, bool drop_last,
                                       int num_replicas, int rank)
    : dataset_size_(size), shuffle_(shuffle), drop_last_(drop_last), seed_(seed) {
  replicas_ = num_replicas >= 0 ? num_replicas : world_size();
  rank_ = rank >= 0 ? rank : distributed::rank();
  KILN_CHECK(size >= 0, "DistributedSampler: expected a data set size >= 0, got ", size);
  KILN_CHECK(replicas_ >= 1, "DistributedSampler: expected num_replicas >= 1, got ", replicas_);
  KILN_CHECK(rank_ >= 0 && rank_ < replicas_, "DistributedSampler: expected a rank in [0, ",
             replicas_, "), got ", rank_);
  per_rank_ = drop_last_ ? size / replicas_ : (size + replicas_ - 1) / replicas_;
}

std::vector<int64_t> DistributedSampler::indices() const {
  return data::shard_indices(dataset_size_, shuffle_, seed_, epoch_, drop_last_, rank_, replicas_);
}

}  // namespace kiln::distributed
