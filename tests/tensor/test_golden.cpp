// Replays tests/golden/ops.json, written by PyTorch 1.13 (tests/golden/make_golden.py): every
// op family's forward and backward, and one training step of a tiny FMNIST-style CNN, must
// match PyTorch's outputs and gradients. tests/golden/nonfinite.json (make_nonfinite_golden.py)
// holds the same ops with NaN and +-inf inputs: they must come out where PyTorch's do, on the
// CPU and on the emulated device. The JSON is committed, so this test never needs PyTorch. The
// C++ side lists every case it expects: a case missing from a file, or a case a file has that
// the C++ does not know, fails the test.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "golden_data.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::tensor;
using core::DType;
using json = nlohmann::json;

namespace {

// Every case make_golden.py writes. Adding a case there means adding its name here.
const std::vector<std::string> kExpectedCases = {
    "add_broadcast", "sub_broadcast", "mul_broadcast", "div_broadcast", "add_scalar", "sub_scalar",
    "mul_scalar", "div_scalar", "pow_tensor", "pow_scalar_int", "pow_scalar_frac", "neg", "exp",
    "log", "sqrt", "abs", "relu", "sigmoid", "tanh", "clamp", "where_broadcast",
    "maximum_broadcast", "minimum_broadcast",
    // reductions and softmax
    "sum_dims", "sum_keepdim", "sum_all", "mean_keepdim", "mean_all", "var_unbiased",
    "var_biased_keepdim", "var_all", "max_dim", "min_dim_keepdim", "max_full_ties", "min_full_ties",
    "argmax", "argmax_keepdim", "softmax_dim1", "softmax_last", "log_softmax_last",
    "log_softmax_dim0",
    // movement
    "reshape", "reshape_noncontig", "flatten", "permute", "transpose", "narrow", "slice_step",
    "select", "expand", "squeeze_unsqueeze", "cat_dim1", "cat_dim0",
    // matmul
    "matmul_2d", "matmul_batched_broadcast", "matmul_transposed", "matmul_vec_vec",
    "matmul_mat_vec", "matmul_vec_mat", "matmul_batched_vec", "matmul_vec_batched", "linear_bias",
    "linear_batched_nobias",
    // conv, pool, norm
    "conv2d_basic", "conv2d_stride2_pad1", "conv2d_dilation2_nobias", "conv2d_asymmetric",
    "conv2d_1x1", "max_pool2d_k2", "max_pool2d_k3_s2_p1", "max_pool2d_asym_overlap",
    "avg_pool2d_k2", "avg_pool2d_k3_s2_p1", "avg_pool2d_asym", "batch_norm_train_4d",
    "batch_norm_train_2d", "batch_norm_eval_4d",
    // losses and indexing
    "cross_entropy_mean", "cross_entropy_sum", "cross_entropy_none", "cross_entropy_smooth_mean",
    "cross_entropy_smooth_sum", "nll_loss_mean", "nll_loss_sum", "mse_loss_mean", "mse_loss_sum",
    "mse_loss_none", "gather_dim1", "gather_dim0", "index_select_dim0", "index_select_dim1"};

// Every op case make_nonfinite_golden.py writes.
const std::vector<std::string> kNonfiniteCases = {"relu_nonfinite",
                                                  "sigmoid_nonfinite",
                                                  "tanh_nonfinite",
                                                  "exp_nonfinite",
                                                  "clamp_nonfinite",
                                                  "maximum_nan",
                                                  "minimum_nan",
                                                  "mul_inf_zero",
                                                  "sum_nonfinite",
                                                  "mean_nonfinite",
                                                  "var_nonfinite",
                                                  "max_dim_nan",
                                                  "min_dim_nan",
                                                  "max_full_nan",
                                                  "argmax_nan",
                                                  "softmax_nonfinite",
                                                  "log_softmax_nonfinite",
                                                  "linear_nan_weight",
                                                  "matmul_inf",
                                                  "conv2d_nan_pixel",
                                                  "max_pool2d_nonfinite",
                                                  "avg_pool2d_nonfinite",
                                                  "batch_norm_nan_train",
                                                  "batch_norm_nan_eval",
                                                  "cross_entropy_nan_mean",
                                                  "cross_entropy_nan_none",
                                                  "cross_entropy_inf_mean",
                                                  "cross_entropy_inf_none",
                                                  "cross_entropy_minus_inf_mean",
                                                  "cross_entropy_minus_inf_none",
                                                  "mse_loss_inf"};

// allclose: |actual - expected| <= atol + rtol * |expected|, elementwise.
struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-4;
};

