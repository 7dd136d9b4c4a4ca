#include "launcher/slurm/slurm_env.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/socket.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/output.h"
#include "agent/process.h"
#include "launcher/hosts/hostlist.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/event_loop.h"
#include "rendezvous/base/spawn.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/words.h"

namespace drun {

namespace {

using Env = std::map<std::string, std::string>;

// Slurm's pseudo step ids (SLURM_BATCH_SCRIPT, SLURM_EXTERN_CONT,
// SLURM_INTERACTIVE_STEP, ...) are at the top of the 32-bit range.
constexpr uint64_t kFirstPseudoStep = 0xfffffff0u;

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(msg); }

const std::string* Lookup(const Env& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

// The first of several variable names that is set, with its name.
std::pair<const char*, const std::string*> First(const Env& env,
                                                 std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (const std::string* v = Lookup(env, n)) return {n, v};
  }
  return {*names.begin(), nullptr};
}

absl::StatusOr<int> Count(const Env& env, std::initializer_list<const char*> names, int lo) {
  auto [name, v] = First(env, names);
  if (!v) return Bad(absl::StrCat("inside an srun step, but ", name, " is not set"));
  int n;
  if (!absl::SimpleAtoi(*v, &n) || n < lo) {
    return Bad(absl::StrCat(name, "='", *v, "' is not a number of at least ", lo));
  }
  return n;
}

// Options that say "the command line configures the rendezvous itself".
constexpr Opt kRendezvousOptions[] = {Opt::kRdzvEndpoint, Opt::kRdzvBackend, Opt::kNodeRank,
                                      Opt::kMasterAddr, Opt::kMasterPort};

bool Explicit(const CommandLine& cl, Opt option) {
  return cl.Explicit(option);
}

// Whether this process is a task of an srun step; else why not.
bool InSrunStep(const Env& env, std::string* why) {
  const std::string* step = First(env, {"SLURM_STEP_ID", "SLURM_STEPID"}).second;
  if (!step) {
    *why = "not inside an srun step (SLURM_STEP_ID is not set)";
    return false;
  }
  uint64_t id;
  if (!absl::SimpleAtoi(*step, &id) || id >= kFirstPseudoStep) {
    *why = absl::StrCat("SLURM_STEP_ID=", *step,
                        " is the batch script, salloc's shell or another pseudo step, not an "
                        "srun step");
    return false;
  }
  return true;
}

constexpr char kLauncherUnderSrun[] =
    "--launcher slurm runs srun itself: use it in the batch script or the salloc shell, not "
    "under srun (or drop it: under srun, drun configures itself)";

std::string Sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

// The interpreter the agent would pick (agent.cc: spec, $PYTHON_EXEC, python3).
std::string PythonFor(const v1::JobSpec& spec, const Env& env) {
  if (!spec.python_exec().empty()) return spec.python_exec();
  const std::string* p = Lookup(env, "PYTHON_EXEC");
  return p ? *p : "python3";
}

// Task mode: the agent runs one worker and sets torchrun's variables for a
// one-worker node, so the worker is started through env(1), which puts the
// task's own LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and GROUP_WORLD_SIZE
// over them. No shell is involved: the arguments pass through verbatim.
absl::Status WrapForTask(const SlurmStepPlan& p, const Env& env, v1::JobSpec* spec) {
  std::vector<std::string> cmd;
  switch (spec->kind()) {
    case v1::JobSpec::PYTHON_SCRIPT:
      cmd = {PythonFor(*spec, env), "-u", spec->entrypoint()};
      break;
    case v1::JobSpec::PYTHON_MODULE:
      cmd = {PythonFor(*spec, env), "-u", "-m", spec->entrypoint()};
      break;
    default:
      cmd = {spec->entrypoint()};
      break;
  }
  if (cmd[0].find('=') != std::string::npos) {
    return Bad(absl::StrCat("'", cmd[0], "' contains '=', which env(1) would take for a variable; "
                            "in srun task mode run it through a path without '=' (a symlink)"));
  }
  cmd.insert(cmd.end(), spec->args().begin(), spec->args().end());
  const auto path = Lookup(env, "PATH");
  std::string env_bin = FindOnPath("env", path ? *path : "/usr/bin:/bin");
  if (env_bin.empty()) env_bin = "/usr/bin/env";

  std::vector<std::string> vars = {
      absl::StrCat("LOCAL_RANK=", p.local_id),
      absl::StrCat("LOCAL_WORLD_SIZE=", p.tasks_on_node),
      absl::StrCat("GROUP_RANK=", p.node_id),
      absl::StrCat("GROUP_WORLD_SIZE=", p.num_nodes),
  };
  // torchrun's rule (one thread per worker when a node runs several) with the
  // node's real worker count; the agent only sees its one.
  if (p.tasks_on_node > 1 && !env.count("OMP_NUM_THREADS") && !spec->env().count("OMP_NUM_THREADS")) {
    vars.push_back("OMP_NUM_THREADS=1");
  }
  spec->set_kind(v1::JobSpec::PROGRAM);
  spec->set_entrypoint(env_bin);
  spec->clear_args();
  for (const auto& v : vars) spec->add_args(v);
  for (const auto& a : cmd) spec->add_args(a);
  return absl::OkStatus();
}

// "12000-12003" or "12000,12007" -> 12000.
absl::StatusOr<int> FirstReservedPort(const std::string& v) {
  std::string first(v.substr(0, v.find_first_of(",-")));
  int port;
  if (!absl::SimpleAtoi(first, &port) || port < 1 || port > 65535) {
    return Bad(absl::StrCat("SLURM_STEP_RESV_PORTS='", v, "' does not start with a port number"));
  }
  return port;
}

// Whether a TCP server could listen on 0.0.0.0:port now (as gRPC binds it:
// with SO_REUSEADDR, so a port in TIME_WAIT counts as free).
bool PortFree(int port, std::string* why) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return true;  // cannot tell; the server's own bind will say
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  bool ok = bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  if (!ok) *why = strerror(errno);
  return ok;
}

}  // namespace

