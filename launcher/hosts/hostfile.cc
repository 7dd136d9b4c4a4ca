#include "launcher/hosts/hostfile.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "rendezvous/base/quote.h"
#include "rendezvous/base/read_file.h"

namespace drun {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsNameChar(char c) { return IsAlnum(c) || c == '-' || c == '.' || c == '_'; }

bool AllDigits(absl::string_view s) {
  for (char c : s) {
    if (!IsDigit(c)) return false;
  }
  return !s.empty();
}

bool IsIpv6(absl::string_view s) {
  if (s.empty() || s.size() > 45) return false;  // INET6_ADDRSTRLEN - 1
  // inet_pton stops at a NUL; check the characters first so "::1\0junk" is refused.
  for (char c : s) {
    if (!IsDigit(c) && !(c >= 'a' && c <= 'f') && !(c >= 'A' && c <= 'F') && c != ':' && c != '.') {
      return false;
    }
  }
  const std::string z(s);
  in6_addr addr;
  return inet_pton(AF_INET6, z.c_str(), &addr) == 1;
}

// Where a problem is, as the message prefix: "hosts:3" or "--host entry 'x'".
using Where = std::string;

absl::Status Error(const Where& where, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", problem));
}

absl::Status CheckHost(const Where& where, absl::string_view host, bool in_hostfile) {
  if (host.empty()) return Error(where, "missing host name");
  if (host.find(':') != absl::string_view::npos) {
    if (IsIpv6(host)) return absl::OkStatus();
    const std::size_t colon = host.rfind(':');
    const absl::string_view name = host.substr(0, colon);
    if (in_hostfile && host.find(':') == colon && AllDigits(host.substr(colon + 1)) &&
        CheckHost(where, name, in_hostfile).ok()) {
      // MPICH's "host:N" machine-file form: say what to write instead.
      return Error(
          where,
          absl::StrCat("invalid host name ", QuoteText(host), " (to give slots in a host file write ",
                       QuoteText(absl::StrCat(name, " slots=", host.substr(colon + 1))), ")"));
    }
    return Error(where, absl::StrCat("invalid host name ", QuoteText(host),
                                     " (':' only belongs in an IPv6 address)"));
  }
  if (host.size() > 255) {
    return Error(where, absl::StrCat("host name ", QuoteText(host), " is longer than 255 characters"));
  }
  for (char c : host) {
    if (!IsNameChar(c)) {
      return Error(where, absl::StrCat("invalid host name ", QuoteText(host),
                                       " (expected letters, digits, '-', '.', '_')"));
    }
  }
  if (host[0] == '-' || host[0] == '.') {
    return Error(where, absl::StrCat("invalid host name ", QuoteText(host),
                                     " (must not start with '-' or '.')"));
  }
  return absl::OkStatus();
}

absl::Status CheckUser(const Where& where, absl::string_view user) {
  if (user.empty()) return Error(where, "empty user name before '@'");
  bool ok = user.size() <= 255 && user[0] != '-';
  for (char c : user) ok = ok && IsNameChar(c);
  if (!ok) {
    return Error(where, absl::StrCat("invalid user name ", QuoteText(user),
                                     " (expected letters, digits, '-', '.', '_')"));
  }
  return absl::OkStatus();
}

// Splits "[user@]host" and validates both parts.
absl::Status SplitUserHost(const Where& where, absl::string_view spec, bool in_hostfile,
                           HostEntry* e) {
  absl::string_view host = spec;
  const std::size_t at = spec.find('@');
  if (at != absl::string_view::npos) {
    if (spec.find('@', at + 1) != absl::string_view::npos) {
      return Error(where, absl::StrCat("invalid host ", QuoteText(spec),
                                       " (expected [user@]host with one '@')"));
    }
    const absl::string_view user = spec.substr(0, at);
    if (absl::Status s = CheckUser(where, user); !s.ok()) return s;
    e->user = std::string(user);
    host = spec.substr(at + 1);
  }
  if (absl::Status s = CheckHost(where, host, in_hostfile); !s.ok()) return s;
  e->host = std::string(host);
  return absl::OkStatus();
}

// A positive count no larger than kMaxHostSlots; `what` names it in messages ("slots=").
absl::StatusOr<int> ParseCount(const Where& where, absl::string_view what, absl::string_view text) {
  if (!AllDigits(text)) {
    return Error(where, absl::StrCat("expected a positive integer after ", QuoteText(what), ", got ",
                                     text.empty() ? "nothing" : QuoteText(text)));
  }
  std::int64_t v = 0;
  for (char c : text) {
    v = v * 10 + (c - '0');
    if (v > kMaxHostSlots) {
      return Error(where, absl::StrCat(QuoteText(absl::StrCat(what, text)), " is above the limit of ",
                                       kMaxHostSlots));
    }
  }
  if (v == 0) {
    return Error(where, absl::StrCat(QuoteText(absl::StrCat(what, text)),
                                     ": the count must be at least 1 (leave the host out to "
                                     "give it no processes)"));
  }
  return static_cast<int>(v);
}

// Folds repeated hosts into their first entry (see the header for the rules).
class Merger {
 public:
  absl::Status Add(const Where& where, HostEntry e, bool has_slots, bool has_max) {
    auto [it, inserted] = index_.try_emplace(e.host, hosts_.size());
    if (inserted) {
      hosts_.push_back(std::move(e));
      Tally t;
      t.appearances = 1;
      t.effective = has_slots ? hosts_.back().slots : 1;
      t.all_max = has_max;
      t.max_sum = hosts_.back().max_slots;
      tallies_.push_back(t);
      return absl::OkStatus();
    }
    HostEntry& first = hosts_[it->second];
    Tally& t = tallies_[it->second];
    if (first.user != e.user) {
      auto describe = [](const std::string& u) {
        return u.empty() ? std::string("no user") : absl::StrCat("user ", QuoteText(u));
      };
      return Error(where, absl::StrCat("host ", QuoteText(e.host), " is given with ", describe(e.user),
                                       " here but with ", describe(first.user),
                                       first.line > 0 ? absl::StrCat(" on line ", first.line)
                                                      : std::string(" earlier"),
                                       " (a host has one user name)"));
    }
    ++t.appearances;
    t.effective += has_slots ? e.slots : 1;
    t.all_max = t.all_max && has_max;
    t.max_sum += e.max_slots;
    if (t.effective > kMaxHostSlots || t.max_sum > kMaxHostSlots) {
      return Error(where, absl::StrCat("host ", QuoteText(e.host), " has more than ", kMaxHostSlots,
                                       " slots in total"));
    }
    return absl::OkStatus();
  }

