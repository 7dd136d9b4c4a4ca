// The job model resolved once (issue 11): every option from each of its three sources
// (command line > PET_/DRUN_ environment > YAML job file), the Origin recorded for it,
// every refused combination, and the JobMode decided for each mode.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agent/cpu_placement.h"
#include "agent/handled_signals.h"
#include "launcher/job/cli.h"
#include "launcher/job/config_file.h"

namespace drun {
namespace {

using Env = std::map<std::string, std::string>;
using Args = std::vector<std::string>;

class JobResolutionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/job_resolution_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& f : files_) unlink(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    files_.push_back(path);
    return path;
  }
  // Parses with a job file holding `yaml` (none when empty).
  absl::StatusOr<CommandLine> Parse(Args args, Env env = {}, const std::string& yaml = "") {
    if (!yaml.empty()) {
      args.insert(args.begin(), {"--config", Write("job.yaml", yaml)});
    }
    return ParseCommandLine(args, env);
  }
  std::string dir_;
  std::vector<std::string> files_;
};

std::string Msg(const absl::StatusOr<CommandLine>& cl) { return std::string(cl.status().message()); }

// One value option: three distinct valid values (file, environment, command line), the
// options that make each valid, and what the resolved job says about it.
struct ValueCase {
  std::string name;
  std::string file, env, cl;
  Args base;
  std::function<std::string(const CommandLine&)> resolved;
};

std::vector<ValueCase> ValueCases() {
  const Args endpoint = {"--rdzv-endpoint", "127.0.0.1:29400"};
  return {
      {"nnodes", "1", "1:2", "1:3", endpoint,
       [](const CommandLine& c) {
         const std::string min = std::to_string(c.spec.min_nodes()), max = std::to_string(c.spec.max_nodes());
         return min == max ? min : min + ":" + max;
       }},
      {"nproc-per-node", "2", "3", "4", {}, [](const CommandLine& c) { return c.spec.nproc_per_node(); }},
      {"max-restarts", "1", "2", "3", {}, [](const CommandLine& c) { return std::to_string(c.spec.max_restarts()); }},
      {"role", "a", "b", "c", {}, [](const CommandLine& c) { return c.spec.role(); }},
      {"node-setup", "true", "echo", "exit 0", {}, [](const CommandLine& c) { return c.spec.node_setup(); }},
      {"shutdown-timeout", "1", "2", "3", {},
       [](const CommandLine& c) { return std::to_string(static_cast<int>(c.spec.shutdown_timeout_s())); }},
      {"monitor-interval", "1", "2", "3", {}, nullptr},
      {"start-method", "spawn", "fork", "forkserver", {}, nullptr},
      {"run-id", "r1", "r2", "r3", {}, [](const CommandLine& c) { return c.spec.run_id(); }},
      {"iface", "eth1", "10.0.0.0/24", "fd00::/64", {}, [](const CommandLine& c) { return c.spec.iface(); }},
      {"rdzv-id", "i1", "i2", "i3", {}, [](const CommandLine& c) { return c.spec.run_id(); }},
      {"rdzv-backend", "c10d", "static", "c10d", endpoint,
       [](const CommandLine& c) { return std::string(c.spec.rdzv_backend() == v1::JobSpec::STATIC ? "static" : "c10d"); }},
      {"rdzv-endpoint", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", {},
       [](const CommandLine& c) { return c.spec.rdzv_endpoint(); }},
      {"rdzv-conf", "join_timeout=1", "join_timeout=2", "join_timeout=3", {},
       [](const CommandLine& c) { return "join_timeout=" + std::to_string(static_cast<int>(c.spec.join_timeout_s())); }},
      {"node-rank", "0", "1", "2", {"--nnodes", "3", "--master-addr", "127.0.0.1"},
       [](const CommandLine& c) { return std::to_string(c.spec.node_rank()); }},
      {"master-addr", "127.0.0.1", "127.0.0.2", "127.0.0.3", {}, [](const CommandLine& c) { return c.spec.master_addr(); }},
      {"master-port", "1001", "1002", "1003", {}, [](const CommandLine& c) { return std::to_string(c.spec.master_port()); }},
      {"local-addr", "127.0.0.1", "127.0.0.2", "127.0.0.3", {}, [](const CommandLine& c) { return c.spec.local_addr(); }},
      {"rdzv-token-file", "t1", "t2", "t3", {}, [](const CommandLine& c) { return c.token_file; }},
      {"log-dir", "l1", "l2", "l3", {}, [](const CommandLine& c) { return c.spec.log_dir(); }},
      {"redirects", "1", "2", "3", {}, [](const CommandLine& c) { return std::to_string(c.spec.redirects().all()); }},
      {"tee", "1", "2", "3", {}, [](const CommandLine& c) { return std::to_string(c.spec.tee().all()); }},
      {"local-ranks-filter", "0", "1", "2", {},
       [](const CommandLine& c) { return std::to_string(c.spec.local_ranks_filter(0)); }},
      {"report", "a.json", "b.json", "c.json", {}, [](const CommandLine& c) { return c.report_path; }},
      {"hostfile", "h1", "h2", "h3", {}, [](const CommandLine& c) { return c.hostfile; }},
      {"host", "a", "b", "c", {}, [](const CommandLine& c) { return c.hosts; }},
      {"remote-drun", "d1", "d2", "d3", {}, [](const CommandLine& c) { return c.remote_drun; }},
      {"rsh", "ssh -p 1", "ssh -p 2", "ssh -p 3", {}, [](const CommandLine& c) { return c.rsh; }},
      {"signals-to-handle", "SIGTERM", "SIGUSR1", "SIGINT,SIGHUP", {},
       [](const CommandLine& c) { return SignalListText(HandledSignals(c.spec)); }},
      {"numa-binding", "node", "exclusive", "core-complex", {},
       [](const CommandLine& c) { return NumaBindingName(c.spec.numa_binding()); }},
      {"launcher", "slurm", "local", "slurm", {},
       [](const CommandLine& c) { return std::string(c.launcher == Launcher::kSlurm ? "slurm" : "local"); }},
  };
}

