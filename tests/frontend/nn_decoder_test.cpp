// TransformerDecoderLayer, TransformerDecoder and Transformer
// (frontend/nn_decoder.h) against PyTorch 1.13's values and gradients for the
// same inputs and parameters (tests/frontend/data/make_nn_more_reference.py
// prints them), eagerly and traced; gradients also against finite
// differences (f64); libtorch's names, order and errors.
#include <limits>
#include <map>

#include "test_util.h"

namespace kiln {
namespace {

using test::autograd_grad;
using test::check_close;
using test::numeric_grad;

// PyTorch 1.13's summaries (make_nn_more_reference.py): first values, sum, weighted sum.
const std::map<std::string, std::vector<double>> kReference = {
    {"decoder_layer",
     {1.00781846, -0.929211915, 2.93132019, -0.873386443, -0.125717431, -0.910431325, 7.50916702,
      0.100267017}},
    {"decoder_layer dtgt",
     {-0.108759105, 0.456182599, -0.162707701, 0.128499091, -0.0455957055, 0.0833404511, 1.50846668,
      3.3513583}},
    {"decoder_layer dmemory",
     {0.00145008322, -0.000431770459, -0.00220368383, -0.00341469143, -0.00375676528, -0.0031425599,
      -0.0953635423, -0.00529457472}},
    {"decoder_layer d multihead_attn.in_proj_weight",
     {-0.000375649543, -0.0101736169, 0.00572521519, -0.00225232821, 0.00224443898, -0.000787455414,
      1.06115207, -0.446542522}},
    {"decoder_layer d norm3.weight",
     {-0.201320559, 1.91740143, -1.77034855, -0.364778489, -0.0426959619, -0.553678453,
      -0.631782614, 2.39640984}},
    {"transformer",
     {-0.151982397, 1.23954976, 2.23174524, -1.26308095, -1.15605843, -0.918439865, 17.5971646,
      -2.70543024}},
    {"transformer dsrc",
     {-0.00781902671, -0.0212071352, -0.0172207206, 0.0133396573, 0.0239226483, 0.0137899993,
      0.20468644, 0.0518837232}},
    {"transformer dtgt",
     {-0.0340244472, -0.0621876121, -0.250769317, 0.148097083, 0.092189014, 0.00493115,
      -0.0788695971, -0.24804795}},
    {"transformer d encoder.layers.0.linear1.weight",
     {-0.11106354, -0.0661816895, 0.0437474251, -0.0286422987, 0.12895523, 0.0542624816,
      -0.154223417, -0.324248951}},
    {"transformer d decoder.norm.weight",
     {-0.341183007, 0.65202266, -0.608647048, 1.23025644, 1.19368291, 0.194128275, 3.91302581,
      -1.68801287}},
};

void check(const Tensor& t, const std::string& key, double tol = 2e-5) {
  CAPTURE(key);
  test::check_summary(t, kReference.at(key), tol);
}

Tensor iota_sin(Shape s, double scale) {
  return arange(numel(s)).to(kFloat32).mul(Scalar(scale)).sin().reshape(s);
}
Tensor iota_cos(Shape s, double scale) {
  return arange(numel(s)).to(kFloat32).mul(Scalar(scale)).cos().reshape(s);
}

// The script's parameters: the i-th of named_parameters() is
// sin(arange * (base + step i)) * scale, plus 1 for the norms' weights.
void set_parameters(nn::Module& m, double base, double step, double scale) {
  NoGradGuard no_grad;
  int i = 0;
  for (auto& [name, p] : m.named_parameters()) {
    Tensor v = iota_sin(p.sizes(), base + step * i++).mul(Scalar(scale));
    if (name.find("norm") != std::string::npos && name.ends_with("weight")) v = v.add(Scalar(1.0));
    p.copy_(v.to(p.dtype()));
  }
}

std::vector<std::string> names_of(const nn::Module& m) {
  std::vector<std::string> out;
  for (auto& [name, p] : m.named_parameters()) out.push_back(name);
  return out;
}

Tensor bools(std::vector<int> v, Shape s) {
  return tensor(std::vector<float>(v.begin(), v.end())).reshape(s).to(kBool);
}

const double kInf = std::numeric_limits<double>::infinity();

TEST_CASE("TransformerDecoderLayer equals PyTorch's with every mask, eagerly and traced") {
  nn::TransformerDecoderLayer layer(
      nn::TransformerDecoderLayerOptions(8, 2).dim_feedforward(12).dropout(0.0));
  // libtorch 1.13's order (what tests/compat/seq2seq_transformer.cpp printed built against it).
  CHECK(names_of(*layer) ==
        std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                 "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                                 "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias",
                                 "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias",
                                 "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
                                 "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
                                 "norm3.weight", "norm3.bias"});
  set_parameters(*layer, 0.31, 0.05, 0.4);
  Tensor tgt_pad = bools({0, 0, 0, 0, 0, 0, 0, 1}, {2, 4});
  Tensor mem_pad = bools({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5});
  Tensor mem_mask = zeros({4, 5});
  {
    NoGradGuard no_grad;
    mem_mask.index_put_({0, 4}, Scalar(-kInf));
    mem_mask.index_put_({2, 1}, Scalar(-0.5));
  }
  Tensor causal = nn::TransformerImpl::generate_square_subsequent_mask(4);
  auto run = [&](const Tensor& tgt, const Tensor& memory) {
    Tensor y = layer(tgt, memory, causal, mem_mask, tgt_pad, mem_pad);
    auto g =
        autograd::grad({y.mul(iota_sin(y.sizes(), 0.7)).sum()},
                       {tgt, memory, layer->multihead_attn->in_proj_weight, layer->norm3->weight});
    return std::vector<Tensor>{y, g[0], g[1], g[2], g[3]};
  };
  Tensor tgt = iota_cos({4, 2, 8}, 0.23).requires_grad_();
  Tensor memory = iota_sin({5, 2, 8}, 0.37).requires_grad_();
  auto traced = jit([&](Tensor t, Tensor m) { return run(t, m); }, "decoder_layer");
  for (const auto& r : {run(tgt, memory), traced(tgt, memory)}) {
    check(r[0], "decoder_layer");
    check(r[1], "decoder_layer dtgt", 1e-4);
    check(r[2], "decoder_layer dmemory", 1e-4);
    check(r[3], "decoder_layer d multihead_attn.in_proj_weight", 1e-4);
    check(r[4], "decoder_layer d norm3.weight", 1e-4);
  }
}

TEST_CASE("Transformer equals PyTorch's: GELU, two layers each, final norms, masks") {
  nn::Transformer model(nn::TransformerOptions(8, 2, 2, 2)
                            .dim_feedforward(12)
                            .dropout(0.0)
                            .activation(nn::TransformerActivation::GELU));
  const auto names = names_of(*model);
  REQUIRE(names.size() == 64);
  CHECK(names[0] == "encoder.layers.0.self_attn.in_proj_weight");
  CHECK(names[12] == "encoder.layers.1.self_attn.in_proj_weight");
  CHECK(names[24] == "encoder.norm.weight");
  CHECK(names[26] == "decoder.layers.0.self_attn.in_proj_weight");
  CHECK(names[30] == "decoder.layers.0.multihead_attn.in_proj_weight");
  CHECK(names[38] == "decoder.layers.0.norm1.weight");
  CHECK(names[62] == "decoder.norm.weight");
  // libtorch's reset_parameters: xavier-uniform for every matrix, the biases and norms kept.
  CHECK(model->named_parameters()["decoder.layers.1.linear1.bias"].abs().max().item<float>() <=
        1 / std::sqrt(8.0f));
  CHECK(model->named_parameters()["encoder.norm.weight"].eq(Scalar(1.0)).all().item<bool>());
  const double xavier = std::sqrt(6.0 / (12 + 8));
  CHECK(model->named_parameters()["encoder.layers.0.linear1.weight"].abs().max().item<double>() <=
        xavier);

  set_parameters(*model, 0.29, 0.013, 0.35);
  Tensor src_pad = bools({0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {2, 5});
  Tensor tgt_pad = bools({0, 0, 0, 0, 0, 0, 0, 1}, {2, 4});
  Tensor causal = nn::TransformerImpl::generate_square_subsequent_mask(4);
  auto run = [&](const Tensor& src, const Tensor& tgt) {
    Tensor out = model(src, tgt, Tensor(), causal, Tensor(), src_pad, tgt_pad, src_pad);
    auto* encoder = model->encoder.ptr()->as<nn::TransformerEncoder>();
    auto* decoder = model->decoder.ptr()->as<nn::TransformerDecoder>();
    auto g = autograd::grad(
        {out.mul(iota_cos(out.sizes(), 0.9)).sum()},
        {src, tgt, encoder->layers->at<nn::TransformerEncoderLayerImpl>(0).linear1->weight,
         decoder->norm.ptr()->as<nn::LayerNorm>()->weight});
    return std::vector<Tensor>{out, g[0], g[1], g[2], g[3]};
  };
  Tensor src = iota_cos({5, 2, 8}, 0.19).requires_grad_();
  Tensor tgt = iota_sin({4, 2, 8}, 0.41).requires_grad_();
  auto traced = jit([&](Tensor s, Tensor t) { return run(s, t); }, "transformer");
  for (const auto& r : {run(src, tgt), traced(src, tgt)}) {
    CHECK(r[0].sizes() == Shape{4, 2, 8});
    check(r[0], "transformer");
    check(r[1], "transformer dsrc", 2e-4);
    check(r[2], "transformer dtgt", 1e-4);
    check(r[3], "transformer d encoder.layers.0.linear1.weight", 2e-4);
    check(r[4], "transformer d decoder.norm.weight", 1e-4);
  }
  // The encoder and decoder called through their AnyModules, as a greedy decoder does.
  Tensor memory = model->encoder.forward(src.detach(), Tensor(), src_pad);
  Tensor out = model->decoder.forward(tgt.detach(), memory, causal, Tensor(), tgt_pad, src_pad);
  check(out, "transformer");
}

TEST_CASE("the decoder's gradients equal finite differences (f64); dropout; clones") {
  nn::TransformerDecoderLayer layer(
      nn::TransformerDecoderLayerOptions(4, 2).dim_feedforward(6).dropout(0.0).activation(
          nn::TransformerActivation::GELU));
  nn::TransformerDecoder decoder(nn::TransformerDecoderOptions(layer, 2).norm(
      nn::AnyModule(nn::LayerNorm(nn::LayerNormOptions({4})))));
  decoder->to(kFloat64);
  set_parameters(*decoder, 0.5, 0.03, 0.5);
  Tensor memory = iota_sin({3, 2, 4}, 0.6).to(kFloat64);
  Tensor causal = nn::TransformerImpl::generate_square_subsequent_mask(3).to(kFloat64);
  Tensor pad = bools({0, 0, 0, 0, 0, 1}, {2, 3});
  auto f = [&](const Tensor& tgt) {
    Tensor y = decoder(tgt, memory, causal, Tensor(), Tensor(), pad);
    return y.mul(iota_cos(y.sizes(), 0.3).to(kFloat64)).sum();
  };
  Tensor tgt0 = iota_cos({3, 2, 4}, 0.45).to(kFloat64);
  check_close(autograd_grad(f, tgt0), numeric_grad(f, tgt0), 1e-6, 1e-8);
  auto g = [&](const Tensor& mem) {
    Tensor y = decoder(tgt0, mem, causal);
    return y.mul(iota_cos(y.sizes(), 0.3).to(kFloat64)).sum();
  };
  check_close(autograd_grad(g, memory), numeric_grad(g, memory), 1e-6, 1e-8);

  // The layers start as copies of the given one, each its own.
  CHECK(decoder->layers->size() == 2);
  CHECK(names_of(*decoder).back() == "norm.bias");
  auto& first = decoder->layers->at<nn::TransformerDecoderLayerImpl>(0);
  auto& second = decoder->layers->at<nn::TransformerDecoderLayerImpl>(1);
  CHECK(first.linear1->weight.impl() != second.linear1->weight.impl());
  CHECK(first.linear1->weight.impl() != layer->linear1->weight.impl());

  // Dropout when training, eager equal to traced; none in eval mode.
  nn::TransformerDecoderLayer drop(
      nn::TransformerDecoderLayerOptions(4, 1).dim_feedforward(6).dropout(0.5));
  Tensor t = iota_sin({3, 2, 4}, 0.3), m = iota_cos({3, 2, 4}, 0.2);
  manual_seed(3);
  Tensor eager = drop(t, m);
  manual_seed(3);
  Tensor traced = jit([&](Tensor a, Tensor b) { return drop(a, b); }, "decoder_dropout")(t, m);
  check_close(traced, eager, 1e-5, 1e-6);
  drop->eval();
  check_close(drop(t, m), drop(t, m));
}

TEST_CASE("the decoder and Transformer refuse bad shapes and masks, naming them") {
  nn::TransformerDecoderLayer layer(nn::TransformerDecoderLayerOptions(4, 2).dim_feedforward(6));
  Tensor t = zeros({3, 2, 4}), m = zeros({5, 2, 4});
  KILN_CHECK_ERROR(layer(t, zeros({5, 3, 4})), "expected tgt [T, N, E] and memory [S, N, E]");
  KILN_CHECK_ERROR(layer(t, zeros({5, 2, 6})), "key [S, N, 4]");
  KILN_CHECK_ERROR(layer(t, m, zeros({3, 4})), "attn_mask [3, 3]");
  KILN_CHECK_ERROR(layer(t, m, Tensor(), Tensor(), Tensor(), ones({2, 5})),
                   "bool key_padding_mask");
  KILN_CHECK_ERROR(nn::TransformerDecoderLayer(nn::TransformerDecoderLayerOptions(6, 4)),
                   "divisible");
  KILN_CHECK_ERROR(nn::TransformerDecoder(nn::TransformerDecoderLayer(nullptr), 2),
                   "expected a layer");
  KILN_CHECK_ERROR(nn::TransformerDecoder(layer, -1), "num_layers >= 0");
  nn::Transformer model(nn::TransformerOptions(4, 2, 1, 1).dim_feedforward(6));
  KILN_CHECK_ERROR(model(zeros({5, 2, 4}), zeros({3, 3, 4})), "the same batch N");
  KILN_CHECK_ERROR(model(zeros({5, 2, 4}), zeros({3, 2, 5})), "tgt [T, N, 4]");
  KILN_CHECK_ERROR(nn::TransformerImpl::generate_square_subsequent_mask(-1), "size >= 0");
  Tensor mask = nn::TransformerImpl::generate_square_subsequent_mask(3);
  CHECK(mask.isinf().sum().item<int64_t>() == 3);
  CHECK(mask.narrow(0, 2, 1).eq(Scalar(0.0)).all().item<bool>());
  // An AnyModule whose module takes fewer tensors than it is given.
  nn::AnyModule norm(nn::LayerNorm(nn::LayerNormOptions({4})));
  KILN_CHECK_ERROR(norm.forward(t, t), "no forward of 2 tensors");
}

}  // namespace
}  // namespace kiln
