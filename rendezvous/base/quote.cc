#include "rendezvous/base/quote.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace drun {

std::string QuoteText(absl::string_view s) {
  constexpr size_t kMaxQuoted = 80;
  // Cut the input, not the escaped text, so no escape sequence is split.
  size_t n = std::min(s.size(), kMaxQuoted);
  while (absl::CHexEscape(s.substr(0, n)).size() > kMaxQuoted) --n;
  return absl::StrCat("'", absl::CHexEscape(s.substr(0, n)), n < s.size() ? "...'" : "'");
}

std::string QuotePath(absl::string_view path) {
  return absl::StrCat("'", absl::CHexEscape(path), "'");
}

std::string ShellQuote(absl::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

}  // namespace drun