// The option a test names by its spelling (the cases are tables of names).
Opt OptNamed(const std::string& name) {
  const OptionInfo* o = FindOption(name);
  EXPECT_NE(o, nullptr) << name;
  return o ? o->id : Opt::kHelp;
}

std::string EnvVarOf(const std::string& option) {
  for (const OptionInfo& o : KnownOptions()) {
    if (o.name == option) return o.env;
  }
  return "";
}

// Every value option, from the job file alone, then the environment over the file, then
// the command line over both: the value and the Origin follow the winner.
TEST_F(JobResolutionTest, EveryValueOptionFromEachSourceWithPrecedenceAndOrigin) {
  for (const ValueCase& c : ValueCases()) {
    SCOPED_TRACE(c.name);
    const std::string var = EnvVarOf(c.name);
    ASSERT_FALSE(var.empty());
    const std::string yaml = c.name + ": " + c.file + "\n";
    Args args = c.base;
    args.push_back("t.py");

    auto file = Parse(args, {}, yaml);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(file->origins.at(OptNamed(c.name)).kind, Origin::kJobFile);
    EXPECT_EQ(file->Describe(OptNamed(c.name)), c.name + ": " + c.file + " (" + dir_ + "/job.yaml)");
    if (c.resolved) {
      EXPECT_EQ(c.resolved(*file), c.file);
    }

    auto env = Parse(args, {{var, c.env}}, yaml);
    ASSERT_TRUE(env.ok()) << env.status();
    EXPECT_EQ(env->origins.at(OptNamed(c.name)).kind, Origin::kEnvironment);
    EXPECT_EQ(env->Describe(OptNamed(c.name)), var + "=" + c.env + " (environment)");
    if (c.resolved) {
      EXPECT_EQ(c.resolved(*env), c.env);
    }

    Args with_cl = c.base;
    with_cl.insert(with_cl.end(), {"--" + c.name, c.cl, "t.py"});
    auto cl = Parse(with_cl, {{var, c.env}}, yaml);
    ASSERT_TRUE(cl.ok()) << cl.status();
    EXPECT_EQ(cl->origins.at(OptNamed(c.name)).kind, Origin::kCommandLine);
    EXPECT_EQ(cl->Describe(OptNamed(c.name)), "--" + c.name + " " + c.cl);
    if (c.resolved) {
      EXPECT_EQ(c.resolved(*cl), c.cl);
    }
  }
}

// The env twin of each option is PET_<NAME> for torchrun's and DRUN_<NAME> for drun's own.
TEST_F(JobResolutionTest, EnvironmentNames) {
  EXPECT_EQ(EnvVarOf("nnodes"), "PET_NNODES");
  EXPECT_EQ(EnvVarOf("nproc-per-node"), "PET_NPROC_PER_NODE");
  EXPECT_EQ(EnvVarOf("master-port"), "PET_MASTER_PORT");
  EXPECT_EQ(EnvVarOf("hostfile"), "DRUN_HOSTFILE");
  EXPECT_EQ(EnvVarOf("shutdown-timeout"), "DRUN_SHUTDOWN_TIMEOUT");
  EXPECT_EQ(EnvVarOf("env-file"), "DRUN_ENV_FILE");
}

