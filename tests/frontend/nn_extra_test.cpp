// MultiheadAttention, TransformerEncoderLayer and the functions and modules of
// frontend/nn_extra.h against PyTorch 1.13's values for the same inputs and
// parameters (tests/frontend/data/make_nn_extra_reference.py prints them),
// eagerly and traced, with gradients also against finite differences (f64).
#include "test_util.h"

namespace kiln {
namespace {

using test::autograd_grad;
using test::check_close;
using test::numeric_grad;

Tensor iota_sin(Shape s, double scale = 1.0) {
  return arange(numel(s)).to(kFloat32).mul(Scalar(scale)).sin().reshape(s);
}
Tensor iota_cos(Shape s, double scale = 1.0) {
  return arange(numel(s)).to(kFloat32).mul(Scalar(scale)).cos().reshape(s);
}

void check_prefix(const Tensor& t, const std::vector<double>& want, double tol = 2e-5) {
  const std::vector<double> got = t.flatten().to_vector<double>();
  REQUIRE(got.size() >= want.size());
  for (size_t i = 0; i < want.size(); ++i)
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(1.0));
}
void check_sum(const Tensor& t, double want, double tol = 2e-5) {
  CHECK(t.sum().item<double>() == doctest::Approx(want).epsilon(tol).scale(1.0));
}

// The reference script's parameters: the i-th of named_parameters() is
// sin(arange * (base + step i)) * scale (+ shift for the norms' weights).
void set_parameters(nn::Module& m, double base, double step, double scale, bool norm_ones = false) {
  NoGradGuard no_grad;
  int i = 0;
  for (auto& [name, p] : m.named_parameters()) {
    Tensor v = iota_sin(p.sizes(), base + step * i++).mul(Scalar(scale));
    const bool norm_weight = name.ends_with("norm1.weight") || name.ends_with("norm2.weight");
    if (norm_ones && norm_weight) v = v.add(Scalar(1.0));
    p.copy_(v);
  }
}

std::vector<std::string> names_of(const nn::Module& m) {
  std::vector<std::string> out;
  for (auto& [name, p] : m.named_parameters()) out.push_back(name);
  return out;
}

Tensor causal_mask(int64_t len) {
  return zeros({len, len})
      .masked_fill(ones({len, len}).triu(1).to(kBool),
                   Scalar(-std::numeric_limits<double>::infinity()));
}

TEST_CASE(
    "MultiheadAttention equals PyTorch's: self-attention with both masks, eagerly and traced") {
  nn::MultiheadAttention m(8, 2);
  CHECK(names_of(*m) == std::vector<std::string>{"in_proj_weight", "in_proj_bias",
                                                 "out_proj.weight", "out_proj.bias"});
  set_parameters(*m, 0.37, 0.11, 0.3);
  Tensor pad = tensor({0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1}).reshape({3, 5}).to(kBool);
  Tensor mask = causal_mask(5);
  auto run = [&](const Tensor& x) {
    auto [out, w] = m(x, x, x, pad, true, mask);
    Tensor loss = out.pow(2).sum().add(w.mul(iota_sin(w.sizes(), 0.5)).sum());
    auto g = autograd::grad({loss}, {x, m->in_proj_weight, m->in_proj_bias});
    return std::vector<Tensor>{out, w, loss, g[0], g[1], g[2]};
  };
  Tensor x = iota_cos({5, 3, 8}, 0.23).requires_grad_();
  auto traced = jit([&](Tensor x) { return run(x); }, "mha");
  for (const auto& r : {run(x), traced(x)}) {
    CHECK(r[0].sizes() == Shape{5, 3, 8});
    CHECK(r[1].sizes() == Shape{3, 5, 5});
    check_sum(r[0], 2.51727819);
    check_prefix(r[0], {0.32242188, -0.03520371, -0.030264676, 0.4824712, 0.42979813, -0.3237308,
                        -0.59409964, -0.081302717});
    check_sum(r[1], 15);
    check_prefix(r[1], {1, 0, 0, 0, 0, 0.42064661, 0.57935333, 0});
    CHECK(r[2].item<double>() == doctest::Approx(18.3423367).epsilon(2e-5));
    check_sum(r[3], -9.3516407, 1e-4);
    check_prefix(r[3], {0.16658458, 0.071437255, -0.033373732, -0.13366874, -0.21587323,
                        -0.26886109, -0.2854588, -0.26342168});
    check_sum(r[4], 17.0313148);
    check_prefix(r[4], {0.15808244, 0.17401332, 0.18077946, 0.17802438, 0.16589335, 0.14502503,
                        0.11651874, 0.081875734});
    // The key bias moves every score of a query alike: its gradient is zero.
    check_prefix(r[5],
                 {0.094882026,
                  -0.19233316,
                  0.28345942,
                  -0.36526388,
                  -0.084169462,
                  0.047614742,
                  -0.0094941342,
                  -0.028938562,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  13.574394,
                  15.851934,
                  12.769648,
                  5.3697019,
                  -3.8458366,
                  -11.761031,
                  -15.699595,
                  -14.329832},
                 1e-4);
  }
  // need_weights false: the same output, no weights.
  auto [out, none] = m(x, x, x, pad, false, mask);
  CHECK_FALSE(none.defined());
  check_sum(out, 2.51727819);
}

TEST_CASE("MultiheadAttention with kdim, vdim, add_bias_kv, add_zero_attn and per-head weights") {
  nn::MultiheadAttention m(
      nn::MultiheadAttentionOptions(8, 2).kdim(6).vdim(4).add_bias_kv(true).add_zero_attn(true));
  CHECK(names_of(*m) == std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight",
                                                 "in_proj_bias", "bias_k", "bias_v",
                                                 "out_proj.weight", "out_proj.bias"});
  set_parameters(*m, 0.37, 0.11, 0.3);
  Tensor k = iota_sin({4, 3, 6}, 0.17), v = iota_cos({4, 3, 4}, 0.41);
  Tensor pad = tensor({0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1}).reshape({3, 4}).to(kBool);
  auto run = [&](const Tensor& q) {
    auto [out, w] = m(q, k, v, pad, true, Tensor(), false);
    auto g = autograd::grad({out.pow(2).sum().add(w.sum())}, {q, m->bias_k});
    return std::vector<Tensor>{out, w, g[0], g[1]};
  };
  Tensor q = iota_cos({5, 3, 8}, 0.31).requires_grad_();
  auto traced = jit([&](Tensor q) { return run(q); }, "mha_cross");
  for (const auto& r : {run(q), traced(q)}) {
    CHECK(r[1].sizes() == Shape{3, 2, 5, 6});
    check_sum(r[0], 3.75439501);
    check_prefix(r[0], {-0.10083903, 0.17441565, 0.4024291, -0.11587191, -0.44611949, -0.019134849,
                        0.19814935, 0.1217282});
    check_sum(r[1], 30.0000019);
    check_prefix(r[1], {0.17840232, 0.15793271, 0.17292261, 0.16303574, 0.17116933, 0.15653722,
                        0.035658393, 0.39758688});
    check_sum(r[2], -0.110413492, 1e-3);
    check_prefix(r[2],
                 {0.00057686609, 0.00097018603, 0.0012321974, 0.0013274356, 0.00124301,
                  0.00099035189, 0.00060365227, 0.00013525138},
                 1e-3);
    check_prefix(r[3],
                 {0.023665151, -0.06140919, -0.03760644, -0.070724621, 0.010593, -0.0053430041,
                  0.02364921, 0.017787945},
                 1e-4);
  }
}

