#include "launcher/job/cli.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/agent_options.h"
#include "agent/cpu_placement.h"
#include "agent/handled_signals.h"
#include "agent/nproc.h"
#include "absl/strings/str_join.h"
#include "agent/output.h"
#include "agent/std_streams.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/quote.h"
#include "rendezvous/base/random.h"
#include "rendezvous/base/read_file.h"
#include "launcher/job/user_env.h"

namespace drun {

using EnvMap = std::map<std::string, std::string>;

namespace {

enum class Kind { kFlag, kValue };
enum class EnvTwin { kTorchrun, kDrun, kNone };  // PET_<NAME>, DRUN_<NAME>, none

// A job file sets the option under its own name, or not at all (the options
// that act on the command line itself).
constexpr bool kInJobFile = true;
constexpr bool kCommandOnly = false;

struct OptionDef {
  Opt id;
  const char* name;  // canonical, dashed
  char short_name;
  Kind kind;
  const char* group;
  const char* metavar;
  const char* help;
  EnvTwin env;
  ValueRule rule;
  const char* default_value;  // "": none (OptionInfo::default_value)
  bool in_job_file;
};

// An --env-file or token file is a few lines; anything bigger is the wrong file.
constexpr size_t kMaxEnvFileBytes = 1 << 20;

constexpr const char kJob[] = "job";
constexpr const char kRdzv[] = "rendezvous";
constexpr const char kOut[] = "output";
constexpr const char kSsh[] = "ssh";
constexpr const char kSlurm[] = "slurm";

constexpr double kNoLimit = std::numeric_limits<double>::infinity();
constexpr ValueRule kFlagRule{ValueRule::kFlag, 0, 0, false, "true or false"};
constexpr ValueRule kTextRule{ValueRule::kText, 0, 0, false, "text"};
constexpr ValueRule kCountRule{ValueRule::kInt, 0, 1 << 30, false, "a whole number of 0 or more"};
constexpr ValueRule kPortRule{ValueRule::kInt, 1, 65535, false, "a TCP port number (1-65535)"};
constexpr ValueRule kSecondsRule{ValueRule::kSeconds, 0, kNoLimit, false, "a number of seconds (0 or more)"};
constexpr ValueRule kPositiveSecondsRule{ValueRule::kSeconds, 0, kNoLimit, true,
                                         "a number of seconds above 0"};

// The order here is the order of --help (and of Opt).
const OptionDef kOptions[] = {
    {Opt::kConfig, "config", 0, Kind::kValue, kJob, "FILE",
     "read options from a YAML job file (docs/config.md); the command line and environment win",
     EnvTwin::kDrun, kTextRule, "", kCommandOnly},
    {Opt::kPrintConfig, "print-config", 0, Kind::kFlag, kJob, nullptr,
     "print the resolved job as a YAML job file and exit", EnvTwin::kNone, kFlagRule, "", kCommandOnly},
    {Opt::kNnodes, "nnodes", 0, Kind::kValue, kJob, "N|MIN:MAX", "number of nodes, or an elastic range (default 1)",
     EnvTwin::kTorchrun, kTextRule, "1", kInJobFile},
    {Opt::kNprocPerNode, "nproc-per-node", 0, Kind::kValue, kJob, "N|cpu|gpu|auto|gpu:LIST",
     "workers per node; gpu:1,3,5 runs one worker per listed GPU (default 1)", EnvTwin::kTorchrun, kTextRule, "1",
     kInJobFile},
    {Opt::kStandalone, "standalone", 0, Kind::kFlag, kJob, nullptr,
     "single-node job with an in-process rendezvous and a random run id", EnvTwin::kTorchrun, kFlagRule, "",
     kInJobFile},
    {Opt::kModule, "module", 'm', Kind::kFlag, kJob, nullptr, "run the entrypoint as a Python module (python -m)",
     EnvTwin::kTorchrun, kFlagRule, "", kInJobFile},
    {Opt::kNoPython, "no-python", 0, Kind::kFlag, kJob, nullptr, "run the entrypoint as a program, without Python",
     EnvTwin::kTorchrun, kFlagRule, "", kInJobFile},
    {Opt::kRunPath, "run-path", 0, Kind::kFlag, kJob, nullptr,
     "accepted for torchrun compatibility: the script runs as python3 -u SCRIPT either way", EnvTwin::kTorchrun,
     kFlagRule, "", kInJobFile},
    {Opt::kMaxRestarts, "max-restarts", 0, Kind::kValue, kJob, "N",
     "restarts of the whole job before failing (default 0)", EnvTwin::kTorchrun, kCountRule, "0", kInJobFile},
    {Opt::kRestartPolicy, "restart-policy", 0, Kind::kValue, kJob, "unless-repeated|always",
     "unless-repeated (default) ends the job when the same rank fails the same way twice in a row; "
     "always restarts every failure while --max-restarts lasts", EnvTwin::kDrun, kTextRule, "unless-repeated",
     kInJobFile},
    {Opt::kRole, "role", 0, Kind::kValue, kJob, "NAME", "worker role, ROLE_NAME (default 'default')",
     EnvTwin::kTorchrun, kTextRule, "default", kInJobFile},
    {Opt::kNodeSetup, "node-setup", 0, Kind::kValue, kJob, "CMD",
     "run CMD (/bin/sh -c) once per node before the workers start; they start only if it exits 0", EnvTwin::kDrun,
     kTextRule, "", kInJobFile},
    {Opt::kNoAgentStore, "no-agent-store", 0, Kind::kFlag, kJob, nullptr,
     "let rank 0 host the c10d store (torchrun 1.13's way) instead of drun serving a fresh one per round",
     EnvTwin::kDrun, kFlagRule, "", kInJobFile},
    {Opt::kX, "x", 'x', Kind::kValue, kJob, "VAR[=VALUE]",
     "give every worker VAR (this shell's value, or VALUE), on every node; repeatable (mpirun's -x)",
     EnvTwin::kNone, kTextRule, "", kInJobFile},
    {Opt::kEnvFile, "env-file", 0, Kind::kValue, kJob, "FILE", "give every worker the VAR=VALUE lines of FILE",
     EnvTwin::kDrun, kTextRule, "", kInJobFile},
    {Opt::kShutdownTimeout, "shutdown-timeout", 0, Kind::kValue, kJob, "SECONDS",
     "grace between forwarding a stop signal and SIGKILL (default 30)", EnvTwin::kDrun, kSecondsRule, "30",
     kInJobFile},
    {Opt::kHangTimeout, "hang-timeout", 0, Kind::kValue, kJob, "SECONDS",
     "when no rank prints or uses CPU for SECONDS, show every rank's stack and end the job (exit 124) "
     "or restart it if restarts are left (default 0: off)",
     EnvTwin::kDrun, kSecondsRule, "0", kInJobFile},
    {Opt::kSignalsToHandle, "signals-to-handle", 0, Kind::kValue, kJob, "SIG,...",
     "the signals drun passes to the workers (default SIGINT,SIGTERM,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2); "
     "one left out keeps its default action on drun itself", EnvTwin::kTorchrun, kTextRule,
     "SIGINT,SIGTERM,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2", kInJobFile},
    {Opt::kVirtualLocalRank, "virtual-local-rank", 0, Kind::kFlag, kJob, nullptr,
     "every worker gets LOCAL_RANK=0 and sees only its own GPU, through CUDA_VISIBLE_DEVICES",
     EnvTwin::kTorchrun, kFlagRule, "", kInJobFile},
    {Opt::kNumaBinding, "numa-binding", 0, Kind::kValue, kJob, "node|socket|exclusive|core-complex",
     "bind each worker to the CPUs near its GPU (without GPUs: its share of the node); exclusive: a "
     "disjoint share of whole cores each, OMP_NUM_THREADS to match (docs/semantics.md)", EnvTwin::kTorchrun,
     kTextRule, "", kInJobFile},
    {Opt::kMonitorInterval, "monitor-interval", 0, Kind::kValue, kJob, "SECONDS",
     "accepted for torchrun compatibility; drun is event driven", EnvTwin::kTorchrun, kSecondsRule, "",
     kInJobFile},
    {Opt::kStartMethod, "start-method", 0, Kind::kValue, kJob, "spawn|fork|forkserver",
     "accepted for torchrun compatibility", EnvTwin::kTorchrun, kTextRule, "", kInJobFile},
    {Opt::kRunId, "run-id", 0, Kind::kValue, kRdzv, "ID", "job id, TORCHELASTIC_RUN_ID (same as --rdzv-id)",
     EnvTwin::kDrun, kTextRule, "", kInJobFile},
    {Opt::kRdzvId, "rdzv-id", 0, Kind::kValue, kRdzv, "ID",
     "job id shared by all nodes (default: random with --standalone, else 'none')", EnvTwin::kTorchrun, kTextRule,
     "", kInJobFile},
    {Opt::kRdzvBackend, "rdzv-backend", 0, Kind::kValue, kRdzv, "c10d|static", "rendezvous backend",
     EnvTwin::kTorchrun, kTextRule, "", kInJobFile},
    {Opt::kRdzvEndpoint, "rdzv-endpoint", 0, Kind::kValue, kRdzv, "HOST:PORT", "rendezvous server address",
     EnvTwin::kTorchrun, kTextRule, "", kInJobFile},
    {Opt::kRdzvConf, "rdzv-conf", 0, Kind::kValue, kRdzv, "K=V,...",
     "rendezvous settings (join_timeout, last_call_timeout, close_timeout, is_host)", EnvTwin::kTorchrun,
     kTextRule, "", kInJobFile},
    {Opt::kNodeRank, "node-rank", 0, Kind::kValue, kRdzv, "N", "this node's rank in a static rendezvous",
     EnvTwin::kTorchrun, kCountRule, "", kInJobFile},
    {Opt::kMasterAddr, "master-addr", 0, Kind::kValue, kRdzv, "ADDR",
     "node 0 of a static job (--node-rank), MASTER_ADDR of the workers (default: 127.0.0.1)", EnvTwin::kTorchrun,
     kTextRule, "", kInJobFile},
    {Opt::kMasterPort, "master-port", 0, Kind::kValue, kRdzv, "PORT",
     "MASTER_PORT given to the workers, in every mode (default: a free port)", EnvTwin::kTorchrun, kPortRule, "",
     kInJobFile},
    {Opt::kLocalAddr, "local-addr", 0, Kind::kValue, kRdzv, "ADDR", "address of this node as others should reach it",
     EnvTwin::kTorchrun, kTextRule, "", kInJobFile},
    {Opt::kIface, "iface", 0, Kind::kValue, kRdzv, "NAME|CIDR",
     "interface of the workers' gloo and NCCL sockets, by name or subnet (default on many nodes: the one "
     "each node reaches the rendezvous through)",
     EnvTwin::kDrun, kTextRule, "", kInJobFile},
    {Opt::kRdzvTokenFile, "rdzv-token-file", 0, Kind::kValue, kRdzv, "FILE",
     "file holding the job token (else $DRUN_RDZV_TOKEN), mode 0600; nodes without it are rejected",
     EnvTwin::kDrun, kTextRule, "", kInJobFile},
    {Opt::kRdzvTls, "rdzv-tls", 0, Kind::kValue, kRdzv, "CERT,KEY,CA",
     "TLS with client certificates on the rendezvous channel: this node's certificate, its key (mode "
     "0600) and the CA that signs every node's; the same paths on every host",
     EnvTwin::kDrun, kTextRule, "", kInJobFile},
    {Opt::kLogDir, "log-dir", 0, Kind::kValue, kOut, "DIR",
     "keep workers' output in <DIR>/<run_id>_<unique>/[<host>/]attempt_<n>/<local_rank>/{stdout,stderr}.log "
     "(both streams unless -r/-t say otherwise), a fresh run directory for every run, one for all its nodes; "
     "over ssh every host's files are also collected into this DIR at the end",
     EnvTwin::kTorchrun, kTextRule, "", kInJobFile},
    {Opt::kRedirects, "redirects", 'r', Kind::kValue, kOut, "0-3|R:0-3,...",
     "send workers' stdout (1), stderr (2) or both (3) to log files only", EnvTwin::kTorchrun, kTextRule, "",
     kInJobFile},
    {Opt::kTee, "tee", 't', Kind::kValue, kOut, "0-3|R:0-3,...",
     "copy workers' stdout (1), stderr (2) or both (3) to log files", EnvTwin::kTorchrun, kTextRule, "",
     kInJobFile},
    {Opt::kLocalRanksFilter, "local-ranks-filter", 0, Kind::kValue, kOut, "R,...",
     "show only these local ranks on the console", EnvTwin::kTorchrun, kTextRule, "", kInJobFile},
    {Opt::kStdin, "stdin", 0, Kind::kValue, kOut, "RANK|all|none",
     "which global ranks read drun's stdin (default: all when it is a terminal, so pdb and input() work on every rank; else 0); the others read end-of-file", EnvTwin::kDrun, kTextRule,
     "0", kInJobFile},
    {Opt::kSummary, "summary", 0, Kind::kFlag, kOut, nullptr,
     "print the per-rank table (exit, attempts, wall time, peak RSS) at exit; always on failure", EnvTwin::kDrun,
     kFlagRule, "", kInJobFile},
    {Opt::kReport, "report", 0, Kind::kValue, kOut, "FILE", "write the run's summary and rendezvous timings as JSON",
     EnvTwin::kDrun, kTextRule, "", kInJobFile},
    {Opt::kQuiet, "quiet", 'q', Kind::kFlag, kOut, nullptr,
     "print nothing of drun's own but the outcome of a failed job", EnvTwin::kDrun, kFlagRule, "", kInJobFile},
    {Opt::kHostfile, "hostfile", 0, Kind::kValue, kSsh, "FILE",
     "start one agent per host of FILE over ssh (mpirun syntax: host [slots=N] [max_slots=N])", EnvTwin::kDrun,
     kTextRule, "", kInJobFile},
    {Opt::kHost, "host", 'H', Kind::kValue, kSsh, "HOST[:N],...", "the same for a list of hosts (mpirun's -H)",
     EnvTwin::kDrun, kTextRule, "", kInJobFile},
    {Opt::kRemoteDrun, "remote-drun", 0, Kind::kValue, kSsh, "PATH",
     "drun's path on the hosts (default: this drun's path)", EnvTwin::kDrun, kTextRule, "", kInJobFile},
    {Opt::kSshAcceptNew, "ssh-accept-new", 0, Kind::kFlag, kSsh, nullptr,
     "accept and remember unknown host keys (StrictHostKeyChecking=accept-new)", EnvTwin::kDrun, kFlagRule, "",
     kInJobFile},
    {Opt::kRsh, "rsh", 0, Kind::kValue, kSsh, "CMD",
     "start agents with CMD HOST ... instead of libssh (e.g. 'ssh -p 2222')", EnvTwin::kDrun, kTextRule, "",
     kInJobFile},
    {Opt::kLauncher, "launcher", 0, Kind::kValue, kSlurm, "local|ssh|slurm",
     "how agents start: slurm runs srun inside an allocation (default: from the other options)", EnvTwin::kDrun,
     kTextRule, "", kInJobFile},
    {Opt::kHelp, "help", 'h', Kind::kFlag, "", nullptr, "show this help and exit", EnvTwin::kNone, kFlagRule, "",
     kCommandOnly},
    {Opt::kVersion, "version", 0, Kind::kFlag, "", nullptr, "show drun's version and its libraries' and exit",
     EnvTwin::kNone, kFlagRule, "", kCommandOnly},
};

const OptionDef& Def(Opt id) { return kOptions[static_cast<size_t>(id)]; }

// --rdzv-conf's keys (torchrun's names), each with its rule and default.
struct ConfKeyDef {
  const char* key;
  ValueRule rule;
  const char* default_value;
};
constexpr ConfKeyDef kRdzvConfKeys[] = {
    {"join_timeout", kSecondsRule, "600"},
    {"last_call_timeout", kSecondsRule, "30"},
    {"close_timeout", kSecondsRule, "30"},
    {"read_timeout", kPositiveSecondsRule, "60"},
    {"is_host", kFlagRule, ""},
    {"keep_alive_interval", kPositiveSecondsRule, "0.5"},
    {"keep_alive_max_attempt", {ValueRule::kInt, 1, 1000, false, "a count of 1 or more"}, "4"},
};
constexpr const char kJoinTimeoutAlias[] = "timeout";  // torchrun's older name of join_timeout

// torchrun 2.x options that drun refuses, each with its reason (docs/migrating.md).
struct RefusedOption {
  const char* name;
  const char* reason;
};
constexpr RefusedOption kRefused[] = {
    {"logs-specs",
     "torchrun's LogsSpecs plugins do not apply: drun writes its own layout (--log-dir, -r, -t)"},
    {"event-log-handler", "drun has no torchrun event handlers; --report FILE writes the run as JSON"},
    {"duplicate-stdout-filters",
     "drun does not copy matching lines to a separate file; --log-dir with -t keeps every line"},
    {"duplicate-stderr-filters",
     "drun does not copy matching lines to a separate file; --log-dir with -t keeps every line"},
    {"use-env", "torch.distributed.launch's flag: drun always passes LOCAL_RANK in the environment"},
};

// mpirun's process-count spellings.
enum class MpiCount { kNone, kTotal, kPerNode };
MpiCount MpirunSpelling(const std::string& name) {
  for (const char* t : {"-np", "--np", "-n", "-c"}) {
    if (name == t) return MpiCount::kTotal;
  }
  for (const char* p : {"-N", "-npernode", "--npernode"}) {
    if (name == p) return MpiCount::kPerNode;
  }
  return MpiCount::kNone;
}

const OptionDef* FindLong(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  for (const auto& o : kOptions) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

const OptionDef* FindShort(char c) {
  for (const auto& o : kOptions) {
    if (o.short_name == c) return &o;
  }
  return nullptr;
}

// The option's environment twin; "" for an option that only the command line
// (or a job file) sets: a stray DRUN_VERSION or DRUN_HELP in a CI job's
// environment must not change what every drun does, and -x is repeatable (its
// environment is the variables themselves).
std::string EnvName(const OptionDef& o) {
  if (o.env == EnvTwin::kNone) return "";
  std::string n = absl::AsciiStrToUpper(o.name);
  std::replace(n.begin(), n.end(), '-', '_');
  return absl::StrCat(o.env == EnvTwin::kTorchrun ? "PET_" : "DRUN_", n);
}

// Other spellings of an option's variable, read after EnvName: the Kubeflow
// training operator writes PET_N_PROC_PER_NODE in some versions.
std::vector<std::string> EnvAliases(const OptionDef& o) {
  if (o.id == Opt::kNprocPerNode) return {"PET_N_PROC_PER_NODE"};
  return {};
}

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(msg); }

absl::Status UnknownOption(const std::string& arg) {
  std::string name = arg.substr(0, arg.find('='));
  std::string bare = name;
  bare.erase(0, bare.find_first_not_of('-'));
  std::replace(bare.begin(), bare.end(), '_', '-');
  for (const RefusedOption& r : kRefused) {
    if (bare == r.name) return Bad(absl::StrCat(name, " is not supported: ", r.reason));
  }
  const OptionDef* best = nullptr;
  // Only names long enough to be a typo of another (not -x for -np).
  size_t best_d = bare.size() >= 4 ? 4 : 0;
  for (const auto& o : kOptions) {
    size_t d = EditDistance(bare, o.name);
    if (d < best_d) {
      best_d = d;
      best = &o;
    }
  }
  if (best) return Bad(absl::StrCat("unknown option ", name, "; did you mean --", best->name, "?"));
  return Bad(absl::StrCat("unknown option ", name, "; see drun --help"));
}

bool ParseBool(const std::string& v, bool* out) {
  std::string s = absl::AsciiStrToLower(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return *out = true, true;
  if (s == "0" || s == "false" || s == "no" || s == "off" || s.empty()) return *out = false, true;
  return false;
}

// torchrun's --standalone run ids are random too; 12 hex digits.
std::string RandomRunId() { return RandomHex(6); }

// The command line split into options and the entrypoint.
struct Tokens {
  std::map<Opt, std::string> given;          // option -> value ("1" for flags)
  std::vector<std::string> x;                // -x values, in order
  std::vector<size_t> x_args;                // the argument holding each (the value ends it)
  std::vector<std::string> rest;             // entrypoint and its arguments
  // mpirun's -np N (kTotal) or -N N (kPerNode), with the spelling used.
  MpiCount mpi_kind = MpiCount::kNone;
  std::string mpi_spelling;
  std::string mpi_value;
};

// Reads the value of option `o` (spelled `spelling`) at args[*i].
absl::StatusOr<std::string> TakeValue(const std::vector<std::string>& args, size_t* i,
                                      const std::string& spelling, const char* metavar) {
  if (*i + 1 >= args.size()) {
    return Bad(absl::StrCat(spelling, " needs a value: ", spelling, " ", metavar));
  }
  return args[++*i];
}

absl::StatusOr<Tokens> Tokenize(const std::vector<std::string>& args) {
  Tokens t;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // the training script
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (MpiCount k = MpirunSpelling(name); k != MpiCount::kNone) {
      auto v = eq == std::string::npos ? TakeValue(args, &i, name, "N") : a.substr(eq + 1);
      if (!v.ok()) return v.status();
      t.mpi_kind = k;
      t.mpi_spelling = name;
      t.mpi_value = *v;
      continue;
    }
    const OptionDef* o = nullptr;
    std::optional<std::string> value;
    if (a[1] == '-') {
      o = FindLong(a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2));
      if (!o) return UnknownOption(a);
      if (eq != std::string::npos) value = a.substr(eq + 1);
    } else {
      o = FindShort(a[1]);
      if (!o) return UnknownOption(a);
      if (a.size() > 2) {
        if (o->kind == Kind::kFlag) return UnknownOption(a);
        value = a.substr(a[2] == '=' ? 3 : 2);
      }
    }
    if (o->kind == Kind::kFlag) {
      if (value) return Bad(absl::StrCat("--", o->name, " takes no value; write just --", o->name));
      t.given[o->id] = "1";
      continue;
    }
    if (!value) {
      auto v = TakeValue(args, &i, absl::StrCat("--", o->name), o->metavar);
      if (!v.ok()) return v.status();
      value = *v;
    }
    if (o->id == Opt::kX) {  // repeatable
      t.x.push_back(*value);
      t.x_args.push_back(i);
      continue;
    }
    t.given[o->id] = *value;
  }
  t.rest.assign(args.begin() + static_cast<long>(std::min(i, args.size())), args.end());
  return t;
}

// One option's value with where it came from.
struct Valued {
  std::string value;
  Origin origin;
};

// The three layers an option may come from, in precedence order: the command
// line, the environment (PET_<NAME> / DRUN_<NAME>), a job file.
class Sources {
 public:
  Sources(const Tokens& t, const EnvMap& env, const JobFile& job, std::string job_path)
      : t_(t), env_(env), job_(job), job_path_(std::move(job_path)) {}

