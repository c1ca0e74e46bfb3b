// YieldWindow: a waiter's yielding counted in the time it looked itself. Yields are fed to it
// with made-up times (count), so the rule is checked exactly; one real yield shows the wiring.
#include <doctest/doctest.h>

#include <chrono>

#include "transport/yield_window.h"

using namespace std::chrono_literals;
using ringlet::transport::YieldWindow;

namespace {

// Feeds yields of `each` (with no time between them) until the window closes or `most` are fed;
// returns how many it took.
int yields_until_closed(YieldWindow& w, YieldWindow::Clock::time_point& t,
                        YieldWindow::Clock::duration each, int most) {
  int n = 0;
  while (w.open() && n < most) {
    w.count(t, t + each);
    t += each;
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("yield window: alone on its core, it closes once it has looked for its time") {
  auto t = YieldWindow::Clock::time_point{} + 1s;
  YieldWindow w(40us, t);
  CHECK(w.open());
  CHECK(yields_until_closed(w, t, 1us, 1000) == 40);
  CHECK_FALSE(w.open());
}

TEST_CASE("yield window: other threads' turns on the core do not count as looking") {
  auto t = YieldWindow::Clock::time_point{} + 1s;
  YieldWindow w(40us, t);
  // Three neighbours' turns of 30 us each (90 us of wall time): still open.
  CHECK(yields_until_closed(w, t, 30us, 3) == 3);
  CHECK(w.open());
  // Then 40 quick yields of 1 us: the window closes on the last.
  CHECK(yields_until_closed(w, t, 1us, 1000) == 40);
  CHECK_FALSE(w.open());
}

TEST_CASE("yield window: it closes at five times its looking time in wall time regardless") {
  auto t = YieldWindow::Clock::time_point{} + 1s;
  YieldWindow w(40us, t);
  // Only others' turns (none of it looking): closed once 200 us have passed.
  CHECK(yields_until_closed(w, t, 25us, 1000) == 8);
  CHECK_FALSE(w.open());
  // A yield just short of kOthersRan counts as looking.
  auto u = YieldWindow::Clock::time_point{} + 1s;
  YieldWindow v(40us, u);
  CHECK(yields_until_closed(v, u, YieldWindow::kOthersRan - 1us, 1000) == 10);
}

TEST_CASE("yield window: a real yield moves it on") {
  YieldWindow w(0us);
  CHECK_FALSE(w.open());  // no looking time: closed from the start
  YieldWindow v(1s);
  v.yield();
  CHECK(v.open());
}
