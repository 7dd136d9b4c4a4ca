// Who serves the workers' store (launcher/job/worker_store.h), as the command
// line resolves it: torch's advice USE_LIBUV=0, from drun's environment, -x or
// --rdzv-conf use_libuv=0, gives rank 0's store and USE_LIBUV=0 to every worker.
#include "launcher/job/worker_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/job/cli.h"

namespace drun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using Env = std::map<std::string, std::string>;

CommandLine Parse(std::vector<std::string> args, Env env = {}) {
  auto cl = ParseCommandLine(args, env);
  EXPECT_TRUE(cl.ok()) << cl.status();
  return cl.ok() ? *cl : CommandLine{};
}

std::string UseLibuvOfWorkers(const CommandLine& cl) {
  auto it = cl.spec.env().find("USE_LIBUV");
  return it == cl.spec.env().end() ? "(unset)" : it->second;
}

TEST(WorkerStore, DefaultIsTheAgentStoreWithoutANotice) {
  CommandLine cl = Parse({"--nproc-per-node", "2", "t.py"});
  EXPECT_TRUE(cl.spec.agent_store());
  EXPECT_EQ(UseLibuvOfWorkers(cl), "(unset)");
  EXPECT_THAT(cl.notices, IsEmpty());
}

TEST(WorkerStore, UseLibuv0InDrunsEnvironmentGivesRank0sStoreAndTellsEveryWorker) {
  CommandLine cl = Parse({"--nproc-per-node", "2", "t.py"}, {{"USE_LIBUV", "0"}});
  EXPECT_FALSE(cl.spec.agent_store());
  EXPECT_EQ(UseLibuvOfWorkers(cl), "0");  // remote nodes' workers too, with the job
  ASSERT_EQ(cl.notices.size(), 1u);
  EXPECT_THAT(cl.notices[0], HasSubstr("USE_LIBUV=0 (drun's environment): rank 0's torch hosts"));
}

TEST(WorkerStore, UseLibuv0GivenWithXGivesRank0sStore) {
  CommandLine cl = Parse({"-x", "USE_LIBUV=0", "--nproc-per-node", "2", "t.py"});
  EXPECT_FALSE(cl.spec.agent_store());
  EXPECT_EQ(UseLibuvOfWorkers(cl), "0");
  ASSERT_EQ(cl.notices.size(), 1u);
  EXPECT_THAT(cl.notices[0], HasSubstr("given to the workers"));
  // As torch's env:// reads it: any value but "1" turns libuv off.
  EXPECT_FALSE(Parse({"-x", "USE_LIBUV=false", "t.py"}).spec.agent_store());
  // -x wins over drun's environment, as in the workers' environment.
  CommandLine on = Parse({"-x", "USE_LIBUV=1", "t.py"}, {{"USE_LIBUV", "0"}});
  EXPECT_TRUE(on.spec.agent_store());
  EXPECT_THAT(on.notices, IsEmpty());
}

TEST(WorkerStore, UseLibuv1KeepsTheAgentStore) {
  CommandLine cl = Parse({"t.py"}, {{"USE_LIBUV", "1"}});
  EXPECT_TRUE(cl.spec.agent_store());
  EXPECT_EQ(UseLibuvOfWorkers(cl), "(unset)");
}

TEST(WorkerStore, NoAgentStoreFlagSaysNothingMore) {
  CommandLine cl = Parse({"--no-agent-store", "t.py"});
  EXPECT_FALSE(cl.spec.agent_store());
  EXPECT_THAT(cl.notices, IsEmpty());
  CommandLine both = Parse({"--no-agent-store", "-x", "USE_LIBUV=0", "t.py"});
  EXPECT_FALSE(both.spec.agent_store());
  EXPECT_THAT(both.notices, ElementsAre(HasSubstr("USE_LIBUV=0")));
}

TEST(WorkerStore, RdzvConfUseLibuv0) {
  CommandLine cl = Parse({"--rdzv-conf", "use_libuv=0,join_timeout=60", "t.py"});
  EXPECT_FALSE(cl.spec.agent_store());
  EXPECT_EQ(UseLibuvOfWorkers(cl), "0");
  EXPECT_EQ(cl.spec.join_timeout_s(), 60);
  ASSERT_EQ(cl.notices.size(), 1u);
  EXPECT_THAT(cl.notices[0], HasSubstr("--rdzv-conf use_libuv=0"));
  EXPECT_TRUE(Parse({"--rdzv-conf", "use_libuv=1", "t.py"}).spec.agent_store());
  EXPECT_TRUE(Parse({"--rdzv-conf", "use_libuv=true", "t.py"}).spec.agent_store());
  EXPECT_FALSE(Parse({"--rdzv-conf", "use_libuv=false", "t.py"}).spec.agent_store());
}

TEST(WorkerStore, RdzvConfAndUseLibuvThatDisagreeAreRefused) {
  auto cl = ParseCommandLine({"--rdzv-conf", "use_libuv=1", "-x", "USE_LIBUV=0", "t.py"}, {});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(), HasSubstr("say opposite things about libuv"));
  auto env = ParseCommandLine({"--rdzv-conf", "use_libuv=0", "t.py"}, {{"USE_LIBUV", "1"}});
  ASSERT_FALSE(env.ok());
  EXPECT_THAT(env.status().message(), HasSubstr("USE_LIBUV=1 (in drun's environment)"));
  auto bad = ParseCommandLine({"--rdzv-conf", "use_libuv=maybe", "t.py"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("use_libuv"));
}

TEST(WorkerStore, RdzvConfUseLibuvIsAKnownKey) {
  auto bad = ParseCommandLine({"--rdzv-conf", "use_libu=0", "t.py"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("use_libuv"));  // listed among the known keys
}

TEST(WorkerStore, ChooseWorkerStoreAlone) {
  WorkerStoreInput in;
  in.env_use_libuv = "0";
  in.given_use_libuv = "0";
  auto s = ChooseWorkerStore(in);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->host, StoreHost::kRank0);
  EXPECT_EQ(s->why, StoreWhy::kGivenUseLibuv);
  EXPECT_FALSE(s->give_use_libuv_0);  // the workers have it already
  EXPECT_EQ(WorkerStoreNotice(WorkerStore{}), "");
}

}  // namespace
}  // namespace drun
