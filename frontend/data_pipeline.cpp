// The non-template parts of the data pipeline (frontend/data_pipeline.h):
// Stack, the MNIST reader (the idx format), TensorDataset and the samplers.
#include "frontend/data_pipeline.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>

namespace kiln::data {

namespace transforms {

Example<> Stack<Example<>>::apply_batch(std::vector<Example<>> examples) {
  std::vector<Tensor> data, targets;
  data.reserve(examples.size());
  targets.reserve(examples.size());
  for (auto& e : examples) {
    data.push_back(std::move(e.data));
    targets.push_back(std::move(e.target));
  }
  return {kiln::stack(data), kiln::stack(targets)};
}

TensorExample Stack<TensorExample>::apply_batch(std::vector<TensorExample> examples) {
  std::vector<Tensor> data;
  data.reserve(examples.size());
  for (auto& e : examples) data.push_back(std::move(e.data));
  return TensorExample(kiln::stack(data));
}

}  // namespace transforms

namespace datasets {

namespace {

std::string join_path(const std::string& root, const std::string& name) {
  if (root.empty()) return name;
  return root.back() == '/' ? root + name : root + "/" + name;
}

// The file's bytes; an error naming it when it cannot be read.
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("MNIST: cannot open " + path + " (expected the idx file there)");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

uint32_t big_endian32(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// An idx file of unsigned bytes: its dims (after checking the magic) and where the data starts.
std::vector<int64_t> idx_dims(const std::string& path, const std::string& bytes, uint32_t rank) {
  if (bytes.size() < 4 + 4 * size_t(rank))
    throw Error("MNIST: " + path + " is " + std::to_string(bytes.size()) +
                " bytes, too short for an idx header");
  const uint32_t magic = big_endian32(bytes, 0);
  if (magic != 0x800 + rank)
    throw Error("MNIST: " + path + " starts with magic number " + std::to_string(magic) +
                " (expected " + std::to_string(0x800 + rank) + ": unsigned bytes, " +
                std::to_string(rank) + " dims)");
  std::vector<int64_t> dims;
  int64_t n = 1;
  for (uint32_t d = 0; d < rank; ++d) {
    dims.push_back(big_endian32(bytes, 4 + 4 * d));
    n *= dims.back();
  }
  const size_t want = 4 + 4 * size_t(rank) + size_t(n);
  if (bytes.size() != want)
    throw Error("MNIST: " + path + " is " + std::to_string(bytes.size()) + " bytes (expected " +
                std::to_string(want) + " for dims " + shape_str(dims) + ")");
  return dims;
}

}  // namespace

MNIST::MNIST(const std::string& root, Mode mode) : train_(mode == Mode::kTrain) {
  const std::string prefix = train_ ? "train" : "t10k";
  const std::string ipath = join_path(root, prefix + "-images-idx3-ubyte");
  const std::string lpath = join_path(root, prefix + "-labels-idx1-ubyte");
  const std::string ib = read_all(ipath), lb = read_all(lpath);
  const std::vector<int64_t> idims = idx_dims(ipath, ib, 3), ldims = idx_dims(lpath, lb, 1);
  if (idims[0] != ldims[0])
    throw Error("MNIST: " + ipath + " has " + std::to_string(idims[0]) + " images but " + lpath +
                " " + std::to_string(ldims[0]) + " labels");
  const int64_t n = idims[0], rows = idims[1], cols = idims[2];
  std::vector<float> pixels(static_cast<size_t>(n * rows * cols));
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<float>(static_cast<unsigned char>(ib[16 + i])) / 255.0f;
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<unsigned char>(lb[8 + i]);
  images_ = from_blob(pixels.data(), {n, 1, rows, cols}, TensorOptions(kFloat32)).clone();
  targets_ = from_blob(labels.data(), {n}, TensorOptions(kInt64)).clone();
}

Example<> MNIST::get(size_t index) {
  const int64_t i = static_cast<int64_t>(index);
  return {images_[i], targets_[i]};
}

std::optional<size_t> MNIST::size() const {
  return static_cast<size_t>(images_.size(0));
}

TensorDataset::TensorDataset(const std::vector<Tensor>& tensors) : tensor(kiln::stack(tensors)) {}

TensorExample TensorDataset::get(size_t index) {
  return TensorExample(tensor[static_cast<int64_t>(index)]);
}

std::optional<size_t> TensorDataset::size() const {
  return static_cast<size_t>(tensor.size(0));
}

}  // namespace datasets

namespace samplers {

void SequentialSampler::reset(std::optional<size_t> new_size) {
  if (new_size) size_ = *new_size;
  index_ = 0;
}

std::optional<std::vector<size_t>> SequentialSampler::next(size_t batch_size) {
  const size_t n = std::min(batch_size, size_ - index_);
  if (n == 0) return std::nullopt;
  std::vector<size_t> out(n);
  std::iota(out.begin(), out.end(), index_);
  index_ += n;
  return out;
}

RandomSampler::RandomSampler(int64_t size, DType index_dtype) : size_(static_cast<size_t>(size)) {
  if (size < 0) throw Error("RandomSampler: expected a size >= 0, got " + std::to_string(size));
  (void)index_dtype;  // the indices are size_t here
  reset();
}

void RandomSampler::reset(std::optional<size_t> new_size) {
  if (new_size) size_ = *new_size;
  indices_.clear();
  if (size_ > 0)
    for (int64_t i : randperm(static_cast<int64_t>(size_)).to_vector<int64_t>())
      indices_.push_back(static_cast<size_t>(i));
  index_ = 0;
}

std::optional<std::vector<size_t>> RandomSampler::next(size_t batch_size) {
  const size_t n = std::min(batch_size, indices_.size() - index_);
  if (n == 0) return std::nullopt;
  std::vector<size_t> out(indices_.begin() + static_cast<std::ptrdiff_t>(index_),
                          indices_.begin() + static_cast<std::ptrdiff_t>(index_ + n));
  index_ += n;
  return out;
}

DistributedSampler::DistributedSampler(size_t size, size_t num_replicas, size_t rank,
                                       bool allow_duplicates)
    : size_(size), num_replicas_(num_replicas), rank_(rank), allow_duplicates_(allow_duplicates) {
  if (num_replicas == 0 || rank >= num_replicas)
    throw Error("DistributedSampler: expected 0 <= rank < num_replicas, got rank " +
                std::to_string(rank) + " of " + std::to_string(num_replicas));
}

size_t DistributedSampler::local_sample_count() const {
  return allow_duplicates_ ? (size_ + num_replicas_ - 1) / num_replicas_ : size_ / num_replicas_;
}

DistributedRandomSampler::DistributedRandomSampler(size_t size, size_t num_replicas, size_t rank,
                                                   bool allow_duplicates)
    : DistributedSampler(size, num_replicas, rank, allow_duplicates) {
  reset();
}

void DistributedRandomSampler::populate_indices() {
  const size_t local = local_sample_count();
  const size_t count = num_replicas_ == 1 ? size_ : local * num_replicas_;
  all_indices_.resize(count);
  std::iota(all_indices_.begin(), all_indices_.end(), size_t(0));
  for (size_t i = size_; i < count; ++i) all_indices_[i] = i - size_;  // repeats, for equal shares
  begin_index_ = rank_ * local;
  end_index_ = begin_index_ + local;
  sample_index_ = begin_index_;
}

void DistributedRandomSampler::reset(std::optional<size_t> new_size) {
  if (new_size) size_ = *new_size;
  populate_indices();
  std::mt19937 rand(static_cast<std::mt19937::result_type>(epoch_));
  std::shuffle(all_indices_.begin(), all_indices_.end(), rand);
  sample_index_ = begin_index_;
}

std::optional<std::vector<size_t>> DistributedRandomSampler::next(size_t batch_size) {
  if (sample_index_ >= end_index_) return std::nullopt;
  const size_t end = std::min(end_index_, sample_index_ + batch_size);
  std::vector<size_t> out(all_indices_.begin() + static_cast<std::ptrdiff_t>(sample_index_),
                          all_indices_.begin() + static_cast<std::ptrdiff_t>(end));
  sample_index_ = end;
  return out;
}

DistributedSequentialSampler::DistributedSequentialSampler(size_t size, size_t num_replicas,
                                                           size_t rank, bool allow_duplicates)
    : DistributedSampler(size, num_replicas, rank, allow_duplicates) {
  reset();
}

void DistributedSequentialSampler::reset(std::optional<size_t> new_size) {
  if (new_size) size_ = *new_size;
  const size_t local = local_sample_count();
  begin_index_ = rank_ * local;
  end_index_ = begin_index_ + local;
  sample_index_ = begin_index_;
}

std::optional<std::vector<size_t>> DistributedSequentialSampler::next(size_t batch_size) {
  if (sample_index_ >= end_index_) return std::nullopt;
  const size_t end = std::min(end_index_, sample_index_ + batch_size);
  std::vector<size_t> out;
  for (size_t i = sample_index_; i < end; ++i) out.push_back(i % size_);
  sample_index_ = end;
  return out;
}

}  // namespace samplers

}  // namespace kiln::data
