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
#include "launcher/job/config_file.h"
#include "launcher/hosts/hostfile.h"

namespace drun {

// How agents start.
enum class Launcher {
  kLocal,  // this process is a node
  kSsh,    // --hostfile / -H: one agent per host over ssh
  kSlurm,  // --launcher slurm: srun starts the agents
};

// How this drun process takes part in the job. Decided once, by
// ParseCommandLine, from the resolved options and the environment; every other
// part of drun reads it instead of asking "is it distributed?" again.
enum class JobMode {
  kSingleNode,     // --standalone, or one node without an endpoint: in-process rendezvous
  kStatic,         // --rdzv-backend static or --node-rank, typed on every node
  kC10d,           // --rdzv-endpoint (and --nnodes), typed on every node
  kSrunStep,       // a task of an srun step, configured from SLURM_* (launcher/slurm/slurm_env.h
                   // turns it into node or task mode, or back into one of the above)
  kSsh,            // Launcher::kSsh
  kSlurmLauncher,  // Launcher::kSlurm
};
const char* JobModeName(JobMode mode);

// Where a value came from, for messages ("PET_NNODES=2") and --print-config.
struct Origin {
  enum Kind { kCommandLine, kEnvironment, kJobFile };
  Kind kind = kCommandLine;
  std::string name;   // the spelling: "--nnodes", "PET_NNODES", the job file's path
  std::string value;  // as given
  // "--nnodes 2", "PET_NNODES=2 (environment)", "nnodes: 2 (job.yaml)".
  std::string Describe(const std::string& option) const;
};

// Where a secret sits in the arguments ParseCommandLine was given: the last
// tail_bytes of args[arg] (the VALUE of -x NAME=VALUE).
struct SecretArg {
  size_t arg = 0;
  size_t tail_bytes = 0;
};

struct CommandLine {
  v1::JobSpec spec;
  bool help = false;
  bool version = false;
  bool standalone = false;
  std::string token_file;  // --rdzv-token-file
  Launcher launcher = Launcher::kLocal;
  JobMode mode = JobMode::kSingleNode;
  std::string hostfile;                  // --hostfile
  std::string hosts;                     // -H/--host
  std::vector<std::string> forward_env;  // -x VAR or VAR=VALUE, in order (resolved into spec.env)
  std::vector<SecretArg> secret_args;    // the -x values, for HideSecrets
  std::string env_file;                  // --env-file (resolved into spec.env)
  std::string remote_drun;
  std::string rsh;
  bool ssh_accept_new = false;
  // Hosts from a job file's hosts: (with max_slots, which -H cannot say).
  std::vector<HostEntry> host_entries;
  bool print_config = false;  // --print-config
  JobFile resolved;           // with --print-config: the job as resolved
  bool summary = false;     // --summary
  std::string report_path;  // --report
  // Every option given on the command line, in the environment or in a job
  // file (canonical dashed name -> where), so later stages (Slurm
  // auto-configuration, the ssh plan) can tell a default from a choice and
  // name the source in a message.
  std::map<std::string, Origin> origins;
  bool Explicit(const std::string& option) const { return origins.count(option) > 0; }
  // "--nnodes 2" or "PET_NNODES=2 (environment)"; "--<option>" when not given.
  std::string Describe(const std::string& option) const;
  // One-line notices for the user (without "drun: "): values drun dropped or
  // changed, printed once before anything starts.
  std::vector<std::string> notices;
};

// `args` excludes argv[0]. Errors are one line saying what is wrong and what
// to write instead; the caller prints "drun: <message>" and exits 2.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const std::map<std::string, std::string>& env);

// Overwrites the -x values in this process's own argv (argv[0] is the
// program, argv[1..] the arguments ParseCommandLine was given) with '*', so
// `ps` and /proc/PID/cmdline, which every user may read, do not show them.
// Call it once the command line is parsed and argv is not exec'd again.
void HideSecrets(const CommandLine& cl, int argc, char** argv);

// The options drun knows, for other front ends (YAML job files, the man page).
struct OptionInfo {
  std::string name;  // canonical, dashed: "nproc-per-node"
  char short_name;   // 0 when none
  bool is_flag;      // takes no value
  bool repeatable;   // may be given several times (-x)
  std::string group;
  std::string metavar;
  std::string help;
  std::string env;  // PET_<NAME> or DRUN_<NAME>; "" for --help, --version, --print-config, -x
};
std::vector<OptionInfo> KnownOptions();

// The mode of a node that is not configured by Slurm: kSingleNode, kStatic or
// kC10d, from the resolved JobSpec (the srun auto-configuration calls it once
// it has decided, or found that it does not apply).
JobMode NodeMode(const CommandLine& cl);

// The job token: --rdzv-token-file's first line, else $DRUN_RDZV_TOKEN, else "".
absl::StatusOr<std::string> ReadJobToken(const CommandLine& cl,
                                         const std::map<std::string, std::string>& env);

// Whether this process must run drun-net (the networked binary): every mode
// but a single node, and --version.
bool NeedsNetwork(const CommandLine& cl);

// Levenshtein distance, for "did you mean" suggestions.
size_t EditDistance(const std::string& a, const std::string& b);

// The path of the drun binary the user ran (the light drun when this is
// drun-net), for starting drun elsewhere: remote hosts run the same path.
std::string DrunPath();
void SetDrunPath(std::string path);

std::string HelpText();
std::string VersionText();
// "drun 0.1.0": what must be the same on every host of a job.
std::string VersionWords();

}  // namespace drun

#endif  // DRUN_LAUNCHER_CLI_H_