  std::optional<Valued> Get(Opt id) const {
    const OptionDef& o = Def(id);
    if (auto it = t_.given.find(id); it != t_.given.end()) {
      return Valued{it->second, {Origin::kCommandLine, absl::StrCat("--", o.name), it->second}};
    }
    std::vector<std::string> vars = {EnvName(o)};
    for (auto& alias : EnvAliases(o)) vars.push_back(alias);
    for (const std::string& var : vars) {
      if (var.empty()) continue;
      if (auto e = env_.find(var); e != env_.end()) {
        return Valued{e->second, {Origin::kEnvironment, var, e->second}};
      }
    }
    if (!o.in_job_file) return std::nullopt;
    if (auto f = job_.options.find(o.name); f != job_.options.end()) {
      return Valued{f->second, {Origin::kJobFile, job_path_, f->second}};
    }
    return std::nullopt;
  }
  // The value given, else the option's default (OptionInfo::default_value),
  // else nullopt. Only for options whose value has no rule to check.
  std::optional<std::string> Value(Opt id) const {
    if (auto v = Get(id)) return v->value;
    if (*Def(id).default_value) return std::string(Def(id).default_value);
    return std::nullopt;
  }
  // A flag's value; a value that is not a boolean is an error naming its source.
  absl::StatusOr<bool> Flag(Opt id) const {
    auto v = Get(id);
    if (!v) return false;
    bool b;
    if (!ParseBool(v->value, &b)) {
      return Bad(absl::StrCat(Label(v->origin, id), "='", v->value, "' is not a boolean; write 1 or 0"));
    }
    return b;
  }
  // The value given, checked by the option's rule (CheckValue), else its
  // default; nullopt when neither.
  absl::StatusOr<std::optional<std::string>> Checked(Opt id) const {
    const OptionDef& o = Def(id);
    auto v = Get(id);
    if (!v) return *o.default_value ? std::optional<std::string>(o.default_value) : std::nullopt;
    if (absl::Status st = CheckValue(o.rule, v->value); !st.ok()) {
      return Bad(absl::StrCat(Label(v->origin, id), " ", st.message()));
    }
    return std::optional<std::string>(absl::StripAsciiWhitespace(v->value));
  }
  // How a message names the option as the user gave it.
  static std::string Label(const Origin& o, Opt id) {
    const char* name = Def(id).name;
    switch (o.kind) {
      case Origin::kEnvironment:
        return o.name;
      case Origin::kJobFile:
        return absl::StrCat(name, " (", o.name, ")");
      case Origin::kCommandLine:
        break;
    }
    return absl::StrCat("--", name);
  }
  const Tokens& tokens() const { return t_; }
  const JobFile& job() const { return job_; }
  const EnvMap& env() const { return env_; }

