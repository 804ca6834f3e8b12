// The losses of frontend/nn_losses.h against PyTorch 1.13's values and
// gradients (tests/frontend/data/make_nn_losses_reference.py prints them),
// each reduced by mean, by sum and not at all, eagerly and traced; their
// gradients also against finite differences (f64), and their modules.
#include <map>
#include <string>

#include "test_util.h"

namespace kiln {
namespace {

using test::autograd_grad;
using test::check_close;
using test::numeric_grad;
namespace F = nn::functional;
using nn::Reduction;

Tensor iota_sin(Shape s, double scale = 1.0) {
  return arange(numel(s)).to(kFloat32).mul(Scalar(scale)).sin().reshape(s);
}

// PyTorch 1.13's values (tests/frontend/data/make_nn_losses_reference.py).
const std::map<std::string, std::vector<double>> kReference = {
    {"margin_ranking mean", {0.58432722}},
    {"margin_ranking mean grad", {-0.16666667, 0.16666667, 0, 0.16666667, 0, -0.16666667}},
    {"margin_ranking sum", {3.5059633}},
    {"margin_ranking sum grad", {-1, 1, 0, 1, 0, -1}},
    {"margin_ranking none", {0.2, 0.87080628, 0, 0.71148717, 0, 1.7236699}},
    {"margin_ranking none grad", {-1, 2, 0, 4, 0, -6}},
    {"hinge_embedding mean", {0.60072494}},
    {"hinge_embedding mean grad", {0.16666667, 0, 0.16666667, 0, 0, -0.16666667}},
    {"hinge_embedding sum", {3.6043496}},
    {"hinge_embedding sum grad", {1, 0, 1, 0, 0, -1}},
    {"hinge_embedding none", {0, 0, 1.4781746, 0, 0.80000001, 1.3261749}},
    {"hinge_embedding none grad", {1, 0, 3, 0, 0, -6}},
    {"soft_margin mean", {0.94839042}},
    {"soft_margin mean grad", {-0.083333336, 0.12073112, -0.030950552, 0.13082683, 0.10384043, -0.10476509}},
    {"soft_margin sum", {5.6903424}},
    {"soft_margin sum grad", {-0.5, 0.72438669, -0.18570329, 0.78496099, 0.62304252, -0.62859052}},
    {"soft_margin none", {0.69314718, 1.2887564, 0.20543045, 1.5369354, 0.97562283, 0.99045008}},
    {"soft_margin none grad", {-0.5, 1.4487734, -0.55710989, 3.1398439, 3.1152127, -3.771543}},
    {"cosine_embedding mean", {0.49881858}},
    {"cosine_embedding mean grad", {0, -0.023281828, 0.015219986, -0.02006346, -0.18510875, -0.22614598}},
    {"cosine_embedding sum", {0.99763715}},
    {"cosine_embedding sum grad", {0, -0.046563655, 0.030439973, -0.04012692, -0.3702175, -0.45229197}},
    {"cosine_embedding none", {0.0048377514, 0.9927994}},
    {"cosine_embedding none grad", {0, -0.046563655, 0.030439973, -0.080253839, -0.740435, -0.90458393}},
    {"triplet_margin mean", {0.61407322}},
    {"triplet_margin mean grad", {9.3196059e-07, 0.17054935, 0.47001377, 0.3189446, 0.34746557, 0.16595785}},
    {"triplet_margin sum", {1.2281464}},
    {"triplet_margin sum grad", {1.8639212e-06, 0.3410987, 0.94002753, 0.63788921, 0.69493115, 0.33191571}},
    {"triplet_margin none", {0.78958571, 0.43856072}},
    {"triplet_margin none grad", {1.8639212e-06, 0.3410987, 0.94002753, 1.2757784, 1.3898623, 0.66383141}},
    {"triplet_margin_p1 mean", {0}},
    {"triplet_margin_p1 mean grad", {0, 0, 0, 0, 0, 0}},
    {"triplet_margin_p1 sum", {0}},
    {"triplet_margin_p1 sum grad", {0, 0, 0, 0, 0, 0}},
    {"triplet_margin_p1 none", {0, 0}},
    {"triplet_margin_p1 none grad", {0, 0, 0, 0, 0, 0}},
    {"multilabel_soft_margin mean", {0.96186364}},
    {"multilabel_soft_margin mean grad", {-0.041666668, 0.12073112, -0.0619011, 0.065413415, 0.10384041, -0.20953017}},
    {"multilabel_soft_margin sum", {1.9237273}},
    {"multilabel_soft_margin sum grad", {-0.083333336, 0.24146223, -0.1238022, 0.13082683, 0.20768082, -0.41906035}},
    {"multilabel_soft_margin none", {0.68206364, 1.2416636}},
    {"multilabel_soft_margin none grad", {-0.083333336, 0.24146223, -0.1238022, 0.26165366, 0.41536164, -0.8381207}},
    {"poisson_nll mean", {1.3255905}},
    {"poisson_nll mean grad", {0.16666667, 0.27137858, 0.39748898, 0.10838628, 0.1921365, -0.56818986}},
    {"poisson_nll sum", {7.9535427}},
    {"poisson_nll sum grad", {1, 1.6282716, 2.3849339, 0.65031743, 1.1528189, -3.4091392}},
    {"poisson_nll none", {1, 1.6619451, 1.4285848, -0.2341249, 1.4015777, 2.6955602}},
    {"poisson_nll none grad", {1, 3.2565432, 7.1548023, 2.6012697, 5.7640944, -20.454836}},
    {"poisson_nll_full_rate mean", {1.8486557}},
    {"poisson_nll_full_rate mean grad", {0, 0.010366827, -0.044547826, -0.19180404, 0.028350025, 0.89799863}},
    {"poisson_nll_full_rate sum", {11.091934}},
    {"poisson_nll_full_rate sum grad", {0, 0.062200904, -0.2672869, -1.1508243, 0.17010015, 5.3879919}},
    {"poisson_nll_full_rate none", {0.1, 1.0021069, 1.3174434, 2.1606121, 0.85583079, 5.6559405}},
    {"poisson_nll_full_rate none grad", {0, 0.12440181, -0.80186081, -4.6032972, 0.85050058, 32.327953}},
};

void check_values(const Tensor& t, const std::string& key, double tol = 2e-6) {
  CAPTURE(key);
  test::check_near(t, kReference.at(key), tol);
}

using Loss = std::function<Tensor(const Tensor&, Reduction)>;

// The script's cases: each a loss of x [6] (reshaped where the loss wants
// [2, 3]) with fixed other operands, in x's dtype.
std::vector<std::pair<std::string, Loss>> cases() {
  auto f = [](std::vector<float> v, Shape s, const Tensor& like) {
    return tensor(v).reshape(s).to(like.dtype());
  };
  auto sign = [f](const Tensor& x) { return f({1, -1, 1, -1, -1, 1}, {6}, x); };
  auto other = [](const Tensor& x, Shape s, double scale) { return iota_sin(s, scale).to(x.dtype()); };
  return {
      {"margin_ranking",
       [=](const Tensor& x, Reduction r) {
         return F::margin_ranking_loss(x, other(x, {6}, 0.3), sign(x),
                                       nn::MarginRankingLossOptions().margin(0.2).reduction(r));
       }},
      {"hinge_embedding",
       [=](const Tensor& x, Reduction r) {
         return F::hinge_embedding_loss(x, f({1, -1, 1, -1, 0.5, -1}, {6}, x),
                                        nn::HingeEmbeddingLossOptions().margin(0.8).reduction(r));
       }},
      {"soft_margin",
       [=](const Tensor& x, Reduction r) { return F::soft_margin_loss(x, sign(x), r); }},
      {"cosine_embedding",
       [=](const Tensor& x, Reduction r) {
         return F::cosine_embedding_loss(x.reshape({2, 3}), other(x, {2, 3}, 0.9),
                                         f({1, -1}, {2}, x),
                                         nn::CosineEmbeddingLossOptions().margin(-0.5).reduction(r));
       }},
      {"triplet_margin",
       [=](const Tensor& x, Reduction r) {
         return F::triplet_margin_loss(
             x.reshape({2, 3}), other(x, {2, 3}, 0.9), other(x, {2, 3}, 1.7),
             nn::TripletMarginLossOptions().margin(1.5).p(2).swap(true).reduction(r));
       }},
      {"triplet_margin_p1",
       [=](const Tensor& x, Reduction r) {
         return F::triplet_margin_loss(x.reshape({2, 3}), other(x, {2, 3}, 0.9),
                                       other(x, {2, 3}, 1.7),
                                       nn::TripletMarginLossOptions().margin(0.5).p(1).reduction(r));
       }},
      {"multilabel_soft_margin",
       [=](const Tensor& x, Reduction r) {
         return F::multilabel_soft_margin_loss(
             x.reshape({2, 3}), f({1, 0, 1, 0, 0, 1}, {2, 3}, x),
             nn::MultiLabelSoftMarginLossOptions().weight(f({0.5, 1, 2}, {3}, x)).reduction(r));
       }},
      {"poisson_nll",
       [=](const Tensor& x, Reduction r) {
         return F::poisson_nll_loss(x, f({0, 1, 2, 3, 0.5, 4}, {6}, x),
                                    nn::PoissonNLLLossOptions().reduction(r));
       }},
      {"poisson_nll_full_rate",
       [=](const Tensor& x, Reduction r) {
         return F::poisson_nll_loss(
             x.abs().add(Scalar(0.1)), f({0, 1, 2, 3, 0.5, 4}, {6}, x),
             nn::PoissonNLLLossOptions().log_input(false).full(true).reduction(r));
       }},
  };
}

TEST_CASE("the losses equal PyTorch's, values and gradients, every reduction, eagerly and traced") {
  const std::vector<std::pair<Reduction, std::string>> reductions = {
      {Reduction::Mean, "mean"}, {Reduction::Sum, "sum"}, {Reduction::None, "none"}};
  for (const auto& [name, loss] : cases())
    for (const auto& [r, rname] : reductions) {
      auto run = [&, &loss = loss, r = r](const Tensor& x0) {
        Tensor x = x0.detach().requires_grad_();
        Tensor y = loss(x, r);
        Tensor w = arange(1, y.numel() + 1).to(kFloat32).reshape(y.sizes());
        return std::vector<Tensor>{y, autograd::grad({y.mul(w).sum()}, {x})[0]};
      };
      auto traced = jit([&](Tensor x) { return run(x); }, name + "_" + rname);
      const Tensor x = iota_sin({6}, 0.7).mul(Scalar(1.5));
      for (const auto& res : {run(x), traced(x)}) {
        check_values(res[0], name + " " + rname);
        check_values(res[1], name + " " + rname + " grad", 5e-6);
      }
    }
}

TEST_CASE("the losses' gradients equal finite differences (f64)") {
  const Tensor x0 = iota_sin({6}, 0.7).mul(Scalar(1.5)).to(kFloat64);
  for (const auto& [name, loss] : cases()) {
    CAPTURE(name);
    auto f = [&loss = loss](const Tensor& x) { return loss(x, Reduction::Sum); };
    check_close(autograd_grad(f, x0), numeric_grad(f, x0), 1e-6, 1e-7);
  }
}

TEST_CASE("the loss modules call their functions; bad shapes are refused") {
  const Tensor a = iota_sin({2, 3}, 0.7), b = iota_sin({2, 3}, 0.9), c = iota_sin({2, 3}, 1.7);
  CHECK(equal(nn::TripletMarginLoss(nn::TripletMarginLossOptions().margin(2.0))(a, b, c),
              F::triplet_margin_loss(a, b, c, nn::TripletMarginLossOptions().margin(2.0))));
  const Tensor y = tensor({1.0f, -1.0f});
  CHECK(equal(nn::CosineEmbeddingLoss()(a, b, y), F::cosine_embedding_loss(a, b, y)));
  CHECK(equal(nn::MarginRankingLoss()(a, b, ones({2, 3})),
              F::margin_ranking_loss(a, b, ones({2, 3}))));
  CHECK(equal(nn::SoftMarginLoss()(a, b.sign()), F::soft_margin_loss(a, b.sign())));
  CHECK(equal(nn::HingeEmbeddingLoss()(a, b.sign()), F::hinge_embedding_loss(a, b.sign())));
  CHECK(equal(nn::PoissonNLLLoss()(a, b.abs()), F::poisson_nll_loss(a, b.abs())));
  CHECK(equal(nn::MultiLabelSoftMarginLoss()(a, b.gt(Scalar(0)).to(kFloat32)),
              F::multilabel_soft_margin_loss(a, b.gt(Scalar(0)).to(kFloat32))));
  KILN_CHECK_ERROR(F::soft_margin_loss(a, y), "soft_margin_loss: expected input and target of the same shape");
  KILN_CHECK_ERROR(F::cosine_embedding_loss(a, iota_sin({3}), y), "cosine_embedding_loss: expected inputs");
  KILN_CHECK_ERROR(F::multilabel_soft_margin_loss(iota_sin({6}), iota_sin({6})),
                   "multilabel_soft_margin_loss: expected input [N, C]");
}

}  // namespace
}  // namespace kiln
