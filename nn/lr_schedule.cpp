// LR schedules: PyTorch 1.13's get_lr (recursive, chainable) and _get_closed_form_lr, in
// double, with the same operation order so that the sequences equal PyTorch's.
#include "nn/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace ringlet::nn {

// --- LRScheduler --------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer)
    : optimizer_(optimizer), base_lr_(optimizer.initial_lr()) {}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  optimizer_.set_lr(get_lr());
  last_lr_ = optimizer_.lr();
}

void LRScheduler::step_to(std::int64_t epoch) {
  ++step_count_;
  last_epoch_ = epoch;
  optimizer_.set_lr(closed_form_lr());
  last_lr_ = optimizer_.lr();
}

NamedState LRScheduler::state_dict() const {
  NamedState out;
  out.set("last_epoch", static_cast<double>(last_epoch_));
  out.set("step_count", static_cast<double>(step_count_));
  out.set("base_lr", base_lr_);
  out.set("last_lr", last_lr_);
  return out;
}

namespace {

const char* const kSchedulerKeys[] = {"last_epoch", "step_count", "base_lr", "last_lr"};

// Rejects keys outside `allowed` (and those under `nested_prefix`, checked by the caller).
void check_keys(const NamedState& state, const std::vector<std::string>& allowed,
                const std::string& nested_prefix) {
  for (const auto& [key, value] : state) {
    const bool nested = !nested_prefix.empty() && key.rfind(nested_prefix, 0) == 0;
    RINGLET_CHECK(nested || std::find(allowed.begin(), allowed.end(), key) != allowed.end(),
                  ValueError, "LR scheduler load_state_dict: unexpected key '", key, "'");
  }
  for (const std::string& key : allowed) {
    RINGLET_CHECK(state.contains(key), ValueError, "LR scheduler load_state_dict: missing key '",
                  key, "'");
    state.scalar(key);  // throws when it holds a tensor
  }
}

}  // namespace

void LRScheduler::load_state_dict(const NamedState& state) {
  check_keys(state, {std::begin(kSchedulerKeys), std::end(kSchedulerKeys)}, "");
  last_epoch_ = static_cast<std::int64_t>(state.scalar("last_epoch"));
  step_count_ = static_cast<std::int64_t>(state.scalar("step_count"));
  base_lr_ = state.scalar("base_lr");
  last_lr_ = state.scalar("last_lr");
}

// --- StepLR -------------------------------------------------------------------------

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  RINGLET_CHECK(step_size > 0, ValueError, "StepLR: step_size must be positive, got ", step_size);
  RINGLET_CHECK(std::isfinite(gamma) && gamma >= 0, ValueError, "StepLR: invalid gamma ", gamma);
  initial_step();
}

double StepLR::get_lr() const {
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return optimizer_.lr();
  return optimizer_.lr() * gamma_;
}

double StepLR::closed_form_lr() const {
  return base_lr_ * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_));
}

// --- MultiStepLR --------------------------------------------------------------------

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  RINGLET_CHECK(std::isfinite(gamma) && gamma >= 0, ValueError, "MultiStepLR: invalid gamma ",
                gamma);
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

double MultiStepLR::get_lr() const {
  const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (hits == 0) return optimizer_.lr();
  return optimizer_.lr() * std::pow(gamma_, static_cast<double>(hits));
}

double MultiStepLR::closed_form_lr() const {
  const auto passed =
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  return base_lr_ * std::pow(gamma_, static_cast<double>(passed));
}

// --- LinearLR -----------------------------------------------------------------------

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   std::int64_t total_iters)
    : LRScheduler(optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  // PyTorch 1.13 accepts start_factor 0 and then divides by zero on the first step.
  RINGLET_CHECK(start_factor > 0 && start_factor <= 1, ValueError,
                "LinearLR: start_factor must be in (0, 1], got ", start_factor);
  RINGLET_CHECK(end_factor >= 0 && end_factor <= 1, ValueError,
                "LinearLR: end_factor must be in [0, 1], got ", end_factor);
  RINGLET_CHECK(total_iters > 0, ValueError, "LinearLR: total_iters must be positive, got ",
                total_iters);
  initial_step();
}

double LinearLR::get_lr() const {
  const double lr = optimizer_.lr();
  if (last_epoch_ == 0) return lr * start_factor_;
  if (last_epoch_ > total_iters_) return lr;
  const double span = end_factor_ - start_factor_;
  return lr * (1. + span / (static_cast<double>(total_iters_) * start_factor_ +
                            static_cast<double>(last_epoch_ - 1) * span));
}

double LinearLR::closed_form_lr() const {
  return base_lr_ * (start_factor_ + (end_factor_ - start_factor_) *
                                         static_cast<double>(std::min(total_iters_, last_epoch_)) /
                                         static_cast<double>(total_iters_));
}

// --- CosineAnnealingLR --------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  RINGLET_CHECK(t_max > 0, ValueError, "CosineAnnealingLR: t_max must be positive, got ", t_max);
  RINGLET_CHECK(std::isfinite(eta_min) && eta_min >= 0, ValueError,
                "CosineAnnealingLR: invalid eta_min ", eta_min);
  initial_step();
}

