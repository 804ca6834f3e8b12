// The cluster log-probability library step (ir/ops.def's cluster_logprob and
// cluster_logprob_grad): one cluster of an adaptive softmax, computed only for
// the rows whose target lies in the cluster, as PyTorch's
// AdaptiveLogSoftmaxWithLoss does with index_select. A traced graph has static
// shapes, so the selection happens here: the work is proportional to the rows
// in the cluster, and no [rows, cluster size] matrix is held (each member row's
// logits, one row at a time per thread). The gradient recomputes each member
// row's logits and log-sum-exp instead of keeping them. The reference kernels
// (runtime/reference_cluster_logprob.cpp), plain loops in double, are its
// oracle; the CUDA library kernels (runtime/cuda_library.h) do the same on a GPU.
#pragma once

#include <array>
#include <cstdint>

#include "ir/attrs.h"
#include "ir/op.h"

namespace kiln {

struct ClusterShape {
  DType dtype = DType::f32;
  int64_t rows = 0;     // N: rows of h and targets
  int64_t width = 0;    // H: features per row
  int64_t columns = 0;  // C: the cluster's classes (rows of w)
  int64_t start = 0;    // the cluster's first class: row r is a member when
                        // start <= t[r] < start + columns
};

/// The shape of a cluster_logprob node or its gradient node from its h and w
/// types and attributes.
ClusterShape cluster_logprob_shape(const TensorType& h, const TensorType& w, const Attrs& attrs);

/// Where each gradient the mask `which` selects (h, w) starts in the flat
/// result of cluster_logprob_backward, in elements; -1 for one not selected.
std::array<int64_t, 2> cluster_logprob_grad_offsets(const ClusterShape& s, int which);

/// out [rows]: for a member row r, log_softmax(h_r w^T)[t[r] - start]; 0 for
/// every other row (whose h row is not read).
void cluster_logprob_forward(const ClusterShape& s, const void* h, const void* w, const int64_t* t,
                             void* out);

/// The gradients of cluster_logprob with output gradient `g` [rows] that the
/// bitmask `which` asks for: h (1, [rows, width]), w (2, [columns, width]),
/// written one after the other in that order into `grad`. A row that is not a
/// member contributes nothing (its dh row is 0). dw sums the member rows in
/// order, one task per block of columns: the same bits at every thread count.
void cluster_logprob_backward(const ClusterShape& s, int which, const void* h, const void* w,
                              const int64_t* t, const void* g, void* grad);

}  // namespace kiln
