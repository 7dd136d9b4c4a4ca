// Words in messages to people: a count with its noun in the right number
// ("1 rank", "3 ranks"), and the nearest of some names to a misspelt one
// ("did you mean --nnodes?", "did you mean ex2_reduce.py?").
#ifndef DRUN_RENDEZVOUS_BASE_WORDS_H_
#define DRUN_RENDEZVOUS_BASE_WORDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace drun {

// "1 rank", "0 ranks", "2 ranks"; `plural` for the nouns that do not take an
// 's' ("1 child", "2 children"). Every count drun prints with a noun goes
// through it.
std::string Count(int64_t n, absl::string_view singular, absl::string_view plural = "");
// The noun alone, for a count written elsewhere ("stderr (last 3 lines)").
std::string Noun(int64_t n, absl::string_view singular, absl::string_view plural = "");

// Levenshtein distance.
size_t EditDistance(absl::string_view a, absl::string_view b);

// The candidate nearest to `word` when it is a likely misspelling of it: at
// most `max_distance` edits away, and fewer edits than the word's length
// (so "x" is no typo of "y"); "" when none is. The first of equals wins.
std::string NearestName(absl::string_view word, const std::vector<std::string>& candidates,
                        size_t max_distance);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_WORDS_H_
