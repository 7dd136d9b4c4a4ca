// Slurm auto-configuration (launcher/slurm/slurm_env.h) from synthetic SLURM_* maps,
// shaped like what srun 22.05 exports to its tasks.
#include "launcher/slurm/slurm_env.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/slurm/slurm_launcher.h"

namespace drun {
namespace {

using Env = std::map<std::string, std::string>;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

CommandLine Parse(std::vector<std::string> args, const Env& env = {}) {
  auto cl = ParseCommandLine(args, env);
  EXPECT_TRUE(cl.ok()) << cl.status();
  return cl.ok() ? *cl : CommandLine{};
}

// Task `proc` of `srun -N3 --ntasks-per-node=1` in job 4242 (node mode).
Env NodeStep(int node) {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_CLUSTER_NAME", "lab"},
          {"SLURM_STEP_NUM_NODES", "3"},
          {"SLURM_NNODES", "3"},
          {"SLURM_STEP_NUM_TASKS", "3"},
          {"SLURM_NTASKS", "3"},
          {"SLURM_STEP_NODELIST", "gpu[07-09]"},
          {"SLURM_JOB_NODELIST", "gpu[07-09]"},
          {"SLURM_STEP_TASKS_PER_NODE", "1(x3)"},
          {"SLURM_NODEID", std::to_string(node)},
          {"SLURM_PROCID", std::to_string(node)},
          {"SLURM_LOCALID", "0"},
          {"PATH", "/usr/bin:/bin"}};
}

// Task `proc` of `srun -n 6` over nodes a1,b2,b3 with 3,2,1 tasks (block layout).
Env TaskStep(int proc) {
  const int node = proc < 3 ? 0 : proc < 5 ? 1 : 2;
  const int local = proc < 3 ? proc : proc < 5 ? proc - 3 : 0;
  return {{"SLURM_JOB_ID", "77"},
          {"SLURM_STEP_ID", "2"},
          {"SLURM_STEP_NUM_NODES", "3"},
          {"SLURM_STEP_NUM_TASKS", "6"},
          {"SLURM_STEP_NODELIST", "a1,b[2-3]"},
          {"SLURM_STEP_TASKS_PER_NODE", "3,2,1"},
          {"SLURM_NODEID", std::to_string(node)},
          {"SLURM_PROCID", std::to_string(proc)},
          {"SLURM_LOCALID", std::to_string(local)},
          {"PYTHON_EXEC", "/usr/bin/python3"},
          {"PATH", "/usr/bin:/bin"}};
}

std::vector<std::string> Args(const v1::JobSpec& s) { return {s.args().begin(), s.args().end()}; }

TEST(SlurmEnv, OffOutsideAStep) {
  CommandLine cl = Parse({"train.py"});
  for (Env env : {Env{}, Env{{"SLURM_JOB_ID", "5"}},
                  // sbatch's batch script and salloc's interactive step are pseudo steps.
                  Env{{"SLURM_JOB_ID", "5"}, {"SLURM_STEP_ID", "4294967291"}},
                  Env{{"SLURM_JOB_ID", "5"}, {"SLURM_STEP_ID", "4294967290"}}}) {
    auto plan = PlanSlurmStep(cl, env, "");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->mode, SlurmMode::kOff);
    EXPECT_FALSE(plan->why_off.empty());
    CommandLine applied = cl;
    Env e = env;
    ASSERT_TRUE(ApplySlurmEnvironment(&applied, &e).ok());
    EXPECT_EQ(applied.spec.SerializeAsString(), cl.spec.SerializeAsString());
    EXPECT_EQ(e, env);
  }
}

