// torch::save / torch::load on Kiln. Modules go to Kiln's weights files
// (kiln::save, frontend/checkpoint.h); tensors, lists of tensors and
// optimizers (with their state) to archives (frontend/archive.h). Round-trips
// are exact. The files are Kiln's own, not PyTorch's pickles; weights trained in
// PyTorch load from safetensors (torch::load_safetensors).
#pragma once

#include <istream>
#include <ostream>

#include "torch/functions.h"

namespace torch {
namespace serialize {
using kiln::serialize::InputArchive;
using kiln::serialize::OutputArchive;
}  // namespace serialize

namespace detail {
template <class M>
concept ModuleHandle = requires(const M& m) {
  m.ptr();
}
|| requires(const M& m) {
  { *m } -> std::convertible_to<const kiln::nn::Module&>;
};
template <class M>
kiln::nn::Module& module_of(const M& m) {
  if constexpr (requires { m.ptr(); })
    return *m.ptr();
  else
    return *m;
}
/// libtorch's load gives an optimizer its saved state (momentum buffers,
/// moments, step counts) but not its options: every group keeps the learning
/// rate it was made with (or set since), as a program that resumes with a new
/// rate expects. Kiln's own Optimizer::load restores the saved rates too.
inline void load_state_keeping_rates(kiln::optim::Optimizer& optimizer, serialize::InputArchive& a) {
  std::vector<double> rates;
  for (const kiln::optim::OptimizerParamGroup& g : optimizer.param_groups()) rates.push_back(g.options().get_lr());
  optimizer.load(a);
  for (size_t g = 0; g < rates.size(); ++g) optimizer.param_groups()[g].options().set_lr(rates[g]);
}
inline serialize::InputArchive archive_from(const std::string& path) {
  serialize::InputArchive a;
  a.load_from(path);
  return a;
}
inline serialize::InputArchive archive_from(std::istream& stream) {
  serialize::InputArchive a;
  a.load_from(stream);
  return a;
}
}  // namespace detail

/// A module (holder or shared_ptr): its parameters and buffers, by name.
template <detail::ModuleHandle M>
void save(const M& module, const std::string& path) {
  kiln::save(detail::module_of(module), path);
}
template <detail::ModuleHandle M>
void load(const M& module, const std::string& path) {
  kiln::load(detail::module_of(module), path);
}
/// A module into or from a stream: an archive of its parameters and buffers.
template <detail::ModuleHandle M>
void save(const M& module, std::ostream& stream) {
  serialize::OutputArchive a;
  detail::module_of(module).save(a);
  a.save_to(stream);
}
template <detail::ModuleHandle M>
void load(const M& module, std::istream& stream) {
  serialize::InputArchive a = detail::archive_from(stream);
  detail::module_of(module).load(a);
}

/// A tensor, under the key "0".
template <class Target>
void save(const Tensor& tensor, Target&& path_or_stream) {
  serialize::OutputArchive a;
  a.write("0", tensor);
  a.save_to(std::forward<Target>(path_or_stream));
}
template <class Source>
void load(Tensor& tensor, Source&& path_or_stream) {
  serialize::InputArchive a = detail::archive_from(std::forward<Source>(path_or_stream));
  a.read("0", tensor);
}
/// A list of tensors, under the keys "0", "1", ...
template <class Target>
void save(const std::vector<Tensor>& tensors, Target&& path_or_stream) {
  serialize::OutputArchive a;
  for (size_t i = 0; i < tensors.size(); ++i) a.write(std::to_string(i), tensors[i]);
  a.save_to(std::forward<Target>(path_or_stream));
}
template <class Source>
void load(std::vector<Tensor>& tensors, Source&& path_or_stream) {
  serialize::InputArchive a = detail::archive_from(std::forward<Source>(path_or_stream));
  tensors.clear();
  for (size_t i = 0;; ++i) {
    Tensor t;
    if (!a.try_read(std::to_string(i), t)) break;
    tensors.push_back(t);
  }
}
/// An optimizer's state (momentum, moments, step counts); loading keeps the
/// optimizer's options, as libtorch's (detail::load_state_keeping_rates).
template <class Target>
void save(const kiln::optim::Optimizer& optimizer, Target&& path_or_stream) {
  serialize::OutputArchive a;
  optimizer.save(a);
  a.save_to(std::forward<Target>(path_or_stream));
}
template <class Source>
void load(kiln::optim::Optimizer& optimizer, Source&& path_or_stream) {
  serialize::InputArchive a = detail::archive_from(std::forward<Source>(path_or_stream));
  detail::load_state_keeping_rates(optimizer, a);
}

namespace serialize {
/// archive << module and archive >> module, as libtorch's.
inline OutputArchive& operator<<(OutputArchive& a, const std::shared_ptr<kiln::nn::Module>& m) {
  m->save(a);
  return a;
}
inline InputArchive& operator>>(InputArchive& a, const std::shared_ptr<kiln::nn::Module>& m) {
  m->load(a);
  return a;
}
inline OutputArchive& operator<<(OutputArchive& a, const kiln::optim::Optimizer& o) {
  o.save(a);
  return a;
}
inline InputArchive& operator>>(InputArchive& a, kiln::optim::Optimizer& o) {
  detail::load_state_keeping_rates(o, a);
  return a;
}
}  // namespace serialize

}  // namespace torch