TEST_CASE("MultiheadAttention: gradients against finite differences (f64), dropout, errors") {
  nn::MultiheadAttention m(nn::MultiheadAttentionOptions(4, 2).add_zero_attn(true));
  m->to(kFloat64);
  Tensor pad = tensor({0, 0, 1, 0, 0, 0}).reshape({2, 3}).to(kBool);
  Tensor kv = iota_sin({3, 2, 4}, 0.7).to(kFloat64);
  auto f = [&](const Tensor& q) {
    auto [out, w] = m(q, kv, kv, pad, true, causal_mask(3).to(kFloat64));
    return out.mul(iota_cos(out.sizes(), 0.3).to(kFloat64)).sum().add(w.pow(2).sum());
  };
  Tensor q0 = iota_cos({3, 2, 4}, 0.45).to(kFloat64);
  check_close(autograd_grad(f, q0), numeric_grad(f, q0), 1e-6, 1e-8);

  // Dropout on the weights when training, none in eval mode; eager equals traced.
  nn::MultiheadAttention d(nn::MultiheadAttentionOptions(4, 1).dropout(0.5));
  Tensor x = iota_sin({3, 2, 4}, 0.3);
  auto weights = [&](const Tensor& x) { return std::get<1>(d(x, x, x)); };
  manual_seed(1);
  Tensor eager = weights(x);
  manual_seed(1);
  Tensor traced = jit([&](Tensor x) { return weights(x); }, "mha_dropout")(x);
  check_close(traced, eager);
  CHECK(eager.eq(Scalar(0.0)).sum().item<int64_t>() > 0);
  d->eval();
  check_sum(weights(x), 6.0, 1e-6);

  KILN_CHECK_ERROR(m(q0, kv, kv, Tensor(), true, ones({3, 3}).to(kBool)), "float attn_mask");
  KILN_CHECK_ERROR(m(q0, kv, kv, ones({2, 3}), true), "bool key_padding_mask");
  KILN_CHECK_ERROR(m(q0.narrow(2, 0, 3), kv, kv), "expected a query [L, N, 4]");
  KILN_CHECK_ERROR(nn::MultiheadAttention(6, 4), "divisible");
}

