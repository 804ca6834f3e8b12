// kiln::data's pipeline in libtorch's shape (torch::data): datasets that give
// one Example (data, target) per index, transforms mapped over them (Normalize,
// Lambda, Stack to collate a batch), samplers that choose the indices of each
// batch, and a loader, made by make_data_loader, whose worker threads build
// batches in parallel while the training loop runs:
//
//   auto ds = data::datasets::MNIST(root)
//                 .map(data::transforms::Normalize<>(0.1307, 0.3081))
//                 .map(data::transforms::Stack<>());
//   auto loader = data::make_data_loader(std::move(ds),
//                                        data::LoaderOptions().batch_size(64).workers(2));
//   for (data::Example<>& batch : *loader) step(batch.data, batch.target);
//
// (The simpler kiln::data::DataLoader over a TensorDataset, frontend/data.h,
// stays.) Datasets live on the CPU. Each worker thread gets its own copy of
// the dataset, as in libtorch; a dataset's get() must not share unguarded
// mutable state. Batches come in sampler order unless enforce_ordering(false).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::data {

/// No target: Example<Tensor, NoTarget> holds only data.
struct NoTarget {};

/// One example: its data and its target (a batch, after Stack, is one too).
template <class Data = Tensor, class Target = Tensor>
struct Example {
  using DataType = Data;
  using TargetType = Target;
  Example() = default;
  Example(Data data, Target target) : data(std::move(data)), target(std::move(target)) {}
  Data data;
  Target target;
};
template <class Data>
struct Example<Data, NoTarget> {
  using DataType = Data;
  using TargetType = NoTarget;
  Example() = default;
  Example(Data data) : data(std::move(data)) {}  // NOLINT: implicit, as libtorch
  operator Data&() { return data; }              // NOLINT
  operator const Data&() const { return data; }  // NOLINT
  Data data;
};
using TensorExample = Example<Tensor, NoTarget>;

/// How make_data_loader batches: batch_size, worker threads (0: the loop's own
/// thread builds each batch when asked), max_jobs (batches prepared ahead;
/// default 2 per worker), drop_last (drop a last, short batch), and
/// enforce_ordering (batches in sampler order; false: as workers finish them).
/// torch::data::DataLoaderOptions is this type.
class LoaderOptions {
 public:
  LoaderOptions() = default;
  LoaderOptions(size_t batch_size) : batch_size_(batch_size) {}  // NOLINT: implicit, as libtorch
  LoaderOptions& batch_size(size_t v) {
    batch_size_ = v;
    return *this;
  }
  LoaderOptions& workers(size_t v) {
    workers_ = v;
    return *this;
  }
  LoaderOptions& max_jobs(size_t v) {
    max_jobs_ = v;
    return *this;
  }
  LoaderOptions& timeout(std::chrono::milliseconds v) {
    timeout_ = v;
    return *this;
  }
  LoaderOptions& enforce_ordering(bool v) {
    enforce_ordering_ = v;
    return *this;
  }
  LoaderOptions& drop_last(bool v) {
    drop_last_ = v;
    return *this;
  }
  size_t batch_size() const { return batch_size_; }
  size_t workers() const { return workers_; }
  size_t max_jobs() const { return max_jobs_.value_or(2 * workers_); }
  std::optional<std::chrono::milliseconds> timeout() const { return timeout_; }
  bool enforce_ordering() const { return enforce_ordering_; }
  bool drop_last() const { return drop_last_; }

 private:
  size_t batch_size_ = 1, workers_ = 0;
  std::optional<size_t> max_jobs_;
  std::optional<std::chrono::milliseconds> timeout_;
  bool enforce_ordering_ = true, drop_last_ = false;
};

