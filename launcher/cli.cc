#include "launcher/cli.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/nproc.h"
#include "agent/output.h"
#include "absl/strings/str_join.h"

namespace drun {

namespace {

enum class Kind { kFlag, kValue };

struct OptionDef {
  const char* name;  // canonical, dashed
  char short_name;
  Kind kind;
  const char* group;
  const char* metavar;
  const char* help;
  bool torchrun;  // env twin is PET_<NAME> (torchrun's), else DRUN_<NAME>
};

constexpr const char kJob[] = "job";
constexpr const char kRdzv[] = "rendezvous";
constexpr const char kOut[] = "output";
constexpr const char kSsh[] = "ssh";
constexpr const char kSlurm[] = "slurm";

// The order here is the order of --help.
const OptionDef kOptions[] = {
    {"config", 0, Kind::kValue, kJob, "FILE",
     "read options from a YAML job file (docs/config.md); the command line and environment win", false},
    {"print-config", 0, Kind::kFlag, kJob, nullptr, "print the resolved job as a YAML job file and exit", false},
    {"nnodes", 0, Kind::kValue, kJob, "N|MIN:MAX", "number of nodes, or an elastic range (default 1)", true},
    {"nproc-per-node", 0, Kind::kValue, kJob, "N|cpu|gpu|auto|gpu:LIST",
     "workers per node; gpu:1,3,5 runs one worker per listed GPU (default 1)", true},
    {"standalone", 0, Kind::kFlag, kJob, nullptr,
     "single-node job with an in-process rendezvous and a random run id", true},
    {"module", 'm', Kind::kFlag, kJob, nullptr, "run the entrypoint as a Python module (python -m)", true},
    {"no-python", 0, Kind::kFlag, kJob, nullptr, "run the entrypoint as a program, without Python", true},
    {"max-restarts", 0, Kind::kValue, kJob, "N", "restarts of the whole job before failing (default 0)", true},
    {"role", 0, Kind::kValue, kJob, "NAME", "worker role, ROLE_NAME (default 'default')", true},
    {"node-setup", 0, Kind::kValue, kJob, "CMD",
     "run CMD (/bin/sh -c) once per node before the workers start; they start only if it exits 0", false},
    {"no-agent-store", 0, Kind::kFlag, kJob, nullptr,
     "let rank 0 host the c10d store (torchrun 1.13's way) instead of drun serving a fresh one per round",
     false},
    {"shutdown-timeout", 0, Kind::kValue, kJob, "SECONDS",
     "grace between forwarding a stop signal and SIGKILL (default 30)", false},
    {"monitor-interval", 0, Kind::kValue, kJob, "SECONDS", "accepted for torchrun compatibility; drun is event driven", true},
    {"start-method", 0, Kind::kValue, kJob, "spawn|fork|forkserver", "accepted for torchrun compatibility", true},
    {"run-id", 0, Kind::kValue, kRdzv, "ID", "job id, TORCHELASTIC_RUN_ID (same as --rdzv-id)", false},
    {"rdzv-id", 0, Kind::kValue, kRdzv, "ID", "job id shared by all nodes (default: random with --standalone, else 'none')", true},
    {"rdzv-backend", 0, Kind::kValue, kRdzv, "c10d|static", "rendezvous backend", true},
    {"rdzv-endpoint", 0, Kind::kValue, kRdzv, "HOST:PORT", "rendezvous server address", true},
    {"rdzv-conf", 0, Kind::kValue, kRdzv, "K=V,...", "rendezvous settings (join_timeout, last_call_timeout, close_timeout, is_host)", true},
    {"node-rank", 0, Kind::kValue, kRdzv, "N", "this node's rank in a static rendezvous", true},
    {"master-addr", 0, Kind::kValue, kRdzv, "ADDR", "MASTER_ADDR given to the workers (default: this node, 127.0.0.1)", true},
    {"master-port", 0, Kind::kValue, kRdzv, "PORT", "MASTER_PORT given to the workers (default: a free port)", true},
    {"local-addr", 0, Kind::kValue, kRdzv, "ADDR", "address of this node as others should reach it", true},
    {"rdzv-token-file", 0, Kind::kValue, kRdzv, "FILE",
     "file holding the job token (else $DRUN_RDZV_TOKEN); nodes without it are rejected", false},
    {"log-dir", 0, Kind::kValue, kOut, "DIR",
     "keep workers' output in <DIR>/<run_id>[_<unique>]/[<host>/]attempt_<n>/<local_rank>/{stdout,stderr}.log (both streams unless -r/-t say otherwise)", true},
    {"redirects", 'r', Kind::kValue, kOut, "0-3|R:0-3,...",
     "send workers' stdout (1), stderr (2) or both (3) to log files only", true},
    {"tee", 't', Kind::kValue, kOut, "0-3|R:0-3,...", "copy workers' stdout (1), stderr (2) or both (3) to log files", true},
    {"local-ranks-filter", 0, Kind::kValue, kOut, "R,...", "show only these local ranks on the console", true},
    {"stdin", 0, Kind::kValue, kOut, "RANK|all|none", "which global ranks read drun's stdin (default 0; the others read end-of-file)", false},
    {"summary", 0, Kind::kFlag, kOut, nullptr,
     "print the per-rank table (exit, attempts, wall time, peak RSS) at exit; always on failure", false},
    {"report", 0, Kind::kValue, kOut, "FILE", "write the run's summary and rendezvous timings as JSON", false},
    {"quiet", 'q', Kind::kFlag, kOut, nullptr, "print nothing of drun's own but the outcome of a failed job", false},
    {"hostfile", 0, Kind::kValue, kSsh, "FILE",
     "start one agent per host of FILE over ssh (mpirun syntax: host [slots=N] [max_slots=N])", false},
    {"host", 'H', Kind::kValue, kSsh, "HOST[:N],...", "the same for a list of hosts (mpirun's -H)", false},
    {"x", 'x', Kind::kValue, kSsh, "VAR[=VALUE]", "forward VAR (or set it) on every host; repeatable (mpirun's -x)", false},
    {"env-file", 0, Kind::kValue, kSsh, "FILE", "forward the VAR=VALUE lines of FILE to every host", false},
    {"remote-drun", 0, Kind::kValue, kSsh, "PATH", "drun's path on the hosts (default: this drun's path)", false},
    {"ssh-accept-new", 0, Kind::kFlag, kSsh, nullptr,
     "accept and remember unknown host keys (StrictHostKeyChecking=accept-new)", false},
    {"rsh", 0, Kind::kValue, kSsh, "CMD", "start agents with CMD HOST ... instead of libssh (e.g. 'ssh -p 2222')", false},
    {"launcher", 0, Kind::kValue, kSlurm, "local|ssh|slurm",
     "how agents start: slurm runs srun inside an allocation (default: from the other options)", false},
    {"help", 'h', Kind::kFlag, "", nullptr, "show this help and exit", false},
    {"version", 0, Kind::kFlag, "", nullptr, "show drun's version and its libraries' and exit", false},
};

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

std::string EnvName(const OptionDef& o) {
  std::string n = absl::AsciiStrToUpper(o.name);
  std::replace(n.begin(), n.end(), '-', '_');
  return absl::StrCat(o.torchrun ? "PET_" : "DRUN_", n);
}

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(msg); }

absl::Status UnknownOption(const std::string& arg) {
  std::string name = arg.substr(0, arg.find('='));
  std::string bare = name;
  bare.erase(0, bare.find_first_not_of('-'));
  std::replace(bare.begin(), bare.end(), '_', '-');
  const OptionDef* best = nullptr;
  size_t best_d = 4;
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

absl::StatusOr<double> ParseSeconds(const std::string& opt, const std::string& v) {
  double d;
  if (!absl::SimpleAtod(v, &d) || d < 0) {
    return Bad(absl::StrCat("--", opt, ": '", v, "' is not a number of seconds; write e.g. 30 or 0.5"));
  }
  return d;
}

absl::StatusOr<int> ParseInt(const std::string& opt, const std::string& v, int lo, int hi,
                             const std::string& what) {
  int n;
  if (!absl::SimpleAtoi(v, &n) || n < lo || n > hi) {
    return Bad(absl::StrCat("--", opt, ": '", v, "' is not ", what));
  }
  return n;
}

std::string RandomRunId() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid()));
  static const char kHex[] = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 12; ++i) id.push_back(kHex[gen() % 16]);
  return id;
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> given;  // canonical name -> value ("1" for flags)
  std::map<std::string, std::vector<std::string>> multi;  // repeatable options
  std::vector<std::string> rest;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // the training script
    const OptionDef* o = nullptr;
    std::optional<std::string> value;
    if (a[1] == '-') {
      size_t eq = a.find('=');
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
      given[o->name] = "1";
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        return Bad(absl::StrCat("--", o->name, " needs a value: --", o->name, " ", o->metavar));
      }
      value = args[++i];
    }
    if (std::string(o->name) == "x") {  // repeatable
      multi[o->name].push_back(*value);
      continue;
    }
    given[o->name] = *value;
  }
  rest.assign(args.begin() + static_cast<long>(std::min(i, args.size())), args.end());

  CommandLine cl;
  // A job file is the lowest layer: command line > environment > file.
  JobFile job;
  {
    std::string path;
    if (auto it = given.find("config"); it != given.end()) {
      path = it->second;
    } else if (auto e = env.find("DRUN_CONFIG"); e != env.end()) {
      path = e->second;
    }
    if (!path.empty()) {
      auto loaded = LoadJobFile(path);
      if (!loaded.ok()) return loaded.status();
      job = std::move(*loaded);
    }
  }
  auto get = [&](const char* name) -> std::optional<std::string> {
    auto it = given.find(name);
    if (it != given.end()) return it->second;
    const OptionDef* o = FindLong(name);
    auto e = env.find(EnvName(*o));
    if (e != env.end()) return e->second;
    auto f = job.options.find(name);
    if (f != job.options.end()) return f->second;
    return std::nullopt;
  };
  auto flag = [&](const char* name) -> absl::StatusOr<bool> {
    auto v = get(name);
    if (!v) return false;
    bool b;
    if (!ParseBool(*v, &b)) {
      return Bad(absl::StrCat(EnvName(*FindLong(name)), "='", *v, "' is not a boolean; write 1 or 0"));
    }
    return b;
  };

  for (const auto& o : kOptions) {
    if (given.count(o.name) || multi.count(o.name) || env.count(EnvName(o)) ||
        job.options.count(o.name) || job.multi.count(o.name)) {
      cl.explicit_options.insert(o.name);
    }
  }

  auto help = flag("help");
  if (!help.ok()) return help.status();
  cl.help = *help;
  auto version = flag("version");
  if (!version.ok()) return version.status();
  cl.version = *version;
  if (cl.help || cl.version) return cl;

  v1::JobSpec& s = cl.spec;
  auto standalone = flag("standalone");
  if (!standalone.ok()) return standalone.status();
  cl.standalone = *standalone;

  // Nodes.
  int min_nodes = 1, max_nodes = 1;
  if (auto v = get("nnodes")) {
    std::vector<std::string> parts = absl::StrSplit(*v, ':');
    const std::string hint = "write a number like 2, or a range MIN:MAX like 2:4";
    if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &min_nodes) || min_nodes < 1 ||
        (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &max_nodes) || max_nodes < 1))) {
      return Bad(absl::StrCat("--nnodes: '", *v, "' is not valid; ", hint));
    }
    if (parts.size() == 1) max_nodes = min_nodes;
    if (min_nodes > max_nodes) {
      return Bad(absl::StrCat("--nnodes ", *v, ": the minimum is larger than the maximum; ", hint));
    }
  }
  if (cl.standalone) min_nodes = max_nodes = 1;
  s.set_min_nodes(min_nodes);
  s.set_max_nodes(max_nodes);

  s.set_nproc_per_node(get("nproc-per-node").value_or("1"));
  if (absl::Status st = ValidateNprocSpec(s.nproc_per_node()); !st.ok() && !absl::IsFailedPrecondition(st)) {
    return st;
  }

  auto module = flag("module");
  if (!module.ok()) return module.status();
  auto no_python = flag("no-python");
  if (!no_python.ok()) return no_python.status();
  if (*module && *no_python) {
    return Bad("--module and --no-python exclude each other; use one of them");
  }
  s.set_kind(*module ? v1::JobSpec::PYTHON_MODULE
                     : *no_python ? v1::JobSpec::PROGRAM : v1::JobSpec::PYTHON_SCRIPT);

  if (auto v = get("max-restarts")) {
    auto n = ParseInt("max-restarts", *v, 0, 1 << 30, "a number of restarts (0 or more)");
    if (!n.ok()) return n.status();
    s.set_max_restarts(*n);
  }
  auto no_agent_store = flag("no-agent-store");
  if (!no_agent_store.ok()) return no_agent_store.status();
  s.set_agent_store(!*no_agent_store);
  s.set_role(get("role").value_or("default"));
  s.set_node_setup(get("node-setup").value_or(""));
  s.set_shutdown_timeout_s(30);
  if (auto v = get("shutdown-timeout")) {
    auto d = ParseSeconds("shutdown-timeout", *v);
    if (!d.ok()) return d.status();
    s.set_shutdown_timeout_s(*d);
  }
  if (auto v = get("monitor-interval")) {
    if (auto d = ParseSeconds("monitor-interval", *v); !d.ok()) return d.status();
  }
  if (auto v = get("start-method")) {
    if (*v != "spawn" && *v != "fork" && *v != "forkserver") {
      return Bad(absl::StrCat("--start-method: '", *v, "' is not valid; write spawn, fork or forkserver"));
    }
  }

  // Rendezvous.
  auto run_id = get("run-id");
  auto rdzv_id = get("rdzv-id");
  if (run_id && rdzv_id && *run_id != *rdzv_id) {
    return Bad("--run-id and --rdzv-id name the same thing; give only one of them");
  }
  if (run_id || rdzv_id) {
    s.set_run_id(run_id ? *run_id : *rdzv_id);
    if (s.run_id().empty()) return Bad("--run-id: the id must not be empty");
  } else {
    s.set_run_id(cl.standalone ? RandomRunId() : "none");
  }
  s.set_rdzv_backend(get("rdzv-backend").value_or(""));
  if (!s.rdzv_backend().empty() && s.rdzv_backend() != "c10d" && s.rdzv_backend() != "static") {
    return Bad(absl::StrCat("--rdzv-backend: '", s.rdzv_backend(),
                            "' is not available; drun serves its own rendezvous: write c10d or static"));
  }
  s.set_rdzv_endpoint(get("rdzv-endpoint").value_or(""));
  s.set_join_timeout_s(600);
  s.set_last_call_timeout_s(30);
  s.set_close_timeout_s(30);
  s.set_keepalive_interval_s(0.5);
  s.set_keepalive_timeout_s(2);
  if (auto v = get("rdzv-conf")) {
    int max_attempts = 4;
    for (absl::string_view kv : absl::StrSplit(*v, ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      if (p.first.empty() || kv.find('=') == absl::string_view::npos) {
        return Bad(absl::StrCat("--rdzv-conf: '", kv, "' is not KEY=VALUE; write e.g. join_timeout=600,last_call_timeout=30"));
      }
      (*s.mutable_rdzv_conf())[p.first] = p.second;
      const std::string& k = p.first;
      if (k == "is_host") {
        bool b;
        if (!ParseBool(p.second, &b)) return Bad(absl::StrCat("--rdzv-conf is_host='", p.second, "': write true or false"));
        continue;
      }
      if (k == "keep_alive_max_attempt") {
        auto n = ParseInt("rdzv-conf keep_alive_max_attempt", p.second, 1, 1000, "a count of 1 or more");
        if (!n.ok()) return n.status();
        max_attempts = *n;
        continue;
      }
      auto d = ParseSeconds(absl::StrCat("rdzv-conf ", k), p.second);
      if (!d.ok()) return d.status();
      if (k == "join_timeout" || k == "timeout") s.set_join_timeout_s(*d);
      else if (k == "last_call_timeout") s.set_last_call_timeout_s(*d);
      else if (k == "close_timeout") s.set_close_timeout_s(*d);
      else if (k == "read_timeout") {}
      else if (k == "keep_alive_interval") s.set_keepalive_interval_s(*d);
      else {
        return Bad(absl::StrCat("--rdzv-conf: unknown key '", k, "'; known: join_timeout, last_call_timeout, "
                                "close_timeout, read_timeout, is_host, keep_alive_interval, keep_alive_max_attempt"));
      }
    }
    if (s.rdzv_conf().count("keep_alive_interval") || s.rdzv_conf().count("keep_alive_max_attempt")) {
      s.set_keepalive_timeout_s(s.keepalive_interval_s() * max_attempts);
    }
  }
  s.set_node_rank(-1);
  if (auto v = get("node-rank")) {
    auto n = ParseInt("node-rank", *v, 0, 1 << 30, "a node rank (0 or more)");
    if (!n.ok()) return n.status();
    s.set_node_rank(*n);
  }
  s.set_master_addr(get("master-addr").value_or(""));
  if (auto v = get("master-port")) {
    auto n = ParseInt("master-port", *v, 1, 65535, "a TCP port (1-65535)");
    if (!n.ok()) return n.status();
    s.set_master_port(*n);
  }
  s.set_local_addr(get("local-addr").value_or(""));

  // Output.
  s.set_log_dir(get("log-dir").value_or(""));
  for (const char* name : {"redirects", "tee"}) {
    std::string v = get(name).value_or("");
    auto spec = ParseStdSpec(v);
    if (!spec.ok()) return Bad(absl::StrCat("--", name, ": ", spec.status().message()));
    if (std::string(name) == "redirects") s.set_redirects(v); else s.set_tee(v);
  }
  std::string filter = get("local-ranks-filter").value_or("");
  if (auto f = ParseRankList(filter); !f.ok()) {
    return Bad(absl::StrCat("--local-ranks-filter: ", f.status().message()));
  }
  s.set_local_ranks_filter(filter);
  if (auto v = get("stdin")) {
    auto t = ParseStdinTarget(*v);
    if (!t.ok()) return Bad(absl::StrCat("--stdin: ", t.status().message()));
    *s.mutable_stdin_target() = *t;
  }
  for (const char* name : {"summary", "quiet"}) {
    auto b = flag(name);
    if (!b.ok()) return b.status();
    if (std::string(name) == "summary") cl.summary = *b; else s.set_quiet(*b);
  }
  cl.report_path = get("report").value_or("");

  cl.token_file = get("rdzv-token-file").value_or("");
  cl.hostfile = get("hostfile").value_or("");
  cl.hosts = get("host").value_or("");
  cl.forward_env = job.multi["x"];  // the file's first, then the command line's
  for (const auto& x : multi["x"]) cl.forward_env.push_back(x);
  for (const auto& [k, v] : job.env) (*s.mutable_env())[k] = v;
  if (cl.hostfile.empty() && get("host").value_or("").empty() && !job.hosts.empty()) {
    cl.hosts = absl::StrJoin(job.hosts, ",");
    cl.host_entries = job.host_entries;
    for (auto& h : cl.host_entries) h.line = 0;  // lines of the YAML file, not a host file
  }
  cl.env_file = get("env-file").value_or("");
  cl.remote_drun = get("remote-drun").value_or("");
  cl.rsh = get("rsh").value_or("");
  auto accept_new = flag("ssh-accept-new");
  if (!accept_new.ok()) return accept_new.status();
  cl.ssh_accept_new = *accept_new;
  cl.launcher = get("launcher").value_or("");
  if (!cl.launcher.empty() && cl.launcher != "local" && cl.launcher != "ssh" && cl.launcher != "slurm") {
    return Bad(absl::StrCat("--launcher: '", cl.launcher, "' is not valid; write local, ssh or slurm"));
  }
  if (!cl.hostfile.empty() && !cl.hosts.empty()) {
    return Bad("--hostfile and -H/--host both name the hosts; give only one of them");
  }
  if (cl.launcher.empty()) {
    cl.launcher = (!cl.hostfile.empty() || !cl.hosts.empty()) ? "ssh" : "local";
  }
  if (cl.launcher == "ssh" && cl.hostfile.empty() && cl.hosts.empty()) {
    return Bad("--launcher ssh needs the hosts: --hostfile FILE or -H host1,host2");
  }
  if (s.rdzv_backend() == "static" || (s.node_rank() >= 0 && s.rdzv_endpoint().empty())) {
    s.set_rdzv_backend("static");
    if (min_nodes != max_nodes) {
      return Bad("a static rendezvous has a fixed size: write --nnodes N, or use --rdzv-backend c10d for a range");
    }
    if (s.node_rank() < 0 && max_nodes > 1) return Bad("a static rendezvous needs --node-rank on every node");
    if (s.node_rank() >= max_nodes) {
      return Bad(absl::StrCat("--node-rank ", s.node_rank(), " is out of range for --nnodes ", max_nodes,
                              "; write 0..", max_nodes - 1));
    }
    if (max_nodes > 1 && s.master_addr().empty() && s.rdzv_endpoint().empty()) {
      return Bad("a static rendezvous needs --master-addr (the node with --node-rank 0)");
    }
  } else if (max_nodes > 1 && s.rdzv_endpoint().empty() && !cl.standalone &&
             cl.launcher == "local" && !env.count("SLURM_STEP_ID")) {  // srun configures it
    return Bad(absl::StrCat("--nnodes ", get("nnodes").value_or(""),
                            " needs --rdzv-endpoint HOST:PORT (the node that hosts the rendezvous)"));
  }

  // The entrypoint: the command line's replaces the file's script and args.
  if (rest.empty() && !job.script.empty()) {
    rest.push_back(job.script);
    rest.insert(rest.end(), job.args.begin(), job.args.end());
  }
  auto print_config = flag("print-config");
  if (!print_config.ok()) return print_config.status();
  cl.print_config = *print_config;
  if (cl.print_config) {
    // The resolved job, as a file LoadJobFile reads back.
    JobFile& r = cl.resolved;
    for (const auto& o : kOptions) {
      const std::string name = o.name;
      if (name == "help" || name == "version" || name == "config" || name == "print-config" ||
          name == "x") {
        continue;
      }
      if (o.kind == Kind::kFlag) {
        auto b = flag(o.name);
        if (b.ok() && *b) r.options[name] = "1";
      } else if (auto v = get(o.name)) {
        r.options[name] = *v;
      }
    }
    if (!cl.forward_env.empty()) r.multi["x"] = cl.forward_env;
    for (const auto& [k, v] : s.env()) r.env[k] = v;
    if (!cl.host_entries.empty()) r.host_entries = cl.host_entries;
    if (!rest.empty()) {
      r.script = rest[0];
      r.args.assign(rest.begin() + 1, rest.end());
    }
    return cl;
  }
  if (rest.empty()) {
    return Bad("missing the training script; write drun [options] train.py [args...]");
  }
  s.set_entrypoint(rest[0]);
  for (size_t k = 1; k < rest.size(); ++k) s.add_args(rest[k]);
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd)) s.set_working_dir(cwd);
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

