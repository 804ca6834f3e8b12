// kiln::data: feeding training loops, after torch.utils.data. TensorDataset
// (rows of tensors that share dim 0), DataLoader (batches, seeded shuffling,
// and sharding over data-parallel ranks as DistributedSampler does),
// train_test_split, and read_csv (plain or gzip text into a 2-D tensor).
// Datasets live on the CPU; move each batch to the device with .to(kCUDA).
// Shuffles use std::mt19937_64 and Kiln's own Fisher-Yates, so an order
// depends only on (seed, epoch) and is the same on every platform.
#pragma once

#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::data {

/// Rows of one or more CPU tensors that share their size in dim 0, as
/// torch.utils.data.TensorDataset: row i is {t[i] for each tensor t}.
class TensorDataset {
 public:
  /// An error unless there is at least one tensor, every tensor is a defined,
  /// eager CPU tensor of at least one dimension, and all have the same size in dim 0.
  explicit TensorDataset(std::vector<Tensor> tensors, KILN_LOC);

  /// The number of rows.
  int64_t size() const { return size_; }
  /// Row i (0 <= i < size()) of every tensor: views, as t[i].
  std::vector<Tensor> get(int64_t i, KILN_LOC) const;
  /// A dataset of the given rows, in that order, copied into new contiguous tensors.
  TensorDataset subset(const std::vector<int64_t>& rows, KILN_LOC) const;
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  int64_t size_ = 0;
};

/// How a DataLoader batches, e.g. DataLoaderOptions{.batch_size = 32, .shuffle = true}.
struct DataLoaderOptions {
  int64_t batch_size = 1;
  /// A new order for each epoch given to DataLoader::set_epoch; false keeps row order.
  bool shuffle = false;
  /// With `shuffle`: every rank must use the same seed.
  uint64_t seed = 0;
  /// Drops the last, short batch, and, with several ranks, the rows that do not
  /// divide evenly among them; else those ranks repeat rows from the start.
  bool drop_last = false;
  /// This process's share of the rows, for data parallelism:
  /// {.rank = distributed::rank(), .world_size = distributed::world_size()}.
  int64_t rank = 0;
  int64_t world_size = 1;
};

/// Batches of a TensorDataset, for range-for:
///   for (const std::vector<Tensor>& batch : loader) { auto x = batch[0], y = batch[1]; }
/// Each batch holds one new contiguous CPU tensor per dataset tensor, of its
/// dtype, with the batch's rows (batch_size of them, the last maybe fewer).
///
/// The order is row order, or with `shuffle` a permutation that depends only on
/// (seed, epoch). With world_size > 1 the (shuffled) order is dealt out as by
/// torch's DistributedSampler: rank r gets positions r, r + world_size, ...;
/// unless drop_last, the order is first padded by repeating it from its start
/// to a multiple of world_size. Every rank then has the same number of batches,
/// and the ranks' rows are disjoint when world_size divides size().
class DataLoader {
 public:
  /// Input iterator over the batches of one pass.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::vector<Tensor>;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;

    Iterator() = default;
    reference operator*() const { return batch_; }
    pointer operator->() const { return &batch_; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(const Iterator& o) const { return index_ == o.index_; }

   private:
    friend class DataLoader;
    const DataLoader* loader_ = nullptr;
    std::shared_ptr<const std::vector<int64_t>> rows_;
    int64_t index_ = 0;
    std::vector<Tensor> batch_;
  };

  /// An error for batch_size < 1, world_size < 1, or a rank outside [0, world_size).
  DataLoader(TensorDataset dataset, DataLoaderOptions options = {}, KILN_LOC);

  /// Batches per pass (the same on every rank).
  int64_t size() const;
  /// Chooses the shuffle for the next passes, as DistributedSampler.set_epoch:
  /// call it at the start of every epoch, or every epoch has the same order.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  /// The dataset rows this rank visits in a pass of the current epoch, in order.
  std::vector<int64_t> indices() const;

  Iterator begin() const;
  Iterator end() const;
  const TensorDataset& dataset() const { return dataset_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  std::vector<Tensor> batch(std::span<const int64_t> rows) const;

  TensorDataset dataset_;
  std::vector<Tensor> sources_;  // the dataset's tensors, contiguous and detached
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
};

/// The rows of 0..n-1 that rank `rank` of `world_size` reads in `epoch`, by
/// DistributedSampler's rules: one order for every rank (a permutation that
/// depends only on seed and epoch when shuffling), padded by repeating it from
/// its start so each rank gets ceil(n / world_size) rows (with drop_last,
/// trimmed to floor), then every world_size-th position from `rank`.
/// DataLoader and distributed::DistributedSampler both deal rows with it.
std::vector<int64_t> shard_indices(int64_t n, bool shuffle, uint64_t seed, int64_t epoch,
                                   bool drop_last, int64_t rank, int64_t world_size);

/// Rows 0..n-1 dealt at random into a train and a test part, each in increasing order.
struct Split {
  std::vector<int64_t> train;
  std::vector<int64_t> test;
};

/// A seeded split of n rows: round(test_fraction * n) of them go to `test`
/// (0 <= test_fraction <= 1). Use with TensorDataset::subset:
///   auto split = data::train_test_split(ds.size(), 0.2, 42);
///   auto train = ds.subset(split.train), test = ds.subset(split.test);
Split train_test_split(int64_t n, double test_fraction, uint64_t seed = 0, KILN_LOC);

/// How read_csv reads a file.
struct CsvOptions {
  /// Separates fields. ' ' means any run of spaces and tabs (as numpy.loadtxt's
  /// default); any other character separates exactly one field from the next.
  char delimiter = ',';
  /// Lines to skip at the start of the file (a header).
  int64_t skip_rows = 0;
  /// The dtype of the result; each field is parsed as that type (an integer
  /// dtype takes integers only; bool takes 0, 1, true, false).
  DType dtype = DType::f32;
};

/// Reads a delimited text file of numbers into a new 2-D CPU tensor
/// [rows, columns]. gzip data (a name ending in ".gz" must hold it; other files
/// are inflated when they start with gzip's magic bytes) is read through zlib,
/// several concatenated members one after another. Blank lines are
/// skipped; spaces and tabs around a field are ignored. A missing file, a
/// damaged gzip stream, a row with a different number of fields than the first,
/// or a field that is not a number of the dtype is a kiln::Error naming the
/// file, the line and the column.
Tensor read_csv(const std::string& path, const CsvOptions& options = {});
/// Parses the text of a delimited file as read_csv does; `name` is used in errors.
Tensor parse_csv(std::string_view text, const std::string& name, const CsvOptions& options = {});

}  // namespace kiln::data