// The flags: true in the file, turned off by the environment, on again on the command line.
TEST_F(JobResolutionTest, EveryFlagFromEachSourceWithPrecedence) {
  struct FlagCase {
    std::string name;
    std::function<bool(const CommandLine&)> get;
  };
  const std::vector<FlagCase> flags = {
      {"standalone", [](const CommandLine& c) { return c.standalone; }},
      {"module", [](const CommandLine& c) { return c.spec.kind() == v1::JobSpec::PYTHON_MODULE; }},
      {"no-python", [](const CommandLine& c) { return c.spec.kind() == v1::JobSpec::PROGRAM; }},
      {"run-path", [](const CommandLine& c) { return c.spec.kind() == v1::JobSpec::PYTHON_SCRIPT; }},
      {"no-agent-store", [](const CommandLine& c) { return !c.spec.agent_store(); }},
      {"summary", [](const CommandLine& c) { return c.summary; }},
      {"quiet", [](const CommandLine& c) { return c.spec.quiet(); }},
      {"ssh-accept-new", [](const CommandLine& c) { return c.ssh_accept_new; }},
      {"virtual-local-rank", [](const CommandLine& c) { return c.spec.virtual_local_rank(); }},
  };
  for (const FlagCase& f : flags) {
    SCOPED_TRACE(f.name);
    const std::string var = EnvVarOf(f.name);
    const std::string yaml = f.name + ": true\n";
    auto file = Parse({"t.py"}, {}, yaml);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_TRUE(f.get(*file));
    EXPECT_EQ(file->origins.at(OptNamed(f.name)).kind, Origin::kJobFile);
    auto env = Parse({"t.py"}, {{var, "0"}}, yaml);
    ASSERT_TRUE(env.ok()) << env.status();
    if (f.name != "run-path") {
      EXPECT_FALSE(f.get(*env));
    }
    EXPECT_EQ(env->origins.at(OptNamed(f.name)).kind, Origin::kEnvironment);
    auto cl = Parse({"--" + f.name, "t.py"}, {{var, "0"}}, yaml);
    ASSERT_TRUE(cl.ok()) << cl.status();
    EXPECT_TRUE(f.get(*cl));
    EXPECT_EQ(cl->Describe(OptNamed(f.name)), "--" + f.name);
  }
}

TEST_F(JobResolutionTest, FlagEnvironmentValueThatIsNotABooleanNamesTheVariable) {
  auto cl = Parse({"t.py"}, {{"PET_STANDALONE", "maybe"}});
  ASSERT_FALSE(cl.ok());
  EXPECT_NE(Msg(cl).find("PET_STANDALONE"), std::string::npos) << Msg(cl);
}

// -x and --env-file: the job file's env:, then --env-file, then -x, in every source.
TEST_F(JobResolutionTest, WorkerEnvironmentFromEverySource) {
  const std::string env_file = Write("vars.env", "B=file\nC=file\n");
  auto cl = Parse({"-x", "C=x", "--env-file", env_file, "t.py"}, {},
                  "env:\n  A: yaml\n  B: yaml\nx: [D=yamlx]\n");
  ASSERT_TRUE(cl.ok()) << cl.status();
  const auto& env = cl->spec.env();
  EXPECT_EQ(env.at("A"), "yaml");
  EXPECT_EQ(env.at("B"), "file");
  EXPECT_EQ(env.at("C"), "x");
  EXPECT_EQ(env.at("D"), "yamlx");
  EXPECT_EQ(cl->origins.at(Opt::kEnvFile).kind, Origin::kCommandLine);
  // --env-file from DRUN_ENV_FILE; -x VAR forwards drun's own value.
  auto from_env = Parse({"-x", "HOME", "t.py"}, {{"DRUN_ENV_FILE", env_file}, {"HOME", "/h"}});
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_EQ(from_env->spec.env().at("B"), "file");
  EXPECT_EQ(from_env->spec.env().at("HOME"), "/h");
  EXPECT_EQ(from_env->origins.at(Opt::kEnvFile).kind, Origin::kEnvironment);
}

TEST_F(JobResolutionTest, DrunOwnedVariableDroppedWithOneNoticeNamingTheFlag) {
  auto cl = Parse({"-x", "MASTER_ADDR=1.2.3.4", "-x", "FOO=1", "t.py"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.env().count("MASTER_ADDR"), 0u);
  EXPECT_EQ(cl->spec.env().at("FOO"), "1");
  ASSERT_EQ(cl->notices.size(), 1u);
  EXPECT_NE(cl->notices[0].find("--master-addr"), std::string::npos) << cl->notices[0];
  EXPECT_EQ(cl->notices[0].find('\n'), std::string::npos);
}

TEST_F(JobResolutionTest, ConfigFromDrunConfigVariable) {
  const std::string path = Write("other.yaml", "nproc-per-node: 5\n");
  auto cl = Parse({"t.py"}, {{"DRUN_CONFIG", path}});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.nproc_per_node(), "5");
  EXPECT_EQ(cl->origins.at(Opt::kNprocPerNode).kind, Origin::kJobFile);
}

// --- mpirun's process counts -----------------------------------------------------------