namespace transforms {

/// Maps a whole batch to another.
template <class InputBatch, class OutputBatch>
class BatchTransform {
 public:
  using InputBatchType = InputBatch;
  using OutputBatchType = OutputBatch;
  virtual ~BatchTransform() = default;
  virtual OutputBatch apply_batch(InputBatch input_batch) = 0;
};

/// Maps each example of a batch.
template <class Input, class Output>
class Transform : public BatchTransform<std::vector<Input>, std::vector<Output>> {
 public:
  using InputType = Input;
  using OutputType = Output;
  virtual Output apply(Input input) = 0;
  std::vector<Output> apply_batch(std::vector<Input> input_batch) override {
    std::vector<Output> out;
    out.reserve(input_batch.size());
    for (auto& i : input_batch) out.push_back(apply(std::move(i)));
    return out;
  }
};

/// A function as a per-example transform.
template <class Input, class Output = Input>
class Lambda : public Transform<Input, Output> {
 public:
  using FunctionType = std::function<Output(Input)>;
  explicit Lambda(FunctionType f) : f_(std::move(f)) {}
  Output apply(Input input) override { return f_(std::move(input)); }

 private:
  FunctionType f_;
};

/// A function as a batch transform.
template <class Input, class Output = Input>
class BatchLambda : public BatchTransform<Input, Output> {
 public:
  using FunctionType = std::function<Output(Input)>;
  explicit BatchLambda(FunctionType f) : f_(std::move(f)) {}
  Output apply_batch(Input input) override { return f_(std::move(input)); }

 private:
  FunctionType f_;
};

/// A transform of an example's data tensor (the target passes through).
template <class Target = Tensor>
class TensorTransform : public Transform<Example<Tensor, Target>, Example<Tensor, Target>> {
 public:
  using E = Example<Tensor, Target>;
  virtual Tensor operator()(Tensor input) = 0;
  E apply(E input) override {
    input.data = (*this)(std::move(input.data));
    return input;
  }
};

/// A function of the data tensor as a transform.
template <class Target = Tensor>
class TensorLambda : public TensorTransform<Target> {
 public:
  using FunctionType = std::function<Tensor(Tensor)>;
  explicit TensorLambda(FunctionType f) : f_(std::move(f)) {}
  Tensor operator()(Tensor input) override { return f_(std::move(input)); }

 private:
  FunctionType f_;
};

/// Per-channel numbers: one for every channel, or one per channel.
struct ChannelValues {
  ChannelValues(double v) : values{v} {}  // NOLINT: implicit
  ChannelValues(std::initializer_list<double> v) : values(v) {}
  ChannelValues(std::vector<double> v) : values(std::move(v)) {}  // NOLINT
  std::vector<double> values;
};

/// (data - mean) / stddev per channel (dim 0 of the data), as libtorch's.
template <class Target = Tensor>
class Normalize : public TensorTransform<Target> {
 public:
  Normalize(ChannelValues mean, ChannelValues stddev)
      : mean(channels(mean.values)), stddev(channels(stddev.values)) {}
  Tensor operator()(Tensor input) override { return input.sub(mean).div(stddev); }
  Tensor mean, stddev;

 private:
  static Tensor channels(const std::vector<double>& v) {
    return kiln::tensor(v, TensorOptions(kFloat32)).reshape({static_cast<int64_t>(v.size()), 1, 1});
  }
};

/// Collates a batch of examples into one.
template <class T>
using Collation = BatchTransform<std::vector<T>, T>;

/// Stacks the examples' data (and targets) along a new dim 0.
template <class T = Example<>>
struct Stack;
template <>
struct Stack<Example<>> : public Collation<Example<>> {
  Example<> apply_batch(std::vector<Example<>> examples) override;
};
template <>
struct Stack<TensorExample> : public Collation<TensorExample> {
  TensorExample apply_batch(std::vector<TensorExample> examples) override;
};

}  // namespace transforms

namespace datasets {

template <class Source, class AppliedTransform>
class MapDataset;

/// The base of every dataset: a batch of the examples a request names, and the size.
template <class Self, class Batch = std::vector<Example<>>,
          class BatchRequest = std::vector<size_t>>
class BatchDataset {
 public:
  using SelfType = Self;
  using BatchType = Batch;
  using BatchRequestType = BatchRequest;
  static constexpr bool is_stateful = false;
  virtual ~BatchDataset() = default;
  virtual Batch get_batch(BatchRequest request) = 0;
  virtual std::optional<size_t> size() const = 0;