TEST(SlurmEnv, OffWhenTheCommandLineConfiguresTheRendezvous) {
  const Env env = NodeStep(1);
  for (auto args : std::vector<std::vector<std::string>>{
           {"--rdzv-endpoint", "head:29400", "--nnodes", "3", "train.py"},
           {"--rdzv-backend", "c10d", "--rdzv-endpoint", "head:1", "--nnodes", "3", "train.py"},
           {"--node-rank", "1", "--master-addr", "head", "--nnodes", "3", "train.py"},
           {"--master-port", "29500", "train.py"},
           {"--standalone", "train.py"},
           {"-H", "a,b", "train.py"}}) {
    CommandLine cl = Parse(args);
    auto plan = PlanSlurmStep(cl, env, "");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->mode, SlurmMode::kOff) << args[0];
    Env e = env;
    CommandLine applied = cl;
    ASSERT_TRUE(ApplySlurmEnvironment(&applied, &e).ok());
    EXPECT_EQ(applied.spec.SerializeAsString(), cl.spec.SerializeAsString()) << args[0];
    EXPECT_FALSE(e.count("DRUN_RDZV_TOKEN"));
  }
  // The same through torchrun's environment twins.
  CommandLine cl = Parse({"train.py"}, {{"PET_RDZV_ENDPOINT", "head:29400"}});
  EXPECT_EQ(PlanSlurmStep(cl, env, "")->mode, SlurmMode::kOff);
}

TEST(SlurmEnv, NodeModeFromTheStep) {
  CommandLine cl = Parse({"--nproc-per-node", "2", "train.py", "--epochs", "3"});
  for (int node = 0; node < 3; ++node) {
    auto plan = PlanSlurmStep(cl, NodeStep(node), "");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->mode, SlurmMode::kPerNode);
    const v1::JobSpec& s = plan->spec;
    EXPECT_EQ(s.min_nodes(), 3);
    EXPECT_EQ(s.max_nodes(), 3);
    EXPECT_EQ(s.node_rank(), node);
    EXPECT_EQ(s.nproc_per_node(), "2");
    EXPECT_EQ(s.run_id(), "slurm-4242.0");
    // The first node of the step hosts; every node resolves the name itself.
    EXPECT_EQ(s.rdzv_endpoint(), "gpu07:" + std::to_string(DerivedSlurmPort(4242, 0)));
    EXPECT_EQ(s.host_role(), node == 0 ? v1::JobSpec::HOST_ROLE_HOST : v1::JobSpec::HOST_ROLE_CLIENT);
    EXPECT_EQ(plan->is_host, node == 0);
    // The program and its arguments are untouched.
    EXPECT_EQ(s.kind(), v1::JobSpec::PYTHON_SCRIPT);
    EXPECT_EQ(s.entrypoint(), "train.py");
    EXPECT_THAT(Args(s), ElementsAre("--epochs", "3"));
  }
}

TEST(SlurmEnv, NeverUsesTheLaunchNodeAddress) {
  Env env = NodeStep(2);
  env["SLURM_LAUNCH_NODE_IPADDR"] = "192.0.2.99";  // the login node, often
  env["SLURM_SRUN_COMM_HOST"] = "192.0.2.99";
  auto plan = PlanSlurmStep(Parse({"train.py"}), env, "");
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->spec.rdzv_endpoint(), ::testing::StartsWith("gpu07:"));
}

TEST(SlurmEnv, StepVariablesWinOverTheJobs) {
  // A step on part of the allocation: SLURM_NNODES/SLURM_JOB_NODELIST are the job's.
  Env env = NodeStep(0);
  env["SLURM_STEP_NUM_NODES"] = "2";
  env["SLURM_STEP_NUM_TASKS"] = "2";
  env["SLURM_STEP_NODELIST"] = "gpu[08-09]";
  env["SLURM_STEP_TASKS_PER_NODE"] = "1(x2)";
  auto plan = PlanSlurmStep(Parse({"train.py"}), env, "");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->spec.max_nodes(), 2);
  EXPECT_THAT(plan->spec.rdzv_endpoint(), ::testing::StartsWith("gpu08:"));
  // Without the step variables, the older names are read.
  for (const char* k : {"SLURM_STEP_NUM_NODES", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
                        "SLURM_STEP_TASKS_PER_NODE"}) {
    env.erase(k);
  }
  env["SLURM_NODELIST"] = "x[1-3]";
  plan = PlanSlurmStep(Parse({"train.py"}), env, "");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->spec.max_nodes(), 3);
  EXPECT_THAT(plan->spec.rdzv_endpoint(), ::testing::StartsWith("x1:"));
}