// The golden file is read once; every test case below shares it read-only.
const json& golden() {
  static const json data = ringlet::testing::load_golden("ops.json");
  return data;
}

const json& nonfinite_golden() {
  static const json data = ringlet::testing::load_golden("nonfinite.json");
  return data;
}

// Compares `actual` with the stored tensor; records one failure per mismatching tensor that
// names the first few differing elements (flat row-major index, expected, actual). NaN matches
// only NaN, and an infinity only the same infinity.
void check_close(const std::string& what, const Tensor& actual_anywhere, const json& expected,
                 Tolerance tol) {
  if (!actual_anywhere.defined()) {
    FAIL_CHECK(what << ": no tensor (expected shape " << expected.at("shape").dump() << ")");
    return;
  }
  const Tensor actual = actual_anywhere.cpu();
  const Shape shape = expected.at("shape").get<Shape>();
  if (actual.shape() != shape) {
    FAIL_CHECK(what << ": shape " << shape_str(actual.shape()) << ", expected "
                    << shape_str(shape));
    return;
  }
  const DType dtype = ringlet::testing::golden_dtype(expected);
  if (actual.dtype() != dtype) {
    FAIL_CHECK(what << ": dtype " << actual.dtype() << ", expected " << dtype);
    return;
  }
  const auto want = ringlet::testing::golden_values(expected);
  const auto got = actual.to_vector<double>();
  // Integer outputs (indices) must match exactly.
  const Tolerance t = dtype == DType::f32 ? tol : Tolerance{0, 0};
  std::ostringstream report;
  int bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
    const double diff = std::abs(got[i] - want[i]);
    const double allowed = t.atol + t.rtol * std::abs(want[i]);
    if (!(diff <= allowed)) {  // also catches NaN and infinities
      if (bad < 5) {
        report.precision(9);
        report << "\n  [" << i << "] expected " << want[i] << ", actual " << got[i] << " (|diff| "
               << diff << " > " << allowed << ")";
      }
      ++bad;
      worst = std::max(worst, diff);
    }
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << want.size()
                               << " elements differ (worst |diff| " << worst << ", atol " << t.atol
                               << ", rtol " << t.rtol << ")" << report.str());
}

Reduction parse_reduction(const json& p) {
  const auto r = p.at("reduction").get<std::string>();
  if (r == "mean") return Reduction::mean;
  if (r == "sum") return Reduction::sum;
  if (r == "none") return Reduction::none;
  throw std::runtime_error("golden file: unknown reduction " + r);
}

std::array<std::int64_t, 2> pair(const json& p, const char* key) {
  return p.at(key).get<std::array<std::int64_t, 2>>();
}

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
using OpFn = std::function<Outputs(const Inputs& in, const json& p)>;