TEST_CASE("TransformerEncoderLayer equals PyTorch's (GELU, masks), eagerly and traced") {
  nn::TransformerEncoderLayer layer(
      nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(12).dropout(0.0).activation(
          nn::TransformerActivation::GELU));
  CHECK(names_of(*layer) ==
        std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                 "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                                 "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
                                 "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"});
  set_parameters(*layer, 0.29, 0.07, 0.4, /*norm_ones=*/true);
  Tensor pad = tensor({0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1}).reshape({3, 5}).to(kBool);
  Tensor mask = causal_mask(5);
  auto run = [&](const Tensor& src) {
    Tensor y = layer(src, mask, pad);
    auto g = autograd::grad({y.mul(iota_sin(y.sizes(), 0.7)).sum()}, {src, layer->linear1->weight});
    return std::vector<Tensor>{y, g[0], g[1]};
  };
  Tensor src = iota_cos({5, 3, 8}, 0.19).requires_grad_();
  auto traced = jit([&](Tensor s) { return run(s); }, "encoder_layer");
  for (const auto& r : {run(src), traced(src)}) {
    check_sum(r[0], 12.6640463);
    check_prefix(r[0], {1.3424205, -0.16916898, 2.0616269, 1.0407517, -0.6785605, -0.76117814,
                        -0.34386107, -1.6383071});
    check_sum(r[1], 4.75197744, 1e-4);
    check_prefix(r[1],
                 {-1.2540451, 1.1889542, 0.47295535, -0.12668079, 0.24620697, -0.057393678,
                  -0.66157448, -0.4192667},
                 1e-4);
    check_prefix(r[2],
                 {-0.16430378, -0.045483422, -0.17122456, -0.096219957, 0.076845244, 0.019328667,
                  0.19074887, 0.04094924},
                 1e-4);
  }
  // A function as the activation.
  nn::TransformerEncoderLayer custom(
      nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(12).dropout(0.0).activation(
          [](const Tensor& x) { return x.tanh(); }));
  CHECK(custom(src.detach()).sizes() == Shape{5, 3, 8});
}