TEST(SlurmEnv, NprocDefaultsToTheNodesGpus) {
  Env env = NodeStep(1);
  env["SLURM_GPUS_ON_NODE"] = "4";
  EXPECT_EQ(PlanSlurmStep(Parse({"train.py"}), env, "")->spec.nproc_per_node(), "4");
  // An explicit choice wins, on the command line or in the environment.
  EXPECT_EQ(PlanSlurmStep(Parse({"--nproc-per-node", "2", "train.py"}), env, "")->spec.nproc_per_node(),
            "2");
  EXPECT_EQ(PlanSlurmStep(Parse({"train.py"}, {{"PET_NPROC_PER_NODE", "3"}}), env, "")
                ->spec.nproc_per_node(),
            "3");
  env["SLURM_GPUS_ON_NODE"] = "0";
  EXPECT_EQ(PlanSlurmStep(Parse({"train.py"}), env, "")->spec.nproc_per_node(), "1");
}

TEST(SlurmEnv, ExplicitRunIdAndNnodesAreKeptOrChecked) {
  Env env = NodeStep(0);
  EXPECT_EQ(PlanSlurmStep(Parse({"--rdzv-id", "exp7", "train.py"}), env, "")->spec.run_id(), "exp7");
  // (The CLI itself asks for --rdzv-endpoint when --nnodes > 1 comes alone, so
  // the option is marked explicit by hand.) A range that holds the step's node
  // count is fixed to it; a count that differs is an error.
  CommandLine cl = Parse({"train.py"});
  cl.origins[Opt::kNnodes] = Origin{Origin::kCommandLine, "--nnodes", "2:4"};
  cl.spec.set_min_nodes(2);
  cl.spec.set_max_nodes(4);
  auto plan = PlanSlurmStep(cl, env, "");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->spec.min_nodes(), 3);
  EXPECT_EQ(plan->spec.max_nodes(), 3);
  cl.spec.set_min_nodes(4);
  cl.spec.set_max_nodes(4);
  plan = PlanSlurmStep(cl, env, "");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("--nnodes 4 does not match this srun step's 3 nodes"));
}

TEST(SlurmEnv, TaskModeEachTaskIsOneWorker) {
  CommandLine cl = Parse({"train.py", "--lr", "a=b"});
  for (int proc = 0; proc < 6; ++proc) {
    const Env env = TaskStep(proc);
    auto plan = PlanSlurmStep(cl, env, "");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->mode, SlurmMode::kPerTask);
    const v1::JobSpec& s = plan->spec;
    // One member of the rendezvous per task, ranked by SLURM_PROCID: RANK = SLURM_PROCID,
    // WORLD_SIZE = SLURM_NTASKS.
    EXPECT_EQ(s.min_nodes(), 6);
    EXPECT_EQ(s.max_nodes(), 6);
    EXPECT_EQ(s.node_rank(), proc);
    EXPECT_EQ(s.nproc_per_node(), "1");
    EXPECT_EQ(s.run_id(), "slurm-77.2");
    EXPECT_EQ(s.rdzv_endpoint(), "a1:" + std::to_string(DerivedSlurmPort(77, 2)));
    EXPECT_EQ(s.host_role(), proc == 0 ? v1::JobSpec::HOST_ROLE_HOST : v1::JobSpec::HOST_ROLE_CLIENT);
    // The node's view goes over the agent's one-worker values through env(1).
    const int node = std::stoi(env.at("SLURM_NODEID"));
    const int on_node = node == 0 ? 3 : node == 1 ? 2 : 1;
    EXPECT_EQ(s.kind(), v1::JobSpec::PROGRAM);
    EXPECT_THAT(s.entrypoint(), ::testing::EndsWith("/env"));
    std::vector<std::string> want = {"LOCAL_RANK=" + env.at("SLURM_LOCALID"),
                                     "LOCAL_WORLD_SIZE=" + std::to_string(on_node),
                                     "GROUP_RANK=" + std::to_string(node), "GROUP_WORLD_SIZE=3"};
    if (on_node > 1) want.push_back("OMP_NUM_THREADS=1");
    for (const char* a : {"/usr/bin/python3", "-u", "train.py", "--lr", "a=b"}) want.push_back(a);
    EXPECT_EQ(Args(s), want);
  }
}

