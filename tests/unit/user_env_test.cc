#include "launcher/job/user_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace drun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST(ResolveUserEnv, OrderFileThenEnvFileThenX) {
  auto env = ResolveUserEnv({{"A", "file"}, {"C", "c"}},
                            std::make_pair(std::string("envfile"),
                                           std::string("# comment\nexport B='two words'\nA=0\n\nPATH=/q\n")),
                            {"HOME", "A=1", "A=2"}, {{"PATH", "/p"}, {"HOME", "/h"}, {"OTHER", "x"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_THAT(env->vars, ElementsAre(Pair("A", "2"), Pair("B", "two words"), Pair("C", "c"),
                                     Pair("HOME", "/h"), Pair("PATH", "/q")));
  EXPECT_THAT(env->notices, IsEmpty());
}

TEST(ResolveUserEnv, UnsetVariableIsAnError) {
  auto env = ResolveUserEnv({}, std::nullopt, {"NOPE"}, {});
  ASSERT_FALSE(env.ok());
  EXPECT_THAT(env.status().message(), HasSubstr("-x NOPE: NOPE is not set"));
  auto bad = ResolveUserEnv({}, std::nullopt, {"1X=2"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("expected VAR or VAR=VALUE"));
}

TEST(ResolveUserEnv, DrunOwnedVariablesAreDroppedWithANotice) {
  auto env = ResolveUserEnv({{"RANK", "3"}}, std::make_pair(std::string("f.env"), std::string("WORLD_SIZE=9\n")),
                            {"MASTER_ADDR=10.0.0.1", "FOO=1"}, {});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_THAT(env->vars, ElementsAre(Pair("FOO", "1")));
  ASSERT_EQ(env->notices.size(), 3u);
  EXPECT_THAT(env->notices[0], HasSubstr("env: RANK: drun sets RANK for every worker; ignored (use --node-rank"));
  EXPECT_THAT(env->notices[1], HasSubstr("--env-file f.env: drun sets WORLD_SIZE"));
  EXPECT_THAT(env->notices[2], HasSubstr("-x MASTER_ADDR: drun sets MASTER_ADDR for every worker; ignored (use --master-addr)"));
}

TEST(ParseEnvFile, ErrorsNameFileAndLine) {
  auto r = ParseEnvFile("A=1\n1BAD=2\n", "my.env", {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("my.env:2: expected VAR=VALUE"));
  auto bare = ParseEnvFile("X\n", "my.env", {{"X", "v"}});
  ASSERT_TRUE(bare.ok());
  EXPECT_THAT(*bare, ElementsAre(Pair("X", "v")));
}

}  // namespace
}  // namespace drun
