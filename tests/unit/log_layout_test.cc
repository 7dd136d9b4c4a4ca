// LogLayout (agent/log_layout.h) on a real file system, in a fresh temporary
// directory per test: the paths, the claims with an exclusive mkdir, the
// unique run directory per run and who names it, the streams kept in files,
// the default log directory of -r/-t, the stack dumps' files, and a
// launcher's collection decision.
#include "agent/log_layout.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "agent/std_streams.h"
#include "gtest/gtest.h"
#include "rendezvous/base/random.h"

namespace drun {
namespace {

namespace fs = std::filesystem;

class LogLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("drun_log_layout_test_");
    ASSERT_TRUE(dir.ok()) << dir.status();
    tmp_ = *dir;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  v1::JobSpec Spec(const std::string& run_id, const std::string& run_name = "") const {
    v1::JobSpec spec;
    spec.set_log_dir(tmp_ + "/logs");
    spec.set_run_id(run_id);
    spec.set_log_run_dir(run_name);
    return spec;
  }
  static std::set<std::string> List(const std::string& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
  }
  static mode_t Mode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }
  std::string tmp_;
};

TEST_F(LogLayoutTest, NewRunNameIsTheRunIdAndSixRandomLettersOrDigits) {
  std::set<std::string> names;
  for (int i = 0; i < 20; ++i) {
    const std::string name = LogLayout::NewRunName("exp7");
    EXPECT_TRUE(std::regex_match(name, std::regex("exp7_[A-Za-z0-9]{6}"))) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 20u);
}

TEST_F(LogLayoutTest, ClaimRunDirMakesTheRootAndAFreshDirectoryEachTime) {
  const std::string root = tmp_ + "/a/b";
  absl::StatusOr<std::string> first = LogLayout::ClaimRunDir(root, "none");
  absl::StatusOr<std::string> second = LogLayout::ClaimRunDir(root, "none");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(*first, *second);
  EXPECT_EQ(List(root), (std::set<std::string>{*first, *second}));
  EXPECT_EQ(Mode(root + "/" + *first), 0700u);
}

TEST_F(LogLayoutTest, ClaimRunDirUnderAFileSaysWhichPath) {
  std::ofstream(tmp_ + "/file") << "x";
  absl::StatusOr<std::string> r = LogLayout::ClaimRunDir(tmp_ + "/file/logs", "none");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);  // ENOTDIR
  EXPECT_EQ(r.status().message(), tmp_ + "/file/logs: Not a directory");
}

TEST_F(LogLayoutTest, ClaimChildDirTakesTheNextFreeSuffix) {
  EXPECT_EQ(*LogLayout::ClaimChildDir(tmp_, "red01"), tmp_ + "/red01");
  EXPECT_EQ(*LogLayout::ClaimChildDir(tmp_, "red01"), tmp_ + "/red01.1");
  EXPECT_EQ(*LogLayout::ClaimChildDir(tmp_, "red01"), tmp_ + "/red01.2");
  EXPECT_EQ(Mode(tmp_ + "/red01.2"), 0700u);
  EXPECT_FALSE(LogLayout::ClaimChildDir(tmp_ + "/missing", "red01").ok());
}

TEST_F(LogLayoutTest, OneNodeClaimsAFreshRunDirectoryEvenWithAGivenRunId) {
  LogLayout first(Spec("exp7"), "node", /*per_host=*/false);
  LogLayout again(Spec("exp7"), "node", /*per_host=*/false);
  ASSERT_TRUE(first.Prepare().ok());
  ASSERT_TRUE(again.Prepare().ok());
  ASSERT_TRUE(first.claimed());
  EXPECT_NE(first.node_dir(), again.node_dir());
  EXPECT_EQ(fs::path(first.node_dir()).parent_path(), tmp_ + "/logs");
  EXPECT_TRUE(std::regex_match(fs::path(first.node_dir()).filename().string(),
                               std::regex("exp7_[A-Za-z0-9]{6}")));
  struct stat st {};
  ASSERT_EQ(stat(first.node_dir().c_str(), &st), 0);
  EXPECT_EQ(first.node_dir_inode(), static_cast<uint64_t>(st.st_ino));
}

