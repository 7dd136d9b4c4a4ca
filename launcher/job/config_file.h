// Job files: `drun --config job.yaml`. A job file is a YAML map whose keys are the
// command-line options (same names, dashes or underscores: `nproc-per-node` or
// `nproc_per_node`) plus
//
//   env:     map VAR -> value, set for every worker on every node
//   hosts:   list of `host`, `host:slots`, `user@host:slots` (mpirun's -H syntax) or maps
//            {host, slots, max_slots, user}; or one string in -H syntax
//   script:  the training script (or program, or module with `module: true`)
//   args:    list of the script's arguments
//   tls:     map {cert, key, ca}: --rdzv-tls CERT,KEY,CA
//
// Flags take booleans (`standalone: true`); other options take scalars (numbers or strings);
// `rdzv-conf` may also be a map ({join_timeout: 600}), `x` a list. `host`, `hosts` and
// `hostfile` exclude each other. Loading only checks the file's shape and the values that
// have a type of their own (numbers, booleans, host names); the rest is checked by the
// command-line parser the values are handed to, exactly as if they had been typed.
//
// Errors are InvalidArgument (NotFound etc. for an unreadable file) with one line naming
// the file, the line and the key:
//   job.yaml:4: unknown key 'nproc-per-nod'; did you mean 'nproc-per-node'?
//   job.yaml:7: 'max-restarts' must be a number, not a list
// yaml-cpp's exceptions never leave this module.
#ifndef DRUN_LAUNCHER_CONFIG_FILE_H_
#define DRUN_LAUNCHER_CONFIG_FILE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "launcher/hosts/hostfile.h"

namespace drun {

struct JobFile {
  // Canonical (dashed) option name -> the value as the command line would take it: "1"/"0"
  // for flags, "k=v,k2=v2" for an rdzv-conf map, numbers as written.
  std::map<std::string, std::string> options;
  // Repeatable options (x), in file order.
  std::map<std::string, std::vector<std::string>> multi;
  // env:, set for every worker.
  std::map<std::string, std::string> env;
  // hosts:, one -H entry each ("user@host:slots", "[fe80::1]:2", "red01"), after merging
  // repeated hosts the way -H does; absl::StrJoin(hosts, ",") is a valid -H value.
  std::vector<std::string> hosts;
  // The same hosts with what -H cannot say: max_slots, and `line` = the line of the job
  // file that named the host. Filled by ParseJobFile; RenderJobFile prefers it to `hosts`
  // when it is not empty.
  std::vector<HostEntry> host_entries;
  std::string script;             // script:
  std::vector<std::string> args;  // args:
};

// Reads and parses the job file at `path` (at most 16 MiB). Read errors name the path.
absl::StatusOr<JobFile> LoadJobFile(const std::string& path);

// Parses job-file text; `filename` is only used in messages ("<filename>:<line>: ...").
// An empty document is an empty job.
absl::StatusOr<JobFile> ParseJobFile(absl::string_view yaml_text, absl::string_view filename);

// Renders a job (a resolved one, for --print-config) as YAML that ParseJobFile accepts back
// and that gives the same JobFile: options in --help order, then x, env, hosts, script,
// args. Option names that drun does not know are written too (and would be refused back).
std::string RenderJobFile(const JobFile& job);

}  // namespace drun

#endif  // DRUN_LAUNCHER_CONFIG_FILE_H_
