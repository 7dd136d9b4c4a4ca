// The ssh launcher's pure parts: host plan (nnodes, spares, per-host nproc),
// env forwarding, --env-file, shell quoting and --rsh splitting.
#include "launcher/ssh/ssh_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/ssh/ssh_rsh.h"

namespace drun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

CommandLine Cl(std::vector<Opt> explicit_opts = {}) {
  CommandLine cl;
  cl.launcher = Launcher::kSsh;
  cl.mode = JobMode::kSsh;
  cl.hostfile = "hosts";
  for (Opt o : explicit_opts) cl.origins[o] = Origin{Origin::kCommandLine, "--" + OptionOf(o).name, ""};
  cl.spec.set_nproc_per_node("1");
  cl.spec.set_min_nodes(1);
  cl.spec.set_max_nodes(1);
  cl.spec.set_node_rank(-1);
  return cl;
}

std::vector<HostEntry> Hosts(std::vector<std::pair<std::string, int>> hs, int max_slots = 0) {
  std::vector<HostEntry> out;
  int line = 1;
  for (auto& [h, slots] : hs) {
    HostEntry e;
    e.host = h;
    e.slots = slots;
    e.max_slots = max_slots;
    e.line = line++;
    out.push_back(e);
  }
  return out;
}

TEST(PlanSshJob, EveryHostRunsWithoutNnodes) {
  CommandLine cl = Cl();
  auto plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 0}, {"b", 2}, {"c", 0}}), {}, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->min_nodes, 3);
  EXPECT_EQ(plan->max_nodes, 3);
  EXPECT_EQ(plan->spares, 0);
  EXPECT_EQ(plan->hosts[0].spec.nproc_per_node(), "1");
  EXPECT_EQ(plan->hosts[1].spec.nproc_per_node(), "2");  // slots set nproc
  EXPECT_EQ(plan->hosts[1].spec.max_nodes(), 3);
}

TEST(PlanSshJob, HostsPastMaxAreSpares) {
  CommandLine cl = Cl({Opt::kNnodes});
  cl.spec.set_min_nodes(2);
  cl.spec.set_max_nodes(3);
  auto plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 0}, {"b", 0}, {"c", 0}, {"d", 0}}), {}, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->spares, 1);
  EXPECT_FALSE(plan->hosts[2].spare);
  EXPECT_TRUE(plan->hosts[3].spare);
  EXPECT_EQ(plan->hosts[3].spec.min_nodes(), 2);
}

TEST(PlanSshJob, TooFewHostsForMin) {
  CommandLine cl = Cl({Opt::kNnodes});
  cl.spec.set_min_nodes(3);
  cl.spec.set_max_nodes(3);
  auto plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 0}, {"b", 0}}), {}, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("needs at least 3 hosts"));
}

TEST(PlanSshJob, MaxSlotsAloneSetsNproc) {
  CommandLine cl = Cl();
  auto plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 0}, {"b", 0}}, 2), {}, {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->hosts[0].spec.nproc_per_node(), "2");
}

TEST(PlanSshJob, ExplicitNprocWinsButRespectsMaxSlots) {
  CommandLine cl = Cl({Opt::kNprocPerNode});
  cl.spec.set_nproc_per_node("2");
  auto plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 4}}), {}, {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->hosts[0].spec.nproc_per_node(), "2");
  cl.spec.set_nproc_per_node("3");
  auto bad = PlanSshJob(cl, cl.spec, Hosts({{"a", 0}}, 2), {}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("hosts:1: host a has max_slots=2"));
}

TEST(PlanSshJob, EnvAndPythonExecAndNoLocalAddr) {
  CommandLine cl = Cl();
  cl.spec.set_local_addr("10.0.0.1");
  auto plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 0}}), {{"FOO", "1"}},
                         {{"PYTHON_EXEC", "/usr/bin/python3"}});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->hosts[0].spec.env().at("FOO"), "1");
  EXPECT_EQ(plan->hosts[0].spec.python_exec(), "/usr/bin/python3");
  EXPECT_EQ(plan->hosts[0].spec.local_addr(), "");
}

TEST(PlanSshJob, RejectsStaticRanks) {
  CommandLine cl = Cl();
  cl.spec.set_node_rank(0);
  EXPECT_FALSE(PlanSshJob(cl, cl.spec, Hosts({{"a", 0}}), {}, {}).ok());
}