int DerivedSlurmPort(uint64_t job_id, uint64_t step_id) {
  return kSlurmPortBase + static_cast<int>(job_id % kSlurmPortJobSlots) * 4 +
         static_cast<int>(step_id % 4);
}

std::string DerivedSlurmToken(const std::string& cluster, const std::string& job_id,
                              const std::string& step_id, const std::string& secret) {
  // NUL separators keep ("1","23") and ("12","3") apart.
  std::string data = "drun-slurm-token-v1";
  for (const std::string* part : {&cluster, &job_id, &step_id, &secret}) {
    data.push_back('\0');
    data += *part;
  }
  return Sha256Hex(data);
}

std::string AddressTowardAny(const std::vector<std::string>& addrs, int port) {
  for (const std::string& a : addrs) {
    auto ip = ResolveHost(a);
    if (!ip.ok()) continue;
    std::string src = RouteSourceAddress(*ip, port);
    if (!src.empty()) return src;
  }
  return "";
}

std::string AddressTowardOtherNodes(const std::string& nodelist, const std::string& self, int port) {
  auto nodes = ExpandHostlist(nodelist, 100000);
  if (!nodes.ok()) return "";
  std::vector<std::string> others;
  for (const std::string& n : *nodes) {
    if (n != self) others.push_back(n);
  }
  return AddressTowardAny(others, port);
}

std::vector<std::pair<std::string, std::string>> ParseNodeAddrs(absl::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::string name, addr;
    for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      if (absl::ConsumePrefix(&word, "NodeName=")) name = std::string(word);
      else if (absl::ConsumePrefix(&word, "NodeAddr=")) addr = std::string(word);
    }
    if (!name.empty() && !addr.empty()) out.emplace_back(std::move(name), std::move(addr));
  }
  return out;
}

