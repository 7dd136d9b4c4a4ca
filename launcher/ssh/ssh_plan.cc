#include "launcher/ssh/ssh_plan.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "rendezvous/base/words.h"

namespace drun {

namespace {

absl::Status Bad(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

// mpirun's -np N over the hosts, as mpirun maps it: each host's slots (else
// max_slots) filled in order, then one more per host round-robin, never past a
// host's max_slots. The counts per host, in order; hosts at the end may get 0.
absl::StatusOr<std::vector<int>> SpreadTotal(int total, const std::vector<HostEntry>& hosts) {
  std::vector<int> counts(hosts.size(), 0);
  int left = total;
  for (size_t i = 0; i < hosts.size() && left > 0; ++i) {
    const int slots = hosts[i].slots > 0 ? hosts[i].slots : hosts[i].max_slots;
    counts[i] = std::min(left, slots);
    left -= counts[i];
  }
  while (left > 0) {
    bool placed = false;
    for (size_t i = 0; i < hosts.size() && left > 0; ++i) {
      if (hosts[i].max_slots > 0 && counts[i] >= hosts[i].max_slots) continue;
      ++counts[i];
      --left;
      placed = true;
    }
    if (!placed) {
      return Bad(absl::StrCat("-np ", total, " is more processes than the hosts' max_slots allow (",
                              total - left, "); lower -np or raise max_slots"));
    }
  }
  return counts;
}

// --stdin RANK names a rank the job has, where the plan fixes the world size:
// a fixed node count and a number of workers on every host that runs the job.
absl::Status CheckStdinRank(const CommandLine& cl, const SshPlan& plan) {
  const v1::JobSpec::StdinTarget& t = cl.spec.stdin_target();
  if (t.mode() != v1::JobSpec::StdinTarget::RANK || plan.min_nodes != plan.max_nodes) return absl::OkStatus();
  int world = 0;
  for (const HostPlan& h : plan.hosts) {
    int n = 0;
    if (h.spare) continue;
    if (!absl::SimpleAtoi(h.spec.nproc_per_node(), &n)) return absl::OkStatus();  // "gpu": known on the host
    world += n;
  }
  if (t.rank() < world) return absl::OkStatus();
  return Bad(absl::StrCat(cl.Describe(Opt::kStdin), ": the job has ranks 0 to ", world - 1, " (over ",
                          Count(plan.max_nodes, "host"), "); write one of them, all or none"));
}

}  // namespace

std::string HostLabel(const HostEntry& e) {
  return e.user.empty() ? e.host : absl::StrCat(e.user, "@", e.host);
}

std::map<std::string, std::string> AlwaysForwardedEnv(const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> out;
  for (const char* name : kAlwaysForwarded) {
    if (auto it = env.find(name); it != env.end()) out[name] = it->second;
  }
  return out;
}

absl::StatusOr<std::vector<HostEntry>> LoadHosts(const CommandLine& cl) {
  if (!cl.host_entries.empty()) return cl.host_entries;  // a job file's hosts:
  absl::StatusOr<std::vector<HostEntry>> hosts;
  std::string source;
  if (!cl.hostfile.empty()) {
    hosts = ReadHostfile(cl.hostfile);
    source = absl::StrCat("--hostfile ", cl.hostfile);
  } else {
    hosts = ParseHostArg(cl.hosts);
    if (!hosts.ok()) {
      return Bad(absl::StrCat("-H ", absl::CEscape(cl.hosts.substr(0, 80)), ": ",
                              hosts.status().message()));
    }
    source = "-H";
  }
  if (!hosts.ok()) return hosts.status();
  if (hosts->empty()) {
    return Bad(absl::StrCat(source, " names no host; list one host per line (host [slots=N])"));
  }
  return hosts;
}

absl::StatusOr<SshPlan> PlanSshJob(const CommandLine& cl, const v1::JobSpec& spec,
                                   const std::vector<HostEntry>& hosts,
                                   const std::map<std::string, std::string>& forwarded_env,
                                   const std::map<std::string, std::string>& env) {
  SshPlan plan;
  std::vector<int> spread;  // -np N: each host's share
  int n = static_cast<int>(hosts.size());
  int used = n;  // the hosts -np N gives processes to
  if (cl.total_procs > 0) {
    // Over the hosts that run the job (the first MAX with --nnodes; the rest stay spares).
    const size_t job_hosts = cl.Explicit(Opt::kNnodes) ? std::min<size_t>(hosts.size(), spec.max_nodes())
                                                       : hosts.size();
    auto counts = SpreadTotal(cl.total_procs, {hosts.begin(), hosts.begin() + job_hosts});
    if (!counts.ok()) return counts.status();
    spread = *std::move(counts);
    used = 0;
    for (int c : spread) used += c > 0;
    if (cl.Explicit(Opt::kNnodes) && used < spec.min_nodes()) {
      return Bad(absl::StrCat("-np ", cl.total_procs, " fills only ", Count(used, "host"), ", but ",
                              cl.Describe(Opt::kNnodes), " needs ", spec.min_nodes(),
                              "; raise -np or lower --nnodes"));
    }
    if (!cl.Explicit(Opt::kNnodes)) n = used;  // fewer processes than hosts: the last hosts idle
  }
  if (cl.Explicit(Opt::kNnodes)) {
    plan.min_nodes = spec.min_nodes();
    plan.max_nodes = spec.max_nodes();
    if (n < plan.min_nodes) {
      return Bad(absl::StrCat("--nnodes ", plan.min_nodes,
                              plan.min_nodes == plan.max_nodes ? "" : absl::StrCat(":", plan.max_nodes),
                              " needs at least ", Count(plan.min_nodes, "host"), ", but ",
                              cl.hostfile.empty() ? "-H" : cl.hostfile, " lists ", n,
                              "; add hosts or lower --nnodes"));
    }
  } else {
    plan.min_nodes = plan.max_nodes = n;
  }
  if (spec.rdzv_backend() == v1::JobSpec::STATIC || spec.node_rank() >= 0) {
    return Bad("--node-rank and --rdzv-backend static do not apply to the ssh launcher: it "
               "starts every node itself and the rendezvous assigns the ranks; drop them");
  }
  const int active = std::min({n, plan.max_nodes, used});
  plan.spares = n - active;

  const bool nproc_explicit = cl.Explicit(Opt::kNprocPerNode) && spread.empty();
  int nproc_number = 0;
  const bool nproc_numeric = absl::SimpleAtoi(spec.nproc_per_node(), &nproc_number);

  for (int i = 0; i < n; ++i) {
    const HostEntry& e = hosts[i];
    HostPlan hp;
    hp.entry = e;
    hp.spare = i >= active;
    hp.spec = spec;
    if (!spread.empty() && !hp.spare) {
      hp.spec.set_nproc_per_node(std::to_string(spread[i]));
    } else if (nproc_explicit) {
      if (e.max_slots > 0 && nproc_numeric && nproc_number > e.max_slots) {
        std::string where = e.line > 0 ? absl::StrCat(cl.hostfile, ":", e.line, ": ") : "";
        return Bad(absl::StrCat(where, "host ", e.host, " has max_slots=", e.max_slots,
                                ", but --nproc-per-node asks for ", nproc_number,
                                " processes; lower --nproc-per-node or raise max_slots"));
      }
    } else if (e.slots > 0) {
      hp.spec.set_nproc_per_node(std::to_string(e.slots));
    } else if (e.max_slots > 0) {
      hp.spec.set_nproc_per_node(std::to_string(e.max_slots));
    }
    hp.spec.set_min_nodes(plan.min_nodes);
    hp.spec.set_max_nodes(plan.max_nodes);
    hp.spec.clear_local_addr();
    for (const auto& [k, v] : forwarded_env) hp.spec.mutable_env()->insert({k, v});  // the user's win
    if (hp.spec.python_exec().empty()) {
      if (auto it = env.find("PYTHON_EXEC"); it != env.end() && !it->second.empty()) {
        hp.spec.set_python_exec(it->second);
      }
    }
    plan.hosts.push_back(std::move(hp));
  }
  if (absl::Status st = CheckStdinRank(cl, plan); !st.ok()) return st;
  return plan;
}

}  // namespace drun