TEST(SlurmEnv, TaskModeModuleProgramAndOmp) {
  Env env = TaskStep(4);
  env["OMP_NUM_THREADS"] = "8";  // the user's choice stays
  auto plan = PlanSlurmStep(Parse({"-m", "pkg.train", "x"}), env, "");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Args(plan->spec), ElementsAre("LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1",
                                            "GROUP_WORLD_SIZE=3", "/usr/bin/python3", "-u", "-m",
                                            "pkg.train", "x"));
  plan = PlanSlurmStep(Parse({"--no-python", "./bench", "--n=1"}), TaskStep(5), "");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Args(plan->spec), ElementsAre("LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "GROUP_RANK=2",
                                            "GROUP_WORLD_SIZE=3", "./bench", "--n=1"));
  plan = PlanSlurmStep(Parse({"--no-python", "/opt/a=b/bench"}), TaskStep(5), "");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("contains '='"));
}

TEST(SlurmEnv, TaskModeRejectsSeveralWorkersPerTask) {
  auto plan = PlanSlurmStep(Parse({"--nproc-per-node", "2", "train.py"}), TaskStep(0), "");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("6 tasks on 3 nodes"));
  EXPECT_THAT(plan.status().message(), HasSubstr("--ntasks-per-node=1"));
  EXPECT_TRUE(PlanSlurmStep(Parse({"--nproc-per-node", "1", "train.py"}), TaskStep(0), "").ok());
}

TEST(SlurmEnv, TaskModeHostIsLocalTaskZeroOfTheFirstNode) {
  // An arbitrary layout can put task 0 elsewhere; the host is still on the first node.
  Env env = TaskStep(3);
  env["SLURM_NODEID"] = "0";
  env["SLURM_LOCALID"] = "0";
  env["SLURM_PROCID"] = "3";
  auto plan = PlanSlurmStep(Parse({"train.py"}), env, "");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->is_host);
  EXPECT_EQ(plan->spec.node_rank(), 3);
}

TEST(SlurmEnv, BadStepValuesAreOneLineErrors) {
  struct Case {
    const char* key;
    const char* value;  // nullptr: removed
    const char* message;
  } cases[] = {
      {"SLURM_STEP_NUM_NODES", "x", "SLURM_STEP_NUM_NODES='x' is not a number"},
      {"SLURM_NODEID", nullptr, "SLURM_NODEID is not set"},
      {"SLURM_NODEID", "5", "inconsistent Slurm step"},
      {"SLURM_STEP_NODELIST", "n[1-", "SLURM_STEP_NODELIST:"},
      {"SLURM_STEP_NODELIST", "n[1-4]", "names 4 nodes, but the step has 3"},
      {"SLURM_STEP_TASKS_PER_NODE", "3(x2)", "gives 2 nodes, but the step has 3"},
      {"SLURM_STEP_RESV_PORTS", "none", "SLURM_STEP_RESV_PORTS='none'"},
      {"SLURM_JOB_ID", "abc", "SLURM_JOB_ID is not a job id"},
  };
  for (const Case& c : cases) {
    Env env = TaskStep(1);
    if (c.value) env[c.key] = c.value; else env.erase(c.key);
    auto plan = PlanSlurmStep(Parse({"train.py"}), env, "");
    ASSERT_FALSE(plan.ok()) << c.key;
    EXPECT_THAT(plan.status().message(), HasSubstr(c.message)) << c.key;
    EXPECT_EQ(plan.status().message().find('\n'), std::string::npos);
  }
}