  /// This dataset with `transform` applied to every batch it gives.
  template <class TransformType>
  MapDataset<Self, TransformType> map(TransformType transform) & {
    return MapDataset<Self, TransformType>(static_cast<Self&>(*this), std::move(transform));
  }
  template <class TransformType>
  MapDataset<Self, TransformType> map(TransformType transform) && {
    return MapDataset<Self, TransformType>(std::move(static_cast<Self&>(*this)),
                                           std::move(transform));
  }
};

/// A dataset of single examples (CRTP): implement get(index) and size().
template <class Self, class SingleExample = Example<>>
class Dataset : public BatchDataset<Self, std::vector<SingleExample>> {
 public:
  using ExampleType = SingleExample;
  virtual ExampleType get(size_t index) = 0;
  std::vector<ExampleType> get_batch(std::vector<size_t> indices) override {
    std::vector<ExampleType> batch;
    batch.reserve(indices.size());
    for (size_t i : indices) batch.push_back(get(i));
    return batch;
  }
};

/// A dataset with a transform applied to each batch of its source.
template <class Source, class AppliedTransform>
class MapDataset : public BatchDataset<MapDataset<Source, AppliedTransform>,
                                       typename AppliedTransform::OutputBatchType,
                                       typename Source::BatchRequestType> {
 public:
  using DatasetType = Source;
  using TransformType = AppliedTransform;
  using BatchRequestType = typename Source::BatchRequestType;
  using OutputBatchType = typename AppliedTransform::OutputBatchType;
  MapDataset(Source dataset, AppliedTransform transform)
      : dataset_(std::move(dataset)), transform_(std::move(transform)) {}
  OutputBatchType get_batch(BatchRequestType request) override {
    return transform_.apply_batch(dataset_.get_batch(std::move(request)));
  }
  std::optional<size_t> size() const override { return dataset_.size(); }
  const Source& dataset() const { return dataset_; }
  const AppliedTransform& transform() const { return transform_; }

 private:
  Source dataset_;
  AppliedTransform transform_;
};

/// `dataset.map(transform)` as a function.
template <class D, class T>
MapDataset<D, T> map(D dataset, T transform) {
  return MapDataset<D, T>(std::move(dataset), std::move(transform));
}

/// The MNIST files in `root` (train-images-idx3-ubyte, train-labels-idx1-ubyte,
/// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte; the idx format of
/// yann.lecun.com/exdb/mnist): images [N, 1, rows, cols] float32 in [0, 1],
/// targets [N] int64. Any image count and size is read (libtorch insists on
/// 60000/10000 images of 28 x 28). A missing or malformed file is a
/// kiln::Error naming it.
class MNIST : public Dataset<MNIST> {
 public:
  enum class Mode { kTrain, kTest };
  explicit MNIST(const std::string& root, Mode mode = Mode::kTrain);
  Example<> get(size_t index) override;
  std::optional<size_t> size() const override;
  bool is_train() const noexcept { return train_; }
  const Tensor& images() const { return images_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor images_, targets_;
  bool train_;
};

/// Rows of one tensor (dim 0) as examples without targets.
class TensorDataset : public Dataset<TensorDataset, TensorExample> {
 public:
  explicit TensorDataset(const std::vector<Tensor>& tensors);
  explicit TensorDataset(Tensor tensor) : tensor(std::move(tensor)) {}
  TensorExample get(size_t index) override;
  std::optional<size_t> size() const override;
  Tensor tensor;
};

}  // namespace datasets

namespace samplers {

/// Gives the indices of each batch; reset() starts a new pass.
template <class BatchRequest = std::vector<size_t>>
class Sampler {
 public:
  using BatchRequestType = BatchRequest;
  virtual ~Sampler() = default;
  virtual void reset(std::optional<size_t> new_size) = 0;
  virtual std::optional<BatchRequest> next(size_t batch_size) = 0;
};

/// 0, 1, 2, ... in order.
class SequentialSampler : public Sampler<> {
 public:
  explicit SequentialSampler(size_t size) : size_(size) {}
  void reset(std::optional<size_t> new_size = std::nullopt) override;
  std::optional<std::vector<size_t>> next(size_t batch_size) override;
  size_t index() const noexcept { return index_; }

 private:
  size_t size_, index_ = 0;
};

/// A permutation per pass, from the global generator (manual_seed repeats it):
/// randperm at every reset(), as libtorch's.
class RandomSampler : public Sampler<> {
 public:
  explicit RandomSampler(int64_t size, DType index_dtype = kInt64);
  void reset(std::optional<size_t> new_size = std::nullopt) override;
  std::optional<std::vector<size_t>> next(size_t batch_size) override;
  size_t index() const noexcept { return index_; }

