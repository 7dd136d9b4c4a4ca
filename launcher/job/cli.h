// The command line: torchrun's flags in both spellings (--nproc-per-node and
// --nproc_per_node), their PET_<NAME> environment equivalents (drun's own
// flags read DRUN_<NAME>), and drun's additions. The command line wins over
// the environment. The result is a JobSpec plus what only the launcher needs.
// Every option is a row of one list, launcher/job/options.inc (an X-macro that
// makes both the Opt enum and the table behind OptionInfo): its names, value
// rule, default, job-file key and help. --help (help.cc), the man page and
// shell completion are rendered from it. Defaults are applied here, once, into the JobSpec; the
// rest of drun reads the JobSpec and supplies none of its own.
#ifndef DRUN_LAUNCHER_CLI_H_
#define DRUN_LAUNCHER_CLI_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "drun/v1/job.pb.h"
#include "launcher/job/config_file.h"
#include "launcher/hosts/hostfile.h"
#include "rendezvous/base/words.h"  // EditDistance, for "did you mean"

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

// Every option drun knows, by name in code: the first field of each row of
// launcher/job/options.inc, the one list of options (its other fields make
// the option table in cli.cc, in this order, which is --help's). Code asks for
// an option by its Opt, never by a string. Adding an option: a row there and
// its consumer in cli.cc.
enum class Opt {
#define DRUN_OPTION(id, ...) id,
#include "launcher/job/options.inc"
#undef DRUN_OPTION
};
constexpr size_t kOptionCount = 0
#define DRUN_OPTION(id, ...) +1
#include "launcher/job/options.inc"
#undef DRUN_OPTION
    ;

// What values an option takes: checked by CheckValue, the same way wherever
// the value comes from (command line, PET_/DRUN_ environment, job file).
struct ValueRule {
  enum Type {
    kFlag,     // a boolean (1/0, true/false, yes/no, on/off)
    kText,     // anything; the option's own grammar is checked when the job is resolved
    kInt,      // a whole number in [lo, hi]
    kSeconds,  // a finite number of seconds in [lo, hi] (above lo when lo_open)
  };
  Type type = kText;
  double lo = 0;
  double hi = 0;
  bool lo_open = false;
  const char* range = "";  // the valid values in words: "a whole number of 0 or more"
};

// Where a value came from, for messages ("PET_NNODES=2") and --print-config.
struct Origin {
  enum Kind { kCommandLine, kEnvironment, kJobFile };
  Kind kind = kCommandLine;
  std::string name;   // the spelling: "--nnodes", "PET_NNODES", the job file's path
  std::string value;  // as given
  // "--nnodes 2", "PET_NNODES=2 (environment)", "nnodes: 2 (job.yaml)".
  std::string Describe(Opt option) const;
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
  std::string help_topic;  // --help TOPIC: "" (the common options), "all" or a group (HelpTopics)
  bool version = false;
  std::string print_completion;  // --print-completion SHELL: bash, zsh or tcsh
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
  // mpirun's -np N with a host list (the ssh launcher): the job's total number
  // of workers, spread over the hosts as mpirun spreads it (launcher/ssh/ssh_plan.h);
  // 0 otherwise.
  int total_procs = 0;
  // Hosts from a job file's hosts: (with max_slots, which -H cannot say).
  std::vector<HostEntry> host_entries;
  bool print_config = false;  // --print-config
  JobFile resolved;           // with --print-config: the job as resolved
  // `drun` alone (no arguments, no job file's script): the caller prints
  // UsageText() on stderr and exits 2.
  bool usage = false;
  // Whether drun's stdin is a terminal, as ParseCommandLine was told: with no
  // --stdin (command line, environment or job file) every rank reads it then
  // (--stdin all: pdb and input() on every rank); else rank 0.
  bool stdin_is_terminal = false;
  // --rdzv-conf use_libuv, when given (resolved with the workers' USE_LIBUV
  // into spec.agent_store and spec.env: launcher/job/worker_store.h).
  std::optional<bool> rdzv_use_libuv;
  bool summary = false;     // --summary
  std::string report_path;  // --report
  // Every option given on the command line, in the environment or in a job
  // file (option -> where), so later stages (Slurm
  // auto-configuration, the ssh plan) can tell a default from a choice and
  // name the source in a message.
  std::map<Opt, Origin> origins;
  bool Explicit(Opt option) const { return origins.count(option) > 0; }
  // "--nnodes 2" or "PET_NNODES=2 (environment)"; "--<option>" when not given.
  std::string Describe(Opt option) const;
  // One-line notices for the user (without "drun: "): values drun dropped or
  // changed, printed once before anything starts.
  std::vector<std::string> notices;
};

// `args` excludes argv[0]. Errors are one line saying what is wrong and what
// to write instead; the caller prints "drun: <message>" and exits 2.
// stdin_is_terminal: the launching drun's stdin is a terminal (isatty(0)),
// which makes --stdin's default all. `drun help` (help first) is --help unless
// a file named help is in the current directory (then it runs, with a notice).
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const std::map<std::string, std::string>& env,
                                             bool stdin_is_terminal = false);