// One entry per "op" kind in the file: runs the ringlet op on the case's inputs. The first
// output is the one backward starts from.
const std::map<std::string, OpFn>& op_table() {
  static const std::map<std::string, OpFn> table = {
      // elementwise
      {"add", [](const Inputs& in, const json&) { return Outputs{add(in[0], in[1])}; }},
      {"sub", [](const Inputs& in, const json&) { return Outputs{sub(in[0], in[1])}; }},
      {"mul", [](const Inputs& in, const json&) { return Outputs{mul(in[0], in[1])}; }},
      {"div", [](const Inputs& in, const json&) { return Outputs{div(in[0], in[1])}; }},
      {"add_scalar",
       [](const Inputs& in, const json& p) {
         return Outputs{add(in[0], p.at("scalar").get<double>())};
       }},
      {"sub_scalar",
       [](const Inputs& in, const json& p) {
         return Outputs{sub(in[0], p.at("scalar").get<double>())};
       }},
      {"mul_scalar",
       [](const Inputs& in, const json& p) {
         return Outputs{mul(in[0], p.at("scalar").get<double>())};
       }},
      {"div_scalar",
       [](const Inputs& in, const json& p) {
         return Outputs{div(in[0], p.at("scalar").get<double>())};
       }},
      {"pow", [](const Inputs& in, const json&) { return Outputs{pow(in[0], in[1])}; }},
      {"pow_scalar",
       [](const Inputs& in, const json& p) {
         return Outputs{pow(in[0], p.at("exponent").get<double>())};
       }},
      {"neg", [](const Inputs& in, const json&) { return Outputs{neg(in[0])}; }},
      {"exp", [](const Inputs& in, const json&) { return Outputs{exp(in[0])}; }},
      {"log", [](const Inputs& in, const json&) { return Outputs{log(in[0])}; }},
      {"sqrt", [](const Inputs& in, const json&) { return Outputs{sqrt(in[0])}; }},
      {"abs", [](const Inputs& in, const json&) { return Outputs{abs(in[0])}; }},
      {"relu", [](const Inputs& in, const json&) { return Outputs{relu(in[0])}; }},
      {"sigmoid", [](const Inputs& in, const json&) { return Outputs{sigmoid(in[0])}; }},
      {"tanh", [](const Inputs& in, const json&) { return Outputs{tanh(in[0])}; }},
      {"clamp",
       [](const Inputs& in, const json& p) {
         return Outputs{clamp(in[0], p.at("min").get<double>(), p.at("max").get<double>())};
       }},
      {"where", [](const Inputs& in, const json&) { return Outputs{where(in[0], in[1], in[2])}; }},
      {"maximum", [](const Inputs& in, const json&) { return Outputs{maximum(in[0], in[1])}; }},
      {"minimum", [](const Inputs& in, const json&) { return Outputs{minimum(in[0], in[1])}; }},
      // reductions
      {"sum",
       [](const Inputs& in, const json& p) {
         return Outputs{sum(in[0], p.at("dims").get<Shape>(), p.at("keepdim").get<bool>())};
       }},
      {"mean",
       [](const Inputs& in, const json& p) {
         return Outputs{mean(in[0], p.at("dims").get<Shape>(), p.at("keepdim").get<bool>())};
       }},
      {"var",
       [](const Inputs& in, const json& p) {
         return Outputs{var(in[0], p.at("dims").get<Shape>(), p.at("unbiased").get<bool>(),
                            p.at("keepdim").get<bool>())};
       }},
      {"max_dim",
       [](const Inputs& in, const json& p) {
         auto [values, indices] =
             max(in[0], p.at("dim").get<std::int64_t>(), p.at("keepdim").get<bool>());
         return Outputs{values, indices};
       }},
      {"min_dim",
       [](const Inputs& in, const json& p) {
         auto [values, indices] =
             min(in[0], p.at("dim").get<std::int64_t>(), p.at("keepdim").get<bool>());
         return Outputs{values, indices};
       }},
      {"max_full", [](const Inputs& in, const json&) { return Outputs{max(in[0])}; }},
      {"min_full", [](const Inputs& in, const json&) { return Outputs{min(in[0])}; }},
      {"argmax",
       [](const Inputs& in, const json& p) {
         return Outputs{
             argmax(in[0], p.at("dim").get<std::int64_t>(), p.at("keepdim").get<bool>())};
       }},
      {"softmax",
       [](const Inputs& in, const json& p) {
         return Outputs{softmax(in[0], p.at("dim").get<std::int64_t>())};
       }},
      {"log_softmax",
       [](const Inputs& in, const json& p) {
         return Outputs{log_softmax(in[0], p.at("dim").get<std::int64_t>())};
       }},
      // movement
      {"reshape",
       [](const Inputs& in, const json& p) {
         return Outputs{reshape(in[0], p.at("shape").get<Shape>())};
       }},
      {"transpose_reshape",
       [](const Inputs& in, const json& p) {
         const Tensor t =
             transpose(in[0], p.at("dim0").get<std::int64_t>(), p.at("dim1").get<std::int64_t>());
         return Outputs{reshape(t, p.at("shape").get<Shape>())};
       }},
      {"flatten",
       [](const Inputs& in, const json& p) {
         return Outputs{flatten(in[0], p.at("start_dim").get<std::int64_t>(),
                                p.at("end_dim").get<std::int64_t>())};
       }},
      {"permute", [](const Inputs& in,
                     const json& p) { return Outputs{permute(in[0], p.at("dims").get<Shape>())}; }},
      {"transpose",
       [](const Inputs& in, const json& p) {
         return Outputs{
             transpose(in[0], p.at("dim0").get<std::int64_t>(), p.at("dim1").get<std::int64_t>())};
       }},
      {"narrow",
       [](const Inputs& in, const json& p) {
         return Outputs{narrow(in[0], p.at("dim").get<std::int64_t>(),
                               p.at("start").get<std::int64_t>(),
                               p.at("length").get<std::int64_t>())};
       }},
      {"slice",
       [](const Inputs& in, const json& p) {
         return Outputs{slice(in[0], p.at("dim").get<std::int64_t>(),
                              p.at("start").get<std::int64_t>(), p.at("end").get<std::int64_t>(),
                              p.at("step").get<std::int64_t>())};
       }},
      {"select",
       [](const Inputs& in, const json& p) {
         return Outputs{
             select(in[0], p.at("dim").get<std::int64_t>(), p.at("index").get<std::int64_t>())};
       }},
      {"expand", [](const Inputs& in,
                    const json& p) { return Outputs{expand(in[0], p.at("shape").get<Shape>())}; }},
      {"squeeze_unsqueeze",
       [](const Inputs& in, const json& p) {
         const Tensor t = squeeze(in[0], p.at("squeeze").get<std::int64_t>());
         return Outputs{unsqueeze(t, p.at("unsqueeze").get<std::int64_t>())};
       }},
      {"cat", [](const Inputs& in,
                 const json& p) { return Outputs{cat(in, p.at("dim").get<std::int64_t>())}; }},
      // matmul
      {"matmul", [](const Inputs& in, const json&) { return Outputs{matmul(in[0], in[1])}; }},
      // Both operands transposed views: GEMM must take them as transposes.
      {"matmul_tt",
       [](const Inputs& in, const json&) {
         return Outputs{matmul(transpose(in[0], 0, 1), transpose(in[1], 0, 1))};
       }},
      {"linear",
       [](const Inputs& in, const json&) {
         return Outputs{linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor())};
       }},
      // conv, pool, norm
      {"conv2d",
       [](const Inputs& in, const json& p) {
         Conv2dOptions options;
         options.stride = pair(p, "stride");
         options.padding = pair(p, "padding");
         options.dilation = pair(p, "dilation");
         return Outputs{conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), options)};
       }},
      {"max_pool2d",
       [](const Inputs& in, const json& p) {
         const Pool2dOptions options{pair(p, "kernel"), pair(p, "stride"), pair(p, "padding")};
         auto [values, indices] = max_pool2d_with_indices(in[0], options);
         return Outputs{values, indices};
       }},
      {"avg_pool2d",
       [](const Inputs& in, const json& p) {
         const Pool2dOptions options{pair(p, "kernel"), pair(p, "stride"), pair(p, "padding")};
         return Outputs{avg_pool2d(in[0], options)};
       }},
      {"batch_norm",
       [](const Inputs& in, const json& p) {
         return Outputs{batch_norm(in[0], in[1], in[2], in[3], in[4], p.at("training").get<bool>(),
                                   p.at("momentum").get<double>(), p.at("eps").get<double>())};
       }},
      // losses and indexing
      {"cross_entropy",
       [](const Inputs& in, const json& p) {
         return Outputs{cross_entropy(in[0], in[1], parse_reduction(p),
                                      p.at("label_smoothing").get<double>())};
       }},
      {"nll_loss",
       [](const Inputs& in, const json& p) {
         return Outputs{nll_loss(in[0], in[1], parse_reduction(p))};
       }},
      {"mse_loss",
       [](const Inputs& in, const json& p) {
         return Outputs{mse_loss(in[0], in[1], parse_reduction(p))};
       }},
      {"gather",
       [](const Inputs& in, const json& p) {
         return Outputs{gather(in[0], p.at("dim").get<std::int64_t>(), in[1])};
       }},
      {"index_select",
       [](const Inputs& in, const json& p) {
         return Outputs{index_select(in[0], p.at("dim").get<std::int64_t>(), in[1])};
       }},
  };
  return table;
}

