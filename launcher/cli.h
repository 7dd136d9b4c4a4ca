// The command line: torchrun's flags in both spellings (--nproc-per-node and
// --nproc_per_node), their PET_<NAME> environment equivalents (drun's own
// flags read DRUN_<NAME>), and drun's additions. The command line wins over
// the environment. The result is a JobSpec plus what only the launcher needs.
#ifndef DRUN_LAUNCHER_CLI_H_
#define DRUN_LAUNCHER_CLI_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "drun/v1/job.pb.h"
#include "launcher/config_file.h"
#include "launcher/hosts/hostfile.h"

namespace drun {

struct CommandLine {
  v1::JobSpec spec;
  bool help = false;
  bool version = false;
  bool standalone = false;
  std::string token_file;  // --rdzv-token-file
  // How agents start: "local" (this process is the node), "ssh", "slurm".
  std::string launcher = "local";
  std::string hostfile;                  // --hostfile
  std::string hosts;                     // -H/--host
  std::vector<std::string> forward_env;  // -x VAR or VAR=value, in order
  std::string env_file;
  std::string remote_drun;
  std::string rsh;
  bool ssh_accept_new = false;
  // Hosts from a job file's hosts: (with max_slots, which -H cannot say).
  std::vector<HostEntry> host_entries;
  bool print_config = false;  // --print-config
  JobFile resolved;           // with --print-config: the job as resolved
  bool summary = false;     // --summary
  std::string report_path;  // --report
  // Canonical names (dashed) of the options set on the command line or in the
  // environment, so later stages (Slurm auto-configuration) can tell a
  // default from a choice.
  std::set<std::string> explicit_options;
};

// `args` excludes argv[0]. Errors are one line saying what is wrong and what
// to write instead; the caller prints "drun: <message>" and exits 2.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const std::map<std::string, std::string>& env);

// The options drun knows, for other front ends (YAML job files, the man page).
struct OptionInfo {
  std::string name;  // canonical, dashed: "nproc-per-node"
  char short_name;   // 0 when none
  bool is_flag;      // takes no value
  bool repeatable;   // may be given several times (-x)
  std::string group;
  std::string metavar;
  std::string help;
  std::string env;  // PET_<NAME> or DRUN_<NAME>
};
std::vector<OptionInfo> KnownOptions();

// Levenshtein distance, for "did you mean" suggestions.
size_t EditDistance(const std::string& a, const std::string& b);

// The path of the drun binary the user ran (the light drun when this is
// drun-net), for starting drun elsewhere: remote hosts run the same path.
std::string DrunPath();
void SetDrunPath(std::string path);

std::string HelpText();
std::string VersionText();

}  // namespace drun

#endif  // DRUN_LAUNCHER_CLI_H_