TEST(SlurmEnv, ReservedPortsWin) {
  Env env = NodeStep(1);
  env["SLURM_STEP_RESV_PORTS"] = "12011-12012";
  auto plan = PlanSlurmStep(Parse({"train.py"}), env, "");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->port, 12011);
  EXPECT_EQ(plan->port_source, "SLURM_STEP_RESV_PORTS");
  EXPECT_EQ(plan->spec.rdzv_endpoint(), "gpu07:12011");
  env["SLURM_STEP_RESV_PORTS"] = "12020,12030";
  EXPECT_EQ(PlanSlurmStep(Parse({"train.py"}), env, "")->port, 12020);
}

TEST(SlurmEnv, DerivedPortsOfNearbyJobsNeverCollide) {
  // Any two jobs less than kSlurmPortJobSlots apart, each with steps 0..3.
  std::set<int> seen;
  for (uint64_t job = 1000000; job < 1000000 + kSlurmPortJobSlots; ++job) {
    for (uint64_t step = 0; step < 4; ++step) {
      const int port = DerivedSlurmPort(job, step);
      EXPECT_GE(port, 20000);
      EXPECT_LT(port, 29400);  // below torchrun's 29400/29500 and Linux's ephemeral range
      EXPECT_TRUE(seen.insert(port).second) << job << "." << step;
    }
  }
  EXPECT_EQ(DerivedSlurmPort(5, 1), DerivedSlurmPort(5 + kSlurmPortJobSlots, 1));
}

TEST(SlurmEnv, TokenIsPerJobAndStepAndMixesTheSecret) {
  const std::string t = DerivedSlurmToken("lab", "4242", "0", "");
  EXPECT_EQ(t.size(), 64u);
  EXPECT_EQ(t, DerivedSlurmToken("lab", "4242", "0", ""));  // every task agrees
  EXPECT_NE(t, DerivedSlurmToken("lab", "4242", "1", ""));
  EXPECT_NE(t, DerivedSlurmToken("lab", "4243", "0", ""));
  EXPECT_NE(t, DerivedSlurmToken("other", "4242", "0", ""));
  EXPECT_NE(t, DerivedSlurmToken("lab", "4242", "0", "s3cret"));
  EXPECT_NE(DerivedSlurmToken("lab", "1", "23", ""), DerivedSlurmToken("lab", "12", "3", ""));
  // All tasks of a step plan the same token.
  EXPECT_EQ(PlanSlurmStep(Parse({"train.py"}), NodeStep(0), "")->token,
            PlanSlurmStep(Parse({"train.py"}), NodeStep(2), "")->token);
}

TEST(SlurmEnv, ApplySetsTheTokenWhereMainReadsIt) {
  CommandLine cl = Parse({"train.py"});
  Env env = NodeStep(2);  // not the host: nothing is bound or printed
  ASSERT_TRUE(ApplySlurmEnvironment(&cl, &env).ok());
  EXPECT_EQ(env.at("DRUN_RDZV_TOKEN"), DerivedSlurmToken("lab", "4242", "0", ""));
  EXPECT_EQ(cl.spec.node_rank(), 2);

  // A user's token is the secret mixed in, from the environment or a file.
  cl = Parse({"train.py"});
  env = NodeStep(2);
  env["DRUN_RDZV_TOKEN"] = "s3cret";
  ASSERT_TRUE(ApplySlurmEnvironment(&cl, &env).ok());
  EXPECT_EQ(env.at("DRUN_RDZV_TOKEN"), DerivedSlurmToken("lab", "4242", "0", "s3cret"));

  char path[] = "/tmp/slurm_env_test_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "filesecret\n", 11), 11);
  close(fd);
  cl = Parse({"--rdzv-token-file", path, "train.py"});
  env = NodeStep(1);
  ASSERT_TRUE(ApplySlurmEnvironment(&cl, &env).ok());
  EXPECT_EQ(env.at("DRUN_RDZV_TOKEN"), DerivedSlurmToken("lab", "4242", "0", "filesecret"));
  EXPECT_TRUE(cl.token_file.empty());  // consumed: main reads the derived token
  unlink(path);
}