TEST_F(JobResolutionTest, MpirunCounts) {
  for (Args a : {Args{"-np", "4"}, Args{"-n", "4"}, Args{"--np", "4"}, Args{"-N", "4"}, Args{"--npernode", "4"},
                 Args{"-npernode", "4"}, Args{"-np=4"}}) {
    a.push_back("t.py");
    auto cl = Parse(a);
    ASSERT_TRUE(cl.ok()) << a[0] << ": " << cl.status();
    EXPECT_EQ(cl->spec.nproc_per_node(), "4") << a[0];
    EXPECT_EQ(cl->origins.at(Opt::kNprocPerNode).name, a[0].substr(0, a[0].find('=')));
  }
  // The whole job's count over two nodes is two per node; -N is per node.
  auto np = Parse({"-np", "4", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:1", "t.py"});
  ASSERT_TRUE(np.ok()) << np.status();
  EXPECT_EQ(np->spec.nproc_per_node(), "2");
  auto per = Parse({"-N", "4", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:1", "t.py"});
  ASSERT_TRUE(per.ok()) << per.status();
  EXPECT_EQ(per->spec.nproc_per_node(), "4");
}

// --- refused combinations: one line each, naming what to write ---------------------------

struct Refusal {
  Args args;
  Env env;
  std::string says;  // a part of the message
};

void ExpectRefused(const Refusal& r, const absl::StatusOr<CommandLine>& cl) {
  std::string joined;
  for (const auto& a : r.args) joined += a + " ";
  ASSERT_FALSE(cl.ok()) << joined << "was accepted";
  EXPECT_EQ(cl.status().code(), absl::StatusCode::kInvalidArgument) << joined;
  EXPECT_NE(Msg(cl).find(r.says), std::string::npos) << joined << "-> " << Msg(cl);
  EXPECT_EQ(Msg(cl).find('\n'), std::string::npos) << joined << "-> " << Msg(cl);
  EXPECT_EQ(Msg(cl).find("did you mean"), std::string::npos) << joined << "-> " << Msg(cl);
}

TEST_F(JobResolutionTest, RefusedCombinations) {
  const std::string hostfile = Write("hosts", "a slots=2\n");
  const std::vector<Refusal> refusals = {
      {{"--standalone", "--nnodes", "2", "t.py"}, {}, "--nnodes 2"},
      {{"--standalone", "t.py"}, {{"PET_NNODES", "2"}}, "PET_NNODES=2 (environment)"},
      {{"--standalone", "--rdzv-endpoint", "127.0.0.1:1", "t.py"}, {}, "--rdzv-endpoint 127.0.0.1:1"},
      {{"--standalone", "--rdzv-backend", "c10d", "t.py"}, {}, "--rdzv-backend c10d"},
      {{"--standalone", "--node-rank", "0", "t.py"}, {}, "--node-rank 0"},
      {{"--standalone", "--hostfile", hostfile, "t.py"}, {}, "drop --standalone"},
      {{"--standalone", "--launcher", "slurm", "t.py"}, {}, "--launcher slurm"},
      {{"--standalone", "--master-addr", "10.255.255.1", "t.py"}, {}, "not an address of this machine"},
      {{"--rdzv-backend", "static", "--nnodes", "1:2", "--node-rank", "0", "t.py"}, {}, "is a range"},
      {{"--nnodes", "2", "--node-rank", "2", "--master-addr", "127.0.0.1", "t.py"}, {}, "--node-rank 2 is out of range"},
      {{"--rdzv-backend", "static", "--nnodes", "2", "--master-addr", "127.0.0.1", "t.py"}, {}, "needs --node-rank"},
      {{"--nnodes", "2", "--node-rank", "0", "t.py"}, {}, "needs --master-addr"},
      {{"--nnodes", "2", "t.py"}, {}, "needs --rdzv-endpoint"},
      {{"--nnodes", "1:2", "t.py"}, {}, "needs --rdzv-endpoint"},
      {{"--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:1", "--master-addr", "127.0.0.1", "t.py"}, {},
       "drop --master-addr"},
      // The message names the other setting as given (it named -np twice before).
      {{"-np", "4", "--nproc-per-node", "2", "t.py"}, {}, "-np and --nproc-per-node 2 both set"},
      {{"-np", "4", "t.py"}, {{"PET_NPROC_PER_NODE", "2"}}, "-np and PET_NPROC_PER_NODE=2 (environment) both"},
      {{"-np", "3", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:1", "t.py"}, {}, "--nproc-per-node"},
      {{"-np", "4", "--nnodes", "1:2", "--rdzv-endpoint", "127.0.0.1:1", "t.py"}, {}, "--nproc-per-node"},
      {{"-np", "0", "t.py"}, {}, "is not a number of processes"},
      {{"--run-id", "a", "--rdzv-id", "b", "t.py"}, {}, "give only one of them"},
      {{"-m", "--no-python", "t.py"}, {}, "exclude each other"},
      {{"--launcher", "ssh", "t.py"}, {}, "--launcher ssh needs the hosts"},
      {{"--hostfile", hostfile, "-H", "a,b", "t.py"}, {}, "give only one of them"},
      {{"--iface", "eth 1", "t.py"}, {}, "'eth 1' is not an interface name or a subnet"},
      {{"--iface", "10.0.0.0/33", "t.py"}, {}, "'10.0.0.0/33' is not a subnet: write ADDRESS/PREFIX"},
      {{"--iface", "abcdefghijklmnop", "t.py"}, {}, "is not an interface name"},
      {{"--iface", "eth1", "-x", "GLOO_SOCKET_IFNAME=lo", "t.py"}, {},
       "--iface eth1 and GLOO_SOCKET_IFNAME given to the workers both choose the interface"},
      {{"--rdzv-backend", "etcd", "t.py"}, {}, "write c10d or static"},
      {{"--rdzv-conf", "is_host=maybe", "t.py"}, {}, "is_host must be true or false"},
      {{"--rdzv-conf", "bogus=1", "t.py"}, {}, "unknown key 'bogus'"},
      {{"--launcher", "pbs", "t.py"}, {}, "write local, ssh or slurm"},
      {{"t.py"}, {{"PET_NNODES", "2"}}, "PET_NNODES=2"},
      {{"t.py"}, {{"PET_NODE_RANK", "x"}}, "PET_NODE_RANK"},
      {{"t.py"}, {{"PET_MASTER_PORT", "70000"}}, "PET_MASTER_PORT"},
      {{"--nnodes", "1"}, {}, "missing the training script"},
      // --stdin names a rank the job has, where the command line fixes the world size.
      {{"--nproc-per-node", "2", "--stdin", "5", "t.py"}, {}, "--stdin 5: the job has ranks 0 to 1"},
      {{"--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "2", "t.py"}, {{"DRUN_STDIN", "4"}},
       "DRUN_STDIN=4 (environment): the job has ranks 0 to 3"},
      // -np is the whole job's count: per node only with a fixed node count (or a host list).
      {{"--nnodes", "1:2", "-np", "4", "t.py"}, {}, "or name the hosts (--hostfile/-H)"},
      {{"-H", "a,b", "-np", "4", "--print-config", "t.py"}, {}, "-np 4 over hosts has no job-file key"},
      // Found by tests/fuzz/job_fuzz.cc: an empty argument was taken as the entrypoint.
      {{""}, {}, "the training script is an empty string"},
      {{"-m", "", "arg"}, {}, "the training script is an empty string"},
  };
  for (const Refusal& r : refusals) ExpectRefused(r, Parse(r.args, r.env));
}

// torchrun 2.x options: each refused with its reason, none of them a "did you mean".
TEST_F(JobResolutionTest, Torchrun2OptionsRefusedWithAReason) {
  const std::vector<Refusal> refusals = {
      {{"--logs-specs", "x", "t.py"}, {}, "--logs-specs is not supported: "},
      {{"--logs_specs=x", "t.py"}, {}, "--logs_specs is not supported: "},
      {{"--duplicate-stdout-filters", "a,b", "t.py"}, {}, "--duplicate-stdout-filters is not supported: "},
      {{"--duplicate_stderr_filters=a", "t.py"}, {}, "--duplicate_stderr_filters is not supported: "},
      {{"--event-log-handler", "null", "t.py"}, {}, "--event-log-handler is not supported: "},
      {{"--use-env", "t.py"}, {}, "--use-env is not supported: "},
  };
  for (const Refusal& r : refusals) ExpectRefused(r, Parse(r.args, r.env));
  // --run-path and --local-ranks-filter are accepted with torchrun's meaning.
  auto cl = Parse({"--run-path", "--local-ranks-filter", "0,2", "t.py"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.kind(), v1::JobSpec::PYTHON_SCRIPT);
  ASSERT_EQ(cl->spec.local_ranks_filter_size(), 2);
  EXPECT_EQ(cl->spec.local_ranks_filter(1), 2);
}

// torchrun 2.x's --signals-to-handle, --numa-binding: bad values, and the launchers.
TEST_F(JobResolutionTest, SignalsToHandleAndNumaBindingValues) {
  auto cl = Parse({"t.py"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_TRUE(cl->spec.signals_to_handle().empty());  // drun's default, all six
  EXPECT_EQ(cl->spec.numa_binding(), v1::JobSpec::NUMA_BINDING_NONE);
  EXPECT_FALSE(cl->spec.virtual_local_rank());
  cl = Parse({"--signals_to_handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT", "--numa_binding", "socket", "t.py"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(std::vector<int>(cl->spec.signals_to_handle().begin(), cl->spec.signals_to_handle().end()),
            TorchrunDefaultSignals());
  EXPECT_EQ(cl->spec.numa_binding(), v1::JobSpec::NUMA_BINDING_SOCKET);
  const std::string hostfile = Write("hosts", "a slots=2\n");
  const std::vector<Refusal> refusals = {
      {{"--signals-to-handle", "SIGKILL", "t.py"}, {}, "--signals-to-handle: 'SIGKILL' is not a signal"},
      {{"t.py"}, {{"PET_SIGNALS_TO_HANDLE", ""}}, "PET_SIGNALS_TO_HANDLE: the list is empty"},
      {{"--numa-binding", "on", "t.py"}, {}, "--numa-binding: 'on' is not a binding; write node, socket"},
      {{"--hostfile", hostfile, "--signals-to-handle", "SIGTERM", "t.py"}, {},
       "--signals-to-handle SIGTERM applies to a node's own drun; with --hostfile/-H the launcher forwards"},
      {{"--launcher", "slurm", "--signals-to-handle", "SIGTERM", "t.py"}, {}, "with --launcher slurm"},
  };
  for (const Refusal& r : refusals) ExpectRefused(r, Parse(r.args, r.env));
  EXPECT_TRUE(Parse({"--hostfile", hostfile, "--signals-to-handle",
                     "SIGINT,SIGTERM,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2", "t.py"}).ok());
}

// --- the mode, decided once ------------------------------------------------------------

TEST_F(JobResolutionTest, ModeDecidedForEachMode) {
  const std::string hostfile = Write("hosts", "a slots=2\n");
  struct ModeCase {
    Args args;
    Env env;
    JobMode mode;
  };
  const std::vector<ModeCase> cases = {
      {{"t.py"}, {}, JobMode::kSingleNode},
      {{"--standalone", "t.py"}, {}, JobMode::kSingleNode},
      {{"--nnodes", "1", "--master-addr", "127.0.0.1", "--master-port", "2000", "t.py"}, {}, JobMode::kSingleNode},
      {{"--node-rank", "0", "--nnodes", "1", "t.py"}, {}, JobMode::kStatic},
      {{"--rdzv-backend", "static", "t.py"}, {}, JobMode::kStatic},
      {{"--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "t.py"}, {}, JobMode::kStatic},
      {{"--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:1", "t.py"}, {}, JobMode::kC10d},
      {{"--rdzv-endpoint", "127.0.0.1:1", "t.py"}, {}, JobMode::kC10d},
      {{"--nnodes", "1:4", "--rdzv-endpoint", "127.0.0.1:1", "t.py"}, {}, JobMode::kC10d},
      {{"t.py"}, {{"SLURM_STEP_ID", "0"}}, JobMode::kSrunStep},
      {{"t.py"}, {{"SLURM_STEPID", "0"}}, JobMode::kSrunStep},
      // Rendezvous options on the command line configure it, even under srun.
      {{"--rdzv-endpoint", "127.0.0.1:1", "t.py"}, {{"SLURM_STEP_ID", "0"}}, JobMode::kC10d},
      {{"--standalone", "t.py"}, {{"SLURM_STEP_ID", "0"}}, JobMode::kSingleNode},
      {{"--hostfile", hostfile, "t.py"}, {}, JobMode::kSsh},
      {{"-H", "a,b", "t.py"}, {}, JobMode::kSsh},
      {{"--launcher", "slurm", "t.py"}, {}, JobMode::kSlurmLauncher},
  };
  for (const ModeCase& c : cases) {
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    auto cl = Parse(c.args, c.env);
    ASSERT_TRUE(cl.ok()) << joined << cl.status();
    EXPECT_EQ(cl->mode, c.mode) << joined << ": " << JobModeName(cl->mode);
    EXPECT_EQ(NeedsNetwork(*cl), c.mode != JobMode::kSingleNode) << joined;
  }
}

// torchrun's rule for a static job: the rendezvous is at MASTER_ADDR:MASTER_PORT; with
// --no-agent-store rank 0's worker binds MASTER_PORT, so the rendezvous takes the next.
TEST_F(JobResolutionTest, StaticEndpointDerivedFromMaster) {
  auto cl = Parse({"--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", "2000", "t.py"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.rdzv_endpoint(), "127.0.0.1:2000");
  EXPECT_EQ(cl->spec.master_port(), 2000);
  auto own = Parse({"--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", "2000",
                    "--no-agent-store", "t.py"});
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->spec.rdzv_endpoint(), "127.0.0.1:2001");
  EXPECT_EQ(own->spec.master_port(), 2000);
  // --master-port with an endpoint of its own stays the workers' MASTER_PORT.
  auto c10d = Parse({"--rdzv-endpoint", "127.0.0.1:3000", "--master-port", "2000", "t.py"});
  ASSERT_TRUE(c10d.ok()) << c10d.status();
  EXPECT_EQ(c10d->spec.master_port(), 2000);
  EXPECT_EQ(c10d->spec.rdzv_endpoint(), "127.0.0.1:3000");
}

// --rdzv-conf is_host in each of torchrun's spellings.
TEST_F(JobResolutionTest, IsHostSpellings) {
  for (const char* v : {"on", "yes", "True", "1", "true"}) {
    auto cl = Parse({"--rdzv-endpoint", "127.0.0.1:1", "--rdzv-conf", std::string("is_host=") + v, "t.py"});
    ASSERT_TRUE(cl.ok()) << v << ": " << cl.status();
    EXPECT_EQ(cl->spec.host_role(), v1::JobSpec::HOST_ROLE_HOST) << v;
  }
  for (const char* v : {"off", "no", "False", "0"}) {
    auto cl = Parse({"--rdzv-endpoint", "127.0.0.1:1", "--rdzv-conf", std::string("is_host=") + v, "t.py"});
    ASSERT_TRUE(cl.ok()) << v << ": " << cl.status();
    EXPECT_EQ(cl->spec.host_role(), v1::JobSpec::HOST_ROLE_CLIENT) << v;
  }
}

// --- Kubernetes (Kubeflow training operator) environments ------------------------------

TEST_F(JobResolutionTest, KubeflowNprocAlias) {
  auto cl = Parse({"t.py"}, {{"PET_N_PROC_PER_NODE", "3"}});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.nproc_per_node(), "3");
  EXPECT_EQ(cl->Describe(Opt::kNprocPerNode), "PET_N_PROC_PER_NODE=3 (environment)");
  // PET_NPROC_PER_NODE, torchrun's own name, wins over the alias.
  auto both = Parse({"t.py"}, {{"PET_N_PROC_PER_NODE", "3"}, {"PET_NPROC_PER_NODE", "2"}});
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->spec.nproc_per_node(), "2");
}

TEST_F(JobResolutionTest, KubeflowElasticPod) {
  auto cl = Parse({"t.py"}, {{"PET_NNODES", "1:3"},
                             {"PET_RDZV_BACKEND", "c10d"},
                             {"PET_RDZV_ENDPOINT", "trainer-master-0:29400"},
                             {"PET_N_PROC_PER_NODE", "2"}});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->mode, JobMode::kC10d);
  EXPECT_EQ(cl->spec.min_nodes(), 1);
  EXPECT_EQ(cl->spec.max_nodes(), 3);
  EXPECT_EQ(cl->spec.rdzv_endpoint(), "trainer-master-0:29400");
  EXPECT_EQ(cl->spec.nproc_per_node(), "2");
  EXPECT_EQ(cl->Describe(Opt::kNnodes), "PET_NNODES=1:3 (environment)");
}

TEST_F(JobResolutionTest, KubeflowNonElasticPodTakesMasterFromPodEnvironment) {
  auto cl = Parse({"t.py"}, {{"PET_NNODES", "2"},
                             {"PET_NODE_RANK", "1"},
                             {"MASTER_ADDR", "trainer-master-0"},
                             {"MASTER_PORT", "23456"},
                             {"WORLD_SIZE", "2"},
                             {"RANK", "1"}});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->mode, JobMode::kStatic);
  EXPECT_EQ(cl->spec.node_rank(), 1);
  EXPECT_EQ(cl->spec.max_nodes(), 2);
  EXPECT_EQ(cl->spec.master_addr(), "trainer-master-0");
  EXPECT_EQ(cl->spec.master_port(), 23456);
  EXPECT_EQ(cl->spec.rdzv_endpoint(), "trainer-master-0:23456");
  EXPECT_EQ(cl->Describe(Opt::kMasterAddr), "MASTER_ADDR=trainer-master-0 (environment)");
  EXPECT_EQ(cl->Describe(Opt::kMasterPort), "MASTER_PORT=23456 (environment)");
  // WORLD_SIZE and RANK are the pod's, not drun's inputs: the per-node worker count is
  // still --nproc-per-node's default, and the node rank PET_NODE_RANK's.
  EXPECT_EQ(cl->spec.nproc_per_node(), "1");
  // The command line's --master-addr wins over MASTER_ADDR.
  auto given = Parse({"--master-addr", "10.0.0.1", "t.py"},
                     {{"PET_NNODES", "2"}, {"PET_NODE_RANK", "1"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "1"}});
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->spec.master_addr(), "10.0.0.1");
}

// The rendezvous port and a one-node job's MASTER_ADDR are resolved once, in
// the spec: nothing downstream applies a default again (launcher/job/cli.h).
TEST_F(JobResolutionTest, TheRendezvousPortIsResolvedInTheSpec) {
  auto host = Parse({"--nnodes", "2", "--rdzv-endpoint", "node0", "t.py"});
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->spec.rdzv_endpoint(), "node0:29400");
  auto v6 = Parse({"--nnodes", "2", "--rdzv-endpoint", "[fd00::1]", "t.py"});
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->spec.rdzv_endpoint(), "[fd00::1]:29400");
  auto given = Parse({"--nnodes", "2", "--rdzv-endpoint", "node0:1234", "t.py"});
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->spec.rdzv_endpoint(), "node0:1234");
  auto bad = Parse({"--nnodes", "2", "--rdzv-endpoint", "node0:x", "t.py"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--rdzv-endpoint node0:x: 'node0:x' has no valid port; write HOST:PORT with PORT in 1-65535");
}

TEST_F(JobResolutionTest, AOneNodeJobsMasterAddrIsResolvedInTheSpec) {
  auto single = Parse({"t.py"});
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->mode, JobMode::kSingleNode);
  EXPECT_EQ(single->spec.master_addr(), "127.0.0.1");
  auto given = Parse({"--master-addr", "127.0.0.2", "t.py"});
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->spec.master_addr(), "127.0.0.2");
  auto one_static = Parse({"--nnodes", "1", "--node-rank", "0", "t.py"});
  ASSERT_TRUE(one_static.ok()) << one_static.status();
  EXPECT_EQ(one_static->mode, JobMode::kStatic);
  EXPECT_EQ(one_static->spec.master_addr(), "127.0.0.1");
  EXPECT_EQ(one_static->spec.rdzv_endpoint(), "127.0.0.1:29500");
  // Many nodes: the rendezvous host's address, decided by the rendezvous.
  auto c10d = Parse({"--nnodes", "2", "--rdzv-endpoint", "node0:1", "t.py"});
  ASSERT_TRUE(c10d.ok()) << c10d.status();
  EXPECT_EQ(c10d->spec.master_addr(), "");
}

// A job file that says everything, checked field by field.
TEST_F(JobResolutionTest, JobFileAlone) {
  auto cl = Parse({}, {},
                  "nnodes: 2\nnode-rank: 1\nmaster-addr: 127.0.0.1\nmaster-port: 2345\n"
                  "nproc_per_node: 2\nmax-restarts: 1\nrdzv-conf: {join_timeout: 7, is_host: false}\n"
                  "env: {A: b}\nscript: train.py\nargs: [--lr, '0.1']\n");
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->mode, JobMode::kStatic);
  EXPECT_EQ(cl->spec.node_rank(), 1);
  EXPECT_EQ(cl->spec.master_port(), 2345);
  EXPECT_EQ(cl->spec.join_timeout_s(), 7);
  EXPECT_EQ(cl->spec.host_role(), v1::JobSpec::HOST_ROLE_CLIENT);
  EXPECT_EQ(cl->spec.entrypoint(), "train.py");
  ASSERT_EQ(cl->spec.args_size(), 2);
  EXPECT_EQ(cl->spec.args(1), "0.1");
  EXPECT_EQ(cl->spec.env().at("A"), "b");
  // A job-file error names the file and the key.
  auto bad = Parse({"t.py"}, {}, "nnodes: 2\nnode-rank: 5\nmaster-addr: 127.0.0.1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(Msg(bad).find("node-rank: 5 ("), std::string::npos) << Msg(bad);
}

// Found by tests/fuzz/job_fuzz.cc: yaml-cpp's LoadAll looped forever (and grew without
// bound) on a job file with a ',' where a document starts.
// mpirun's -np N with a host list: the job's total, for the ssh plan to spread.
TEST_F(JobResolutionTest, TotalOverHostsIsKeptForTheSshPlan) {
  for (const Args& args : {Args{"--hostfile", "hosts", "-np", "4", "t.py"},
                           Args{"-H", "a,b", "--nnodes", "2", "-n", "4", "t.py"}}) {
    auto cl = Parse(args);
    ASSERT_TRUE(cl.ok()) << cl.status();
    EXPECT_EQ(cl->total_procs, 4);
    EXPECT_EQ(cl->launcher, Launcher::kSsh);
  }
  auto local = Parse({"--nnodes", "2", "--rdzv-endpoint", "h:29400", "-np", "4", "t.py"});
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->total_procs, 0);
  EXPECT_EQ(local->spec.nproc_per_node(), "2");
}

// `drun` alone: the usage, not a one-line error; `drun help`: --help unless ./help exists.
TEST_F(JobResolutionTest, BareDrunAndHelpWord) {
  auto bare = Parse({});
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_TRUE(bare->usage);
  auto help = Parse({"help"});
  ASSERT_TRUE(help.ok()) << help.status();
  EXPECT_TRUE(help->help);
  auto from_file = Parse({}, {}, "script: t.py\n");  // a job file's script runs
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_FALSE(from_file->usage);
  EXPECT_EQ(from_file->spec.entrypoint(), "t.py");
}

// --stdin's default: every rank from a terminal, rank 0 from a pipe; a choice wins.
TEST_F(JobResolutionTest, StdinDefaultFollowsTheTerminal) {
  using T = v1::JobSpec::StdinTarget;
  auto piped = ParseCommandLine({"--nproc-per-node", "2", "t.py"}, {}, /*stdin_is_terminal=*/false);
  ASSERT_TRUE(piped.ok()) << piped.status();
  EXPECT_EQ(piped->spec.stdin_target().mode(), T::RANK);
  EXPECT_EQ(piped->spec.stdin_target().rank(), 0);
  auto typed = ParseCommandLine({"--nproc-per-node", "2", "t.py"}, {}, /*stdin_is_terminal=*/true);
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_EQ(typed->spec.stdin_target().mode(), T::ALL);
  for (const auto& [args, env] : std::vector<std::pair<Args, Env>>{
           {{"--stdin", "1", "--nproc-per-node", "2", "t.py"}, {}},
           {{"--nproc-per-node", "2", "t.py"}, {{"DRUN_STDIN", "1"}}}}) {
    auto chosen = ParseCommandLine(args, env, /*stdin_is_terminal=*/true);
    ASSERT_TRUE(chosen.ok()) << chosen.status();
    EXPECT_EQ(chosen->spec.stdin_target().mode(), T::RANK);
    EXPECT_EQ(chosen->spec.stdin_target().rank(), 1);
  }
  auto from_file = Parse({"t.py"}, {}, "stdin: none\n");
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->spec.stdin_target().mode(), T::NONE);
  // Where the world size is not known yet (a node range), any rank is accepted here.
  EXPECT_TRUE(Parse({"--nnodes", "1:3", "--rdzv-endpoint", "h:1", "--stdin", "9", "t.py"}).ok());
}

TEST_F(JobResolutionTest, StrayCommaInJobFileIsAnErrorNotAHang) {
  for (const char* text : {",\n", ",nproc-per-node: 2\n", ",a: 1\nb: 2\n"}) {
    auto job = ParseJobFile(text, "job.yaml");
    ASSERT_FALSE(job.ok()) << text;
    EXPECT_EQ(std::string(job.status().message()).rfind("job.yaml:1: not valid YAML: unexpected ','", 0), 0u)
        << job.status();
  }
  auto cl = Parse({"t.py"}, {}, ",\n");
  ASSERT_FALSE(cl.ok());
  EXPECT_NE(Msg(cl).find("unexpected ','"), std::string::npos) << Msg(cl);
  // Two documents are still refused by their separator.
  auto two = ParseJobFile("nnodes: 1\n---\nnnodes: 2\n", "job.yaml");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().message(), "job.yaml:3: a job file holds one YAML document; remove the second '---'");
}

}  // namespace
}  // namespace drun