std::vector<OptionInfo> KnownOptions() {
  std::vector<OptionInfo> out;
  for (const auto& o : kOptions) {
    out.push_back({o.name, o.short_name, o.kind == Kind::kFlag, std::string(o.name) == "x", o.group,
                   o.metavar ? o.metavar : "", o.help, EnvName(o)});
  }
  return out;
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
      "the environment as PET_<NAME> (torchrun's options) or DRUN_<NAME> (drun's own);\n"
      "the command line wins. The interpreter is $PYTHON_EXEC, else python3 on PATH.\n";
  for (const char* group : {kJob, kRdzv, kOut, kSsh, kSlurm, ""}) {
    absl::StrAppend(&out, "\n", *group ? group : "other", " options:\n");
    for (const auto& o : kOptions) {
      if (std::string(o.group) != group) continue;
      std::string lhs = o.short_name ? absl::StrCat("-", std::string(1, o.short_name), ", --", o.name)
                                     : absl::StrCat("    --", o.name);
      if (std::string(o.name).size() == 1) lhs = absl::StrCat("-", o.name);  // mpirun's -x
      if (o.metavar) absl::StrAppend(&lhs, " ", o.metavar);
      if (lhs.size() < 34) {
        lhs.resize(34, ' ');
        absl::StrAppend(&out, "  ", lhs, o.help, "\n");
      } else {
        absl::StrAppend(&out, "  ", lhs, "\n  ", std::string(34, ' '), o.help, "\n");
      }
    }
  }
  absl::StrAppend(&out,
                  "\nexamples:\n"
                  "  drun --standalone --nproc-per-node 4 train.py --epochs 5\n"
                  "  drun --nproc-per-node gpu:0,2 --max-restarts 3 train.py\n"
                  "  drun --nproc-per-node 4 --node-setup 'python3 prepare_data.py' train.py\n"
                  "  drun --nnodes 2:4 --nproc-per-node 2 --rdzv-endpoint node0:29400 train.py\n"
                  "  drun --hostfile hosts --nproc-per-node 2 -x WANDB_API_KEY train.py\n"
                  "  srun drun --nproc-per-node 2 train.py          (inside sbatch)\n"
                  "  drun --config configs/one_lab_pc.yaml\n"
                  "\nmodes: --standalone or --nnodes 1: this process is the node. --rdzv-endpoint\n"
                  "HOST:PORT on every node: the node whose address HOST is hosts the rendezvous.\n"
                  "--hostfile/-H: agents start over ssh. Under srun (SLURM_STEP_ID set, none of\n"
                  "--rdzv-endpoint/--rdzv-backend/--node-rank/--master-*) drun configures itself:\n"
                  "with one task per node each task is that node's agent (nnodes, node rank and\n"
                  "GPUs from Slurm); with more tasks than nodes each task is one worker\n"
                  "(RANK=SLURM_PROCID, LOCAL_RANK=SLURM_LOCALID). --launcher slurm in a batch\n"
                  "script runs that srun for you (docs/slurm.md).\n"
                  "\nexit status: 0 when every worker exits 0; else the first failing worker's\n"
                  "exit code (128+N for signal N); 2 for a bad command line.\n");
  return out;
}


}  // namespace drun