 private:
  std::vector<size_t> indices_;
  size_t size_, index_ = 0;
};

/// This replica's share of the indices (libtorch's DistributedSampler): each
/// of num_replicas gets ceil(size / num_replicas) of them when allow_duplicates
/// (the order is padded by repeating its start), else floor.
class DistributedSampler : public Sampler<> {
 public:
  DistributedSampler(size_t size, size_t num_replicas = 1, size_t rank = 0,
                     bool allow_duplicates = true);
  void set_epoch(size_t epoch) { epoch_ = epoch; }
  size_t epoch() const { return epoch_; }

 protected:
  size_t local_sample_count() const;
  size_t size_, num_replicas_, rank_, epoch_ = 0;
  bool allow_duplicates_;
};

/// A shuffle per epoch (std::mt19937 seeded with the epoch, the same on every
/// replica: libtorch's), then this replica's contiguous part of it.
class DistributedRandomSampler : public DistributedSampler {
 public:
  DistributedRandomSampler(size_t size, size_t num_replicas = 1, size_t rank = 0,
                           bool allow_duplicates = true);
  void reset(std::optional<size_t> new_size = std::nullopt) override;
  std::optional<std::vector<size_t>> next(size_t batch_size) override;
  size_t index() const noexcept { return sample_index_; }

 private:
  void populate_indices();
  size_t begin_index_ = 0, end_index_ = 0, sample_index_ = 0;
  std::vector<size_t> all_indices_;
};

/// This replica's contiguous part of 0, 1, 2, ...
class DistributedSequentialSampler : public DistributedSampler {
 public:
  DistributedSequentialSampler(size_t size, size_t num_replicas = 1, size_t rank = 0,
                               bool allow_duplicates = true);
  void reset(std::optional<size_t> new_size = std::nullopt) override;
  std::optional<std::vector<size_t>> next(size_t batch_size) override;

 private:
  size_t begin_index_ = 0, end_index_ = 0, sample_index_ = 0;
};

}  // namespace samplers

/// Batches of a dataset, for range-for; made by make_data_loader. With
/// workers(k > 0), k threads (each with its own copy of the dataset) build up
/// to max_jobs batches ahead of the loop. begin() starts a new pass (resetting
/// the sampler); an error a worker hits is rethrown by the loop's ++.
template <class Dataset, class Sampler>
class StatelessDataLoader {
 public:
  using BatchType = typename Dataset::BatchType;
  using BatchRequestType = typename Sampler::BatchRequestType;

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = BatchType;
    using difference_type = std::ptrdiff_t;
    using pointer = BatchType*;
    using reference = BatchType&;
    Iterator() = default;
    BatchType& operator*() { return *batch_; }
    BatchType* operator->() { return &*batch_; }
    Iterator& operator++() {
      batch_ = loader_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(const Iterator& o) const { return !batch_ && !o.batch_; }
    bool operator!=(const Iterator& o) const { return !(*this == o); }

   private:
    friend class StatelessDataLoader;
    StatelessDataLoader* loader_ = nullptr;
    std::optional<BatchType> batch_;
  };

  StatelessDataLoader(Dataset dataset, Sampler sampler, LoaderOptions options)
      : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(options) {
    if (options_.batch_size() == 0) throw Error("make_data_loader: expected batch_size > 0, got 0");
    if (options_.workers() > 0 && options_.max_jobs() == 0)
      throw Error("make_data_loader: expected max_jobs > 0 with workers");
    for (size_t w = 0; w < options_.workers(); ++w)
      threads_.emplace_back([this, ds = dataset_]() mutable { work(ds); });
  }
  ~StatelessDataLoader() { join(); }
  StatelessDataLoader(const StatelessDataLoader&) = delete;
  StatelessDataLoader& operator=(const StatelessDataLoader&) = delete;

  /// Starts a pass: resets the sampler, queues the first batches, returns the first.
  Iterator begin() {
    start_pass();
    Iterator it;
    it.loader_ = this;
    it.batch_ = next();
    return it;
  }
  Iterator end() { return Iterator(); }
  /// Stops and joins the worker threads (also done by the destructor).
  void join() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_ready_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }
  const LoaderOptions& options() const { return options_; }

