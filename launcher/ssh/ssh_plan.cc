#include "launcher/ssh/ssh_plan.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace drun {

namespace {

bool ValidVarName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

absl::Status Bad(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

}  // namespace

std::string HostLabel(const HostEntry& e) {
  return e.user.empty() ? e.host : absl::StrCat(e.user, "@", e.host);
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseEnvFile(
    absl::string_view text, absl::string_view filename,
    const std::map<std::string, std::string>& env) {
  std::vector<std::pair<std::string, std::string>> out;
  int lineno = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++lineno;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    if (absl::StartsWith(line, "export ") || absl::StartsWith(line, "export\t")) {
      line = absl::StripLeadingAsciiWhitespace(line.substr(7));
    }
    const size_t eq = line.find('=');
    std::string name(absl::StripTrailingAsciiWhitespace(line.substr(0, eq)));
    if (!ValidVarName(name)) {
      return Bad(absl::StrCat(filename, ":", lineno, ": expected VAR=VALUE or VAR, got '",
                              absl::CEscape(line.substr(0, 80)), "'"));
    }
    if (eq == absl::string_view::npos) {
      auto it = env.find(name);
      if (it == env.end()) {
        return Bad(absl::StrCat(filename, ":", lineno, ": ", name,
                                " is not set in this environment; write ", name, "=VALUE"));
      }
      out.emplace_back(name, it->second);
      continue;
    }
    absl::string_view value = absl::StripLeadingAsciiWhitespace(line.substr(eq + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    out.emplace_back(name, std::string(value));
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> ForwardedEnv(
    const CommandLine& cl, const std::map<std::string, std::string>& env,
    absl::string_view env_file_text) {
  std::map<std::string, std::string> out;
  for (const char* name : kAlwaysForwarded) {
    if (auto it = env.find(name); it != env.end()) out[name] = it->second;
  }
  if (!cl.env_file.empty()) {
    auto parsed = ParseEnvFile(env_file_text, cl.env_file, env);
    if (!parsed.ok()) return parsed.status();
    for (auto& [k, v] : *parsed) out[k] = v;
  }
  for (const std::string& x : cl.forward_env) {
    const size_t eq = x.find('=');
    const std::string name = x.substr(0, eq);
    if (!ValidVarName(name)) {
      return Bad(absl::StrCat("-x '", absl::CEscape(x.substr(0, 80)),
                              "': expected VAR or VAR=VALUE (a variable name of letters, "
                              "digits and '_')"));
    }
    if (eq != std::string::npos) {
      out[name] = x.substr(eq + 1);
      continue;
    }
    auto it = env.find(name);
    if (it == env.end()) {
      return Bad(absl::StrCat("-x ", name, ": ", name,
                              " is not set in this environment; write -x ", name,
                              "=VALUE to set it on every host"));
    }
    out[name] = it->second;
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
  const int n = static_cast<int>(hosts.size());
  if (cl.explicit_options.count("nnodes")) {
    plan.min_nodes = spec.min_nodes();
    plan.max_nodes = spec.max_nodes();
    if (n < plan.min_nodes) {
      return Bad(absl::StrCat("--nnodes ", plan.min_nodes,
                              plan.min_nodes == plan.max_nodes ? "" : absl::StrCat(":", plan.max_nodes),
                              " needs at least ", plan.min_nodes, " hosts, but ",
                              cl.hostfile.empty() ? "-H" : cl.hostfile, " lists ", n,
                              "; add hosts or lower --nnodes"));
    }
  } else {
    plan.min_nodes = plan.max_nodes = n;
  }
  if (spec.rdzv_backend() == "static" || spec.node_rank() >= 0) {
    return Bad("--node-rank and --rdzv-backend static do not apply to the ssh launcher: it "
               "starts every node itself and the rendezvous assigns the ranks; drop them");
  }
  const int active = std::min(n, plan.max_nodes);
  plan.spares = n - active;

  const bool nproc_explicit = cl.explicit_options.count("nproc-per-node") > 0;
  int nproc_number = 0;
  const bool nproc_numeric = absl::SimpleAtoi(spec.nproc_per_node(), &nproc_number);

  for (int i = 0; i < n; ++i) {
    const HostEntry& e = hosts[i];
    HostPlan hp;
    hp.entry = e;
    hp.spare = i >= active;
    hp.spec = spec;
    if (nproc_explicit) {
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
    for (const auto& [k, v] : forwarded_env) (*hp.spec.mutable_env())[k] = v;
    if (hp.spec.python_exec().empty()) {
      if (auto it = env.find("PYTHON_EXEC"); it != env.end() && !it->second.empty()) {
        hp.spec.set_python_exec(it->second);
      }
    }
    plan.hosts.push_back(std::move(hp));
  }
  return plan;
}

}  // namespace drun
