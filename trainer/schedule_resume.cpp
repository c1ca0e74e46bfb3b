// Restoring or rebuilding a resumed run's lr schedule; see schedule_resume.h.
#include "trainer/schedule_resume.h"

#include <algorithm>
#include <iterator>

#include "core/error.h"
#include "trainer/recipe_parts.h"

namespace ringlet::trainer {
namespace {

// A cosine's horizon that moved: said as it was before the general message existed.
const RecipeChange* cosine_horizon_change(const TrainConfig& c,
                                          const std::vector<RecipeChange>& changes) {
  if (c.schedule != "cosine") return nullptr;
  for (const RecipeChange& change : changes) {
    if (change.key == "epochs") return &change;
  }
  return nullptr;
}

// The command's schedule from its start (the lr the command gives), stepped over `epochs`.
void rebuild(const TrainConfig& c, std::int64_t epochs, nn::Optimizer& optimizer,
             std::unique_ptr<nn::LRScheduler>& schedule) {
  optimizer.reset_lr(c.lr);
  schedule = make_schedule(c, optimizer);
  for (std::int64_t e = 0; e < epochs && schedule; ++e) schedule->step();
}

// The changes of the schedule's own keys.
std::vector<RecipeChange> schedule_changes(const std::vector<RecipeChange>& changes) {
  std::vector<RecipeChange> found;
  std::copy_if(changes.begin(), changes.end(), std::back_inserter(found),
               [](const RecipeChange& change) { return schedule_key(change.key); });
  return found;
}

}  // namespace

bool changes_schedule(const TrainConfig& c, const std::vector<RecipeChange>& changes) {
  return cosine_horizon_change(c, changes) != nullptr || !schedule_changes(changes).empty();
}

std::string resume_schedule(const TrainConfig& c, const std::vector<RecipeChange>& changes,
                            const checkpoint::CheckpointInfo& info, nn::Optimizer& optimizer,
                            std::unique_ptr<nn::LRScheduler>& schedule) {
  const std::string epochs = core::str("epochs ", info.epoch + 1, "-", c.epochs);
  if (const RecipeChange* change = cosine_horizon_change(c, changes)) {
    rebuild(c, info.epoch, optimizer, schedule);
    return core::str("schedule: the cosine horizon moves from ", change->before.dump(), " to ",
                     change->after.dump(), " epochs; ", epochs, " follow the ",
                     change->after.dump(), "-epoch curve, from lr ", optimizer.lr());
  }
  if (changes_schedule(c, changes)) {
    rebuild(c, info.epoch, optimizer, schedule);
    return core::str("schedule: ", describe(schedule_changes(changes)), " (a fork); ", epochs,
                     " follow the schedule as a run started so would, from lr ", optimizer.lr());
  }
  if (schedule == nullptr) return "";
  if (info.schedule.empty()) {
    rebuild(c, info.epoch, optimizer, schedule);
    return core::str("schedule: the checkpoint predates saved schedule state; rebuilt over its ",
                     info.epoch, " epoch(s), lr ", optimizer.lr());
  }
  try {
    schedule->load_state_dict(info.schedule);
  } catch (const core::Error& e) {  // another schedule's keys: a recipe the checks let through
    RINGLET_THROW(ValueError, "the checkpoint's lr schedule state does not fit the ", c.schedule,
                  " schedule: ", e.what());
  }
  return "";
}

}  // namespace ringlet::trainer