 private:
  const Tokens& t_;
  const EnvMap& env_;
  const JobFile& job_;
  std::string job_path_;
};

// Reads an integer option (its value, else its default) when it has one; `set` receives it.
template <typename Set>
absl::Status IntOption(const Sources& src, Opt id, Set set) {
  auto v = src.Checked(id);
  if (!v.ok()) return v.status();
  int n = 0;
  if (*v && absl::SimpleAtoi(**v, &n)) set(n);
  return absl::OkStatus();
}

template <typename Set>
absl::Status SecondsOption(const Sources& src, Opt id, Set set) {
  auto v = src.Checked(id);
  if (!v.ok()) return v.status();
  double d = 0;
  if (*v && absl::SimpleAtod(**v, &d)) set(d);
  return absl::OkStatus();
}

absl::StatusOr<JobFile> LoadConfig(const Tokens& t, const EnvMap& env, std::string* path) {
  if (auto it = t.given.find(Opt::kConfig); it != t.given.end()) {
    *path = it->second;
  } else if (auto e = env.find("DRUN_CONFIG"); e != env.end()) {
    *path = e->second;
  }
  if (path->empty()) return JobFile{};
  return LoadJobFile(*path);
}

absl::Status ResolveNodes(const Sources& src, CommandLine* cl) {
  int min_nodes = 0, max_nodes = 0;
  absl::SimpleAtoi(Def(Opt::kNnodes).default_value, &min_nodes);
  max_nodes = min_nodes;
  if (auto v = src.Get(Opt::kNnodes)) {
    const std::string label = Sources::Label(v->origin, Opt::kNnodes);
    std::vector<std::string> parts = absl::StrSplit(v->value, ':');
    const std::string hint = "write a number like 2, or a range MIN:MAX like 2:4";
    if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &min_nodes) || min_nodes < 1 ||
        (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &max_nodes) || max_nodes < 1))) {
      return Bad(absl::StrCat(label, ": '", v->value, "' is not valid; ", hint));
    }
    if (parts.size() == 1) max_nodes = min_nodes;
    if (min_nodes > max_nodes) {
      return Bad(absl::StrCat(label, " ", v->value, ": the minimum is larger than the maximum; ", hint));
    }
    if (cl->standalone && max_nodes > 1) {
      return Bad(absl::StrCat("--standalone runs one node, but ", cl->Describe(Opt::kNnodes),
                              " asks for more: drop --standalone and give --rdzv-endpoint HOST:PORT"));
    }
  }
  cl->spec.set_min_nodes(min_nodes);
  cl->spec.set_max_nodes(max_nodes);
  return absl::OkStatus();
}