// `drun train.py` typed in a batch script (SLURM_STEP_ID is the batch pseudo
// step): a single-node job after all, whose MASTER_ADDR the spec carries.
TEST(SlurmEnv, TheBatchScriptsSingleNodeResolvesItsMasterAddr) {
  Env env = {{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "4294967291"}};
  CommandLine cl = Parse({"train.py"}, env);
  EXPECT_EQ(cl.mode, JobMode::kSrunStep);
  EXPECT_EQ(cl.spec.master_addr(), "");
  ASSERT_TRUE(ApplySlurmEnvironment(&cl, &env).ok());
  EXPECT_EQ(cl.mode, JobMode::kSingleNode);
  EXPECT_EQ(cl.spec.master_addr(), "127.0.0.1");
}

TEST(SlurmEnv, HostFailsClearlyWhenThePortIsTaken) {
  Env env = NodeStep(0);
  // Hold the derived port of a job id that maps to it.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  int port = 0;
  uint64_t job = 0;
  for (job = 500; job < 500 + kSlurmPortJobSlots; ++job) {
    port = DerivedSlurmPort(job, 0);
    sa.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) break;
  }
  ASSERT_EQ(listen(fd, 1), 0);
  env["SLURM_JOB_ID"] = std::to_string(job);
  CommandLine cl = Parse({"train.py"});
  absl::Status st = ApplySlurmEnvironment(&cl, &env);
  close(fd);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("rendezvous port ", port)));
  EXPECT_THAT(st.message(), HasSubstr("--resv-ports"));
  EXPECT_THAT(st.message(), HasSubstr("--rdzv-endpoint gpu07:PORT"));
}