TEST_CASE("group_norm and GroupNorm equal PyTorch's, with gradients, eagerly and traced") {
  auto run = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor y = nn::functional::group_norm(x, 3, w, b, 1e-5);
    auto g = autograd::grad({y.mul(iota_cos(y.sizes(), 0.3)).sum()}, {x, w, b});
    return std::vector<Tensor>{y, g[0], g[1], g[2]};
  };
  Tensor x = iota_sin({2, 6, 3, 2}, 0.7).requires_grad_();
  Tensor w = iota_cos({6}, 1.3).mul(Scalar(0.1)).add(Scalar(1.0)).requires_grad_();
  Tensor b = iota_sin({6}, 0.9).mul(Scalar(0.1)).requires_grad_();
  auto traced = jit([&](Tensor x, Tensor w, Tensor b) { return run(x, w, b); }, "group_norm");
  for (const auto& r : {run(x, w, b), traced(x, w, b)}) {
    check_sum(r[0], 1.25848579, 1e-4);
    check_prefix(r[0], {-0.22052781, 0.8103472, 1.3563856, 1.1607771, 0.31551921, -0.78184998,
                        -1.4293284, -1.5949384});
    check_prefix(r[1],
                 {1.6942232, 1.3240176, 0.95775515, 0.68843895, 0.51853001, 0.36988428, 0.1588338,
                  -0.20445028},
                 1e-4);
    check_prefix(r[2], {2.8205569, -3.4662187, 2.5793288, 1.112727, -2.000546, 2.3480115}, 1e-4);
    check_prefix(r[3], {6.5949583, -0.63791609, -6.3050871, 3.5029755, 4.7133193, -5.6447277},
                 1e-4);
  }
  auto f = [](const Tensor& x) {
    return nn::functional::group_norm(x, 2).mul(iota_cos(x.sizes(), 0.3).to(kFloat64)).sum();
  };
  Tensor x64 = iota_sin({2, 4, 3}, 0.9).to(kFloat64);
  check_close(autograd_grad(f, x64), numeric_grad(f, x64), 1e-6, 1e-8);
  nn::GroupNorm gn(nn::GroupNormOptions(3, 6).eps(1e-5));
  CHECK(gn->parameters().size() == 2);
  check_close(gn(x.detach()), nn::functional::group_norm(x.detach(), 3));
  CHECK(nn::GroupNorm(nn::GroupNormOptions(3, 6).affine(false))->parameters().empty());
  KILN_CHECK_ERROR(nn::GroupNorm(4, 6), "divisible");
  KILN_CHECK_ERROR(gn(zeros({2, 4, 3})), "expected an input [N, 6, ...]");
}

TEST_CASE("prelu, PReLU and the activation modules") {
  Tensor x = iota_sin({2, 3, 2, 2}, 0.9).requires_grad_();
  Tensor w = tensor({0.25f, -0.5f, 0.1f}).requires_grad_();
  auto run = [](const Tensor& x, const Tensor& w) {
    Tensor y = nn::functional::prelu(x, w);
    auto g = autograd::grad({y.mul(iota_cos(y.sizes(), 0.4)).sum()}, {w});
    return std::vector<Tensor>{y, g[0]};
  };
  auto traced = jit([&](Tensor x, Tensor w) { return run(x, w); }, "prelu");
  for (const auto& r : {run(x, w), traced(x, w)}) {
    check_sum(r[0], 9.67016792);
    check_prefix(r[0], {0, 0.78332686, 0.97384763, 0.42738006, 0.22126018, 0.48876506, 0.38638237,
                        0.016813615});
    check_prefix(r[1], {-0.44283336, 0.45489544, 0.24988434}, 1e-4);
  }
  nn::PReLU p(nn::PReLUOptions().num_parameters(3).init(0.2));
  CHECK(p->weight.sizes() == Shape{3});
  check_close(p->weight, full({3}, 0.2));
  CHECK(nn::PReLU()->weight.item<float>() == 0.25f);
  KILN_CHECK_ERROR(p(zeros({2, 4})), "3 slopes");

  Tensor a = tensor({-2.0f, -0.5f, 0.0f, 0.5f, 3.0f});
  check_close(nn::ELU(nn::ELUOptions().alpha(0.5))(a), nn::functional::elu(a, 0.5));
  check_close(nn::SELU()(a), nn::functional::selu(a));
  check_close(nn::Softplus(nn::SoftplusOptions().beta(2.0).threshold(5.0))(a),
              nn::functional::softplus(a, 2.0, 5.0));
  check_close(nn::Mish()(a), nn::functional::mish(a));
  check_close(nn::Hardtanh(nn::HardtanhOptions().min_val(-1.0).max_val(2.0))(a),
              tensor({-1.0f, -0.5f, 0.0f, 0.5f, 2.0f}));
  KILN_CHECK_ERROR(nn::Hardtanh(nn::HardtanhOptions().min_val(1.0).max_val(0.0)),
                   "max_val > min_val");
}