// --nproc-per-node, or mpirun's -N (per node) / -np (the whole job's count).
absl::Status ResolveNproc(const Sources& src, CommandLine* cl) {
  const Tokens& t = src.tokens();
  auto given = src.Get(Opt::kNprocPerNode);
  std::string nproc = given ? given->value : Def(Opt::kNprocPerNode).default_value;
  if (t.mpi_kind != MpiCount::kNone) {
    int n;
    if (!absl::SimpleAtoi(t.mpi_value, &n) || n < 1) {
      return Bad(absl::StrCat(t.mpi_spelling, " '", t.mpi_value, "' is not a number of processes"));
    }
    if (given) {
      return Bad(absl::StrCat(t.mpi_spelling, " and ", given->origin.Describe(Opt::kNprocPerNode),
                              " both set the number of workers; give only --nproc-per-node"));
    }
    if (t.mpi_kind == MpiCount::kTotal && cl->launcher == Launcher::kSsh) {
      cl->total_procs = n;  // the ssh plan spreads it over the hosts' slots
      cl->spec.set_nproc_per_node("1");  // each host's own count is set by the plan
      return absl::OkStatus();
    }
    const int nodes = cl->spec.max_nodes();
    // Only where drun knows the node count now: typed on every node, not over
    // ssh or Slurm (hosts and allocations set it later).
    const bool in_srun = src.env().count("SLURM_STEP_ID") || src.env().count("SLURM_STEPID");
    const bool fixed = cl->spec.min_nodes() == nodes && cl->launcher == Launcher::kLocal && !in_srun;
    if (t.mpi_kind == MpiCount::kTotal && (!fixed || n % nodes != 0)) {
      return Bad(absl::StrCat(t.mpi_spelling, " ", n, " counts the processes of the whole job; drun "
                              "counts them per node: write --nproc-per-node N (mpirun's -N), or name the hosts "
                              "(--hostfile/-H) to spread the total over them"));
    }
    nproc = std::to_string(t.mpi_kind == MpiCount::kTotal ? n / nodes : n);
  }
  cl->spec.set_nproc_per_node(nproc);
  if (absl::Status st = ValidateNprocSpec(nproc); !st.ok() && !absl::IsFailedPrecondition(st)) {
    if (given && given->origin.kind != Origin::kCommandLine) {
      return Bad(absl::StrCat(Sources::Label(given->origin, Opt::kNprocPerNode), ": ", st.message()));
    }
    return st;
  }
  return absl::OkStatus();
}

absl::Status ResolveEntrypointKind(const Sources& src, CommandLine* cl) {
  auto module = src.Flag(Opt::kModule);
  if (!module.ok()) return module.status();
  auto no_python = src.Flag(Opt::kNoPython);
  if (!no_python.ok()) return no_python.status();
  auto run_path = src.Flag(Opt::kRunPath);  // runs the script as the default does
  if (!run_path.ok()) return run_path.status();
  if (*module && *no_python) {
    return Bad("--module and --no-python exclude each other; use one of them");
  }
  cl->spec.set_kind(*module ? v1::JobSpec::PYTHON_MODULE
                            : *no_python ? v1::JobSpec::PROGRAM : v1::JobSpec::PYTHON_SCRIPT);
  return absl::OkStatus();
}

// --restart-policy: which failed rounds --max-restarts restarts
// (rendezvous/failure_repeat.h).
absl::Status ResolveRestartPolicy(const Sources& src, v1::JobSpec* s) {
  const std::string v = src.Value(Opt::kRestartPolicy).value_or("");
  if (v == "unless-repeated") {
    s->set_restart_policy(v1::JobSpec::RESTART_UNLESS_REPEATED);
  } else if (v == "always") {
    s->set_restart_policy(v1::JobSpec::RESTART_ALWAYS);
  } else {
    return Bad(absl::StrCat("--restart-policy must be unless-repeated or always, not '", v, "'"));
  }
  return absl::OkStatus();
}

absl::Status ResolveSupervision(const Sources& src, CommandLine* cl) {
  v1::JobSpec& s = cl->spec;
  if (auto st = IntOption(src, Opt::kMaxRestarts, [&](int n) { s.set_max_restarts(n); }); !st.ok()) return st;
  if (auto st = ResolveRestartPolicy(src, &s); !st.ok()) return st;
  auto no_agent_store = src.Flag(Opt::kNoAgentStore);
  if (!no_agent_store.ok()) return no_agent_store.status();
  s.set_agent_store(!*no_agent_store);
  s.set_role(src.Value(Opt::kRole).value_or(""));
  s.set_node_setup(src.Value(Opt::kNodeSetup).value_or(""));
  if (auto st = SecondsOption(src, Opt::kShutdownTimeout, [&](double d) { s.set_shutdown_timeout_s(d); });
      !st.ok()) {
    return st;
  }
  if (auto st = SecondsOption(src, Opt::kHangTimeout, [&](double d) { s.set_hang_timeout_s(d); }); !st.ok()) {
    return st;
  }
  if (auto st = SecondsOption(src, Opt::kMonitorInterval, [](double) {}); !st.ok()) return st;
  if (auto v = src.Get(Opt::kStartMethod)) {
    if (v->value != "spawn" && v->value != "fork" && v->value != "forkserver") {
      return Bad(absl::StrCat(Sources::Label(v->origin, Opt::kStartMethod), ": '", v->value,
                              "' is not valid; write spawn, fork or forkserver"));
    }
  }
  return absl::OkStatus();
}

// --signals-to-handle, --virtual-local-rank, --numa-binding: where the
// workers run and which signals reach them (agent/handled_signals.h,
// agent/cpu_placement.h).
absl::Status ResolveWorkerPlacement(const Sources& src, CommandLine* cl) {
  v1::JobSpec& s = cl->spec;
  if (auto v = src.Get(Opt::kSignalsToHandle)) {
    auto list = ParseSignalList(v->value);
    if (!list.ok()) {
      return Bad(absl::StrCat(Sources::Label(v->origin, Opt::kSignalsToHandle), ": ", list.status().message()));
    }
    // The ssh and Slurm launchers forward the six signals themselves.
    if (cl->launcher != Launcher::kLocal && *list != ForwardableSignals()) {
      return Bad(absl::StrCat(cl->Describe(Opt::kSignalsToHandle), " applies to a node's own drun; with ",
                              cl->launcher == Launcher::kSsh ? "--hostfile/-H" : "--launcher slurm",
                              " the launcher forwards ", SignalListText(ForwardableSignals())));
    }
    s.mutable_signals_to_handle()->Assign(list->begin(), list->end());
  }
  auto virtual_local_rank = src.Flag(Opt::kVirtualLocalRank);
  if (!virtual_local_rank.ok()) return virtual_local_rank.status();
  s.set_virtual_local_rank(*virtual_local_rank);
  if (auto v = src.Get(Opt::kNumaBinding)) {
    auto mode = ParseNumaBinding(v->value);
    if (!mode.ok()) {
      return Bad(absl::StrCat(Sources::Label(v->origin, Opt::kNumaBinding), ": ", mode.status().message()));
    }
    s.set_numa_binding(*mode);
  }
  return absl::OkStatus();
}

absl::Status ResolveRunId(const Sources& src, CommandLine* cl) {
  auto run_id = src.Value(Opt::kRunId);
  auto rdzv_id = src.Value(Opt::kRdzvId);
  if (run_id && rdzv_id && *run_id != *rdzv_id) {
    return Bad("--run-id and --rdzv-id name the same thing; give only one of them");
  }
  if (run_id || rdzv_id) {
    cl->spec.set_run_id(run_id ? *run_id : *rdzv_id);
    if (cl->spec.run_id().empty()) return Bad("--run-id: the id must not be empty");
  } else {
    cl->spec.set_run_id((cl->standalone ? RunId::Named(RandomRunId()) : RunId::Default()).text());
  }
  return absl::OkStatus();
}

const ConfKeyDef* FindConfKey(const std::string& k) {
  const std::string key = k == kJoinTimeoutAlias ? "join_timeout" : k;
  for (const ConfKeyDef& c : kRdzvConfKeys) {
    if (key == c.key) return &c;
  }
  return nullptr;
}

// One checked --rdzv-conf value (or a default) into its typed field.
void SetRdzvConf(const std::string& key, const std::string& v, v1::JobSpec* s, int* max_attempts) {
  double d = 0;
  if (key == "is_host") {
    bool b = false;
    ParseBool(v, &b);
    s->set_host_role(b ? v1::JobSpec::HOST_ROLE_HOST : v1::JobSpec::HOST_ROLE_CLIENT);
  } else if (key == "keep_alive_max_attempt") {
    absl::SimpleAtoi(v, max_attempts);
  } else if (absl::SimpleAtod(v, &d)) {
    if (key == "join_timeout") s->set_join_timeout_s(d);
    if (key == "last_call_timeout") s->set_last_call_timeout_s(d);
    if (key == "close_timeout") s->set_close_timeout_s(d);
    if (key == "read_timeout") s->set_read_timeout_s(d);
    if (key == "keep_alive_interval") s->set_keepalive_interval_s(d);
  }
}

// One --rdzv-conf KEY=VALUE, checked by its key's rule.
absl::Status ApplyRdzvConf(const std::string& label, const std::string& k, const std::string& v,
                           v1::JobSpec* s, int* max_attempts) {
  const ConfKeyDef* c = FindConfKey(k);
  if (c == nullptr) {
    std::vector<std::string> known;
    for (const ConfKeyDef& d : kRdzvConfKeys) known.push_back(d.key);
    return Bad(absl::StrCat(label, ": unknown key '", k, "'; known: ", absl::StrJoin(known, ", ")));
  }
  if (absl::Status st = CheckValue(c->rule, v); !st.ok()) {
    return Bad(absl::StrCat(label, " ", k, " ", st.message()));
  }
  SetRdzvConf(c->key, std::string(absl::StripAsciiWhitespace(v)), s, max_attempts);
  return absl::OkStatus();
}