// Runs one case on `device`: forward, the stored upstream gradient backward, then compares
// outputs, input gradients and inputs updated in place.
void run_case(const json& c, core::Device device = core::Device::cpu()) {
  const auto name = c.at("name").get<std::string>();
  const auto op = c.at("op").get<std::string>();
  const auto it = op_table().find(op);
  if (it == op_table().end()) throw std::runtime_error("no ringlet op for kind " + op);
  // Every op, conv2d and batch_norm included, matches within the golden f32 tolerance (the
  // worst element in this file uses under 5% of it), so no case gets a looser one.
  const Tolerance tol;

  Inputs inputs;
  for (const json& j : c.at("inputs")) {
    Tensor t = ringlet::testing::golden_tensor(j).to(device);
    if (j.contains("grad")) t.requires_grad_();
    inputs.push_back(t);
  }
  const Outputs outputs = it->second(inputs, c.at("params"));
  const json& expected = c.at("outputs");
  if (outputs.size() != expected.size()) {
    throw std::runtime_error(std::to_string(outputs.size()) + " outputs, expected " +
                             std::to_string(expected.size()));
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    check_close(name + " output " + std::to_string(i), outputs[i], expected[i], tol);
  }

  if (c.contains("grad_output")) {
    outputs[0].backward(ringlet::testing::golden_tensor(c.at("grad_output")).to(device));
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const json& j = c.at("inputs")[i];
      if (j.contains("grad")) {
        check_close(name + " grad of input " + std::to_string(i), inputs[i].grad(), j.at("grad"),
                    tol);
      }
    }
  }
  for (const json& after : c.at("after")) {
    const auto i = after.at("input").get<std::size_t>();
    check_close(name + " input " + std::to_string(i) + " after the op", inputs.at(i), after, tol);
  }
}

