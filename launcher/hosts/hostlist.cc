#include "launcher/hosts/hostlist.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "rendezvous/base/quote.h"

namespace drun {
namespace {

absl::Status EntryError(absl::string_view entry, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("hostlist entry ", QuoteText(entry), ": ", problem));
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool IsSeparator(char c) { return c == ',' || IsSpace(c); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool AllDigits(absl::string_view s) {
  for (char c : s) {
    if (!IsDigit(c)) return false;
  }
  return !s.empty();
}

// Adds with saturation at `cap + 1`, so "more than cap" survives any number of additions.
std::size_t SaturatingAdd(std::size_t a, std::size_t b, std::size_t cap) {
  if (a > cap || b > cap || a + b > cap) return cap + 1;
  return a + b;
}
std::size_t SaturatingMul(std::size_t a, std::size_t b, std::size_t cap) {
  if (a == 0 || b == 0) return 0;
  if (a > cap || b > cap || a > (cap + 1) / b) return cap + 1;
  return a * b > cap ? cap + 1 : a * b;
}

std::size_t DecimalDigits(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

// Parses an unsigned decimal with no sign, spaces or base prefix; false if empty, not all
// digits, or above `max`.
bool ParseDecimal(absl::string_view s, std::uint64_t max, std::uint64_t* out) {
  if (s.empty()) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (!IsDigit(c)) return false;
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

struct Range {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::size_t width = 0;  // zero-pad to this many digits (Slurm: the length of lo as written)
};

struct Group {
  std::vector<Range> ranges;
  std::size_t count = 0;       // hosts this group contributes, saturated at max_hosts + 1
  std::size_t max_digits = 0;  // widest number this group can print
};

// One entry: literals[0] groups[0] literals[1] ... groups[n-1] literals[n].
struct Entry {
  absl::string_view text;  // the whole entry, for messages
  std::vector<absl::string_view> literals;
  std::vector<Group> groups;
  std::size_t count = 0;  // saturated at max_hosts + 1
};

std::size_t MaxNameLength(const Entry& e) {
  std::size_t n = 0;
  for (absl::string_view l : e.literals) n += l.size();
  for (const Group& g : e.groups) n += g.max_digits;
  return n;
}

absl::StatusOr<Group> ParseGroup(absl::string_view entry, absl::string_view body,
                                 std::size_t max_hosts) {
  Group group;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = body.find(',', start);
    const absl::string_view item = body.substr(
        start, comma == absl::string_view::npos ? absl::string_view::npos : comma - start);
    if (item.empty()) return EntryError(entry, "empty range inside '[...]'");
    const std::size_t dash = item.find('-');
    const absl::string_view lo_text = item.substr(0, dash);
    const absl::string_view hi_text =
        dash == absl::string_view::npos ? lo_text : item.substr(dash + 1);
    if (!AllDigits(lo_text) || !AllDigits(hi_text)) {
      return EntryError(entry, absl::StrCat("invalid range ", QuoteText(item),
                                            " (expected N or N-M, decimal digits only)"));
    }
    Range r;
    if (!ParseDecimal(lo_text, std::numeric_limits<std::uint64_t>::max(), &r.lo) ||
        !ParseDecimal(hi_text, std::numeric_limits<std::uint64_t>::max(), &r.hi)) {
      return EntryError(entry, absl::StrCat("number too large in range ", QuoteText(item)));
    }
    if (r.lo > r.hi) {
      return EntryError(entry, absl::StrCat("reversed range ", QuoteText(item),
                                            " (the low bound is above the high bound)"));
    }
    r.width = lo_text.size();
    const std::uint64_t span = r.hi - r.lo;  // count - 1; cannot overflow
    const std::size_t count =
        span >= max_hosts ? max_hosts + 1 : static_cast<std::size_t>(span) + 1;
    group.count = SaturatingAdd(group.count, count, max_hosts);
    group.max_digits = std::max({group.max_digits, r.width, DecimalDigits(r.hi)});
    group.ranges.push_back(r);
    if (comma == absl::string_view::npos) break;
    start = comma + 1;
  }
  return group;
}

absl::StatusOr<Entry> ParseEntry(absl::string_view text, std::size_t max_hosts) {
  Entry e;
  e.text = text;
  std::size_t literal_start = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ']') return EntryError(text, "']' without a matching '['");
    if (c == '[') {
      const std::size_t close = text.find_first_of("[]", i + 1);
      if (close == absl::string_view::npos || text[close] != ']') {
        return EntryError(text, close == absl::string_view::npos
                                    ? "missing ']'"
                                    : "'[' inside '[...]' (brackets do not nest)");
      }
      e.literals.push_back(text.substr(literal_start, i - literal_start));
      absl::StatusOr<Group> g = ParseGroup(text, text.substr(i + 1, close - i - 1), max_hosts);
      if (!g.ok()) return g.status();
      e.groups.push_back(*std::move(g));
      i = close + 1;
      literal_start = i;
      continue;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7e) {
      return EntryError(
          text, absl::StrCat("invalid character '", absl::CHexEscape(absl::string_view(&c, 1)),
                             "' (host names are printable ASCII)"));
    }
    ++i;
  }
  e.literals.push_back(text.substr(literal_start));
  e.count = 1;
  for (const Group& g : e.groups) e.count = SaturatingMul(e.count, g.count, max_hosts);
  if (MaxNameLength(e) > kMaxHostNameLength) {
    return EntryError(text, absl::StrCat("expands to host names longer than ", kMaxHostNameLength,
                                         " characters"));
  }
  return e;
}

// Splits at separators outside brackets and parses every entry; the total is checked
// against max_hosts before anything is expanded.
absl::StatusOr<std::vector<Entry>> ParseList(absl::string_view list, std::size_t max_hosts,
                                             std::size_t* total) {
  // The saturating arithmetic needs headroom above the cap.
  max_hosts = std::min(max_hosts, std::numeric_limits<std::size_t>::max() / 4);
  std::vector<Entry> entries;
  *total = 0;
  std::size_t i = 0;
  while (i < list.size()) {
    if (IsSeparator(list[i])) {
      ++i;
      continue;
    }
    // An entry runs to the next separator outside brackets; a ']' that closes nothing, or a
    // '[' that is never closed, is left for ParseEntry to name.
    const std::size_t start = i;
    bool in_brackets = false;
    while (i < list.size() && (in_brackets || !IsSeparator(list[i]))) {
      if (list[i] == '[') in_brackets = true;
      if (list[i] == ']') in_brackets = false;
      ++i;
    }
    absl::StatusOr<Entry> e = ParseEntry(list.substr(start, i - start), max_hosts);
    if (!e.ok()) return e.status();
    *total = SaturatingAdd(*total, e->count, max_hosts);
    if (*total > max_hosts) {
      return absl::InvalidArgumentError(absl::StrCat("hostlist expands to more than ", max_hosts,
                                                     " hosts (at entry ", QuoteText(e->text), ")"));
    }
    entries.push_back(*std::move(e));
  }
  return entries;
}

void AppendPadded(std::string* out, std::uint64_t v, std::size_t width) {
  const std::string digits = absl::StrCat(v);
  if (digits.size() < width) out->append(width - digits.size(), '0');
  out->append(digits);
}

// The host of `e` whose group g sits at value[g] of its range range_index[g].
std::string BuildName(const Entry& e, const std::vector<std::size_t>& range_index,
                      const std::vector<std::uint64_t>& value) {
  std::string name(e.literals[0]);
  for (std::size_t g = 0; g < e.groups.size(); ++g) {
    AppendPadded(&name, value[g], e.groups[g].ranges[range_index[g]].width);
    absl::StrAppend(&name, e.literals[g + 1]);
  }
  return name;
}

// Appends every host of `e` to `out`. Iterative (an odometer whose rightmost group turns
// fastest), so an entry with thousands of groups cannot overflow the stack.
void ExpandEntry(const Entry& e, std::vector<std::string>* out) {
  const std::size_t n = e.groups.size();
  std::vector<std::size_t> range_index(n, 0);
  std::vector<std::uint64_t> value(n);
  for (std::size_t g = 0; g < n; ++g) value[g] = e.groups[g].ranges[0].lo;
  while (true) {
    out->push_back(BuildName(e, range_index, value));
    std::size_t g = n;
    while (g > 0) {
      --g;
      const std::vector<Range>& ranges = e.groups[g].ranges;
      if (value[g] < ranges[range_index[g]].hi) {
        ++value[g];
        break;
      }
      if (range_index[g] + 1 < ranges.size()) {
        value[g] = ranges[++range_index[g]].lo;
        break;
      }
      range_index[g] = 0;
      value[g] = ranges[0].lo;
      if (g == 0) return;
    }
    if (n == 0) return;
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view list_in,
                                                        std::size_t max_hosts) {
  const absl::string_view list(list_in.data(), list_in.size());
  std::size_t total = 0;
  absl::StatusOr<std::vector<Entry>> entries = ParseList(list, max_hosts, &total);
  if (!entries.ok()) return entries.status();
  std::vector<std::string> hosts;
  hosts.reserve(total);
  for (const Entry& e : *entries) ExpandEntry(e, &hosts);
  return hosts;
}

absl::StatusOr<std::string> FirstHost(std::string_view list_in, std::size_t max_hosts) {
  const absl::string_view list(list_in.data(), list_in.size());
  std::size_t total = 0;
  absl::StatusOr<std::vector<Entry>> entries = ParseList(list, max_hosts, &total);
  if (!entries.ok()) return entries.status();
  if (entries->empty()) return absl::InvalidArgumentError("hostlist is empty");
  const Entry& e = entries->front();
  std::vector<std::uint64_t> first_values;
  for (const Group& g : e.groups) first_values.push_back(g.ranges[0].lo);
  return BuildName(e, std::vector<std::size_t>(e.groups.size(), 0), first_values);
}

absl::StatusOr<std::size_t> CountHostlist(std::string_view list_in, std::size_t max_hosts) {
  const absl::string_view list(list_in.data(), list_in.size());
  std::size_t total = 0;
  absl::StatusOr<std::vector<Entry>> entries = ParseList(list, max_hosts, &total);
  if (!entries.ok()) return entries.status();
  return total;
}

absl::StatusOr<std::vector<int>> ExpandTasksPerNode(std::string_view spec_in,
                                                    std::size_t max_nodes) {
  const absl::string_view spec(spec_in.data(), spec_in.size());
  std::vector<int> counts;
  if (spec.empty()) return counts;
  auto error = [&](absl::string_view item, absl::string_view problem) {
    return absl::InvalidArgumentError(
        absl::StrCat("tasks-per-node list ", QuoteText(spec), ": item ", QuoteText(item), ": ", problem));
  };
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = spec.find(',', start);
    const absl::string_view item = spec.substr(
        start, comma == absl::string_view::npos ? absl::string_view::npos : comma - start);
    if (item.empty()) return error(item, "empty (expected N or N(xR))");
    absl::string_view count_text = item;
    std::uint64_t repeat = 1;
    const std::size_t paren = item.find('(');
    if (paren != absl::string_view::npos) {
      count_text = item.substr(0, paren);
      const absl::string_view suffix = item.substr(paren);
      if (suffix.size() < 4 || suffix.substr(0, 2) != "(x" || suffix.back() != ')') {
        return error(item, "expected N or N(xR)");
      }
      const absl::string_view repeat_text = suffix.substr(2, suffix.size() - 3);
      if (!ParseDecimal(repeat_text, std::numeric_limits<std::uint64_t>::max(), &repeat)) {
        return error(item,
                     AllDigits(repeat_text) ? "repeat count too large" : "expected N or N(xR)");
      }
      if (repeat == 0) return error(item, "repeat count must be at least 1");
    }
    std::uint64_t count = 0;
    if (!ParseDecimal(count_text, kMaxHostlistHosts, &count)) {
      return error(item, AllDigits(count_text) ? absl::StrCat("count above ", kMaxHostlistHosts)
                                               : std::string("expected N or N(xR)"));
    }
    if (repeat > max_nodes || counts.size() + repeat > max_nodes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tasks-per-node list ", QuoteText(spec), ": expands to more than ", max_nodes, " nodes"));
    }
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), static_cast<int>(count));
    if (comma == absl::string_view::npos) break;
    start = comma + 1;
  }
  return counts;
}

}  // namespace drun
