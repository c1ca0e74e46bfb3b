// Evaluation on a test loader, and of a saved checkpoint (`ringlet eval`); see train.h.
#include <algorithm>

#include "checkpoint/checkpoint.h"
#include "nn/loss.h"
#include "tensor/ops.h"
#include "trainer/finite_state.h"
#include "trainer/input_pipeline.h"
#include "trainer/recipe_parts.h"
#include "trainer/train.h"

namespace ringlet::trainer {
namespace {

// The sums of an evaluation: loss, examples, correct predictions (with and without test-time
// augmentation) and per class, in one f64 vector so that ranks all-reduce them at once.
class EvalTally {
 public:
  explicit EvalTally(std::int64_t classes)
      : classes_(classes), sums_(static_cast<std::size_t>(kPerClass + 2 * classes), 0.0) {}

  // A batch: the logits that decide, the single view's (equal without augmentation), labels.
  void add(const tensor::Tensor& logits, const tensor::Tensor& single_view,
           const tensor::Tensor& labels_on_host) {
    const tensor::Tensor labels = labels_on_host.to(logits.device());
    sums_[kLoss] += tensor::cross_entropy(logits, labels, tensor::Reduction::sum).item();
    const auto predicted = predictions(logits);
    const auto single = single_view.same(logits) ? predicted : predictions(single_view);
    const auto truth = labels_on_host.to_vector<std::int64_t>();
    for (std::size_t i = 0; i < truth.size(); ++i) {
      RINGLET_CHECK(truth[i] >= 0 && truth[i] < classes_, ValueError, "evaluate: label ", truth[i],
                    " is outside the dataset's ", classes_, " classes");
      const std::size_t at = slot(kPerClass + truth[i]);
      sums_[at] += 1;
      sums_[kExamples] += 1;
      sums_[kSingleCorrect] += single[i] == truth[i] ? 1 : 0;
      if (predicted[i] != truth[i]) continue;
      sums_[kCorrect] += 1;
      sums_[at + static_cast<std::size_t>(classes_)] += 1;
    }
  }

  void all_reduce(collectives::Communicator& comm) {
    comm.all_reduce(sums_.data(), sums_.data(), sums_.size(), core::DType::f64,
                    collectives::ReduceOp::sum)
        ->wait(core::Deadline::after(comm.timeout()));
  }

  EvalResult result() const {
    EvalResult r;
    r.examples = static_cast<std::int64_t>(sums_[kExamples]);
    const double n = std::max<double>(1.0, sums_[kExamples]);
    if (r.examples > 0) {
      r.loss = sums_[kLoss] / n;
      r.accuracy = sums_[kCorrect] / n;
      r.single_view_accuracy = sums_[kSingleCorrect] / n;
    }
    for (std::int64_t k = 0; k < classes_; ++k) {
      r.class_examples.push_back(static_cast<std::int64_t>(sums_[slot(kPerClass + k)]));
      r.class_correct.push_back(static_cast<std::int64_t>(sums_[slot(kPerClass + classes_ + k)]));
    }
    return r;
  }

 private:
  static std::vector<std::int64_t> predictions(const tensor::Tensor& logits) {
    return tensor::argmax(logits, 1).to(core::Device::cpu()).to_vector<std::int64_t>();
  }
  static std::size_t slot(std::int64_t i) { return static_cast<std::size_t>(i); }
  static constexpr std::size_t kLoss = 0, kExamples = 1, kCorrect = 2, kSingleCorrect = 3;
  static constexpr std::int64_t kPerClass = 4;  // then examples per class, then correct per class
  std::int64_t classes_;
  std::vector<double> sums_;
};

}  // namespace

EvalResult evaluate(nn::Module& model, data::DataLoader& loader, const EvalOptions& options) {
  RINGLET_CHECK(options.classes > 0, ValueError,
                "evaluate: EvalOptions::classes must be the dataset's number of classes, got ",
                options.classes);
  tensor::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  EvalTally tally(options.classes);
  const auto params = model.parameters();
  const core::Device device = params.empty() ? core::Device::cpu() : params.front().device();
  auto it = loader.begin_epoch(0);
  while (auto batch = it.next()) {
    const tensor::Tensor images = batch->images.to(device);
    const tensor::Tensor logits = model.forward(images);
    if (!options.mirror) {
      tally.add(logits, logits, batch->labels);
      continue;
    }
    const tensor::Tensor mirrored = model.forward(tensor::flip(images, -1));
    tally.add(tensor::mul(tensor::add(logits, mirrored), 0.5), logits, batch->labels);
  }
  model.train(was_training);
  if (options.comm != nullptr && options.comm->size() > 1) tally.all_reduce(*options.comm);
  return tally.result();
}

EvalResult evaluate_checkpoint(const std::string& path, TrainConfig c,
                               collectives::Communicator* comm) {
  c.fill_dataset_defaults();
  const int rank = comm != nullptr ? comm->rank() : 0, world = comm != nullptr ? comm->size() : 1;
  auto model = build_model(c);
  checkpoint::load_checkpoint(path, *model, nullptr);
  // As a resume: weights that hold NaN or an infinity would only print a NaN loss.
  const std::string bad = first_non_finite(*model);
  RINGLET_CHECK(bad.empty(), ValueError, "checkpoint ", path, " holds NaN or infinite values in ",
                bad,
                ": there is nothing to evaluate (the run had diverged, or the file is damaged)");
  const core::Device device = core::parse_device(c.device);
  if (!device.is_cpu()) model->to(device);
  return evaluate(*model, *make_test_loader(c, rank, world), eval_options(c, comm));
}

}  // namespace ringlet::trainer