 private:
  struct Job {
    uint64_t pass;
    size_t seq;
    BatchRequestType request;
  };
  struct Done {
    std::optional<BatchType> batch;
    std::exception_ptr error;
  };

  void start_pass() {
    std::lock_guard<std::mutex> lock(mu_);
    ++pass_;
    jobs_.clear();
    done_.clear();
    next_seq_ = next_yield_ = in_flight_ = 0;
    exhausted_ = false;
    sampler_.reset(dataset_.size());
  }

  // The next request of this pass, or nothing at its end (mu_ held when workers run).
  std::optional<BatchRequestType> next_request() {
    if (exhausted_) return std::nullopt;
    auto r = sampler_.next(options_.batch_size());
    if (!r || (options_.drop_last() && r->size() < options_.batch_size())) {
      exhausted_ = true;
      return std::nullopt;
    }
    return r;
  }

  // Queues requests until max_jobs are in flight (mu_ held).
  void fill_queue() {
    while (in_flight_ < options_.max_jobs()) {
      auto r = next_request();
      if (!r) return;
      jobs_.push_back(Job{pass_, next_seq_++, std::move(*r)});
      ++in_flight_;
      work_ready_.notify_one();
    }
  }

  std::optional<BatchType> next() {
    if (threads_.empty()) {
      auto r = next_request();
      if (!r) return std::nullopt;
      return dataset_.get_batch(std::move(*r));
    }
    std::unique_lock<std::mutex> lock(mu_);
    fill_queue();
    if (in_flight_ == 0) return std::nullopt;
    auto ready = [&] {
      return options_.enforce_ordering() ? done_.count(next_yield_) > 0 : !done_.empty();
    };
    if (options_.timeout()) {
      if (!batch_ready_.wait_for(lock, *options_.timeout(), ready))
        throw Error("data loader: no batch within the timeout of " +
                    std::to_string(options_.timeout()->count()) + " ms");
    } else {
      batch_ready_.wait(lock, ready);
    }
    auto it = options_.enforce_ordering() ? done_.find(next_yield_) : done_.begin();
    Done d = std::move(it->second);
    done_.erase(it);
    ++next_yield_;
    --in_flight_;
    fill_queue();
    lock.unlock();
    if (d.error) std::rethrow_exception(d.error);
    return std::move(d.batch);
  }

  void work(Dataset& ds) {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_ready_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (stop_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      Done d;
      try {
        d.batch = ds.get_batch(std::move(job.request));
      } catch (...) {
        d.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (job.pass != pass_) continue;  // a pass begin() abandoned
        done_.emplace(job.seq, std::move(d));
      }
      batch_ready_.notify_all();
    }
  }

  Dataset dataset_;
  Sampler sampler_;
  LoaderOptions options_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable work_ready_, batch_ready_;
  std::deque<Job> jobs_;
  std::map<size_t, Done> done_;
  uint64_t pass_ = 0;
  size_t next_seq_ = 0, next_yield_ = 0, in_flight_ = 0;
  bool exhausted_ = false, stop_ = false;
};

/// A loader over `dataset` with `sampler`.
template <class Dataset, class Sampler>
  requires(!std::is_convertible_v<Sampler, LoaderOptions>)
    std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(
        Dataset dataset, Sampler sampler, LoaderOptions options = LoaderOptions()) {
  return std::make_unique<StatelessDataLoader<Dataset, Sampler>>(std::move(dataset),
                                                                 std::move(sampler), options);
}

/// A loader over `dataset` with a Sampler made from the dataset's size
/// (RandomSampler unless named: make_data_loader<SequentialSampler>(...)).
template <class Sampler = samplers::RandomSampler, class Dataset>
  requires(std::is_constructible_v<Sampler, size_t> && !Dataset::is_stateful)
    std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(
        Dataset dataset, LoaderOptions options = LoaderOptions()) {
  const std::optional<size_t> size = dataset.size();
  if (!size)
    throw Error("make_data_loader: the dataset has no size, so a sampler cannot be made for it");
  Sampler sampler(*size);
  return make_data_loader(std::move(dataset), std::move(sampler), options);
}

}  // namespace kiln::data