absl::Status ResolveRdzvConf(const Sources& src, CommandLine* cl) {
  v1::JobSpec& s = cl->spec;
  int max_attempts = 0;
  for (const ConfKeyDef& c : kRdzvConfKeys) {
    if (*c.default_value) SetRdzvConf(c.key, c.default_value, &s, &max_attempts);
  }
  auto v = src.Get(Opt::kRdzvConf);
  if (v) {
    const std::string label = Sources::Label(v->origin, Opt::kRdzvConf);
    for (absl::string_view kv : absl::StrSplit(v->value, ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      if (p.first.empty() || kv.find('=') == absl::string_view::npos) {
        return Bad(absl::StrCat(label, ": '", kv,
                                "' is not KEY=VALUE; write e.g. join_timeout=600,last_call_timeout=30"));
      }
      if (auto st = ApplyRdzvConf(label, p.first, p.second, &s, &max_attempts); !st.ok()) return st;
    }
  }
  // The link's keep-alive timeout (rendezvous/link_liveness.h): its probes' interval x their count.
  s.set_keepalive_timeout_s(s.keepalive_interval_s() * max_attempts);
  return absl::OkStatus();
}

// A path as the user wrote it, made absolute against the working directory,
// so remote agents (which start elsewhere) read the same file.
std::string AbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) == nullptr) return path;
  return absl::StrCat(cwd, "/", path);
}

// --rdzv-tls CERT,KEY,CA: three files this user can read, the key readable by
// no one else (like a token file). That they are PEM and that the key is the
// certificate's is checked by OpenSSL when drun-net loads them (main_net.cc):
// the light drun links no libssl.
absl::Status ResolveTls(const Sources& src, CommandLine* cl) {
  auto v = src.Get(Opt::kRdzvTls);
  if (!v) return absl::OkStatus();
  const std::string label = Sources::Label(v->origin, Opt::kRdzvTls);
  const std::vector<std::string> parts = absl::StrSplit(v->value, ',');
  if (parts.size() != 3 || std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    return Bad(absl::StrCat(label, " '", v->value,
                            "': write CERT,KEY,CA: this node's certificate, its private key and the CA "
                            "certificate (PEM files, no ',' in their paths)"));
  }
  const char* roles[] = {"certificate", "key", "CA certificate"};
  std::string paths[3];
  for (int i = 0; i < 3; ++i) {
    paths[i] = AbsolutePath(parts[i]);
    auto text = ReadSmallFile(paths[i], kMaxEnvFileBytes, absl::StrCat(label, " ", roles[i]));
    if (!text.ok()) return Bad(std::string(text.status().message()));
  }
  struct stat st;
  if (stat(paths[1].c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    return Bad(absl::StrCat(label, " key ", QuotePath(paths[1]), " may be read by others (mode ",
                            absl::StrFormat("%04o", st.st_mode & 07777), "); run chmod 600 ",
                            ShellQuote(paths[1])));
  }
  v1::TlsFiles* tls = cl->spec.mutable_tls();
  tls->set_cert(paths[0]);
  tls->set_key(paths[1]);
  tls->set_ca(paths[2]);
  return absl::OkStatus();
}

absl::Status ResolveRendezvous(const Sources& src, CommandLine* cl) {
  v1::JobSpec& s = cl->spec;
  if (auto st = ResolveRunId(src, cl); !st.ok()) return st;
  if (auto v = src.Get(Opt::kRdzvBackend)) {
    if (v->value != "c10d" && v->value != "static") {
      return Bad(absl::StrCat(Sources::Label(v->origin, Opt::kRdzvBackend), ": '", v->value,
                              "' is not available; drun serves its own rendezvous: write c10d or static"));
    }
    s.set_rdzv_backend(v->value == "static" ? v1::JobSpec::STATIC : v1::JobSpec::C10D);
  }
  s.set_rdzv_endpoint(src.Value(Opt::kRdzvEndpoint).value_or(""));
  if (auto st = ResolveRdzvConf(src, cl); !st.ok()) return st;
  s.set_node_rank(-1);
  if (auto st = IntOption(src, Opt::kNodeRank, [&](int n) { s.set_node_rank(n); }); !st.ok()) return st;
  s.set_master_addr(src.Value(Opt::kMasterAddr).value_or(""));
  if (auto st = IntOption(src, Opt::kMasterPort, [&](int n) { s.set_master_port(n); }); !st.ok()) return st;
  s.set_local_addr(src.Value(Opt::kLocalAddr).value_or(""));
  if (auto v = src.Get(Opt::kIface)) {
    if (auto c = ParseIfaceChoice(v->value); !c.ok()) {
      return Bad(absl::StrCat(Sources::Label(v->origin, Opt::kIface), ": ", c.status().message()));
    }
    s.set_iface(v->value);
  }
  return ResolveTls(src, cl);
}

// The job's world size where the command line fixes it: a fixed node count,
// typed on every node (not ssh, Slurm or srun, which learn it later), and a
// numeric --nproc-per-node. nullopt when the nodes learn it at the rendezvous.
std::optional<int> WorldSizeNow(const Sources& src, const CommandLine& cl) {
  const v1::JobSpec& s = cl.spec;
  const bool in_srun = src.env().count("SLURM_STEP_ID") || src.env().count("SLURM_STEPID");
  int nproc = 0;
  if (s.min_nodes() != s.max_nodes() || cl.launcher != Launcher::kLocal || in_srun ||
      !absl::SimpleAtoi(s.nproc_per_node(), &nproc)) {
    return std::nullopt;
  }
  return s.max_nodes() * nproc;
}

// --stdin: as given; else all when drun's stdin is a terminal (every rank's pdb
// and input() are usable), rank 0 when it is a pipe or a file. A rank the job
// does not have is refused where the world size is known now.
absl::Status ResolveStdin(const Sources& src, CommandLine* cl) {
  v1::JobSpec& s = cl->spec;
  auto v = src.Get(Opt::kStdin);
  if (!v) {
    *s.mutable_stdin_target() = *ParseStdinTarget(cl->stdin_is_terminal ? "all" : Def(Opt::kStdin).default_value);
    return absl::OkStatus();
  }
  auto t = ParseStdinTarget(v->value);
  if (!t.ok()) return Bad(absl::StrCat(Sources::Label(v->origin, Opt::kStdin), ": ", t.status().message()));
  *s.mutable_stdin_target() = *t;
  const std::optional<int> world = WorldSizeNow(src, *cl);
  if (t->mode() == v1::JobSpec::StdinTarget::RANK && world && t->rank() >= *world) {
    return Bad(absl::StrCat(v->origin.Describe(Opt::kStdin), ": the job has ranks 0 to ", *world - 1,
                            " (", s.max_nodes(), " node(s) x ", s.nproc_per_node(),
                            "); write one of them, all or none"));
  }
  return absl::OkStatus();
}

absl::Status ResolveOutput(const Sources& src, CommandLine* cl) {
  v1::JobSpec& s = cl->spec;
  s.set_log_dir(src.Value(Opt::kLogDir).value_or(""));
  for (Opt id : {Opt::kRedirects, Opt::kTee}) {
    auto v = src.Get(id);
    if (!v) continue;
    auto spec = ParseStdSpec(v->value);
    if (!spec.ok()) return Bad(absl::StrCat(Sources::Label(v->origin, id), ": ", spec.status().message()));
    *(id == Opt::kRedirects ? s.mutable_redirects() : s.mutable_tee()) = ToProto(*spec);
  }
  if (auto v = src.Get(Opt::kLocalRanksFilter)) {
    auto f = ParseRankList(v->value);
    if (!f.ok()) {
      return Bad(absl::StrCat(Sources::Label(v->origin, Opt::kLocalRanksFilter), ": ", f.status().message()));
    }
    for (int r : *f) s.add_local_ranks_filter(r);
  }
  if (absl::Status st = ResolveStdin(src, cl); !st.ok()) return st;
  auto summary = src.Flag(Opt::kSummary);
  if (!summary.ok()) return summary.status();
  cl->summary = *summary;
  auto quiet = src.Flag(Opt::kQuiet);
  if (!quiet.ok()) return quiet.status();
  s.set_quiet(*quiet);
  cl->report_path = src.Value(Opt::kReport).value_or("");
  return absl::OkStatus();
}

absl::Status ResolveHosts(const Sources& src, CommandLine* cl) {
  const JobFile& job = src.job();
  // A path or host list that is given but empty names nothing: say so rather than fall
  // back to a job file's hosts: (--print-config would then write both).
  for (Opt id : {Opt::kRdzvTokenFile, Opt::kHostfile, Opt::kHost, Opt::kEnvFile}) {
    if (auto v = src.Get(id); v && v->value.empty()) {
      return Bad(absl::StrCat(Sources::Label(v->origin, id), " is empty; give a ",
                              id == Opt::kHost ? "host list" : "file name", " or drop it"));
    }
  }
  cl->token_file = src.Value(Opt::kRdzvTokenFile).value_or("");
  cl->hostfile = src.Value(Opt::kHostfile).value_or("");
  cl->hosts = src.Value(Opt::kHost).value_or("");
  if (cl->hostfile.empty() && cl->hosts.empty() && !job.hosts.empty()) {
    cl->hosts = absl::StrJoin(job.hosts, ",");
    cl->host_entries = job.host_entries;
    for (auto& h : cl->host_entries) h.line = 0;  // lines of the YAML file, not a host file
  }
  cl->remote_drun = src.Value(Opt::kRemoteDrun).value_or("");
  cl->rsh = src.Value(Opt::kRsh).value_or("");
  auto accept_new = src.Flag(Opt::kSshAcceptNew);
  if (!accept_new.ok()) return accept_new.status();
  cl->ssh_accept_new = *accept_new;
  if (!cl->hostfile.empty() && !cl->hosts.empty()) {
    return Bad("--hostfile and -H/--host both name the hosts; give only one of them");
  }
  const bool have_hosts = !cl->hostfile.empty() || !cl->hosts.empty();
  if (auto v = src.Get(Opt::kLauncher)) {
    if (v->value == "local") cl->launcher = Launcher::kLocal;
    else if (v->value == "ssh") cl->launcher = Launcher::kSsh;
    else if (v->value == "slurm") cl->launcher = Launcher::kSlurm;
    else {
      return Bad(absl::StrCat(Sources::Label(v->origin, Opt::kLauncher), ": '", v->value,
                              "' is not valid; write local, ssh or slurm"));
    }
  } else {
    cl->launcher = have_hosts ? Launcher::kSsh : Launcher::kLocal;
  }
  if (cl->launcher == Launcher::kSsh && !have_hosts) {
    return Bad("--launcher ssh needs the hosts: --hostfile FILE or -H host1,host2");
  }
  if (cl->standalone && cl->launcher != Launcher::kLocal) {
    return Bad(absl::StrCat("--standalone runs one node on this machine, but ",
                            have_hosts ? "--hostfile/-H start agents on other hosts" : "--launcher slurm starts them with srun",
                            ": drop --standalone"));
  }
  return absl::OkStatus();
}

// --iface and GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME given to the workers
// (-x, --env-file, YAML env:) both choose the interface: one of them only.
absl::Status CheckIfaceOnce(const CommandLine& cl) {
  if (cl.spec.iface().empty()) return absl::OkStatus();
  for (const char* k : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) {
    if (cl.spec.env().count(k)) {
      return Bad(absl::StrCat(cl.Describe(Opt::kIface), " and ", k, " given to the workers both choose the "
                              "interface: give one of them"));
    }
  }
  return absl::OkStatus();
}

absl::Status ResolveEnv(const Sources& src, CommandLine* cl) {
  const std::string x = Def(Opt::kX).name;  // the job file's x: list
  cl->forward_env = src.job().multi.count(x) ? src.job().multi.at(x) : std::vector<std::string>{};
  for (const auto& x : src.tokens().x) cl->forward_env.push_back(x);
  const Tokens& t = src.tokens();
  for (size_t k = 0; k < t.x.size(); ++k) {
    // -x NAME=VALUE: VALUE is the end of the argument that holds it.
    const size_t eq = t.x[k].find('=');
    if (eq != std::string::npos && eq + 1 < t.x[k].size()) {
      cl->secret_args.push_back({t.x_args[k], t.x[k].size() - eq - 1});
    }
  }
  cl->env_file = src.Value(Opt::kEnvFile).value_or("");
  std::optional<std::pair<std::string, std::string>> env_file;
  if (!cl->env_file.empty()) {
    absl::StatusOr<std::string> text = ReadSmallFile(cl->env_file, kMaxEnvFileBytes, "--env-file");
    if (!text.ok()) return Bad(std::string(text.status().message()));
    env_file = std::make_pair(cl->env_file, *std::move(text));
  }
  auto user = ResolveUserEnv(src.job().env, env_file, cl->forward_env, src.env());
  if (!user.ok()) return user.status();
  for (const auto& [k, v] : user->vars) (*cl->spec.mutable_env())[k] = v;
  for (auto& n : user->notices) cl->notices.push_back(std::move(n));
  return CheckIfaceOnce(*cl);
}

// Options that say "the command line configures the rendezvous itself"; under
// srun, none of them given means drun configures itself from SLURM_*.
constexpr Opt kRendezvousOptions[] = {Opt::kRdzvEndpoint, Opt::kRdzvBackend, Opt::kNodeRank,
                                      Opt::kMasterAddr, Opt::kMasterPort};

}  // namespace

