// Learning-rate schedules with PyTorch 1.13's semantics (torch.optim.lr_scheduler): StepLR,
// MultiStepLR, LinearLR (linear warmup), CosineAnnealingLR and SequentialLR, plus
// make_warmup_cosine. They are chainable as in PyTorch: step() reads the optimizer's current
// lr and writes the next one, with PyTorch's recursive formulas, so values match its own.
// Construction performs PyTorch's initial step (last_epoch 0); call step() after each
// optimizer.step(). A schedule keeps a reference to its optimizer, which must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/optimizer.h"

namespace ringlet::nn {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one epoch (or iteration) and sets the optimizer's lr.
  virtual void step();
  // The lr the last step() (or the constructor) set.
  double get_last_lr() const { return last_lr_; }
  std::int64_t last_epoch() const { return last_epoch_; }
  Optimizer& optimizer() const { return optimizer_; }

  // Scalars "last_epoch", "step_count", "base_lr", "last_lr" (SequentialLR adds its
  // children's under "schedulers.<i>."). Load it after the optimizer's own state, which
  // carries the current lr that the next step() starts from.
  virtual NamedState state_dict() const;
  // Throws ValueError naming a missing or unexpected key.
  virtual void load_state_dict(const NamedState& state);

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // PyTorch's _initial_step: derived constructors call it last.
  void initial_step();
  // The lr for last_epoch_ from the optimizer's current lr (PyTorch's get_lr).
  virtual double get_lr() const = 0;
  // The lr for last_epoch_ from base_lr_ alone (PyTorch's _get_closed_form_lr).
  virtual double closed_form_lr() const = 0;

  Optimizer& optimizer_;
  double base_lr_;  // the optimizer's initial_lr
  std::int64_t last_epoch_ = -1;
  std::int64_t step_count_ = 0;  // steps taken, the initial one included
  double last_lr_ = 0;

 private:
  friend class SequentialLR;
  // PyTorch's step(epoch): jumps to `epoch` using the closed form.
  void step_to(std::int64_t epoch);
};

// lr *= gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);

 private:
  double get_lr() const override;
  double closed_form_lr() const override;
  std::int64_t step_size_;
  double gamma_;
};

// lr *= gamma at each milestone (a milestone listed k times multiplies by gamma^k).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma = 0.1);

 private:
  double get_lr() const override;
  double closed_form_lr() const override;
  std::vector<std::int64_t> milestones_;  // sorted
  double gamma_;
};

// Linear warmup: the factor goes from start_factor to end_factor over total_iters epochs,
// then stays (PyTorch's LinearLR; start_factor in (0, 1], end_factor in [0, 1]).
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           std::int64_t total_iters = 5);

 private:
  double get_lr() const override;
  double closed_form_lr() const override;
  double start_factor_, end_factor_;
  std::int64_t total_iters_;
};

// Cosine from the base lr to eta_min over t_max epochs (PyTorch's recursive form; past t_max
// it rises again, as PyTorch's does).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min = 0);

 private:
  double get_lr() const override;
  double closed_form_lr() const override;
  std::int64_t t_max_;
  double eta_min_;
};

// Runs schedulers[0] until milestones[0], then schedulers[1] (restarted at its epoch 0), ...
// The schedulers must drive the same optimizer; there is one milestone fewer than schedulers.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::unique_ptr<LRScheduler>> schedulers,
               std::vector<std::int64_t> milestones);

  void step() override;
  NamedState state_dict() const override;
  void load_state_dict(const NamedState& state) override;

 private:
  double get_lr() const override { return optimizer_.lr(); }
  double closed_form_lr() const override { return optimizer_.lr(); }
  std::vector<std::unique_ptr<LRScheduler>> schedulers_;
  std::vector<std::int64_t> milestones_;
};

// Linear warmup from start_factor * lr to lr over warmup_iters steps, then cosine annealing
// to eta_min at total_iters: SequentialLR(LinearLR, CosineAnnealingLR, {warmup_iters}), or
// the cosine alone when warmup_iters is 0.
std::unique_ptr<LRScheduler> make_warmup_cosine(Optimizer& optimizer, std::int64_t warmup_iters,
                                                std::int64_t total_iters, double start_factor = 0.1,
                                                double eta_min = 0);

}  // namespace ringlet::nn
