// libFuzzer target for launcher/hosts/hostlist.h: ExpandHostlist, FirstHost, CountHostlist and
// ExpandTasksPerNode on arbitrary bytes. Besides "no crash, no hang, no sanitizer report" it
// checks the promises the header makes, and aborts on any broken one.
//
//   hostlist_fuzz -dict=tests/fuzz/hostlist.dict CORPUS_DIR tests/fuzz/hostlist_corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "launcher/hosts/hostlist.h"

namespace {

// A lower cap than the default keeps each run fast; the cap logic is the same.
constexpr std::size_t kCap = 20000;

void Check(bool ok, const char* what, std::string_view input) {
  if (ok) return;
  std::fprintf(stderr, "invariant broken: %s\ninput (%zu bytes): %.*s\n", what, input.size(),
               static_cast<int>(input.size()), input.data());
  std::abort();
}

bool IsSeparator(char c) {
  return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

void FuzzHostlist(std::string_view in) {
  const absl::StatusOr<std::vector<std::string>> hosts = drun::ExpandHostlist(in, kCap);
  const absl::StatusOr<std::size_t> count = drun::CountHostlist(in, kCap);
  const absl::StatusOr<std::string> first = drun::FirstHost(in, kCap);

  if (!hosts.ok()) {
    Check(hosts.status().code() == absl::StatusCode::kInvalidArgument, "error code", in);
    Check(!hosts.status().message().empty(), "error has a message", in);
    Check(hosts.status().message().size() < 600, "error message is bounded", in);
    Check(count.status() == hosts.status(), "Count fails like Expand", in);
    Check(first.status() == hosts.status(), "FirstHost fails like Expand", in);
    return;
  }
  Check(hosts->size() <= kCap, "cap respected", in);
  Check(count.ok() && *count == hosts->size(), "Count == size", in);
  bool has_non_separator = false;
  bool has_bracket = false;
  for (char c : in) {
    has_non_separator = has_non_separator || !IsSeparator(c);
    has_bracket = has_bracket || c == '[' || c == ']';
  }
  Check(hosts->empty() == !has_non_separator, "non-empty list expands to hosts", in);
  Check(first.ok() == !hosts->empty(), "FirstHost ok iff hosts", in);
  if (first.ok()) Check(*first == hosts->front(), "FirstHost == front", in);

  std::string joined;
  for (const std::string& h : *hosts) {
    Check(!h.empty() && h.size() <= drun::kMaxHostNameLength, "name length", in);
    for (char c : h) {
      const auto u = static_cast<unsigned char>(c);
      Check(u > 0x20 && u < 0x7f && c != '[' && c != ']' && c != ',', "name characters", in);
    }
    if (!joined.empty()) joined += ',';
    joined += h;
  }
  // Without brackets a list is just its entries.
  if (!has_bracket) {
    std::vector<std::string> split;
    std::string cur;
    for (char c : in) {
      if (IsSeparator(c)) {
        if (!cur.empty()) split.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) split.push_back(cur);
    Check(split == *hosts, "bracket-free list splits on separators", in);
  }
  // Expanded names are themselves a valid list that expands to the same hosts.
  const absl::StatusOr<std::vector<std::string>> again = drun::ExpandHostlist(joined, kCap);
  Check(again.ok() && *again == *hosts, "expansion round-trips", in);
}

void FuzzTasks(std::string_view in) {
  const absl::StatusOr<std::vector<int>> tasks = drun::ExpandTasksPerNode(in, kCap);
  if (!tasks.ok()) {
    Check(tasks.status().code() == absl::StatusCode::kInvalidArgument, "tasks error code", in);
    return;
  }
  Check(tasks->size() <= kCap, "tasks cap", in);
  Check(tasks->empty() == in.empty(), "tasks empty iff input empty", in);
  for (int t : *tasks) Check(t >= 0 && t <= static_cast<int>(drun::kMaxHostlistHosts), "range", in);
  // Re-encode run-length and compare.
  std::string enc;
  for (std::size_t i = 0; i < tasks->size();) {
    std::size_t j = i;
    while (j < tasks->size() && (*tasks)[j] == (*tasks)[i]) ++j;
    if (!enc.empty()) enc += ',';
    enc += std::to_string((*tasks)[i]);
    if (j - i > 1) enc += "(x" + std::to_string(j - i) + ")";
    i = j;
  }
  const absl::StatusOr<std::vector<int>> again = drun::ExpandTasksPerNode(enc, kCap);
  Check(again.ok() && *again == *tasks, "tasks round-trip", in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  FuzzHostlist(in);
  FuzzTasks(in);
  return 0;
}