TEST_F(LogLayoutTest, AttemptPathsAreTorchrunsAndTheRankDirectoryIsMade) {
  LogLayout layout(Spec("none"), "node", false);
  ASSERT_TRUE(layout.Prepare().ok());
  const std::string base = layout.node_dir();
  EXPECT_EQ(layout.AttemptDir(3), base + "/attempt_3");
  const LogLayout::RankFiles f = layout.ForRank(3, 1);
  EXPECT_EQ(f.stdout_log, base + "/attempt_3/1/stdout.log");
  EXPECT_EQ(f.stderr_log, base + "/attempt_3/1/stderr.log");
  EXPECT_EQ(f.error_file, base + "/attempt_3/1/error.json");
  EXPECT_TRUE(fs::is_directory(base + "/attempt_3/1"));
  EXPECT_EQ(Mode(base + "/attempt_3/1"), 0700u);
}

TEST_F(LogLayoutTest, ARelativeLogDirBecomesAbsolute) {
  v1::JobSpec spec = Spec("none");
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp_);
  spec.set_log_dir("rel/logs/");
  LogLayout layout(spec, "node", false);
  const absl::Status st = layout.Prepare();
  fs::current_path(cwd);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(fs::path(layout.node_dir()).parent_path(), tmp_ + "/rel/logs");
}

TEST_F(LogLayoutTest, ManyNodesWaitForTheNameAndThenShareOneRunDirectory) {
  LogLayout a(Spec("exp7"), "vm", /*per_host=*/true);
  LogLayout b(Spec("exp7"), "vm", /*per_host=*/true);
  ASSERT_TRUE(a.AwaitsRunName());
  ASSERT_TRUE(a.Prepare().ok());
  ASSERT_TRUE(b.Prepare().ok());
  EXPECT_FALSE(a.claimed());
  EXPECT_TRUE(fs::is_directory(tmp_ + "/logs"));
  EXPECT_TRUE(List(tmp_ + "/logs").empty());
  // The host's choice, from the first Assignment.
  ASSERT_TRUE(a.Claim("exp7_Ab12Cd").ok());
  ASSERT_TRUE(b.Claim("exp7_Ab12Cd").ok());
  EXPECT_EQ(a.node_dir(), tmp_ + "/logs/exp7_Ab12Cd/vm");
  EXPECT_EQ(b.node_dir(), tmp_ + "/logs/exp7_Ab12Cd/vm.1");
  // The next run is named afresh: a tree of its own.
  LogLayout c(Spec("exp7"), "vm", true);
  ASSERT_TRUE(c.Claim("exp7_Zz99Yy").ok());
  EXPECT_EQ(c.node_dir(), tmp_ + "/logs/exp7_Zz99Yy/vm");
}

TEST_F(LogLayoutTest, ARunNameGivenByTheLauncherIsClaimedBeforeJoining) {
  LogLayout layout(Spec("none", "none_Qw34Er"), "red01", /*per_host=*/true);
  EXPECT_FALSE(layout.AwaitsRunName());
  ASSERT_TRUE(layout.Prepare().ok());
  EXPECT_EQ(layout.node_dir(), tmp_ + "/logs/none_Qw34Er/red01");
}

TEST_F(LogLayoutTest, ARunNameThatIsNoPlainNameIsRefused) {
  for (const char* bad : {"../up", "a/b", ".."}) {
    LogLayout layout(Spec("none"), "vm", true);
    ASSERT_TRUE(layout.Prepare().ok());
    const absl::Status st = layout.Claim(bad);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_FALSE(layout.claimed());
  }
  EXPECT_TRUE(List(tmp_ + "/logs").empty());
}

TEST_F(LogLayoutTest, AnUnwritableLogDirIsOneLine) {
  std::ofstream(tmp_ + "/file") << "x";
  v1::JobSpec spec = Spec("none");
  spec.set_log_dir(tmp_ + "/file");
  LogLayout layout(spec, "node", false);
  const absl::Status st = layout.Prepare();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "cannot keep logs in --log-dir " + tmp_ + "/file: " + tmp_ +
                              "/file: Not a directory; give a directory you can write");
}

