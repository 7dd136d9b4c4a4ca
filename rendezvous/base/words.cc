#include "rendezvous/base/words.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace drun {

std::string Noun(int64_t n, absl::string_view singular, absl::string_view plural) {
  if (n == 1) return std::string(singular);
  return plural.empty() ? absl::StrCat(singular, "s") : std::string(plural);
}

std::string Count(int64_t n, absl::string_view singular, absl::string_view plural) {
  return absl::StrCat(n, " ", Noun(n, singular, plural));
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

std::string NearestName(absl::string_view word, const std::vector<std::string>& candidates,
                        size_t max_distance) {
  std::string best;
  size_t best_d = std::min(max_distance + 1, word.size());
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace drun