absl::StatusOr<std::string> ReadJobToken(const CommandLine& cl,
                                         const std::map<std::string, std::string>& env) {
  if (cl.token_file.empty()) {
    auto it = env.find("DRUN_RDZV_TOKEN");
    return it == env.end() ? std::string() : it->second;
  }
  absl::StatusOr<std::string> text = ReadSmallFile(cl.token_file, kMaxEnvFileBytes, "--rdzv-token-file");
  if (!text.ok()) return Bad(std::string(text.status().message()));
  // A secret others may read is no secret (ssh refuses such keys the same way).
  struct stat st;
  if (stat(cl.token_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    return Bad(absl::StrCat("--rdzv-token-file ", QuotePath(cl.token_file), " may be read by others (mode ",
                            absl::StrFormat("%04o", st.st_mode & 07777), "); run chmod 600 ",
                            ShellQuote(cl.token_file)));
  }
  const std::string token = text->substr(0, text->find('\n'));
  if (token.empty()) {
    return Bad(absl::StrCat("--rdzv-token-file ", QuotePath(cl.token_file),
                            ": its first line is empty; write the token on it"));
  }
  return token;
}

JobMode NodeMode(const CommandLine& cl) {
  const v1::JobSpec& s = cl.spec;
  if (cl.standalone) return JobMode::kSingleNode;
  if (s.rdzv_backend() == v1::JobSpec::STATIC) return JobMode::kStatic;
  if (SpansNodes(s) || !s.rdzv_endpoint().empty()) return JobMode::kC10d;
  return JobMode::kSingleNode;
}

namespace {

JobMode DecideMode(const CommandLine& cl, const EnvMap& env) {
  if (cl.launcher == Launcher::kSsh) return JobMode::kSsh;
  if (cl.launcher == Launcher::kSlurm) return JobMode::kSlurmLauncher;
  if (!cl.standalone && (env.count("SLURM_STEP_ID") || env.count("SLURM_STEPID"))) {
    bool configured = false;
    for (Opt o : kRendezvousOptions) configured |= cl.Explicit(o);
    if (!configured) return JobMode::kSrunStep;  // slurm_env decides the rest
  }
  return NodeMode(cl);
}

// --standalone replaces the rendezvous: any option that configures one is a contradiction.
absl::Status CheckStandalone(const CommandLine& cl) {
  if (!cl.standalone) return absl::OkStatus();
  for (Opt o : {Opt::kRdzvEndpoint, Opt::kRdzvBackend, Opt::kNodeRank}) {
    if (cl.Explicit(o)) {
      return Bad(absl::StrCat("--standalone runs its own rendezvous on this machine, so ", cl.Describe(o),
                              " would be ignored: drop one of them"));
    }
  }
  return absl::OkStatus();
}

// On one node every worker runs here: a --master-addr is honoured, so it must
// be an address of this machine.
absl::Status CheckSingleNodeMaster(const CommandLine& cl) {
  const std::string& addr = cl.spec.master_addr();
  if (addr.empty()) return absl::OkStatus();
  auto ip = ResolveHost(addr);
  if (ip.ok() && IsLocalAddress(*ip)) return absl::OkStatus();
  return Bad(absl::StrCat(cl.Describe(Opt::kMasterAddr), " is not an address of this machine, and a "
                          "single-node job runs every worker here: drop it (MASTER_ADDR is then "
                          "127.0.0.1), or give --nnodes and --node-rank for a multi-node job"));
}

// A static job's master: --master-addr/--master-port, else MASTER_ADDR and
// MASTER_PORT of drun's own environment (Kubeflow's non-elastic pods and
// hand-written sbatch scripts export them), and the rendezvous endpoint
// derived from it when none is given.
absl::Status ResolveStaticMaster(const EnvMap& env, CommandLine* cl) {
  v1::JobSpec& s = cl->spec;
  if (s.rdzv_endpoint().empty() && !cl->Explicit(Opt::kMasterAddr)) {
    if (auto it = env.find("MASTER_ADDR"); it != env.end() && !it->second.empty()) {
      s.set_master_addr(it->second);
      cl->origins[Opt::kMasterAddr] = Origin{Origin::kEnvironment, "MASTER_ADDR", it->second};
    }
  }
  const bool addr_from_env = cl->Explicit(Opt::kMasterAddr) && cl->origins[Opt::kMasterAddr].name == "MASTER_ADDR";
  if (!cl->Explicit(Opt::kMasterPort) && addr_from_env) {
    if (auto it = env.find("MASTER_PORT"); it != env.end()) {
      if (absl::Status st = CheckValue(Def(Opt::kMasterPort).rule, it->second); !st.ok()) {
        return Bad(absl::StrCat("MASTER_PORT ", st.message()));
      }
      int port = 0;
      absl::SimpleAtoi(absl::StripAsciiWhitespace(it->second), &port);
      s.set_master_port(port);
      cl->origins[Opt::kMasterPort] = Origin{Origin::kEnvironment, "MASTER_PORT", it->second};
    }
  }
  if (SpansNodes(s) && s.master_addr().empty() && s.rdzv_endpoint().empty()) {
    return Bad("a static rendezvous needs --master-addr (the node with --node-rank 0)");
  }
  if (s.rdzv_endpoint().empty()) {
    // torchrun's rule: the rendezvous is at MASTER_ADDR:MASTER_PORT (29500), and the
    // workers' store is served on the same port. With --no-agent-store rank 0's worker
    // binds MASTER_PORT itself, so the rendezvous takes the next port.
    const int port = s.master_port() > 0 ? s.master_port() : 29500;
    const bool next = !s.agent_store() && s.master_port() > 0;
    const std::string addr = s.master_addr().empty() ? "127.0.0.1" : s.master_addr();
    s.set_rdzv_endpoint(absl::StrCat(addr.find(':') != std::string::npos ? absl::StrCat("[", addr, "]") : addr,
                                     ":", next ? port + 1 : port));
  }
  return absl::OkStatus();
}

absl::Status CheckStatic(CommandLine* cl) {
  v1::JobSpec& s = cl->spec;
  const int max_nodes = s.max_nodes();
  if (s.min_nodes() != max_nodes) {
    return Bad(absl::StrCat("a static rendezvous has a fixed size, but ", cl->Describe(Opt::kNnodes),
                            " is a range: write --nnodes N, or use --rdzv-backend c10d"));
  }
  if (s.node_rank() < 0 && max_nodes > 1) return Bad("a static rendezvous needs --node-rank on every node");
  if (s.node_rank() >= max_nodes) {
    return Bad(absl::StrCat(cl->Describe(Opt::kNodeRank), " is out of range for ", cl->Describe(Opt::kNnodes),
                            "; write 0..", max_nodes - 1));
  }
  return absl::OkStatus();
}

// Options whose meaning does not carry over to the modes where the rendezvous
// host, not the user, decides (c10d, ssh, --launcher slurm), or that those
// launchers do not honour yet: refused, never silently dropped.
absl::Status CheckRemoteModes(const CommandLine& cl) {
  const bool remote = cl.mode == JobMode::kSsh || cl.mode == JobMode::kSlurmLauncher;
  if ((remote || cl.mode == JobMode::kC10d) && cl.Explicit(Opt::kMasterAddr)) {
    return Bad(absl::StrCat(cl.Describe(Opt::kMasterAddr), " names node 0 of a static job (--node-rank); "
                            "in ", JobModeName(cl.mode), " mode the workers' MASTER_ADDR is the machine "
                            "that hosts the rendezvous and the store: drop --master-addr"));
  }
  if (cl.mode == JobMode::kSsh && cl.Explicit(Opt::kLocalAddr)) {
    return Bad(absl::StrCat(cl.Describe(Opt::kLocalAddr), " has no meaning with --hostfile/-H: each host's "
                            "address is the one its ssh connection uses; drop it"));
  }
  return absl::OkStatus();
}

// Combinations, once every value is known; decides the mode.
absl::Status ResolveMode(const EnvMap& env, CommandLine* cl) {
  v1::JobSpec& s = cl->spec;
  if (auto st = CheckStandalone(*cl); !st.ok()) return st;
  if (s.node_rank() >= 0 && s.rdzv_endpoint().empty()) s.set_rdzv_backend(v1::JobSpec::STATIC);
  cl->mode = DecideMode(*cl, env);
  if (cl->mode == JobMode::kSingleNode) return CheckSingleNodeMaster(*cl);
  if (cl->mode == JobMode::kStatic) {
    if (auto st = CheckStatic(cl); !st.ok()) return st;
    return ResolveStaticMaster(env, cl);
  }
  if (!s.agent_store() && s.master_port() > 0 && !s.rdzv_endpoint().empty()) {
    auto ep = ParseEndpoint(s.rdzv_endpoint(), 29400);
    if (ep.ok() && ep->port == s.master_port()) {
      return Bad(absl::StrCat("--no-agent-store lets rank 0 bind MASTER_PORT ", s.master_port(),
                              ", which is also the rendezvous port of ", cl->Describe(Opt::kRdzvEndpoint),
                              ": give them different ports"));
    }
  }
  if (cl->mode == JobMode::kC10d && s.rdzv_endpoint().empty()) {
    return Bad(absl::StrCat(cl->Describe(Opt::kNnodes),
                            " needs --rdzv-endpoint HOST:PORT (the node that hosts the rendezvous)"));
  }
  return CheckRemoteModes(*cl);
}

// --print-config: the resolved job, as a file LoadJobFile reads back.
void FillResolved(const Sources& src, CommandLine* cl) {
  JobFile& r = cl->resolved;
  for (const auto& o : kOptions) {
    const std::string name = o.name;
    if (!o.in_job_file || o.id == Opt::kX) continue;  // -x: below, in order
    if (o.kind == Kind::kFlag) {
      auto b = src.Flag(o.id);
      if (b.ok() && *b) r.options[name] = "1";
    } else if (o.id == Opt::kNprocPerNode) {
      if (cl->Explicit(o.id) || src.tokens().mpi_kind != MpiCount::kNone) r.options[name] = cl->spec.nproc_per_node();
    } else if (auto v = src.Get(o.id)) {
      r.options[name] = v->value;
    }
  }
  if (!cl->forward_env.empty()) r.multi[Def(Opt::kX).name] = cl->forward_env;
  for (const auto& [k, v] : src.job().env) r.env[k] = v;
  if (!cl->host_entries.empty()) r.host_entries = cl->host_entries;
}

absl::Status ResolveEntrypoint(const Sources& src, CommandLine* cl) {
  std::vector<std::string> rest = src.tokens().rest;
  // The command line's entrypoint replaces the file's script and args.
  if (rest.empty() && !src.job().script.empty()) {
    rest.push_back(src.job().script);
    rest.insert(rest.end(), src.job().args.begin(), src.job().args.end());
  }
  if (cl->print_config) {
    if (!rest.empty()) {
      cl->resolved.script = rest[0];
      cl->resolved.args.assign(rest.begin() + 1, rest.end());
    }
    return absl::OkStatus();
  }
  if (rest.empty()) return Bad("missing the training script; write drun [options] train.py [args...]");
  // An empty argument is no entrypoint either (-m '' would start workers that fail).
  if (rest[0].empty()) return Bad("the training script is an empty string; write drun [options] train.py [args...]");
  cl->spec.set_entrypoint(rest[0]);
  for (size_t k = 1; k < rest.size(); ++k) cl->spec.add_args(rest[k]);
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd)) cl->spec.set_working_dir(cwd);
  return absl::OkStatus();
}