TEST_F(LogLayoutTest, WithoutLogDirOnlyErrorFilesInATemporaryDirectory) {
  v1::JobSpec spec;
  spec.set_run_id("none");
  LogLayout layout(spec, "node", false);
  EXPECT_FALSE(layout.keeps_logs());
  ASSERT_TRUE(layout.Prepare().ok());
  EXPECT_TRUE(layout.ForRank(0, 0).error_file.empty());  // no temporary directory yet
  ASSERT_TRUE(layout.MakeTemporary().ok());
  const std::string tmp = layout.Temporary();
  ASSERT_TRUE(fs::is_directory(tmp));
  const LogLayout::RankFiles f = layout.ForRank(2, 5);
  EXPECT_EQ(f.error_file, tmp + "/error-2-5.json");
  EXPECT_TRUE(f.stdout_log.empty());
  EXPECT_TRUE(f.stderr_log.empty());
  EXPECT_EQ(layout.AttemptDir(2), "");
  layout.RemoveTemporary();
  EXPECT_FALSE(fs::exists(tmp));
}

TEST_F(LogLayoutTest, LogDirAloneKeepsBothStreamsOfEveryRank) {
  LogLayout layout(Spec("none"), "node", false);
  ASSERT_TRUE(layout.Prepare().ok());
  for (int lr : {0, 3}) {
    const LogLayout::RankFiles f = layout.ForRank(0, lr);
    EXPECT_FALSE(f.stdout_log.empty()) << lr;
    EXPECT_FALSE(f.stderr_log.empty()) << lr;
  }
}

TEST_F(LogLayoutTest, RedirectsAndTeeChooseTheStreamsKeptPerRank) {
  v1::JobSpec spec = Spec("none");
  *spec.mutable_redirects() = ToProto(*ParseStdSpec("0:1"));  // rank 0: stdout
  *spec.mutable_tee() = ToProto(*ParseStdSpec("1:2"));        // rank 1: stderr
  LogLayout layout(spec, "node", false);
  ASSERT_TRUE(layout.Prepare().ok());
  const LogLayout::RankFiles zero = layout.ForRank(1, 0);
  EXPECT_EQ(zero.stdout_log, layout.node_dir() + "/attempt_1/0/stdout.log");
  EXPECT_EQ(zero.stderr_log, "");
  const LogLayout::RankFiles one = layout.ForRank(1, 1);
  EXPECT_EQ(one.stdout_log, "");
  EXPECT_EQ(one.stderr_log, layout.node_dir() + "/attempt_1/1/stderr.log");
  const LogLayout::RankFiles two = layout.ForRank(1, 2);  // named by neither: only its error file
  EXPECT_EQ(two.stdout_log, "");
  EXPECT_EQ(two.stderr_log, "");
  EXPECT_EQ(two.error_file, layout.node_dir() + "/attempt_1/2/error.json");
}

TEST_F(LogLayoutTest, RedirectsWithoutLogDirGetAPrivateDirectoryUnderTmp) {
  v1::JobSpec spec;
  spec.set_run_id("none");
  *spec.mutable_redirects() = ToProto(*ParseStdSpec("3"));
  absl::StatusOr<std::string> made = LogLayout::DefaultRoot(&spec);
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_FALSE(made->empty());
  EXPECT_EQ(spec.log_dir(), *made);
  EXPECT_TRUE(std::regex_match(*made, std::regex(".*/drun_logs_[A-Za-z0-9]{6}"))) << *made;
  EXPECT_EQ(Mode(*made), 0700u);
  // Decided once: the job has its --log-dir now, and nothing more is made.
  absl::StatusOr<std::string> again = LogLayout::DefaultRoot(&spec);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, "");
  EXPECT_EQ(spec.log_dir(), *made);
  fs::remove_all(*made);
}