TEST(SlurmEnv, LauncherSlurmDefaultsAndMisuse) {
  Env batch = {{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NUM_NODES", "4"}, {"SLURM_NNODES", "4"},
               {"SLURM_JOB_NODELIST", "n[1-4]"}, {"SLURM_GPUS_ON_NODE", "2"}};
  CommandLine cl = Parse({"--launcher", "slurm", "train.py"});
  Env env = batch;
  ASSERT_TRUE(ApplySlurmEnvironment(&cl, &env).ok());
  EXPECT_EQ(cl.spec.min_nodes(), 4);
  EXPECT_EQ(cl.spec.max_nodes(), 4);
  EXPECT_EQ(cl.spec.run_id(), "slurm-9");
  EXPECT_EQ(cl.spec.nproc_per_node(), "2");
  EXPECT_FALSE(env.count("DRUN_RDZV_TOKEN"));  // the launcher draws a random one

  // #SBATCH --ntasks-per-node=3: three workers per node, unless --nproc-per-node says.
  env["SLURM_NTASKS_PER_NODE"] = "3";
  cl = Parse({"--launcher", "slurm", "train.py"});
  ASSERT_TRUE(ApplySlurmEnvironment(&cl, &env).ok());
  EXPECT_EQ(cl.spec.nproc_per_node(), "3");
  cl = Parse({"--launcher", "slurm", "--nproc-per-node", "1", "train.py"});
  ASSERT_TRUE(ApplySlurmEnvironment(&cl, &env).ok());
  EXPECT_EQ(cl.spec.nproc_per_node(), "1");
  env.erase("SLURM_NTASKS_PER_NODE");

  cl = Parse({"--launcher", "slurm", "--nnodes", "2:8", "train.py"});
  ASSERT_TRUE(ApplySlurmEnvironment(&cl, &env).ok());
  EXPECT_EQ(cl.spec.min_nodes(), 2);
  EXPECT_EQ(cl.spec.max_nodes(), 4);
  cl = Parse({"--launcher", "slurm", "--nnodes", "5", "train.py"});
  absl::Status st = ApplySlurmEnvironment(&cl, &env);
  EXPECT_THAT(st.message(), HasSubstr("--nnodes 5 is more than the 4 nodes of this allocation"));

  cl = Parse({"--launcher", "slurm", "train.py"});
  Env none;
  st = ApplySlurmEnvironment(&cl, &none);
  EXPECT_THAT(st.message(), HasSubstr("inside a Slurm allocation"));

  cl = Parse({"--launcher", "slurm", "train.py"});
  Env step = NodeStep(0);
  st = ApplySlurmEnvironment(&cl, &step);
  EXPECT_THAT(st.message(), HasSubstr("not under srun"));
}

// The step's other nodes, never this one, say which address this node is to them.
TEST(SlurmEnv, AddressTowardOtherNodesSkipsThisNode) {
  EXPECT_EQ(AddressTowardOtherNodes("node1", "node1", 12000), "");  // no other node
  EXPECT_EQ(AddressTowardOtherNodes("127.0.0.1", "node1", 12000), "127.0.0.1");
  EXPECT_EQ(StepAddressTowardOtherNodes({{"SLURM_STEP_NODELIST", "127.0.0.1"},
                                         {"SLURMD_NODENAME", "127.0.0.1"}}, 12000), "");
  EXPECT_EQ(StepAddressTowardOtherNodes({{"SLURM_NODELIST", "127.0.0.1"},
                                         {"SLURMD_NODENAME", "node1"}}, 12000), "127.0.0.1");
  EXPECT_EQ(SlurmNodeName({{"SLURMD_NODENAME", "node7"}}), "node7");
}

// scontrol -o show node: one node a line; NodeAddr need not be a name that resolves.
TEST(SlurmEnv, ParsesNodeAddrsOfScontrol) {
  const std::string out =
      "NodeName=node1 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.213.61.11 NodeHostName=node1 "
      "Version=22.05.8\n"
      "NodeName=node2 Arch=x86_64 NodeAddr=gpu-07.ib NodeHostName=node2\n"
      "\n"
      "NodeName=node3 Arch=x86_64\n";  // no NodeAddr: skipped
  EXPECT_THAT(ParseNodeAddrs(out),
              ElementsAre(std::make_pair(std::string("node1"), std::string("10.213.61.11")),
                          std::make_pair(std::string("node2"), std::string("gpu-07.ib"))));
  EXPECT_TRUE(ParseNodeAddrs("").empty());
}

TEST(SlurmEnv, AddressTowardAnySkipsWhatDoesNotResolve) {
  EXPECT_EQ(AddressTowardAny({"no-such-node.invalid", "127.0.0.1"}, 12000), "127.0.0.1");
  EXPECT_EQ(AddressTowardAny({"no-such-node.invalid"}, 12000), "");
  EXPECT_EQ(AddressTowardAny({}, 12000), "");
}

TEST(SlurmLauncher, SrunArgvStartsOneAgentPerNodeWithoutAShell) {
  EXPECT_THAT(SrunAgentArgv("/usr/bin/srun", 3, "/opt/drun bin/drun"),
              ElementsAre("/usr/bin/srun", "--nodes=3", "--ntasks=3", "--ntasks-per-node=1",
                          "--kill-on-bad-exit=1", "--input=all", "--whole", "--mpi=none",
                          "--job-name=drun-agents", "/opt/drun bin/drun", "agent"));
}

}  // namespace
}  // namespace drun