TEST_CASE("adaptive_max_pool2d equals PyTorch's over overlapping bins, with its gradient") {
  auto run = [](const Tensor& x) {
    Tensor y = nn::functional::adaptive_max_pool2d(x, {3, 2});
    return std::vector<Tensor>{y, autograd::grad({y.mul(iota_cos(y.sizes(), 0.6)).sum()}, {x})[0]};
  };
  Tensor x = iota_sin({2, 2, 7, 5}, 1.7).requires_grad_();
  auto traced = jit([&](Tensor x) { return run(x); }, "adaptive_max_pool2d");
  for (const auto& r : {run(x), traced(x)}) {
    CHECK(r[0].sizes() == Shape{2, 2, 3, 2});
    check_sum(r[0], 22.9798756);
    check_prefix(r[0], {0.99979293, 0.99979293, 0.99979293, 0.99979293, 0.94042844, 0.98560071,
                        0.8920117, 0.99885792, 0.8920117, 0.99885792, 0.99482679, 0.91509354});
    check_sum(r[1], 2.19076324, 1e-4);
    check_prefix(r[1],
                 {0, 0, 0, 0, 0, 0,          0, 0, 0, 0,          0, 0, 1.9604912, 0, 0, 0, 0, 0,
                  0, 0, 0, 0, 0, -0.9899925, 0, 0, 0, -0.7373938, 0, 0, 0,         0, 0, 0, 0},
                 1e-4);
  }
  // Dividing sizes take max_pool2d's path: the same values as the bins.
  Tensor y = iota_sin({1, 2, 6, 4}, 0.8);
  check_close(nn::AdaptiveMaxPool2d(nn::AdaptiveMaxPool2dOptions({3, 2}))(y),
              y.reshape({1, 2, 3, 2, 2, 2}).amax({3, 5}));
  auto f = [](const Tensor& x) {
    return nn::functional::adaptive_max_pool2d(x, {2, 3}).pow(2).sum();
  };
  Tensor x64 = iota_sin({1, 2, 5, 4}, 1.1).to(kFloat64);
  check_close(autograd_grad(f, x64), numeric_grad(f, x64), 1e-6, 1e-8);
  KILN_CHECK_ERROR(nn::functional::adaptive_max_pool2d(zeros({4, 4}), 2), "expected an input");
}