namespace {

// What `argv` prints on stdout (stderr to /dev/null) within `limit`; nullopt
// when it cannot start, fails, or outlives the limit (then it is killed).
std::optional<std::string> CaptureOutput(const std::vector<std::string>& argv, Duration limit) {
  UniqueFd read_end, write_end;
  if (!MakePipe(&read_end, &write_end)) return std::nullopt;
  SpawnStdio stdio;
  stdio.in = SpawnStdio::kDevNull;
  stdio.out = write_end.get();
  stdio.err = SpawnStdio::kDevNull;
  pid_t pid;
  if (SpawnInOwnGroup(argv, stdio, &pid) != 0) return std::nullopt;
  write_end.reset();
  std::string out;
  const TimePoint deadline = Clock::now() + limit;
  bool ok = true;
  for (;;) {
    pollfd p{read_end.get(), POLLIN, 0};
    const int n = PollUntil(&p, 1, deadline);
    if (n < 0 || (n == 0 && Clock::now() >= deadline)) {
      ok = false;
      break;
    }
    if (n == 0) continue;  // a signal
    char buf[4096];
    const ssize_t got = read(read_end.get(), buf, sizeof buf);
    if (got > 0) {
      out.append(buf, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  if (!ok) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> SlurmNodeAddrs(const std::string& nodelist,
                                                                const std::string& path) {
  const std::string scontrol = FindOnPath("scontrol", path);
  if (scontrol.empty() || nodelist.empty()) return {};
  auto out = CaptureOutput({scontrol, "-o", "show", "node", nodelist}, std::chrono::seconds(10));
  return out ? ParseNodeAddrs(*out) : std::vector<std::pair<std::string, std::string>>{};
}

std::string SlurmNodeName(const Env& env) {
  if (const std::string* n = Lookup(env, "SLURMD_NODENAME")) return *n;
  char buf[256] = {0};
  return gethostname(buf, sizeof buf - 1) == 0 ? buf : "";
}

std::string StepAddressTowardOtherNodes(const Env& env, int port) {
  const std::string* list = First(env, {"SLURM_STEP_NODELIST", "SLURM_NODELIST"}).second;
  return list ? AddressTowardOtherNodes(*list, SlurmNodeName(env), port) : "";
}

absl::StatusOr<SlurmStepPlan> PlanSlurmStep(const CommandLine& cl, const Env& env,
                                            const std::string& secret) {
  SlurmStepPlan p;
  p.spec = cl.spec;
  if (!InSrunStep(env, &p.why_off)) return p;
  if (cl.launcher == Launcher::kSlurm) return Bad(kLauncherUnderSrun);
  if (cl.launcher == Launcher::kSsh) {
    p.why_off = "--launcher ssh starts the agents itself";
    return p;
  }
  if (cl.standalone) {
    p.why_off = "--standalone runs a single-node job";
    return p;
  }
  for (Opt o : kRendezvousOptions) {
    if (Explicit(cl, o)) {
      p.why_off = absl::StrCat("--", OptionOf(o).name, " configures the rendezvous");
      return p;
    }
  }

  const std::string* job = First(env, {"SLURM_JOB_ID", "SLURM_JOBID"}).second;
  const std::string* step = First(env, {"SLURM_STEP_ID", "SLURM_STEPID"}).second;
  uint64_t job_id, step_id;
  if (!job || !absl::SimpleAtoi(*job, &job_id)) {
    return Bad("inside an srun step, but SLURM_JOB_ID is not a job id");
  }
  absl::SimpleAtoi(*step, &step_id);  // checked by InSrunStep
  p.step = absl::StrCat(*job, ".", *step);

  auto nodes = Count(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES"}, 1);
  if (!nodes.ok()) return nodes.status();
  auto tasks = Count(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"}, 1);
  if (!tasks.ok()) return tasks.status();
  auto node_id = Count(env, {"SLURM_NODEID"}, 0);
  if (!node_id.ok()) return node_id.status();
  auto proc_id = Count(env, {"SLURM_PROCID"}, 0);
  if (!proc_id.ok()) return proc_id.status();
  auto local_id = Count(env, {"SLURM_LOCALID"}, 0);
  if (!local_id.ok()) return local_id.status();
  p.num_nodes = *nodes;
  p.num_tasks = *tasks;
  p.node_id = *node_id;
  p.proc_id = *proc_id;
  p.local_id = *local_id;
  if (p.num_tasks < p.num_nodes || p.node_id >= p.num_nodes || p.proc_id >= p.num_tasks) {
    return Bad(absl::StrCat("inconsistent Slurm step: ", Count(p.num_tasks, "task"), " on ",
                            Count(p.num_nodes, "node"), ", SLURM_NODEID=", p.node_id, ", SLURM_PROCID=", p.proc_id));
  }

  auto [list_name, list] = First(env, {"SLURM_STEP_NODELIST", "SLURM_NODELIST"});
  if (!list) return Bad("inside an srun step, but SLURM_STEP_NODELIST is not set");
  auto count = CountHostlist(*list);
  if (!count.ok()) return Bad(absl::StrCat(list_name, ": ", count.status().message()));
  if (*count != static_cast<size_t>(p.num_nodes)) {
    return Bad(absl::StrCat(list_name, "='", *list, "' names ", Count(*count, "node"), ", but the step has ",
                            p.num_nodes));
  }
  auto first = FirstHost(*list);
  if (!first.ok()) return Bad(absl::StrCat(list_name, ": ", first.status().message()));
  p.host = *first;

  p.tasks_on_node = 1;
  if (p.num_tasks > p.num_nodes) {
    auto [tpn_name, tpn] = First(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
    if (!tpn) return Bad("inside an srun step, but SLURM_STEP_TASKS_PER_NODE is not set");
    auto per_node = ExpandTasksPerNode(*tpn);
    if (!per_node.ok()) return Bad(absl::StrCat(tpn_name, ": ", per_node.status().message()));
    if (per_node->size() != static_cast<size_t>(p.num_nodes)) {
      return Bad(absl::StrCat(tpn_name, "='", *tpn, "' gives ", Count(per_node->size(), "node"),
                              ", but the step has ", p.num_nodes));
    }
    p.tasks_on_node = (*per_node)[p.node_id];
    if (p.local_id >= p.tasks_on_node) {
      return Bad(absl::StrCat("SLURM_LOCALID=", p.local_id, " but ", tpn_name, " gives this node ",
                              Count(p.tasks_on_node, "task")));
    }
  }
  p.mode = p.num_tasks == p.num_nodes ? SlurmMode::kPerNode : SlurmMode::kPerTask;

  if (const std::string* resv = Lookup(env, "SLURM_STEP_RESV_PORTS")) {
    auto port = FirstReservedPort(*resv);
    if (!port.ok()) return port.status();
    p.port = *port;
    p.port_source = "SLURM_STEP_RESV_PORTS";
  } else {
    p.port = DerivedSlurmPort(job_id, step_id);
    p.port_source = "derived from the job id";
  }
  const std::string* cluster = Lookup(env, "SLURM_CLUSTER_NAME");
  p.token = DerivedSlurmToken(cluster ? *cluster : "", *job, *step, secret);

  // The job, as every task of the step sees it.
  v1::JobSpec& s = p.spec;
  const int members = p.mode == SlurmMode::kPerNode ? p.num_nodes : p.num_tasks;
  if (Explicit(cl, Opt::kNnodes) && (cl.spec.min_nodes() > p.num_nodes || cl.spec.max_nodes() < p.num_nodes)) {
    return Bad(absl::StrCat("--nnodes ", cl.spec.min_nodes() == cl.spec.max_nodes()
                                             ? std::to_string(cl.spec.min_nodes())
                                             : absl::StrCat(cl.spec.min_nodes(), ":", cl.spec.max_nodes()),
                            " does not match this srun step's ", p.num_nodes,
                            " nodes (SLURM_STEP_NUM_NODES); drop --nnodes under srun, or change "
                            "the allocation"));
  }
  s.set_min_nodes(members);
  s.set_max_nodes(members);
  s.set_node_rank(p.mode == SlurmMode::kPerNode ? p.node_id : p.proc_id);
  s.set_rdzv_endpoint(absl::StrCat(p.host, ":", p.port));
  p.is_host = p.node_id == 0 && p.local_id == 0;
  if (s.host_role() == v1::JobSpec::HOST_ROLE_AUTO) {
    s.set_host_role(p.is_host ? v1::JobSpec::HOST_ROLE_HOST : v1::JobSpec::HOST_ROLE_CLIENT);
  }
  if (!Explicit(cl, Opt::kRdzvId) && !Explicit(cl, Opt::kRunId)) s.set_run_id(absl::StrCat("slurm-", p.step));

  if (p.mode == SlurmMode::kPerNode) {
    if (!Explicit(cl, Opt::kNprocPerNode)) {
      int gpus = 0;
      const std::string* g = Lookup(env, "SLURM_GPUS_ON_NODE");
      if (g && absl::SimpleAtoi(*g, &gpus) && gpus > 0) s.set_nproc_per_node(std::to_string(gpus));
    }
  } else {
    if (Explicit(cl, Opt::kNprocPerNode) && cl.spec.nproc_per_node() != "1") {
      return Bad(absl::StrCat(
          "this srun step runs ", Count(p.num_tasks, "task"), " on ", Count(p.num_nodes, "node"),
          ", so each task is one worker (RANK=SLURM_PROCID) and --nproc-per-node ",
          cl.spec.nproc_per_node(),
          " cannot apply: drop it, or run one task per node (srun --ntasks-per-node=1) to have "
          "drun start --nproc-per-node workers on each"));
    }
    s.set_nproc_per_node("1");
    if (absl::Status st = WrapForTask(p, env, &s); !st.ok()) return st;
  }
  return p;
}

absl::Status SlurmLauncherDefaults(CommandLine* cl, const Env& env) {
  const std::string* job = First(env, {"SLURM_JOB_ID", "SLURM_JOBID"}).second;
  if (!job) {
    return Bad("--launcher slurm runs inside a Slurm allocation: put it in an sbatch script or "
               "run it in an salloc shell (SLURM_JOB_ID is not set here)");
  }
  std::string why;
  if (InSrunStep(env, &why)) return Bad(kLauncherUnderSrun);
  auto nodes = Count(env, {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}, 1);
  if (!nodes.ok()) return nodes.status();
  v1::JobSpec& s = cl->spec;
  if (!Explicit(*cl, Opt::kNnodes)) {
    s.set_min_nodes(*nodes);
    s.set_max_nodes(*nodes);
  } else if (s.min_nodes() > *nodes) {
    return Bad(absl::StrCat("--nnodes ", s.min_nodes(), " is more than the ", *nodes,
                            " nodes of this allocation (SLURM_JOB_NUM_NODES); ask sbatch/salloc "
                            "for more nodes or lower --nnodes"));
  } else if (s.max_nodes() > *nodes) {
    s.set_max_nodes(*nodes);  // an elastic range: Slurm can start no more agents than nodes
  }
  if (!Explicit(*cl, Opt::kRdzvId) && !Explicit(*cl, Opt::kRunId)) s.set_run_id(absl::StrCat("slurm-", *job));
  if (!Explicit(*cl, Opt::kNprocPerNode)) {
    // The allocation's shape: `#SBATCH --ntasks-per-node=N` asks for N processes
    // per node (as srun and mpirun read it); else one per GPU Slurm gave.
    int count = 0;
    const std::string* tasks = Lookup(env, "SLURM_NTASKS_PER_NODE");
    const std::string* gpus = Lookup(env, "SLURM_GPUS_ON_NODE");
    if (tasks && absl::SimpleAtoi(*tasks, &count) && count > 0) {
      s.set_nproc_per_node(std::to_string(count));
    } else if (gpus && absl::SimpleAtoi(*gpus, &count) && count > 0) {
      s.set_nproc_per_node(std::to_string(count));
    }
  }
  return absl::OkStatus();
}

absl::Status ApplySlurmEnvironment(CommandLine* cl, Env* env, SlurmMode* mode) {
  if (mode) *mode = SlurmMode::kOff;
  auto plan = PlanSlurmStep(*cl, *env, "");
  if (!plan.ok()) return plan.status();
  if (cl->launcher == Launcher::kSlurm) return SlurmLauncherDefaults(cl, *env);
  if (plan->mode == SlurmMode::kOff) {
    if (cl->mode != JobMode::kSrunStep) return absl::OkStatus();
    cl->mode = NodeMode(*cl);
    if (cl->mode == JobMode::kSingleNode) return ResolveSingleNodeMaster(cl);
    if (cl->mode == JobMode::kC10d && cl->spec.rdzv_endpoint().empty()) {
      return Bad(absl::StrCat(cl->Describe(Opt::kNnodes), " needs --rdzv-endpoint HOST:PORT (", plan->why_off,
                              ", so drun does not configure itself from SLURM_*)"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> secret = ReadJobToken(*cl, *env);
  if (!secret.ok()) return secret.status();
  if (!secret->empty()) plan = PlanSlurmStep(*cl, *env, *secret);
  if (!plan.ok()) return plan.status();
  const SlurmStepPlan& p = *plan;
  if (p.is_host) {
    std::string why;
    if (!PortFree(p.port, &why)) {
      return absl::UnavailableError(absl::StrCat(
          "the rendezvous port ", p.port, " (", p.port_source, ", job step ", p.step, ") is taken on ",
          p.host, " (", why, "); another program holds it: run srun with --resv-ports (needs "
          "MpiParams=ports=... in slurm.conf), or give --rdzv-endpoint ", p.host, ":PORT"));
    }
  }
  cl->spec = p.spec;
  cl->mode = NodeMode(*cl);
  if (mode) *mode = p.mode;
  cl->token_file.clear();
  (*env)["DRUN_RDZV_TOKEN"] = p.token;
  if (p.is_host) {
    std::string shape =
        p.mode == SlurmMode::kPerNode
            ? absl::StrCat(Count(p.num_nodes, "node"), ", one drun per node, --nproc-per-node ",
                           p.spec.nproc_per_node())
            : absl::StrCat(Count(p.num_tasks, "task"), " on ", Count(p.num_nodes, "node"),
                           ", one worker per task (RANK=SLURM_PROCID)");
    Say(absl::StrCat("Slurm step ", p.step, ": ", shape, "; rendezvous on ", p.host, ":",
                             p.port, " (port ", p.port_source, "), run id ", p.spec.run_id()));
  }
  return absl::OkStatus();
}

}  // namespace drun
