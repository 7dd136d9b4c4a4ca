// libFuzzer target for launcher/hosts/hostfile.h: ParseHostfile and ParseHostArg on arbitrary
// bytes. Checks the header's promises on every accepted input, and that what was accepted
// prints back to text that parses to the same entries.
//
//   hostfile_fuzz -dict=tests/fuzz/hostfile.dict CORPUS_DIR tests/fuzz/hostfile_corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "launcher/hosts/hostfile.h"

namespace {

void Check(bool ok, const char* what, std::string_view input) {
  if (ok) return;
  std::fprintf(stderr, "invariant broken: %s\ninput (%zu bytes): %.*s\n", what, input.size(),
               static_cast<int>(input.size()), input.data());
  std::abort();
}

bool Same(const drun::HostEntry& a, const drun::HostEntry& b) {
  return a.user == b.user && a.host == b.host && a.slots == b.slots && a.max_slots == b.max_slots;
}

void CheckEntries(const std::vector<drun::HostEntry>& entries, bool from_file,
                  std::string_view in) {
  std::set<std::string> seen;
  int last_line = 0;
  for (const drun::HostEntry& e : entries) {
    Check(!e.host.empty() && e.host.size() <= 255, "host length", in);
    Check(seen.insert(e.host).second, "hosts are distinct", in);
    Check(e.slots >= 0 && e.slots <= drun::kMaxHostSlots, "slots range", in);
    Check(e.max_slots >= 0 && e.max_slots <= drun::kMaxHostSlots, "max_slots range", in);
    Check(e.max_slots == 0 || e.max_slots >= e.slots, "max_slots >= slots", in);
    Check(e.host[0] != '-' && (e.user.empty() || e.user[0] != '-'), "no option-like names", in);
    for (char c : e.host + e.user) {
      Check(c > ' ' && c < 0x7f && c != '#' && c != '@' && c != ',' && c != '=', "name chars", in);
    }
    if (from_file) {
      Check(e.line > last_line, "first-appearance order", in);
      last_line = e.line;
    } else {
      Check(e.line == 0, "-H entries have line 0", in);
      Check(e.max_slots == 0, "-H has no max_slots", in);
    }
  }
}

void FuzzHostfile(std::string_view in) {
  const absl::StatusOr<std::vector<drun::HostEntry>> entries = drun::ParseHostfile(in, "fuzz");
  if (!entries.ok()) {
    Check(entries.status().code() == absl::StatusCode::kInvalidArgument, "error code", in);
    Check(absl::StartsWith(entries.status().message(), "fuzz:"), "error names the file", in);
    Check(entries.status().message().size() < 600, "error message is bounded", in);
    return;
  }
  CheckEntries(*entries, true, in);
  // Print back in canonical form and parse again.
  std::string text;
  for (const drun::HostEntry& e : *entries) {
    if (!e.user.empty()) text += e.user + "@";
    text += e.host;
    if (e.slots > 0) text += " slots=" + std::to_string(e.slots);
    if (e.max_slots > 0) text += " max_slots=" + std::to_string(e.max_slots);
    text += "\n";
  }
  const absl::StatusOr<std::vector<drun::HostEntry>> again = drun::ParseHostfile(text, "again");
  Check(again.ok() && again->size() == entries->size(), "hostfile round-trip parses", in);
  for (std::size_t i = 0; i < entries->size(); ++i) {
    Check(Same((*again)[i], (*entries)[i]), "hostfile round-trip is identical", in);
  }
}

void FuzzHostArg(std::string_view in) {
  const absl::StatusOr<std::vector<drun::HostEntry>> entries = drun::ParseHostArg(in);
  if (!entries.ok()) {
    Check(entries.status().code() == absl::StatusCode::kInvalidArgument, "-H error code", in);
    Check(absl::StartsWith(entries.status().message(), "--host entry '"), "-H error prefix", in);
    Check(entries.status().message().size() < 600, "-H error message is bounded", in);
    return;
  }
  CheckEntries(*entries, false, in);
  std::string arg;
  for (const drun::HostEntry& e : *entries) {
    if (!arg.empty()) arg += ",";
    if (!e.user.empty()) arg += e.user + "@";
    const bool v6 = e.host.find(':') != std::string::npos;
    arg += v6 ? "[" + e.host + "]" : e.host;
    if (e.slots > 0) arg += ":" + std::to_string(e.slots);
  }
  const absl::StatusOr<std::vector<drun::HostEntry>> again = drun::ParseHostArg(arg);
  Check(again.ok() && again->size() == entries->size(), "-H round-trip parses", in);
  for (std::size_t i = 0; i < entries->size(); ++i) {
    Check(Same((*again)[i], (*entries)[i]), "-H round-trip is identical", in);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  FuzzHostfile(in);
  FuzzHostArg(in);
  return 0;
}