double CosineAnnealingLR::get_lr() const {
  constexpr double pi = std::numbers::pi;
  const double lr = optimizer_.lr();
  const double t = static_cast<double>(last_epoch_);
  const double t_max = static_cast<double>(t_max_);
  if (last_epoch_ == 0) return lr;
  if (step_count_ == 1 && last_epoch_ > 0) {
    return eta_min_ + (base_lr_ - eta_min_) * (1 + std::cos(t * pi / t_max)) / 2;
  }
  if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0) {
    return lr + (base_lr_ - eta_min_) * (1 - std::cos(pi / t_max)) / 2;
  }
  return (1 + std::cos(pi * t / t_max)) / (1 + std::cos(pi * (t - 1) / t_max)) * (lr - eta_min_) +
         eta_min_;
}

double CosineAnnealingLR::closed_form_lr() const {
  constexpr double pi = std::numbers::pi;
  return eta_min_ +
         (base_lr_ - eta_min_) *
             (1 + std::cos(pi * static_cast<double>(last_epoch_) / static_cast<double>(t_max_))) /
             2;
}

// --- SequentialLR -------------------------------------------------------------------

SequentialLR::SequentialLR(Optimizer& optimizer,
                           std::vector<std::unique_ptr<LRScheduler>> schedulers,
                           std::vector<std::int64_t> milestones)
    : LRScheduler(optimizer),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  RINGLET_CHECK(!schedulers_.empty(), ValueError, "SequentialLR: no schedulers");
  for (std::size_t i = 0; i < schedulers_.size(); ++i) {
    RINGLET_CHECK(schedulers_[i] != nullptr && &schedulers_[i]->optimizer() == &optimizer,
                  ValueError, "SequentialLR: scheduler ", i,
                  " is null or drives a different optimizer");
  }
  RINGLET_CHECK(milestones_.size() + 1 == schedulers_.size(), ValueError,
                "SequentialLR: expects one milestone fewer than schedulers, got ",
                schedulers_.size(), " schedulers and ", milestones_.size(), " milestones");
  RINGLET_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()), ValueError,
                "SequentialLR: milestones must be increasing");
  // As PyTorch: undo the children's initial steps, then take the first one's again.
  last_epoch_ = 0;
  optimizer_.set_lr(optimizer_.initial_lr());
  for (auto& s : schedulers_) s->last_epoch_ -= 1;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  ++last_epoch_;
  const std::size_t idx = static_cast<std::size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_) {
    s.step_to(0);
  } else {
    s.step();
  }
  last_lr_ = s.get_last_lr();
}

NamedState SequentialLR::state_dict() const {
  NamedState out;
  out.set("last_epoch", static_cast<double>(last_epoch_));
  out.set("last_lr", last_lr_);
  for (std::size_t i = 0; i < schedulers_.size(); ++i) {
    for (const auto& [key, value] : schedulers_[i]->state_dict()) {
      out.set("schedulers." + std::to_string(i) + "." + key, value);
    }
  }
  return out;
}

void SequentialLR::load_state_dict(const NamedState& state) {
  check_keys(state, {"last_epoch", "last_lr"}, "schedulers.");
  std::vector<NamedState> children(schedulers_.size());
  for (const auto& [key, value] : state) {
    if (key.rfind("schedulers.", 0) != 0) continue;
    const std::string rest = key.substr(std::string("schedulers.").size());
    const std::size_t dot = rest.find('.');
    const std::string index = rest.substr(0, dot);
    RINGLET_CHECK(dot != std::string::npos && !index.empty() && index.size() < 10 &&
                      index.find_first_not_of("0123456789") == std::string::npos &&
                      std::stoul(index) < schedulers_.size(),
                  ValueError, "LR scheduler load_state_dict: unexpected key '", key, "'");
    children[std::stoul(index)].set(rest.substr(dot + 1), value);
  }
  // Check every child before changing any.
  for (std::size_t i = 0; i < schedulers_.size(); ++i) {
    try {
      check_keys(children[i], {std::begin(kSchedulerKeys), std::end(kSchedulerKeys)}, "");
    } catch (const core::ValueError& e) {
      RINGLET_THROW(ValueError, "SequentialLR scheduler ", i, ": ", e.what());
    }
  }
  for (std::size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(children[i]);
  last_epoch_ = static_cast<std::int64_t>(state.scalar("last_epoch"));
  last_lr_ = state.scalar("last_lr");
}

std::unique_ptr<LRScheduler> make_warmup_cosine(Optimizer& optimizer, std::int64_t warmup_iters,
                                                std::int64_t total_iters, double start_factor,
                                                double eta_min) {
  RINGLET_CHECK(warmup_iters >= 0 && warmup_iters < total_iters, ValueError,
                "make_warmup_cosine: need 0 <= warmup_iters < total_iters, got warmup_iters ",
                warmup_iters, " and total_iters ", total_iters);
  if (warmup_iters == 0) {
    return std::make_unique<CosineAnnealingLR>(optimizer, total_iters, eta_min);
  }
  std::vector<std::unique_ptr<LRScheduler>> parts;
  parts.push_back(std::make_unique<LinearLR>(optimizer, start_factor, 1.0, warmup_iters));
  parts.push_back(
      std::make_unique<CosineAnnealingLR>(optimizer, total_iters - warmup_iters, eta_min));
  return std::make_unique<SequentialLR>(optimizer, std::move(parts),
                                        std::vector<std::int64_t>{warmup_iters});
}

}  // namespace ringlet::nn
