// The hosts' log collection (launcher/ssh/ssh_logs.h) with real tar on both
// ends: the "remote" side is a local `tar -cf -` child (the --rsh path with no
// command prefix), so every step but the ssh channel runs for real.
#include "launcher/ssh/ssh_logs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "agent/log_layout.h"
#include "launcher/ssh/ssh_rsh.h"

namespace drun {
namespace {

namespace fs = std::filesystem;

class SshLogsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/drun-ssh-logs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }

  // A log tree as an agent writes it: random bytes (any value), mode 0600.
  std::string WriteTree(const std::string& dir, size_t size) {
    std::mt19937 gen(7);
    std::string data(size, '\0');
    for (char& c : data) c = static_cast<char>(gen());
    fs::create_directories(dir + "/attempt_0/0");
    const std::string file = dir + "/attempt_0/0/stdout.log";
    std::ofstream(file, std::ios::binary) << data;
    chmod(file.c_str(), 0600);
    return data;
  }
  static std::string Read(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  static HostLogCopy::Starter LocalTar() {
    return [](const std::string& dir) { return StartRshProcess(TarArgv(dir), ""); };
  }
  std::string root_;
};

// Claiming the copy's directory: LogLayout::ClaimChildDir (tests/unit/log_layout_test.cc).

TEST_F(SshLogsTest, TheRemoteCommandQuotesTheDirectory) {
  EXPECT_EQ(TarCommand("/logs/a b"), "tar -C '/logs/a b' -cf - .");
  EXPECT_EQ(TarArgv("/logs/a b"), (std::vector<std::string>{"tar", "-C", "/logs/a b", "-cf", "-", "."}));
}

TEST_F(SshLogsTest, ATreeArrivesByteForByteWithItsModes) {
  const std::string data = WriteTree(root_ + "/there/red01", 3 << 20);
  const std::string here = *LogLayout::ClaimChildDir(root_, "red01");
  HostLogCopy copy("red01", {HostLogCopy::Item{root_ + "/there/red01", here, absl::OkStatus(), 0}}, LocalTar());
  copy.Run();
  ASSERT_TRUE(copy.items()[0].result.ok()) << copy.items()[0].result;
  EXPECT_GT(copy.bytes(), data.size());  // the tar stream: the file and its headers
  EXPECT_EQ(Read(here + "/attempt_0/0/stdout.log"), data);
  struct stat st;
  ASSERT_EQ(stat((here + "/attempt_0/0/stdout.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(SshLogsTest, AFailingRemoteTarIsTheReasonGiven) {
  const std::string here = *LogLayout::ClaimChildDir(root_, "red01");
  HostLogCopy copy("red01", {HostLogCopy::Item{root_ + "/not-there", here, absl::OkStatus(), 0}}, LocalTar());
  copy.Run();
  const absl::Status& st = copy.items()[0].result;
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tar there exited with status 2: tar: "), absl::string_view::npos) << st;
}

TEST_F(SshLogsTest, AnAbortedCopyStartsNothingAndSaysWhy) {
  int started = 0;
  HostLogCopy copy("red01", {HostLogCopy::Item{root_, root_ + "/x", absl::OkStatus(), 0}},
                   [&](const std::string& dir) {
                     started++;
                     return StartRshProcess(TarArgv(dir), "");
                   });
  copy.Abort("stopped by SIGINT");
  copy.Run();
  EXPECT_EQ(started, 0);
  EXPECT_EQ(copy.items()[0].result, absl::CancelledError("stopped by SIGINT"));
}

// A shared file system: the node's directory is seen here at the same path with
// the same inode; nothing is copied, and the report says where the logs are.
TEST_F(SshLogsTest, CollectLogsCopiesOnlyWhatIsNotSeenHere) {
  const std::string run_dir = root_ + "/none_abcdef";
  fs::create_directories(run_dir + "/orange07");
  WriteTree(run_dir + "/orange07", 1000);
  const std::string data = WriteTree(root_ + "/private/none_abcdef/red01", 5000);
  struct stat st;
  ASSERT_EQ(stat((run_dir + "/orange07").c_str(), &st), 0);
  std::vector<v1::NodeReport> nodes(3);
  nodes[0].set_host("orange07");
  nodes[0].set_log_dir(run_dir + "/orange07");
  nodes[0].set_log_dir_inode(st.st_ino);
  nodes[1].set_host("red01");  // reported a path this machine does not have: copied
  nodes[1].set_log_dir(root_ + "/private/none_abcdef/red01");
  nodes[1].set_log_dir_inode(st.st_ino + 1);
  nodes[2].set_host("purple11");  // no logs
  std::vector<std::string> said;
  LogCollection c;
  c.run_dir = run_dir;
  c.sig_fd = -1;
  c.say = [&](const std::string& l) { said.push_back(l); };
  const std::vector<LogHost> hosts = {{"orange07", 1, LocalTar()}, {"red01", 1, LocalTar()},
                                      {"purple11", 2, LocalTar()}};
  std::vector<std::string> stay;
  EXPECT_EQ(CollectLogs(c, hosts, &nodes, &stay), 0);
  EXPECT_EQ(stay, std::vector<std::string>{"purple11:" + run_dir + "/"});
  EXPECT_EQ(nodes[0].logs_collected_to(), run_dir + "/orange07");
  EXPECT_EQ(nodes[1].logs_collected_to(), run_dir + "/red01");
  EXPECT_EQ(Read(run_dir + "/red01/attempt_0/0/stdout.log"), data);
  EXPECT_EQ(nodes[2].logs_collected_to(), "");
  ASSERT_EQ(said.size(), 2u);
  // The tar stream of one 5000-byte file: 10 KiB (tar pads to 10240-byte records).
  EXPECT_EQ(said[0].rfind("logs of every host: " + run_dir + "/ (10.0 KiB copied from 1 host in ", 0), 0u) << said[0];
  EXPECT_NE(said[0].find("; 1 not collected, below)"), std::string::npos) << said[0];
  // purple11 had two agents join and only one report without logs: two unaccounted for.
  EXPECT_EQ(said[1], "purple11: 2 agents ended without saying where their logs are (killed or lost); they stay on "
                     "purple11 under " + run_dir + "/");
}

}  // namespace
}  // namespace drun