// Overwrites the -x values in this process's own argv (argv[0] is the
// program, argv[1..] the arguments ParseCommandLine was given) with '*', so
// `ps` and /proc/PID/cmdline, which every user may read, do not show them.
// Call it once the command line is parsed and argv is not exec'd again.
void HideSecrets(const CommandLine& cl, int argc, char** argv);

// One row of the option table, for every front end (the command line, YAML
// job files, --help, the man page): the option's names, its value rule, its
// default and its job-file key.
struct OptionInfo {
  Opt id;
  std::string name;  // canonical, dashed: "nproc-per-node"
  char short_name;   // 0 when none
  bool is_flag;      // takes no value
  bool repeatable;   // may be given several times (-x)
  std::string group;
  std::string metavar;
  std::string help;
  std::string env;  // PET_<NAME> or DRUN_<NAME>; "" for --help, --version, --print-config, -x
  ValueRule rule;
  // What the job gets when no source sets the option, as a value of `rule`
  // ("30"); applied once, when the job is resolved. "" when the option has no
  // value of its own then (the job decides: a free port, the mode's run id...).
  std::string default_value;
  // The key a job file sets it with (docs/config.md); "" for the options that
  // act on the command line itself (--help, --version, --config, --print-config).
  std::string yaml_key;
  bool common = false;  // shown by the one-screen `drun --help` (all are in their topic)
};
std::vector<OptionInfo> KnownOptions();  // in table order
const OptionInfo& OptionOf(Opt option);
// An option by its canonical name or with underscores; null when drun has none.
const OptionInfo* FindOption(std::string name);

// Whether `value` is valid under `rule`; the error (InvalidArgument) is the
// end of a sentence whose subject the caller writes (the option as the user
// gave it): "must be a whole number of 0 or more, not '-1'".
absl::Status CheckValue(const ValueRule& rule, const std::string& value);

// --rdzv-conf's keys, each with its rule and default (applied once, when the job
// is resolved): join_timeout, last_call_timeout, close_timeout, read_timeout,
// keep_alive_interval, keep_alive_max_attempt, is_host, use_libuv
// (launcher/job/worker_store.h).
struct RdzvConfKey {
  std::string key;
  ValueRule rule;
  std::string default_value;  // "" for is_host (the endpoint decides)
};
std::vector<RdzvConfKey> RdzvConfKeys();

// The mode of a node that is not configured by Slurm: kSingleNode, kStatic or
// kC10d, from the resolved JobSpec (the srun auto-configuration calls it once
// it has decided, or found that it does not apply).
JobMode NodeMode(const CommandLine& cl);

// Defaults the job spec resolves once; nothing downstream re-applies them.
constexpr int kDefaultRdzvPort = 29400;          // --rdzv-endpoint HOST alone: HOST:29400 (torchrun's)
constexpr char kLoopbackMaster[] = "127.0.0.1";  // MASTER_ADDR of a job on one node without --master-addr

// A single-node job's MASTER_ADDR, into the spec: --master-addr, which must be
// an address of this machine, else kLoopbackMaster. ResolveMode calls it, and
// the srun auto-configuration when it finds a single node after all.
absl::Status ResolveSingleNodeMaster(CommandLine* cl);

// The job token: --rdzv-token-file's first line, else $DRUN_RDZV_TOKEN, else "".
absl::StatusOr<std::string> ReadJobToken(const CommandLine& cl,
                                         const std::map<std::string, std::string>& env);

// Whether this process must run drun-net (the networked binary): every mode
// but a single node, and --version (which the light drun answers itself when
// drun-net is missing: it is no job).
bool NeedsNetwork(const CommandLine& cl);


// The path of the drun binary the user ran (the light drun when this is
// drun-net), for starting drun elsewhere: remote hosts run the same path.
std::string DrunPath();
void SetDrunPath(std::string path);

// --help's topics: "all", then every option group in --help's order ("job",
// "rendezvous", "output", "ssh", "slurm", "other"). launcher/job/help.cc.
std::vector<std::string> HelpTopics();
// `drun --help [TOPIC]`: "" the common options on one screen (at most 80 lines
// of at most 80 columns); "all" every option by group with the modes and exit
// statuses; a group's name, that group's options. Every option is in "all"
// and in its group's topic.
std::string HelpText(const std::string& topic = "");
// The short usage `drun` alone prints on stderr (a few lines, pointing at --help).
std::string UsageText();
// --print-completion SHELL: a script completing drun's options (names, and the
// values a metavar lists, such as --launcher's local|ssh|slurm) and, after
// them, file names. bash (a function _drun bound by `complete`), zsh (the
// same through bashcompinit) or tcsh (`complete drun`).
std::string CompletionScript(const std::string& shell);
// launcher/version.cc (drun-net only: it names gRPC's and libssh's versions).
std::string VersionText();
// "0.1.0": project()'s version in the top-level CMakeLists.txt, the only place it is written.
std::string DrunVersion();
// "drun 0.1.0": what must be the same on every host of a job.
std::string VersionWords();

}  // namespace drun

#endif  // DRUN_LAUNCHER_CLI_H_