  std::vector<HostEntry> Finish() && {
    for (std::size_t i = 0; i < hosts_.size(); ++i) {
      const Tally& t = tallies_[i];
      if (t.appearances > 1) {
        hosts_[i].slots = static_cast<int>(t.effective);
        hosts_[i].max_slots = t.all_max ? static_cast<int>(t.max_sum) : 0;
      }
    }
    return std::move(hosts_);
  }

 private:
  struct Tally {
    int appearances = 0;
    std::int64_t effective = 0;  // slots, with a repeated appearance without slots as 1
    bool all_max = false;
    std::int64_t max_sum = 0;
  };
  std::vector<HostEntry> hosts_;
  std::vector<Tally> tallies_;
  std::unordered_map<std::string, std::size_t> index_;
};

enum class Key { kSlots, kMaxSlots };

// Open MPI's spellings (orte/util/hostfile/hostfile_lex.l) for the two keys drun uses.
bool LookupKey(absl::string_view word, Key* key) {
  static constexpr absl::string_view kSlots[] = {"slots", "count", "cpu"};
  static constexpr absl::string_view kMax[] = {"max_slots", "max-slots", "slots_max", "slots-max",
                                               "max_count", "max-count", "count_max", "count-max",
                                               "max_cpu",   "max-cpu",   "cpu_max",   "cpu-max"};
  for (absl::string_view k : kSlots) {
    if (word == k) {
      *key = Key::kSlots;
      return true;
    }
  }
  for (absl::string_view k : kMax) {
    if (word == k) {
      *key = Key::kMaxSlots;
      return true;
    }
  }
  return false;
}

std::size_t SkipSpace(absl::string_view s, std::size_t i) {
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}
std::size_t SkipWord(absl::string_view s, std::size_t i) {
  while (i < s.size() && !IsSpace(s[i]) && s[i] != '=') ++i;
  return i;
}

absl::Status ParseLine(const Where& where, absl::string_view line, int line_no, Merger* merger,
                       bool* empty) {
  line = line.substr(0, line.find('#'));
  std::size_t i = SkipSpace(line, 0);
  *empty = i == line.size();
  if (*empty) return absl::OkStatus();

  std::size_t end = i;
  while (end < line.size() && !IsSpace(line[end])) ++end;
  HostEntry e;
  e.line = line_no;
  if (absl::Status s = SplitUserHost(where, line.substr(i, end - i), true, &e); !s.ok()) {
    return s;
  }

  bool has_slots = false;
  bool has_max = false;
  i = SkipSpace(line, end);
  while (i < line.size()) {
    // One option: key, optional spaces, '=', optional spaces, value.
    const std::size_t key_start = i;
    const std::size_t key_end = SkipWord(line, i);
    const absl::string_view word = line.substr(key_start, key_end - key_start);
    std::size_t j = SkipSpace(line, key_end);
    const bool has_equals = j < line.size() && line[j] == '=';
    std::size_t value_start = has_equals ? SkipSpace(line, j + 1) : j;
    std::size_t value_end = value_start;
    while (value_end < line.size() && !IsSpace(line[value_end])) ++value_end;
    const absl::string_view item =
        line.substr(key_start, (has_equals ? value_end : key_end) - key_start);

    Key key;
    if (word.empty() || !LookupKey(word, &key)) {
      return Error(where, absl::StrCat("expected 'slots=N' or 'max_slots=N' after host name, got ",
                                       QuoteText(item)));
    }
    const char* canonical = key == Key::kSlots ? "slots" : "max_slots";
    if (!has_equals) {
      return Error(where, absl::StrCat("expected '", canonical, "=N', got ", QuoteText(item)));
    }
    const absl::string_view value = line.substr(value_start, value_end - value_start);
    absl::StatusOr<int> n = ParseCount(where, absl::StrCat(word, "="), value);
    if (!n.ok()) return n.status();
    bool& seen = key == Key::kSlots ? has_slots : has_max;
    if (seen) return Error(where, absl::StrCat("'", canonical, "' is given twice"));
    seen = true;
    (key == Key::kSlots ? e.slots : e.max_slots) = *n;
    i = SkipSpace(line, value_end);
  }
  if (has_slots && has_max && e.max_slots < e.slots) {
    return Error(where, absl::StrCat("max_slots=", e.max_slots, " is less than slots=", e.slots));
  }
  return merger->Add(where, std::move(e), has_slots, has_max);
}

}  // namespace

