// A host's ranks taking turns on its cores (model/core_turns.h): a rank takes a free core (its last
// one first) and holds it until it gives it up; with all held it queues, and the first queued gets
// the next core freed. The network's use of them: test_simulation.cpp ("a host's cores").
#include <doctest/doctest.h>

#include "core/error.h"
#include "model/core_turns.h"

using ringlet::model::CoreTurns;

TEST_CASE("core turns: ranks start round the cores and take their own while it is free") {
  CoreTurns turns(5, 2);
  CHECK(turns.core_of(0) == 0);
  CHECK(turns.core_of(3) == 1);
  CHECK(turns.core_of(4) == 0);
  CHECK_FALSE(turns.holds(0));
  CHECK(turns.take(0));
  CHECK(turns.holds(0));
  CHECK(turns.take(0));  // held already: still its
  CHECK(turns.core_of(0) == 0);
  // Rank 2 starts on core 0, which rank 0 holds: it takes the free one.
  CHECK(turns.take(2));
  CHECK(turns.core_of(2) == 1);
}

TEST_CASE("core turns: with every core held a rank queues; the first queued gets the next freed") {
  CoreTurns turns(4, 2);
  REQUIRE(turns.take(0));
  REQUIRE(turns.take(1));
  CHECK_FALSE(turns.take(3));
  CHECK_FALSE(turns.take(2));
  CHECK_FALSE(turns.holds(3));
  CHECK(turns.turns_passed() == 0);
  CHECK(turns.release(0) == 3);  // first come, first served: rank 3 gets rank 0's core
  CHECK(turns.turns_passed() == 1);
  CHECK(turns.holds(3));
  CHECK(turns.core_of(3) == 0);
  CHECK_FALSE(turns.holds(0));
  CHECK(turns.release(1) == 2);
  CHECK(turns.core_of(2) == 1);
  CHECK(turns.turns_passed() == 2);
  CHECK(turns.release(3) == -1);     // nobody queued: the core is free
  CHECK(turns.turns_passed() == 2);  // and passed to nobody
  CHECK(turns.take(0));              // and rank 0 takes its own again
  CHECK(turns.core_of(0) == 0);
  CHECK(turns.release(1) == -1);  // a rank that holds no core gives nothing up
  CHECK(turns.holds(2));
}

TEST_CASE("core turns: a rank queued twice, or one that does not exist, is an error") {
  CoreTurns turns(3, 1);
  REQUIRE(turns.take(0));
  CHECK_FALSE(turns.take(1));
  CHECK_THROWS_AS(turns.take(1), ringlet::core::Error);
  CHECK_THROWS_AS(turns.core_of(3), ringlet::core::Error);
  CHECK_THROWS_AS(CoreTurns(2, 0), ringlet::core::Error);
}
