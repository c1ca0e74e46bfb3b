// Exact resume through the `ringlet` binary, 2 ranks on a small slice of Fashion-MNIST: every lr
// schedule (none, step, cosine, warmup alone, warmup + cosine, warmup + step) resumed after a
// SIGKILL of the job, by a launcher restart (--max_restarts) and with --resume --epochs N ends
// with the uninterrupted run's tensors bit for bit. (Its own test: 30 jobs of the binary, which
// the ASan run leaves out; scripts/sanitize.sh.)
#include <doctest/doctest.h>
#include <signal.h>

#include <string>

#include "temp_dir.h"
#include "training_runs.h"

using namespace ringlet::testing;

namespace {

// A schedule, and the epochs a run planned before `--resume --epochs 3`. A cosine's horizon is
// the epochs: planned for 1 it trains its first epoch as a 3-epoch run would (cos 0 = 1), so the
// extended run equals the 3-epoch one bit for bit; with a warmup (which needs 2 epochs planned)
// the second epoch already followed the shorter curve, and only the last epoch's lr is the
// 3-epoch run's.
struct Schedule {
  std::string name;
  std::string args;
  int planned = 2;
  bool same_as_three = true;
};

const Schedule kSchedules[] = {
    {"none", ""},
    {"step", "--schedule step --step_size 1 --gamma 0.5"},
    {"cosine", "--schedule cosine", 1},
    {"warmup alone", "--warmup_epochs 1"},
    {"warmup + cosine", "--schedule cosine --warmup_epochs 1", 2, false},
    {"warmup + step", "--schedule step --step_size 1 --gamma 0.5 --warmup_epochs 1"},
};

}  // namespace

TEST_CASE("every lr schedule resumes bit for bit: after a kill, a restart and --epochs N") {
  for (const Schedule& schedule : kSchedules) {
    CAPTURE(schedule.name);
    const std::string recipe = std::string(kSmall) + " --lr 0.05 " + schedule.args;
    TempDir whole("ringlet_resume_whole");
    REQUIRE(train(recipe + " --epochs 3 --out " + quoted(whole.path)).status == 0);

    // The job killed (SIGKILL to the launcher, whose workers die with it) once epoch 1's
    // checkpoint is written, then --resume.
    TempDir killed("ringlet_resume_killed");
    FILE* run = start_train(recipe + " --epochs 3 --out " + quoted(killed.path));
    REQUIRE(wait_for_lines(killed.path / "metrics.jsonl", 1));
    const pid_t launcher = find_ringlet(killed.path.string(), -1);
    REQUIRE(launcher > 0);
    ::kill(launcher, SIGKILL);
    ringlet::testing::finish_command(run);
    REQUIRE(wait_for_workers_gone(killed.path.string(), 2));
    CommandResult result = train("--resume --out " + quoted(killed.path));
    INFO(result.output);
    REQUIRE(result.status == 0);
    check_same_run(killed.path, whole.path);

    // A worker killed in epoch 2: the launcher restarts the job, which resumes.
    TempDir restarted("ringlet_resume_restart");
    run = start_train(recipe + " --epochs 3 --max_restarts 1 --out " + quoted(restarted.path));
    REQUIRE(wait_for_lines(restarted.path / "metrics.jsonl", 1));
    const pid_t rank1 = find_ringlet(restarted.path.string(), 1);
    REQUIRE(rank1 > 0);
    ::kill(rank1, SIGKILL);
    result = ringlet::testing::finish_command(run);
    INFO(result.output);
    REQUIRE(result.status == 0);
    check_same_run(restarted.path, whole.path);

    // Fewer epochs planned, then --resume --epochs 3.
    TempDir extended("ringlet_resume_epochs");
    REQUIRE(train(recipe + " --epochs " + std::to_string(schedule.planned) + " --out " +
                  quoted(extended.path))
                .status == 0);
    result = train("--resume --epochs 3 --out " + quoted(extended.path));
    INFO(result.output);
    REQUIRE(result.status == 0);
    if (schedule.same_as_three) {
      check_same_run(extended.path, whole.path);
    } else {
      const auto longer = read_lines(extended.path / "metrics.jsonl");
      const auto planned = read_lines(whole.path / "metrics.jsonl");
      REQUIRE(longer.size() == 3);
      CHECK(longer[2]["lr"] == planned[2]["lr"]);
    }
  }
}