absl::StatusOr<std::vector<HostEntry>> ParseHostfile(std::string_view text_in,
                                                     std::string_view filename_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  const absl::string_view filename(filename_in.data(), filename_in.size());
  Merger merger;
  int line_no = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == absl::string_view::npos) nl = text.size();
    ++line_no;
    bool empty = false;
    const Where where = absl::StrCat(filename, ":", line_no);
    if (absl::Status s = ParseLine(where, text.substr(start, nl - start), line_no, &merger, &empty);
        !s.ok()) {
      return s;
    }
    start = nl + 1;
  }
  return std::move(merger).Finish();
}

absl::StatusOr<std::vector<HostEntry>> ParseHostLines(const std::vector<HostLine>& lines) {
  Merger merger;
  for (const HostLine& l : lines) {
    bool empty = false;
    if (absl::Status s = ParseLine(l.where, l.text, l.line, &merger, &empty); !s.ok()) return s;
  }
  return std::move(merger).Finish();
}

absl::StatusOr<std::vector<HostEntry>> ReadHostfile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, kMaxHostfileBytes, "hostfile");
  if (!text.ok()) return text.status();
  return ParseHostfile(*text, path);
}

absl::StatusOr<std::vector<HostEntry>> ParseHostArg(std::string_view arg_in,
                                                    std::string_view label) {
  const absl::string_view arg(arg_in.data(), arg_in.size());
  Merger merger;
  std::size_t start = 0;
  while (start <= arg.size()) {
    std::size_t comma = arg.find(',', start);
    if (comma == absl::string_view::npos) comma = arg.size();
    const absl::string_view entry = arg.substr(start, comma - start);
    start = comma + 1;
    if (entry.empty()) continue;
    const Where where = absl::StrCat(absl::string_view(label.data(), label.size()), " ",
                                     QuoteText(entry));

    HostEntry e;
    absl::string_view rest = entry;
    const std::size_t at = entry.find('@');
    absl::string_view user_part;
    if (at != absl::string_view::npos) {
      user_part = entry.substr(0, at + 1);
      rest = entry.substr(at + 1);
    }
    // Separate ":N" from the host; an IPv6 address needs brackets to carry it.
    absl::string_view host = rest;
    absl::string_view slots_text;
    bool has_slots = false;
    if (!rest.empty() && rest[0] == '[') {
      const std::size_t close = rest.find(']');
      if (close == absl::string_view::npos) return Error(where, "missing ']' after IPv6 address");
      host = rest.substr(1, close - 1);
      if (!IsIpv6(host)) {
        return Error(
            where, absl::StrCat(QuoteText(host), " is not an IPv6 address (only those take brackets)"));
      }
      const absl::string_view after = rest.substr(close + 1);
      if (!after.empty()) {
        if (after[0] != ':') {
          return Error(where, absl::StrCat("expected ':N' after ']', got ", QuoteText(after)));
        }
        slots_text = after.substr(1);
        has_slots = true;
      }
    } else {
      const std::size_t colon = rest.find(':');
      if (colon != absl::string_view::npos &&
          rest.find(':', colon + 1) == absl::string_view::npos) {
        host = rest.substr(0, colon);
        slots_text = rest.substr(colon + 1);
        has_slots = true;
      } else if (colon != absl::string_view::npos && !IsIpv6(rest)) {
        return Error(where, absl::StrCat("invalid host ", QuoteText(rest),
                                         " (expected host[:N]; write an IPv6 address with "
                                         "slots as [addr]:N)"));
      }
    }
    const std::string spec = absl::StrCat(user_part, host);
    if (absl::Status s = SplitUserHost(where, spec, false, &e); !s.ok()) return s;
    if (has_slots) {
      absl::StatusOr<int> n = ParseCount(where, absl::StrCat(host, ":"), slots_text);
      if (!n.ok()) return n.status();
      e.slots = *n;
    }
    if (absl::Status s = merger.Add(where, std::move(e), has_slots, false); !s.ok()) return s;
  }
  return std::move(merger).Finish();
}

}  // namespace drun
