// Slurm's compressed host lists ("hostlists") and task-count lists.
//
// Slurm hands a job its nodes in a compressed form, e.g. SLURM_JOB_NODELIST=
// "gpu[01-04,07],login1", and the per-node task counts as SLURM_TASKS_PER_NODE="2(x3),1".
// The functions here expand those forms. They are pure: no I/O, no environment lookups, no
// name resolution; the caller reads the variables and gives the strings.
//
// Hostlist grammar (Slurm's src/common/hostlist.c, with the differences listed below):
//
//   list    := entry { sep entry }           sep: ',' or ASCII whitespace, outside brackets
//   entry   := text { '[' ranges ']' text }   text: printable ASCII except '[', ']', ','
//   ranges  := range { ',' range }
//   range   := N | N '-' M                   N, M: decimal digits, N <= M
//
// - Each N or N-M expands to N..M, zero-padded to the width of N as written ("[08-10]" gives
//   08,09,10; "[1-10]" gives 1..10 unpadded; "[001-3]" gives 001,002,003), as Slurm does.
// - Several bracket groups in one entry expand as a cross product, leftmost group outermost:
//   "a[1-2]b[3-4]" gives a1b3,a1b4,a2b3,a2b4.
// - Order and duplicates are kept exactly as written ("b,a,b" gives b,a,b): Slurm's node
//   order is the rank order, so nothing is sorted or merged.
// - Empty entries are skipped (",a,,b," gives a,b), and an empty or all-separator list
//   expands to no hosts, as in Slurm.
//
// Where drun is stricter than, or goes beyond, Slurm's parser (docs/hosts.md says why):
// - text after the last ']' is allowed ("node[1-2]-ib" gives node1-ib,node2-ib); Slurm
//   rejects it.
// - a '[' without its ']' is an error; Slurm appends the missing ']' and takes the whole entry
//   as one literal host name.
// - a stray ']', a nested '[', an empty range ("[]", "[1,,2]"), "N-" without M, whitespace,
//   signs or letters inside brackets, and control or non-ASCII bytes are errors; Slurm lets
//   strtoul() skip or accept some of them.
// - no per-range limit of 65536 hosts; instead the whole list may expand to at most
//   `max_hosts` hosts (default kMaxHostlistHosts), and no host name may exceed
//   kMaxHostNameLength characters.
//
// Every error is InvalidArgument and names the offending entry, e.g.
//   hostlist entry 'node[5-3]': reversed range '5-3' (the low bound is above the high bound)
#ifndef DRUN_LAUNCHER_HOSTS_HOSTLIST_H_
#define DRUN_LAUNCHER_HOSTS_HOSTLIST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace drun {

// Default cap on the number of hosts one hostlist may expand to (and on the number of counts
// ExpandTasksPerNode returns). Real clusters are far below it; it stops "n[0-999999999]"
// from eating the machine's memory.
inline constexpr std::size_t kMaxHostlistHosts = 1'000'000;

// Longest host name an expansion may produce: a DNS name has at most 253 characters, so
// anything longer is a typo or an attack, not a node.
inline constexpr std::size_t kMaxHostNameLength = 255;

// Expands `list` to its host names, in order, duplicates kept. Fails with InvalidArgument,
// naming the offending entry, if the list is malformed, expands to more than `max_hosts`
// hosts, or would produce a name longer than kMaxHostNameLength. On failure nothing is
// expanded (the size is checked before any name is built).
absl::StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view list,
                                                        std::size_t max_hosts = kMaxHostlistHosts);

// The first host of `list` (the rendezvous host is the first node of SLURM_STEP_NODELIST),
// built without expanding the rest. Succeeds exactly when ExpandHostlist(list, max_hosts)
// succeeds with at least one host, and then returns its front(); an empty list is an
// InvalidArgument error.
absl::StatusOr<std::string> FirstHost(std::string_view list,
                                      std::size_t max_hosts = kMaxHostlistHosts);

// Number of hosts `list` expands to, without building them. Same errors as ExpandHostlist.
absl::StatusOr<std::size_t> CountHostlist(std::string_view list,
                                          std::size_t max_hosts = kMaxHostlistHosts);

// Expands Slurm's SLURM_TASKS_PER_NODE / SLURM_JOB_CPUS_PER_NODE form: comma-separated
// items, each "N" (one node with N) or "N(xR)" (R consecutive nodes with N), so "2(x3),1"
// gives {2, 2, 2, 1}. N may be 0 (the caller decides what an idle node means); R must be at
// least 1; both are decimal without sign or spaces. Counts above kMaxHostlistHosts, more
// than `max_nodes` results, and empty items are InvalidArgument errors naming the item. An
// empty string gives an empty vector.
absl::StatusOr<std::vector<int>> ExpandTasksPerNode(std::string_view spec,
                                                    std::size_t max_nodes = kMaxHostlistHosts);

}  // namespace drun

#endif  // DRUN_LAUNCHER_HOSTS_HOSTLIST_H_