std::vector<std::string> Nprocs(const SshPlan& plan) {
  std::vector<std::string> out;
  for (const HostPlan& h : plan.hosts) out.push_back(h.spec.nproc_per_node() + (h.spare ? " spare" : ""));
  return out;
}

// mpirun's -np N with a host list: the job's total, slots first, then round-robin.
TEST(PlanSshJob, TotalFillsSlotsThenRoundRobin) {
  CommandLine cl = Cl();
  cl.total_procs = 4;
  auto plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 0}, {"b", 0}}), {}, {});  // the seeds' hostfile
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Nprocs(*plan), ElementsAre("2", "2"));
  EXPECT_EQ(plan->max_nodes, 2);
  cl.total_procs = 7;
  plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 4}, {"b", 2}}), {}, {});  // 4+2 filled, then a
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Nprocs(*plan), ElementsAre("5", "2"));
  cl.total_procs = 3;
  plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 2}, {"b", 2}, {"c", 2}}), {}, {});  // c idles
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Nprocs(*plan), ElementsAre("2", "1"));
  EXPECT_EQ(plan->max_nodes, 2);
}

TEST(PlanSshJob, TotalWithNnodes) {
  CommandLine cl = Cl({Opt::kNnodes, Opt::kNprocPerNode});
  cl.spec.set_min_nodes(2);
  cl.spec.set_max_nodes(2);
  cl.total_procs = 4;
  auto plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 0}, {"b", 0}, {"c", 0}}), {}, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Nprocs(*plan), ElementsAre("2", "2", "1 spare"));
  cl.total_procs = 1;
  plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 0}, {"b", 0}}), {}, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(), "-np 1 fills only 1 host, but --nnodes needs 2; raise -np or lower --nnodes");
}

TEST(PlanSshJob, TotalPastMaxSlots) {
  CommandLine cl = Cl();
  cl.total_procs = 5;
  auto plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 1}, {"b", 1}}, /*max_slots=*/2), {}, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "-np 5 is more processes than the hosts' max_slots allow (4); lower -np or raise max_slots");
}

TEST(PlanSshJob, StdinRankPastTheHostsWorldIsRefused) {
  CommandLine cl = Cl({Opt::kStdin});
  cl.origins[Opt::kStdin].value = "5";
  cl.spec.mutable_stdin_target()->set_rank(5);
  auto plan = PlanSshJob(cl, cl.spec, Hosts({{"a", 2}, {"b", 3}}), {}, {});  // ranks 0..4
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "--stdin 5: the job has ranks 0 to 4 (over 2 hosts); write one of them, all or none");
  cl.spec.mutable_stdin_target()->set_rank(4);
  EXPECT_TRUE(PlanSshJob(cl, cl.spec, Hosts({{"a", 2}, {"b", 3}}), {}, {}).ok());
  cl.spec.mutable_stdin_target()->set_rank(5);
  cl.spec.set_nproc_per_node("gpu");  // known only on each host
  cl.origins[Opt::kNprocPerNode] = Origin{Origin::kCommandLine, "--nproc-per-node", "gpu"};
  EXPECT_TRUE(PlanSshJob(cl, cl.spec, Hosts({{"a", 0}, {"b", 0}}), {}, {}).ok());
}

TEST(AlwaysForwardedEnv, OnlyThoseSetHere) {
  auto env = AlwaysForwardedEnv({{"PATH", "/p"}, {"HOME", "/h"}, {"VIRTUAL_ENV", "/v"}});
  EXPECT_THAT(env, ElementsAre(Pair("PATH", "/p"), Pair("VIRTUAL_ENV", "/v")));
}

TEST(ShellQuote, QuotesSingleQuotes) {
  EXPECT_EQ(ShellQuote("/opt/drun"), "'/opt/drun'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

TEST(SplitRshCommand, Words) {
  auto w = SplitRshCommand("ssh -p 2222 -o 'ProxyCommand=nc %h %p' \"a b\"");
  ASSERT_TRUE(w.ok());
  EXPECT_THAT(*w, ElementsAre("ssh", "-p", "2222", "-o", "ProxyCommand=nc %h %p", "a b"));
  EXPECT_FALSE(SplitRshCommand("  ").ok());
  EXPECT_FALSE(SplitRshCommand("ssh 'x").ok());
}

}  // namespace
}  // namespace drun
