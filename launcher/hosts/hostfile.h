// Host files (mpirun's --hostfile, DeepSpeed's -H/--hostfile) and mpirun's -H/--host lists.
//
// Host file grammar, one host per line:
//
//   line   := [ host_spec { option } ] [ '#' comment ]
//   host_spec := [ user '@' ] host
//   option := key ws* '=' ws* N            N: decimal, 1..kMaxHostSlots
//   key    := slots | count | cpu                               (number of slots)
//           | max_slots | max-slots | slots_max | slots-max      (hard cap on processes)
//
// "red01 max_slots = 2", "red01 slots=4" (mpirun and DeepSpeed), "user@red01", blank lines,
// whole-line and trailing '#' comments, tabs and CRLF line ends are all accepted. `host` is a
// DNS-style name (letters, digits, '-', '.', '_'; not starting with '-' or '.') or an IPv4 or
// IPv6 address written plainly; `user` is letters, digits, '-', '.', '_', not starting with
// '-'. Names are kept as written (mpirun strips the domain; drun does not).
//
// -H list grammar (mpirun's --host):  entry { ',' entry },  entry := host_spec [ ':' N ],
// where an IPv6 address must be bracketed when it carries slots: "[fe80::1]:4". Empty entries
// are skipped ("a,,b," is a,b), as mpirun does.
//
// Results: one HostEntry per distinct host, in order of first appearance. A host that
// appears more than once is merged into its first entry: slots add up, and a repeated
// appearance without slots counts as one slot (mpirun's and MPICH's convention that listing a
// host N times gives it N slots), so "a\na" gives a with slots=2. A host listed once without
// slots keeps slots=0, meaning "not given": the caller picks the default (GPU count, 1, ...).
// max_slots is merged only when every appearance gives it (the sum); otherwise it is 0, "no
// cap". A host must use the same user name on every appearance.
//
// Errors are InvalidArgument and name where and what, e.g.
//   hosts:3: expected 'slots=N' or 'max_slots=N' after host name, got 'slotz=2'
// File errors name the path and carry the errno-derived code (NotFound, PermissionDenied...).
#ifndef DRUN_LAUNCHER_HOSTS_HOSTFILE_H_
#define DRUN_LAUNCHER_HOSTS_HOSTFILE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace drun {

// Largest slot or max_slots value, and largest total for one host after merging.
inline constexpr int kMaxHostSlots = 1'000'000;

// Largest host file ReadHostfile reads; a bigger file is almost surely the wrong file.
inline constexpr std::size_t kMaxHostfileBytes = 16 << 20;

struct HostEntry {
  std::string user;   // "" when not given (ssh's default applies)
  std::string host;   // as written; no resolution, no case folding
  int slots = 0;      // 0: not given
  int max_slots = 0;  // 0: not given (no cap); otherwise >= slots
  int line = 0;       // 1-based line of first appearance in a host file; 0 for -H entries
};

// Parses host-file text. `filename` is only used in error messages ("<filename>:<line>: ...").
// Empty or comment-only text gives an empty vector (the caller decides whether that is an
// error).
absl::StatusOr<std::vector<HostEntry>> ParseHostfile(std::string_view text,
                                                     std::string_view filename);

// Reads and parses the host file at `path`. Read errors name the path.
absl::StatusOr<std::vector<HostEntry>> ReadHostfile(const std::string& path);

// One line of host-file syntax and where it came from: `where` starts every message about
// it ("hosts.txt:3", or a job file's "job.yaml:7: hosts") and `line` becomes HostEntry::line.
struct HostLine {
  std::string text;
  std::string where;
  int line = 0;
};

// Parses and merges lines that come from different places (a job file's hosts: list),
// with the rules of ParseHostfile.
absl::StatusOr<std::vector<HostEntry>> ParseHostLines(const std::vector<HostLine>& lines);

// Parses the value of -H/--host: "node01:2,bob@node02,node03". An empty value gives an
// empty vector. Messages start with `label` and the entry: "--host entry 'x': ...".
absl::StatusOr<std::vector<HostEntry>> ParseHostArg(std::string_view arg,
                                                    std::string_view label = "--host entry");

}  // namespace drun

#endif  // DRUN_LAUNCHER_HOSTS_HOSTFILE_H_