TEST_F(LogLayoutTest, NoDefaultLogDirWithoutRedirectsOrWithAGivenOne) {
  v1::JobSpec plain;
  EXPECT_EQ(*LogLayout::DefaultRoot(&plain), "");
  EXPECT_EQ(plain.log_dir(), "");
  v1::JobSpec given = Spec("none");
  *given.mutable_tee() = ToProto(*ParseStdSpec("1"));
  EXPECT_EQ(*LogLayout::DefaultRoot(&given), "");
  EXPECT_EQ(given.log_dir(), tmp_ + "/logs");
}

TEST_F(LogLayoutTest, NameRunNamesTheRunOnceForTheWholeJob) {
  v1::JobSpec spec = Spec("exp7");
  LogLayout::NameRun(&spec);
  EXPECT_TRUE(std::regex_match(spec.log_run_dir(), std::regex("exp7_[A-Za-z0-9]{6}"))) << spec.log_run_dir();
  EXPECT_FALSE(fs::exists(tmp_ + "/logs"));  // named only: the nodes make it
  EXPECT_EQ(LogLayout::RunDir(spec), tmp_ + "/logs/" + spec.log_run_dir());
  // Named already: kept (a node never renames the job's run).
  const std::string name = spec.log_run_dir();
  LogLayout::NameRun(&spec);
  EXPECT_EQ(spec.log_run_dir(), name);
  ASSERT_TRUE(LogLayout::ClaimRun(&spec).ok());
  EXPECT_EQ(spec.log_run_dir(), name);
  // A node given the name claims its own directory in it.
  LogLayout node(spec, "red01", /*per_host=*/true);
  EXPECT_FALSE(node.AwaitsRunName());
  ASSERT_TRUE(node.Prepare().ok());
  EXPECT_EQ(node.node_dir(), LogLayout::RunDir(spec) + "/red01");
}

TEST_F(LogLayoutTest, ClaimRunMakesTheRunDirectoryOnThisMachine) {
  v1::JobSpec first = Spec("none");
  v1::JobSpec second = Spec("none");
  ASSERT_TRUE(LogLayout::ClaimRun(&first).ok());
  ASSERT_TRUE(LogLayout::ClaimRun(&second).ok());
  EXPECT_NE(first.log_run_dir(), second.log_run_dir());
  EXPECT_EQ(List(tmp_ + "/logs"), (std::set<std::string>{first.log_run_dir(), second.log_run_dir()}));
  EXPECT_EQ(Mode(LogLayout::RunDir(first)), 0700u);
}

TEST_F(LogLayoutTest, ClaimRunThatCannotSaysWhatToDo) {
  std::ofstream(tmp_ + "/file") << "x";
  v1::JobSpec spec = Spec("none");
  spec.set_log_dir(tmp_ + "/file/logs");
  const absl::Status st = LogLayout::ClaimRun(&spec);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "cannot keep logs in --log-dir " + tmp_ + "/file/logs on this machine, where drun "
                          "collects every host's logs: " + tmp_ + "/file/logs: Not a directory; give a "
                          "directory you can write here");
  EXPECT_EQ(spec.log_run_dir(), "");
}

TEST_F(LogLayoutTest, WithoutLogDirNoRunIsNamed) {
  v1::JobSpec spec;
  spec.set_run_id("none");
  LogLayout::NameRun(&spec);
  EXPECT_EQ(spec.log_run_dir(), "");
  ASSERT_TRUE(LogLayout::ClaimRun(&spec).ok());
  EXPECT_EQ(spec.log_run_dir(), "");
  EXPECT_EQ(LogLayout::RunDir(spec), "");
}

TEST_F(LogLayoutTest, TheRunDirIsAbsoluteAndItsLineNamesIt) {
  v1::JobSpec spec = Spec("none", "none_Ab12Cd");
  spec.set_log_dir("rel/logs/");
  EXPECT_EQ(LogLayout::RunDir(spec), (fs::current_path() / "rel/logs/none_Ab12Cd").string());
  EXPECT_EQ(LogLayout::RunDirLine("/l/none_Ab12Cd", ""), "logs in /l/none_Ab12Cd/");
  EXPECT_EQ(LogLayout::RunDirLine("/l/none_Ab12Cd", "a directory per node"),
            "logs in /l/none_Ab12Cd/ (a directory per node)");
}