TEST_CASE("kl_div and KLDivLoss equal PyTorch's for every reduction and log_target") {
  Tensor input = iota_sin({4, 5}, 0.8).log_softmax(1).requires_grad_();
  Tensor target = iota_cos({4, 5}, 0.5).mul(Scalar(2.0)).softmax(1);
  target.select(0, 0).select(0, 1).fill_(Scalar(0.0));
  using R = nn::KLDivReduction;
  CHECK(nn::functional::kl_div(input, target, R::BatchMean).item<double>() ==
        doctest::Approx(0.512277663).epsilon(1e-5));
  CHECK(nn::functional::kl_div(input, target, nn::Reduction::Sum).item<double>() ==
        doctest::Approx(2.04911065).epsilon(1e-5));
  CHECK(nn::functional::kl_div(input, target).item<double>() ==
        doctest::Approx(0.102455534).epsilon(1e-5));
  CHECK(nn::functional::kl_div(input, target, R::None).sizes() == Shape{4, 5});
  CHECK(nn::functional::kl_div(input, target.clamp_min(Scalar(1e-3)).log(), R::BatchMean, true)
            .item<double>() == doctest::Approx(0.510911465).epsilon(1e-5));
  nn::KLDivLoss loss(nn::KLDivLossOptions().reduction(R::BatchMean));
  auto run = [&](const Tensor& x) {
    Tensor l = loss(x, target);
    return std::vector<Tensor>{l, autograd::grad({l}, {x})[0]};
  };
  auto traced = jit([&](Tensor x) { return run(x); }, "kl_div");
  for (const auto& r : {run(input), traced(input)}) {
    CHECK(r[0].item<double>() == doctest::Approx(0.512277663).epsilon(1e-5));
    check_sum(r[1], -0.918331385, 1e-4);
    check_prefix(r[1], {-0.10432428, 0, -0.041600358, -0.016264398, -0.0061423681, -0.035470538});
  }
  // With respect to the target too (finite in the zero entries).
  auto f = [&](const Tensor& t) {
    return nn::functional::kl_div(input.detach().to(kFloat64), t, R::Sum);
  };
  Tensor t64 = target.to(kFloat64).add(Scalar(0.01));
  check_close(autograd_grad(f, t64), numeric_grad(f, t64), 1e-6, 1e-8);
  Tensor g = autograd_grad(f, target.to(kFloat64));
  CHECK(std::isfinite(g.sum().item<double>()));
}

TEST_CASE("unflatten, Unflatten and Embedding's padding_idx") {
  Tensor x = arange(24).reshape({2, 12});
  CHECK(nn::Unflatten(nn::UnflattenOptions(1, {3, 4}))(x).sizes() == Shape{2, 3, 4});
  CHECK(nn::functional::unflatten(x, -1, {2, -1, 3}).sizes() == Shape{2, 2, 2, 3});
  KILN_CHECK_ERROR(nn::functional::unflatten(x, 1, {5, 2}), "do not multiply");

  manual_seed(0);
  nn::Embedding e(nn::EmbeddingOptions(5, 3).padding_idx(-1));
  CHECK(e->padding_idx == 4);
  CHECK(e->weight.select(0, 4).abs().sum().item<float>() == 0.0f);
  {
    NoGradGuard no_grad;
    e->weight.select(0, 4).fill_(Scalar(2.0));  // a padding row that is not zero reads as it is
  }
  Tensor idx = tensor({0, 4, 4, 2}).reshape({2, 2});
  auto run = [&](const Tensor& i) {
    Tensor y = e(i);
    return std::vector<Tensor>{y, autograd::grad({y.sum()}, {e->weight})[0]};
  };
  auto traced = jit([&](Tensor i) { return run(i); }, "embedding_padding");
  for (const auto& r : {run(idx), traced(idx)}) {
    CHECK(r[0].select(0, 0).select(0, 1).sum().item<float>() == 6.0f);
    check_close(r[1].sum(1), tensor({1.0f, 0.0f, 1.0f, 0.0f, 0.0f}).mul(Scalar(3.0)));
  }
  KILN_CHECK_ERROR(nn::Embedding(nn::EmbeddingOptions(5, 3).sparse(true)), "not supported");
  KILN_CHECK_ERROR(nn::Embedding(nn::EmbeddingOptions(5, 3).padding_idx(5)), "padding_idx 5");
}

}  // namespace
}  // namespace kiln
