// MakeAgentOptions (launcher/node.h): the one builder of AgentOptions, for
// every mode; and RunId (agent/agent_options.h), the default run id as a type.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "agent/agent_options.h"
#include "agent/log_layout.h"
#include "launcher/job/cli.h"
#include "launcher/node.h"

namespace drun {
namespace {

class AgentOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/agent_options_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    xdg_ = tmpl;
  }
  void TearDown() override {
    rmdir((xdg_ + "/drun").c_str());
    rmdir(xdg_.c_str());
  }

  AgentSetup Setup(AgentRole role, int max_nodes = 1) {
    AgentSetup s;
    s.role = role;
    s.spec.set_max_nodes(max_nodes);
    s.spec.set_min_nodes(1);
    s.spec.set_quiet(true);
    s.nproc.count = 2;
    s.env = {{"XDG_RUNTIME_DIR", xdg_}, {"HOME", "/nowhere"}};
    return s;
  }

  std::string xdg_;
};

// The bug this builder fixed: `drun agent` (ssh, --rsh, srun) chose its control
// directory from an environment not yet filled in, so it listened in
// /tmp/drun-UID whatever XDG_RUNTIME_DIR said, where `drun stacks` did not look.
TEST_F(AgentOptionsTest, EveryModeListensUnderItsOwnXdgRuntimeDir) {
  for (AgentRole role : {AgentRole::kSingleNode, AgentRole::kNetworkNode, AgentRole::kLaunched}) {
    AgentOptions o = MakeAgentOptions(Setup(role));
    EXPECT_EQ(o.control_dir, xdg_ + "/drun") << static_cast<int>(role);
    EXPECT_EQ(o.base_env.at("XDG_RUNTIME_DIR"), xdg_);
    EXPECT_EQ(o.base_env.at("HOME"), "/nowhere");
    struct stat st;
    ASSERT_EQ(stat(o.control_dir.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    EXPECT_TRUE(o.capture);
    EXPECT_EQ(o.version, DrunVersion());
    EXPECT_TRUE(o.quiet);  // from the spec
    EXPECT_EQ(o.nproc.count, 2);
  }
}

TEST_F(AgentOptionsTest, ALaunchedAgentHasItsLifelineAndTheHostInItsPrefix) {
  AgentSetup s = Setup(AgentRole::kLaunched);
  s.hostname = "red01";
  s.launcher_reports_end = true;
  s.advertise_addr = "10.213.51.2";
  AgentOptions o = MakeAgentOptions(std::move(s));
  EXPECT_EQ(o.lifeline_fd, 0);
  EXPECT_TRUE(o.host_in_prefix);  // one host of an ssh job is still "a host"
  EXPECT_TRUE(o.launcher_reports_end);
  EXPECT_EQ(o.hostname, "red01");
  EXPECT_EQ(o.advertise_addr, "10.213.51.2");
  EXPECT_FALSE(o.summary);
  EXPECT_EQ(o.report_path, "");
}

TEST_F(AgentOptionsTest, NodesTypedByHandShowTheHostOnlyWhenTheJobSpansNodes) {
  AgentSetup one = Setup(AgentRole::kNetworkNode, 1);
  one.summary = true;
  one.report_path = "/tmp/r.json";
  AgentOptions o = MakeAgentOptions(std::move(one));
  EXPECT_FALSE(o.host_in_prefix);
  EXPECT_EQ(o.lifeline_fd, -1);
  EXPECT_TRUE(o.summary);
  EXPECT_EQ(o.report_path, "/tmp/r.json");
  EXPECT_FALSE(o.hostname.empty());  // this machine's
  EXPECT_TRUE(MakeAgentOptions(Setup(AgentRole::kNetworkNode, 2)).host_in_prefix);
  EXPECT_FALSE(MakeAgentOptions(Setup(AgentRole::kSingleNode)).host_in_prefix);
  // Only a launched agent is told by its launcher whether it reports the end.
  AgentSetup net = Setup(AgentRole::kNetworkNode, 2);
  net.launcher_reports_end = true;
  EXPECT_FALSE(MakeAgentOptions(std::move(net)).launcher_reports_end);
}

TEST_F(AgentOptionsTest, OnlyALaunchedAgentTakesItsLaunchersConsoleRelayAndStartAnnouncement) {
  for (AgentRole role : {AgentRole::kSingleNode, AgentRole::kNetworkNode, AgentRole::kLaunched}) {
    AgentSetup s = Setup(role, 2);
    s.console_relay = true;
    s.launcher_announces_start = true;
    AgentOptions o = MakeAgentOptions(std::move(s));
    EXPECT_EQ(o.console_relay, role == AgentRole::kLaunched);
    EXPECT_EQ(o.launcher_announces_start, role == AgentRole::kLaunched);
  }
  AgentOptions plain = MakeAgentOptions(Setup(AgentRole::kLaunched, 2));
  EXPECT_FALSE(plain.console_relay);
  EXPECT_FALSE(plain.launcher_announces_start);
}

TEST(SpansNodesTest, IsTheMaximumNodeCount) {
  v1::JobSpec s;
  s.set_min_nodes(1);
  s.set_max_nodes(1);
  EXPECT_FALSE(SpansNodes(s));
  s.set_max_nodes(4);  // elastic 1:4 may span several
  EXPECT_TRUE(SpansNodes(s));
}

TEST(RunIdTest, TheDefaultIsATypeNotAString) {
  EXPECT_TRUE(RunId::Default().is_default());
  EXPECT_EQ(RunId::Default().text(), "none");  // TORCHELASTIC_RUN_ID, as torchrun
  EXPECT_FALSE(RunId::Named("gather").is_default());
  EXPECT_EQ(RunId::Named("gather").text(), "gather");
  // torchrun's own default, written out, is the default.
  EXPECT_EQ(RunId::Named("none"), RunId::Default());
  v1::JobSpec s;
  s.set_run_id("abc");
  EXPECT_EQ(RunId::Of(s), RunId::Named("abc"));
}

TEST(RunIdTest, TheCommandLineResolvesTheDefaultOnce) {
  auto plain = ParseCommandLine({"t.py"}, {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(RunId::Of(plain->spec).is_default());
  EXPECT_EQ(plain->spec.run_id(), "none");
  auto standalone = ParseCommandLine({"--standalone", "t.py"}, {});
  ASSERT_TRUE(standalone.ok());
  EXPECT_FALSE(RunId::Of(standalone->spec).is_default());
  auto named = ParseCommandLine({"--run-id", "job7", "t.py"}, {});
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(RunId::Of(named->spec), RunId::Named("job7"));
  // Every run, a named one too, gets a run directory of its own (agent/log_layout.h).
  EXPECT_EQ(LogLayout::NewRunName(named->spec.run_id()).rfind("job7_", 0), 0u);
  EXPECT_EQ(LogLayout::NewRunName(plain->spec.run_id()).rfind("none_", 0), 0u);
}

}  // namespace
}  // namespace drun