// Every case of `file` is one this test can run, named once, and in `expected`; every name in
// `expected` is in the file.
void check_case_names(const json& file, const std::vector<std::string>& expected_names,
                      const std::string& file_name) {
  std::set<std::string> in_file;
  for (const json& c : file.at("cases")) {
    const auto name = c.at("name").get<std::string>();
    CHECK_MESSAGE(in_file.insert(name).second, "duplicate golden case " << name);
    CHECK_MESSAGE(op_table().count(c.at("op").get<std::string>()) == 1,
                  "golden case " << name << " has op " << c.at("op") << " this test cannot run");
  }
  const std::set<std::string> expected(expected_names.begin(), expected_names.end());
  for (const auto& name : expected) {
    CHECK_MESSAGE(in_file.count(name) == 1,
                  "golden case " << name << " missing from " << file_name);
  }
  for (const auto& name : in_file) {
    CHECK_MESSAGE(expected.count(name) == 1,
                  "golden case " << name << " of " << file_name << " is not in this test's list");
  }
}

// Runs every case of `file` on `device`; returns how many ran to the end.
int run_all_cases(const json& file, core::Device device) {
  int ran = 0;
  for (const json& c : file.at("cases")) {
    const auto name = c.at("name").get<std::string>();
    // One case's exception (an op that throws, a malformed entry) must not hide the others.
    try {
      run_case(c, device);
      ++ran;
    } catch (const std::exception& e) {
      FAIL_CHECK("golden case " << name << " threw: " << std::string(e.what()));
    }
  }
  return ran;
}

}  // namespace

TEST_CASE("golden: the files hold exactly the cases this test knows") {
  check_case_names(golden(), kExpectedCases, "ops.json");
  CHECK_MESSAGE(golden().contains("cnn"), "the tiny CNN case is missing from ops.json");
  check_case_names(nonfinite_golden(), kNonfiniteCases, "nonfinite.json");
}