void RecordOrigins(const Sources& src, CommandLine* cl) {
  for (const auto& o : kOptions) {
    if (auto v = src.Get(o.id)) {
      cl->origins[o.id] = v->origin;
    } else if (o.id == Opt::kX && (!src.tokens().x.empty() || src.job().multi.count(o.name))) {
      cl->origins[Opt::kX] = Origin{src.tokens().x.empty() ? Origin::kJobFile : Origin::kCommandLine, "-x", ""};
    }
  }
  if (src.tokens().mpi_kind != MpiCount::kNone) {
    cl->origins[Opt::kNprocPerNode] = Origin{Origin::kCommandLine, src.tokens().mpi_spelling, src.tokens().mpi_value};
  }
}

}  // namespace

const char* JobModeName(JobMode mode) {
  switch (mode) {
    case JobMode::kSingleNode: return "single node";
    case JobMode::kStatic: return "static rendezvous";
    case JobMode::kC10d: return "c10d rendezvous";
    case JobMode::kSrunStep: return "srun step";
    case JobMode::kSsh: return "ssh";
    case JobMode::kSlurmLauncher: return "--launcher slurm";
  }
  return "?";
}

std::string Origin::Describe(Opt option) const {
  switch (kind) {
    case kEnvironment:
      return absl::StrCat(name, "=", value, " (environment)");
    case kJobFile:
      return absl::StrCat(Def(option).name, ": ", value, " (", name, ")");
    case kCommandLine:
      break;
  }
  return value.empty() || value == "1" ? name : absl::StrCat(name, " ", value);
}

std::string CommandLine::Describe(Opt option) const {
  auto it = origins.find(option);
  return it == origins.end() ? absl::StrCat("--", Def(option).name) : it->second.Describe(option);
}

void HideSecrets(const CommandLine& cl, int argc, char** argv) {
  for (const SecretArg& s : cl.secret_args) {
    if (s.arg + 1 >= static_cast<size_t>(argc)) continue;
    char* a = argv[s.arg + 1];
    const size_t n = strlen(a);
    if (s.tail_bytes <= n) memset(a + n - s.tail_bytes, '*', s.tail_bytes);
  }
}