TEST_F(LogLayoutTest, StackDumpsAreFilesOfTheAttempt) {
  LogLayout layout(Spec("none"), "node", false);
  EXPECT_EQ(layout.StacksFile(0, false, 1700000000123), "");  // not claimed yet
  ASSERT_TRUE(layout.Prepare().ok());
  EXPECT_EQ(layout.StacksFile(2, false, 1700000000123), layout.node_dir() + "/attempt_2/stacks_1700000000123.txt");
  EXPECT_EQ(layout.StacksFile(2, true, 1700000000123), layout.node_dir() + "/attempt_2/hang_stacks.txt");
  v1::JobSpec none;
  LogLayout without(none, "node", false);
  ASSERT_TRUE(without.MakeTemporary().ok());
  EXPECT_EQ(without.StacksFile(0, true, 1), "");  // without --log-dir a dump is shown, not kept
  without.RemoveTemporary();
}

class CollectionTest : public LogLayoutTest {
 protected:
  v1::NodeReport Report(const std::string& dir, uint64_t inode) {
    v1::NodeReport n;
    n.set_host("red01");
    n.set_log_dir(dir);
    n.set_log_dir_inode(inode);
    return n;
  }
  uint64_t Inode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(stat(path.c_str(), &st), 0);
    return st.st_ino;
  }
};

TEST_F(CollectionTest, ANodeWithoutLogsHasNothingToCollect) {
  EXPECT_EQ(LogLayout::PlanCollection(v1::NodeReport(), tmp_, "").kind, LogLayout::Collection::Kind::kNoLogs);
}

TEST_F(CollectionTest, TheSameDirectoryHereIsNotCopied) {
  fs::create_directories(tmp_ + "/run/red01");
  const LogLayout::Collection c =
      LogLayout::PlanCollection(Report(tmp_ + "/run/red01", Inode(tmp_ + "/run/red01")), tmp_ + "/run", "");
  EXPECT_EQ(c.kind, LogLayout::Collection::Kind::kHere);
  EXPECT_EQ(c.dir, tmp_ + "/run/red01");
  EXPECT_EQ(List(tmp_ + "/run"), std::set<std::string>{"red01"});
}

TEST_F(CollectionTest, AnotherMachinesDirectoryIsCopiedIntoAClaimOfItsName) {
  fs::create_directories(tmp_ + "/run/red01.1");
  // The same path, another inode: another machine's directory of that name.
  const v1::NodeReport n = Report(tmp_ + "/run/red01.1", Inode(tmp_ + "/run/red01.1") + 1);
  const LogLayout::Collection c = LogLayout::PlanCollection(n, tmp_ + "/run", "");
  EXPECT_EQ(c.kind, LogLayout::Collection::Kind::kCopy);
  EXPECT_EQ(c.dir, tmp_ + "/run/red01.1.1");
  const LogLayout::Collection elsewhere =
      LogLayout::PlanCollection(Report("/elsewhere/none_x/red01", 42), tmp_ + "/run", "");
  EXPECT_EQ(elsewhere.kind, LogLayout::Collection::Kind::kCopy);
  EXPECT_EQ(elsewhere.dir, tmp_ + "/run/red01");
}

TEST_F(CollectionTest, WhatCannotBeCopiedStaysAndSaysWhy) {
  const LogLayout::Collection no_way =
      LogLayout::PlanCollection(Report("/elsewhere/red01", 42), tmp_, "not a host of this job");
  EXPECT_EQ(no_way.kind, LogLayout::Collection::Kind::kStays);
  EXPECT_EQ(no_way.why, "not a host of this job");
  EXPECT_TRUE(List(tmp_).empty());
  const LogLayout::Collection no_room =
      LogLayout::PlanCollection(Report("/elsewhere/red01", 42), tmp_ + "/missing", "");
  EXPECT_EQ(no_room.kind, LogLayout::Collection::Kind::kStays);
  EXPECT_EQ(no_room.why, tmp_ + "/missing/red01: No such file or directory");
}

}  // namespace
}  // namespace drun
