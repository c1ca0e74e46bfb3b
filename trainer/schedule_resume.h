// How a resume puts the lr schedule where its checkpoint left it. A checkpoint carries the
// schedule's own state (PyTorch's scheduler.state_dict()) beside the optimizer's, whose lr is
// already the next epoch's: loading both continues the run bit for bit, whatever the schedule
// (chainable schedules must not be stepped again over the finished epochs). When the command
// changes the schedule itself (a fork with another lr or schedule, or a moved cosine horizon)
// or the checkpoint predates saved schedules, the command's schedule is rebuilt from its start
// and stepped over the finished epochs, as a run planned so from the start would stand.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "nn/lr_schedule.h"
#include "nn/optimizer.h"
#include "trainer/config.h"
#include "trainer/resume_check.h"

namespace ringlet::trainer {

// Whether `changes` alter the lr schedule: its lr, kind, step, gamma or warmup, or the epochs
// when they are a cosine's horizon.
bool changes_schedule(const TrainConfig& c, const std::vector<RecipeChange>& changes);

// After load_checkpoint(info) into `optimizer`: restores or rebuilds `schedule` (null for a
// constant lr; it may be replaced) for a run that finished info.epoch epochs. Returns what to
// tell the user ("" when the checkpoint's state was restored as it was).
std::string resume_schedule(const TrainConfig& c, const std::vector<RecipeChange>& changes,
                            const checkpoint::CheckpointInfo& info, nn::Optimizer& optimizer,
                            std::unique_ptr<nn::LRScheduler>& schedule);

}  // namespace ringlet::trainer