TEST_CASE("golden: every op matches PyTorch forward and backward") {
  CHECK(run_all_cases(golden(), core::Device::cpu()) == static_cast<int>(kExpectedCases.size()));
}

// NaN and infinities travel through forward and backward as in PyTorch: a NaN weight behind a
// ReLU makes NaN logits, a NaN in a pooling window wins it, inf * 0 is NaN.
TEST_CASE("golden: NaN and infinities propagate as in PyTorch, on the CPU") {
  CHECK(run_all_cases(nonfinite_golden(), core::Device::cpu()) ==
        static_cast<int>(kNonfiniteCases.size()));
}

TEST_CASE("golden: NaN and infinities propagate as in PyTorch, on the emulated device") {
  CHECK(run_all_cases(nonfinite_golden(), core::Device::emu(0)) ==
        static_cast<int>(kNonfiniteCases.size()));
}

// The FMNIST-CNN of the peers' baseline shrunk to 4/8 channels and 16 hidden units, composed
// from the functional ops: one training-mode forward/backward on 8 images must give PyTorch's
// loss, every parameter gradient and the BatchNorm running statistics after the step.
TEST_CASE("golden: tiny CNN loss, parameter gradients and running stats match PyTorch") {
  REQUIRE_MESSAGE(golden().contains("cnn"), "the tiny CNN case is missing from ops.json");
  const json& cnn = golden().at("cnn");
  std::map<std::string, Tensor> param;
  for (const json& p : cnn.at("parameters")) {
    param[p.at("name").get<std::string>()] = ringlet::testing::golden_tensor(p).requires_grad_();
  }
  const auto get = [&](const std::string& name) {
    const auto it = param.find(name);
    if (it == param.end()) throw std::runtime_error("CNN parameter " + name + " missing");
    return it->second;
  };
  // PyTorch's BatchNorm2d starts from mean 0, variance 1.
  std::map<std::string, Tensor> stats = {{"bn1.running_mean", zeros({4})},
                                         {"bn1.running_var", ones({4})},
                                         {"bn2.running_mean", zeros({8})},
                                         {"bn2.running_var", ones({8})}};
  const double momentum = cnn.at("bn_momentum").get<double>();
  const double eps = cnn.at("bn_eps").get<double>();

  Conv2dOptions same;  // 3x3, stride 1, padding 1: keeps H and W
  same.padding = {1, 1};
  const Pool2dOptions pool2;  // kernel 2, stride 2
  const auto block = [&](const Tensor& x, const std::string& conv, const std::string& bn) {
    Tensor h = conv2d(x, get(conv + ".weight"), get(conv + ".bias"), same);
    h = batch_norm(h, stats.at(bn + ".running_mean"), stats.at(bn + ".running_var"),
                   get(bn + ".weight"), get(bn + ".bias"), /*training=*/true, momentum, eps);
    return max_pool2d(relu(h), pool2);
  };
  Tensor h = block(ringlet::testing::golden_tensor(cnn.at("input")), "conv1", "bn1");
  h = flatten(block(h, "conv2", "bn2"), 1);
  h = relu(linear(h, get("fc1.weight"), get("fc1.bias")));
  const Tensor logits = linear(h, get("fc2.weight"), get("fc2.bias"));
  const Tensor loss = cross_entropy(logits, ringlet::testing::golden_tensor(cnn.at("labels")));

  const double want_loss = cnn.at("loss").get<double>();
  CHECK_MESSAGE(std::abs(loss.item() - want_loss) <= 1e-5 + 1e-4 * std::abs(want_loss),
                "CNN loss " << loss.item() << ", expected " << want_loss);
  loss.backward();
  const Tolerance tol = {};
  int compared = 0;
  for (const json& g : cnn.at("gradients")) {
    const auto name = g.at("name").get<std::string>();
    check_close("CNN grad of " + name, get(name).grad(), g, tol);
    ++compared;
  }
  CHECK(compared == static_cast<int>(param.size()));
  for (const json& s : cnn.at("running_stats")) {
    const auto name = s.at("name").get<std::string>();
    check_close("CNN " + name + " after the step", stats.at(name), s, tol);
  }
}