bool NeedsNetwork(const CommandLine& cl) { return cl.version || cl.mode != JobMode::kSingleNode; }

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const std::map<std::string, std::string>& env,
                                             bool stdin_is_terminal) {
  // `drun help`: the usage, as --help, unless the user has a script named help here.
  const bool help_word = !args.empty() && args[0] == "help";
  if (help_word && access("help", F_OK) != 0) {
    CommandLine cl;
    cl.help = true;
    return cl;
  }
  auto tokens = Tokenize(args);
  if (!tokens.ok()) return tokens.status();
  std::string job_path;
  auto job = LoadConfig(*tokens, env, &job_path);
  if (!job.ok()) return job.status();
  const Sources src(*tokens, env, *job, job_path);

  CommandLine cl;
  cl.stdin_is_terminal = stdin_is_terminal;
  RecordOrigins(src, &cl);
  for (auto [field, id] : {std::pair<bool*, Opt>{&cl.help, Opt::kHelp}, {&cl.version, Opt::kVersion},
                           {&cl.standalone, Opt::kStandalone}, {&cl.print_config, Opt::kPrintConfig}}) {
    auto b = src.Flag(id);
    if (!b.ok()) return b.status();
    *field = *b;
  }
  if (cl.help || cl.version) return cl;
  for (auto step : {ResolveHosts, ResolveNodes, ResolveNproc, ResolveEntrypointKind, ResolveSupervision,
                    ResolveWorkerPlacement, ResolveRendezvous, ResolveOutput, ResolveEnv}) {
    if (absl::Status st = step(src, &cl); !st.ok()) return st;
  }
  if (absl::Status st = ResolveMode(env, &cl); !st.ok()) return st;
  if (cl.print_config && cl.total_procs > 0) {
    // A job file sets workers per host (nproc-per-node, or each host's slots), not a total.
    return Bad(absl::StrCat("--print-config: -np ", cl.total_procs, " over hosts has no job-file key; write "
                            "--nproc-per-node N or give the hosts slots"));
  }
  if (cl.print_config) FillResolved(src, &cl);
  if (args.empty() && job->script.empty()) {
    cl.usage = true;
    return cl;
  }
  if (absl::Status st = ResolveEntrypoint(src, &cl); !st.ok()) return st;
  if (help_word) {
    cl.notices.push_back("running ./help, the file named help in this directory (drun --help shows the usage)");
  }
  return cl;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

namespace {
std::string& DrunPathStorage() {
  static std::string path;
  return path;
}
}  // namespace

std::string DrunPath() {
  if (!DrunPathStorage().empty()) return DrunPathStorage();
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "drun";
}

void SetDrunPath(std::string path) { DrunPathStorage() = std::move(path); }

#ifndef DRUN_VERSION
#error "DRUN_VERSION comes from project() in CMakeLists.txt (launcher/job/CMakeLists.txt)"
#endif
std::string DrunVersion() { return DRUN_VERSION; }
std::string VersionWords() { return absl::StrCat("drun ", DrunVersion()); }

namespace {
OptionInfo InfoOf(const OptionDef& o) {
  return {o.id, o.name, o.short_name, o.kind == Kind::kFlag, o.id == Opt::kX, o.group, o.metavar ? o.metavar : "",
          o.help, EnvName(o), o.rule, o.default_value, o.in_job_file ? o.name : ""};
}
}  // namespace

std::vector<OptionInfo> KnownOptions() {
  std::vector<OptionInfo> out;
  for (const auto& o : kOptions) out.push_back(InfoOf(o));
  return out;
}

const OptionInfo& OptionOf(Opt option) {
  static const std::vector<OptionInfo>* const all = new std::vector<OptionInfo>(KnownOptions());
  return (*all)[static_cast<size_t>(option)];
}

const OptionInfo* FindOption(std::string name) {
  const OptionDef* o = FindLong(std::move(name));
  return o ? &OptionOf(o->id) : nullptr;
}

absl::Status CheckValue(const ValueRule& rule, const std::string& value) {
  const std::string t(absl::StripAsciiWhitespace(value));
  bool ok = true;
  switch (rule.type) {
    case ValueRule::kText:
      return absl::OkStatus();
    case ValueRule::kFlag: {
      bool b;
      ok = ParseBool(t, &b);
      break;
    }
    case ValueRule::kInt: {
      int n;
      ok = absl::SimpleAtoi(t, &n) && n >= rule.lo && n <= rule.hi;
      break;
    }
    case ValueRule::kSeconds: {
      double d;
      ok = absl::SimpleAtod(t, &d) && std::isfinite(d) && (rule.lo_open ? d > rule.lo : d >= rule.lo) &&
           d <= rule.hi;
      break;
    }
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("must be ", rule.range, ", not ", QuoteText(value)));
}

std::vector<RdzvConfKey> RdzvConfKeys() {
  std::vector<RdzvConfKey> out;
  for (const ConfKeyDef& c : kRdzvConfKeys) out.push_back({c.key, c.rule, c.default_value});
  return out;
}

namespace {

// A word wider than `width` (a path pattern, a list) cut after its last '/' or
// ',' that fits, else at `width`.
std::vector<absl::string_view> CutWord(absl::string_view word, size_t width) {
  std::vector<absl::string_view> pieces;
  while (word.size() > width) {
    size_t cut = word.substr(0, width).find_last_of("/,");
    cut = cut == absl::string_view::npos ? width : cut + 1;
    pieces.push_back(word.substr(0, cut));
    word.remove_prefix(cut);
  }
  pieces.push_back(word);
  return pieces;
}

// `words` filled into lines of at most `width` columns.
std::vector<std::string> WrapWords(absl::string_view words, size_t width) {
  std::vector<std::string> lines;
  std::vector<absl::string_view> pieces;
  for (absl::string_view word : absl::StrSplit(words, ' ', absl::SkipEmpty())) {
    for (absl::string_view piece : CutWord(word, width)) pieces.push_back(piece);
  }
  for (absl::string_view word : pieces) {
    if (!lines.empty() && lines.back().size() + 1 + word.size() <= width) {
      absl::StrAppend(&lines.back(), " ", word);
    } else {
      lines.emplace_back(word);
    }
  }
  return lines;
}

// One option of --help within 80 columns, as torchrun's: the names and metavar
// in a 34-column field (on a line of their own when longer), the help text
// wrapped beside it.
std::string HelpEntry(std::string lhs, absl::string_view help) {
  constexpr size_t kIndent = 2, kField = 34, kWidth = 80;
  const std::string pad(kIndent + kField, ' ');
  std::string out = std::string(kIndent, ' ') + lhs;
  if (lhs.size() < kField) {
    out.resize(kIndent + kField, ' ');
  } else {
    absl::StrAppend(&out, "\n", pad);
  }
  std::vector<std::string> lines = WrapWords(help, kWidth - pad.size());
  absl::StrAppend(&out, absl::StrJoin(lines, absl::StrCat("\n", pad)), "\n");
  return out;
}

}  // namespace

std::string UsageText() {
  return "usage: drun [options] training_script [script args...]\n"
         "       drun stacks [RUN_ID]\n"
         "e.g.:  drun --nproc-per-node 4 train.py --epochs 5\n"
         "drun --help lists every option; man drun is the manual.\n";
}

std::string HelpText() {
  std::string out =
      "usage: drun [options] training_script [script args...]\n"
      "\n"
      "Launches a distributed training job: one agent per node runs --nproc-per-node\n"
      "workers with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,\n"
      "MASTER_PORT, TORCHELASTIC_*), supervises them, restarts the whole job on failure\n"
      "(--max-restarts) and prints each worker's output with a [rank<N>] prefix.\n"
      "Every option may also be written with underscores (--nproc_per_node) or set in\n"
      "the environment as PET_<NAME> (torchrun's options) or DRUN_<NAME> (drun's own;\n"
      "not --help, --version, --print-config and -x);\n"
      "the command line wins. The interpreter is $PYTHON_EXEC, else the python3 of the\n"
      "venv or conda env drun is installed in (pip), else python3 on PATH.\n";
  for (const char* group : {kJob, kRdzv, kOut, kSsh, kSlurm, ""}) {
    absl::StrAppend(&out, "\n", *group ? group : "other", " options:\n");
    for (const auto& o : kOptions) {
      if (std::string(o.group) != group) continue;
      std::string lhs = o.short_name ? absl::StrCat("-", std::string(1, o.short_name), ", --", o.name)
                                     : absl::StrCat("    --", o.name);
      if (std::string(o.name).size() == 1) lhs = absl::StrCat("-", o.name);  // mpirun's -x
      if (o.metavar) absl::StrAppend(&lhs, " ", o.metavar);
      absl::StrAppend(&out, HelpEntry(lhs, o.help));
    }
  }
  absl::StrAppend(&out,
                  "\nexamples:\n"
                  "  drun --standalone --nproc-per-node 4 train.py --epochs 5\n"
                  "  drun --nproc-per-node gpu:0,2 --max-restarts 3 train.py\n"
                  "  drun --nproc-per-node 4 --node-setup '$PYTHON_EXEC prepare_data.py' train.py\n"
                  "  drun --nnodes 2:4 --nproc-per-node 2 --rdzv-endpoint node0:29400 train.py\n"
                  "  drun --hostfile hosts --nproc-per-node 2 -x WANDB_API_KEY train.py\n"
                  "  srun drun --nproc-per-node 2 train.py          (inside sbatch)\n"
                  "  drun --config configs/one_lab_pc.yaml\n"
                  "  drun stacks [RUN_ID]   every rank's stack of your running job (another shell)\n"
                  "\nmodes: --standalone or --nnodes 1: this process is the node. --rdzv-endpoint\n"
                  "HOST:PORT on every node: the node whose address HOST is hosts the rendezvous.\n"
                  "--hostfile/-H: agents start over ssh. Under srun (SLURM_STEP_ID set, none of\n"
                  "--rdzv-endpoint/--rdzv-backend/--node-rank/--master-*) drun configures itself:\n"
                  "with one task per node each task is that node's agent (nnodes, node rank and\n"
                  "GPUs from Slurm); with more tasks than nodes each task is one worker\n"
                  "(RANK=SLURM_PROCID, LOCAL_RANK=SLURM_LOCALID). --launcher slurm in a batch\n"
                  "script runs that srun for you (docs/slurm.md).\n"
                  "\nexit status: 0 when every worker exits 0; else the first failing worker's\n"
                  "exit code (128+N for signal N); 124 for --hang-timeout; 2 for a bad command\n"
                  "line.\n");
  return out;
}


}  // namespace drun
