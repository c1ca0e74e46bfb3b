// Edit-distance suggestions for mistyped commands, options and config keys.
#include "trainer/usage_error.h"

#include <algorithm>
#include <cstddef>

namespace ringlet::trainer {

namespace {

// Levenshtein distance (insert, delete, substitute), one row at a time.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest(const std::string& word, const std::vector<std::string>& choices) {
  // A third of the length (at least 2) separates typos ("--ouptut") from different words. A
  // choice whose length alone differs by more is skipped unmeasured, so a long word costs
  // nothing (the distance is quadratic in the lengths).
  const auto limit = [](const std::string& choice) {
    return std::max<std::size_t>(2, choice.size() / 3);
  };
  std::string best;
  std::size_t best_distance = 0;
  for (const std::string& choice : choices) {
    const std::size_t longer = std::max(word.size(), choice.size());
    if (longer - std::min(word.size(), choice.size()) > limit(choice)) continue;
    const std::size_t d = edit_distance(word, choice);
    if (best.empty() || d < best_distance) {
      best = choice;
      best_distance = d;
    }
  }
  return !best.empty() && best_distance <= limit(best) ? best : std::string();
}

void throw_unknown(const std::string& context, const std::string& what, const std::string& word,
                   const std::vector<std::string>& choices) {
  std::string message = context.empty() ? "" : context + ": ";
  message += "unknown " + what + " '" + word + "'";
  const std::string hint = nearest(word, choices);
  if (!hint.empty()) message += " (did you mean '" + hint + "'?)";
  message += "; valid: ";
  for (std::size_t i = 0; i < choices.size(); ++i) message += (i ? ", " : "") + choices[i];
  throw UsageError(message);
}

}  // namespace ringlet::trainer
