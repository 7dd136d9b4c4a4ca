#include "launcher/job/cli.h"

#include "agent/std_streams.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

namespace drun {
namespace {

using Env = std::map<std::string, std::string>;

absl::StatusOr<CommandLine> Parse(std::vector<std::string> args, Env env = {}) {
  return ParseCommandLine(args, env);
}

TEST(CliTest, BothSpellingsAndEqualsForm) {
  for (const char* flag : {"--nproc-per-node", "--nproc_per_node"}) {
    auto cl = Parse({flag, "4", "train.py", "--lr", "0.1"});
    ASSERT_TRUE(cl.ok()) << cl.status();
    EXPECT_EQ(cl->spec.nproc_per_node(), "4");
    EXPECT_EQ(cl->spec.entrypoint(), "train.py");
    ASSERT_EQ(cl->spec.args_size(), 2);
    EXPECT_EQ(cl->spec.args(0), "--lr");
  }
  auto cl = Parse({"--max_restarts=3", "--nproc-per-node=2", "t.py"});
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(cl->spec.max_restarts(), 3);
  EXPECT_EQ(cl->spec.nproc_per_node(), "2");
}

TEST(CliTest, ScriptArgumentsAreNotParsed) {
  auto cl = Parse({"t.py", "--nproc-per-node", "bogus", "-m"});
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(cl->spec.nproc_per_node(), "1");
  EXPECT_EQ(cl->spec.args_size(), 3);
  EXPECT_EQ(cl->spec.kind(), v1::JobSpec::PYTHON_SCRIPT);
}

TEST(CliTest, PetEnvironmentAndCommandLineWins) {
  auto cl = Parse({"t.py"}, {{"PET_NPROC_PER_NODE", "2"}, {"PET_MAX_RESTARTS", "4"}});
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(cl->spec.nproc_per_node(), "2");
  EXPECT_EQ(cl->spec.max_restarts(), 4);
  cl = Parse({"--nproc-per-node", "3", "t.py"}, {{"PET_NPROC_PER_NODE", "2"}});
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(cl->spec.nproc_per_node(), "3");
  cl = Parse({"t.py"}, {{"PET_STANDALONE", "1"}, {"DRUN_SHUTDOWN_TIMEOUT", "5"}});
  ASSERT_TRUE(cl.ok());
  EXPECT_TRUE(cl->standalone);
  EXPECT_EQ(cl->spec.shutdown_timeout_s(), 5);
}

TEST(CliTest, ShortOptions) {
  auto cl = Parse({"-m", "-r", "3", "-t1", "pkg.train"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.kind(), v1::JobSpec::PYTHON_MODULE);
  EXPECT_EQ(FromProto(cl->spec.redirects()).all, Streams::Both());
  EXPECT_EQ(FromProto(cl->spec.tee()).all, (Streams{true, false}));
}

TEST(CliTest, Defaults) {
  auto cl = Parse({"t.py"});
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(cl->spec.min_nodes(), 1);
  EXPECT_EQ(cl->spec.max_nodes(), 1);
  EXPECT_EQ(cl->spec.shutdown_timeout_s(), 30);
  EXPECT_EQ(cl->spec.role(), "default");
  EXPECT_EQ(cl->spec.run_id(), "none");
  EXPECT_EQ(cl->spec.node_rank(), -1);
  EXPECT_FALSE(cl->spec.working_dir().empty());
  auto sa = Parse({"--standalone", "t.py"});
  ASSERT_TRUE(sa.ok());
  EXPECT_NE(sa->spec.run_id(), "none");
  EXPECT_EQ(sa->spec.run_id().size(), 12u);
  auto id = Parse({"--rdzv_id", "abc", "t.py"});
  EXPECT_EQ(id->spec.run_id(), "abc");
}

TEST(CliTest, NprocForms) {
  for (const char* v : {"4", "cpu", "gpu", "auto", "gpu:1,3,5"}) {
    EXPECT_TRUE(Parse({"--nproc-per-node", v, "t.py"}).ok()) << v;
  }
  for (const char* v : {"0", "-1", "x", "gpu:", "gpu:1,a", "4.5"}) {
    auto cl = Parse({"--nproc-per-node", v, "t.py"});
    ASSERT_FALSE(cl.ok()) << v;
    EXPECT_NE(cl.status().message().find("--nproc-per-node"), std::string::npos);
  }
}

TEST(CliTest, BadInputSaysWhatToWrite) {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  } cases[] = {
      {{"--nprocs-per-node", "2", "t.py"}, "did you mean --nproc-per-node"},
      {{"--bogus", "t.py"}, "unknown option --bogus"},
      {{"--max-restarts", "-1", "t.py"}, "--max-restarts"},
      {{"--nnodes", "3:2", "t.py"}, "minimum is larger"},
      {{"--nnodes", "a", "t.py"}, "MIN:MAX"},
      {{"--shutdown-timeout", "soon", "t.py"}, "seconds"},
      {{"--master-port", "70000", "t.py"}, "1-65535"},
      {{"-r", "5", "t.py"}, "--redirects"},
      {{"--tee", "0:9", "t.py"}, "--tee"},
      {{"--local-ranks-filter", "a", "t.py"}, "--local-ranks-filter"},
      {{"-m", "--no-python", "t.py"}, "exclude each other"},
      {{"--standalone=1", "t.py"}, "takes no value"},
      {{"--max-restarts"}, "needs a value"},
      {{"--nproc-per-node", "2"}, "missing the training script"},
      {{"--start-method", "thread", "t.py"}, "spawn, fork or forkserver"},
      {{"--rdzv-conf", "join_timeout", "t.py"}, "KEY=VALUE"},
      {{"--run-id", "a", "--rdzv-id", "b", "t.py"}, "only one"},
  };
  for (const auto& c : cases) {
    auto cl = Parse(c.args);
    ASSERT_FALSE(cl.ok()) << c.needle;
    EXPECT_NE(cl.status().message().find(c.needle), std::string::npos)
        << cl.status().message() << " lacks " << c.needle;
    EXPECT_EQ(cl.status().message().find('\n'), std::string::npos);
  }
  auto env = Parse({"t.py"}, {{"PET_STANDALONE", "maybe"}});
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("PET_STANDALONE"), std::string::npos);
}

TEST(CliTest, HelpAndVersion) {
  auto h = Parse({"--help"});
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->help);
  EXPECT_TRUE(Parse({"-h"})->help);
  EXPECT_TRUE(Parse({"--version"})->version);
  std::string text = HelpText("all");
  for (const char* s : {"job options:", "rendezvous options:", "output options:", "--nproc-per-node",
                        "--node-setup", "--shutdown-timeout"}) {
    EXPECT_NE(text.find(s), std::string::npos) << s;
  }
  EXPECT_NE(VersionText().find("gRPC"), std::string::npos);
}

TEST(CliTest, RdzvConfPairs) {
  auto cl = Parse({"--rdzv-conf", "join_timeout=5,last_call_timeout=1", "t.py"});
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(cl->spec.join_timeout_s(), 5);
  EXPECT_EQ(cl->spec.last_call_timeout_s(), 1);
}

class JobFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::string path = ::testing::TempDir() + "/job.yaml";
    FILE* f = fopen(path.c_str(), "w");
    fputs(text.c_str(), f);
    fclose(f);
    return path;
  }
};

TEST_F(JobFileTest, PrecedenceCommandLineThenEnvironmentThenFile) {
  std::string path = Write(
      "nproc-per-node: 2\nmax-restarts: 1\nrole: fromfile\nenv: {A: '1'}\n"
      "script: train.py\nargs: [--lr, '0.1']\nx: [FILEVAR]\n");
  auto cl = Parse({"--config", path}, {{"PET_MAX_RESTARTS", "5"}, {"FILEVAR", "f"}});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.nproc_per_node(), "2");
  EXPECT_EQ(cl->spec.max_restarts(), 5);
  EXPECT_EQ(cl->spec.role(), "fromfile");
  EXPECT_EQ(cl->spec.env().at("A"), "1");
  EXPECT_EQ(cl->spec.entrypoint(), "train.py");
  ASSERT_EQ(cl->spec.args_size(), 2);
  EXPECT_TRUE(cl->Explicit(Opt::kNprocPerNode));
  cl = Parse({"--config", path, "--nproc-per-node", "3", "-x", "CLIVAR", "other.py"},
             {{"PET_NPROC_PER_NODE", "4"}, {"FILEVAR", "f"}, {"CLIVAR", "c"}});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.nproc_per_node(), "3");
  EXPECT_EQ(cl->spec.entrypoint(), "other.py");
  EXPECT_EQ(cl->spec.args_size(), 0);
  EXPECT_EQ(cl->forward_env, (std::vector<std::string>{"FILEVAR", "CLIVAR"}));
  cl = Parse({"t.py"}, {{"DRUN_CONFIG", path}, {"PET_NPROC_PER_NODE", "4"}, {"FILEVAR", "f"}});
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(cl->spec.nproc_per_node(), "4");
}

TEST_F(JobFileTest, HostsFromFileSelectSsh) {
  std::string path = Write("hosts:\n  - {host: red01, max_slots: 2}\n  - orange07:3\nscript: t.py\n");
  auto cl = Parse({"--config", path});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->launcher, Launcher::kSsh);
  EXPECT_EQ(cl->mode, JobMode::kSsh);
  ASSERT_EQ(cl->host_entries.size(), 2u);
  EXPECT_EQ(cl->host_entries[0].max_slots, 2);
  EXPECT_EQ(cl->host_entries[1].slots, 3);
}

TEST_F(JobFileTest, ErrorsNameFileAndLineAndPrintConfigRoundTrips) {
  auto bad = Parse({"--config", Write("nproc-per-node: 2\nmax-restarts: [1]\n"), "t.py"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("job.yaml:2"), std::string::npos) << bad.status();
  auto missing = Parse({"--config", "/nonexistent/job.yaml", "t.py"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/job.yaml"), std::string::npos);
  auto cl = Parse({"--config", Write("nproc-per-node: 2\nscript: t.py\n"), "--print-config",
                   "--max-restarts", "3"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  ASSERT_TRUE(cl->print_config);
  auto again = ParseJobFile(RenderJobFile(cl->resolved), "printed");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->options.at("nproc-per-node"), "2");
  EXPECT_EQ(again->options.at("max-restarts"), "3");
  EXPECT_EQ(again->script, "t.py");
}

}  // namespace
}  // namespace drun

namespace drun {
namespace {

// A CI job's stray DRUN_VERSION (or DRUN_HELP, DRUN_PRINT_CONFIG, DRUN_X) is not an
// option: only the command line asks drun to print its version or help instead of running.
TEST(CliTest, CommandLineOnlyOptionsIgnoreTheEnvironment) {
  auto cl = ParseCommandLine({"t.py"}, {{"DRUN_VERSION", "1.2"}, {"DRUN_HELP", "yes"},
                                        {"DRUN_PRINT_CONFIG", "1"}, {"DRUN_X", "A=1"}});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_FALSE(cl->version);
  EXPECT_FALSE(cl->help);
  EXPECT_FALSE(cl->print_config);
  EXPECT_TRUE(cl->spec.env().empty());
  for (const OptionInfo& o : KnownOptions()) {
    if (o.name == "help" || o.name == "version" || o.name == "print-config" || o.name == "print-completion" ||
        o.name == "x") {
      EXPECT_EQ(o.env, "") << o.name;
    } else {
      EXPECT_FALSE(o.env.empty()) << o.name;
    }
  }
}

}  // namespace
}  // namespace drun

namespace drun {
namespace {

// Found by job_fuzz: `--hostfile ''` with a job file's hosts: was accepted and
// --print-config then wrote both, which no job file may say.
TEST(CliTest, EmptyPathsAreRefused) {
  for (const char* opt : {"--hostfile", "--host", "--rdzv-token-file", "--env-file"}) {
    auto cl = ParseCommandLine({opt, "", "t.py"}, {});
    ASSERT_FALSE(cl.ok()) << opt;
    EXPECT_NE(cl.status().message().find("is empty"), std::string::npos) << cl.status();
  }
}

// The token is the token file's first line; a first line that is empty is refused,
// and without a file $DRUN_RDZV_TOKEN is the token.
TEST(CliTest, JobTokenIsTheFilesFirstLine) {
  char path[] = "/tmp/cli_test_token_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "s3cret\nignored\n", 15), 15);
  close(fd);
  auto cl = ParseCommandLine({"--rdzv-token-file", path, "t.py"}, {});
  ASSERT_TRUE(cl.ok()) << cl.status();
  auto token = ReadJobToken(*cl, {{"DRUN_RDZV_TOKEN", "from-env"}});
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret");
  ASSERT_EQ(chmod(path, 0644), 0);  // a secret others may read is refused
  token = ReadJobToken(*cl, {});
  EXPECT_EQ(token.status().message(), "--rdzv-token-file '" + std::string(path) +
                                          "' may be read by others (mode 0644); run chmod 600 '" + path + "'");
  ASSERT_EQ(chmod(path, 0600), 0);
  ASSERT_EQ(truncate(path, 0), 0);
  token = ReadJobToken(*cl, {});
  EXPECT_EQ(token.status().message(),
            "--rdzv-token-file '" + std::string(path) + "': its first line is empty; write the token on it");
  unlink(path);
  token = ReadJobToken(*cl, {});
  EXPECT_EQ(token.status().message(),
            "cannot open --rdzv-token-file '" + std::string(path) + "': No such file or directory");
  cl = ParseCommandLine({"t.py"}, {});
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(*ReadJobToken(*cl, {{"DRUN_RDZV_TOKEN", "from-env"}}), "from-env");
}

// --rdzv-tls CERT,KEY,CA: parsed once into JobSpec.tls (absolute paths); bad
// input is one line naming the file. That the files are PEM and the key the
// certificate's is OpenSSL's check, in drun-net (tls_relay_test).
class CliTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cli_test_tls_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (const char* f : {"c.pem", "k.pem", "ca.pem"}) {
      const std::string p = dir_ + "/" + f;
      FILE* fp = fopen(p.c_str(), "w");
      ASSERT_NE(fp, nullptr);
      fputs("-----BEGIN X-----\n", fp);
      fclose(fp);
    }
    ASSERT_EQ(chmod((dir_ + "/k.pem").c_str(), 0600), 0);
  }
  void TearDown() override {
    for (const char* f : {"c.pem", "k.pem", "ca.pem"}) unlink((dir_ + "/" + f).c_str());
    unlink((dir_ + "/job.yaml").c_str());
    rmdir(dir_.c_str());
  }
  std::string Files() const { return dir_ + "/c.pem," + dir_ + "/k.pem," + dir_ + "/ca.pem"; }
  std::string dir_;
};

TEST_F(CliTlsTest, ThreeFilesBecomeJobSpecTls) {
  auto cl = Parse({"--rdzv-tls", Files(), "t.py"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.tls().cert(), dir_ + "/c.pem");
  EXPECT_EQ(cl->spec.tls().key(), dir_ + "/k.pem");
  EXPECT_EQ(cl->spec.tls().ca(), dir_ + "/ca.pem");
  cl = Parse({"t.py"}, {{"DRUN_RDZV_TLS", Files()}});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.tls().ca(), dir_ + "/ca.pem");
  EXPECT_FALSE(Parse({"t.py"})->spec.has_tls());
}

TEST_F(CliTlsTest, RelativePathsAreMadeAbsolute) {
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(dir_.c_str()), 0);
  auto cl = Parse({"--rdzv-tls", "c.pem,k.pem,ca.pem", "t.py"});
  ASSERT_EQ(chdir(cwd), 0);
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.tls().key(), dir_ + "/k.pem");
}

TEST_F(CliTlsTest, BadInputIsOneLine) {
  auto cl = Parse({"--rdzv-tls", dir_ + "/c.pem," + dir_ + "/k.pem", "t.py"});
  ASSERT_FALSE(cl.ok());
  EXPECT_EQ(cl.status().message(), "--rdzv-tls '" + dir_ + "/c.pem," + dir_ +
                                       "/k.pem': write CERT,KEY,CA: this node's certificate, its private key "
                                       "and the CA certificate (PEM files, no ',' in their paths)");
  EXPECT_FALSE(Parse({"--rdzv-tls", ",,", "t.py"}).ok());
  cl = Parse({"--rdzv-tls", dir_ + "/c.pem," + dir_ + "/nope.pem," + dir_ + "/ca.pem", "t.py"});
  ASSERT_FALSE(cl.ok());
  EXPECT_EQ(cl.status().message(),
            "cannot open --rdzv-tls key '" + dir_ + "/nope.pem': No such file or directory");
  ASSERT_EQ(chmod((dir_ + "/k.pem").c_str(), 0640), 0);  // a key others may read
  cl = Parse({"--rdzv-tls", Files(), "t.py"});
  ASSERT_FALSE(cl.ok());
  EXPECT_EQ(cl.status().message(), "--rdzv-tls key '" + dir_ + "/k.pem' may be read by others (mode 0640); "
                                   "run chmod 600 '" + dir_ + "/k.pem'");
}

TEST_F(CliTlsTest, JobFileTlsBlock) {
  const std::string yaml = dir_ + "/job.yaml";
  FILE* fp = fopen(yaml.c_str(), "w");
  ASSERT_NE(fp, nullptr);
  fprintf(fp, "tls:\n  cert: %s/c.pem\n  key: %s/k.pem\n  ca: %s/ca.pem\n", dir_.c_str(), dir_.c_str(),
          dir_.c_str());
  fclose(fp);
  auto cl = Parse({"--config", yaml, "t.py"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.tls().cert(), dir_ + "/c.pem");
  EXPECT_EQ(cl->spec.tls().ca(), dir_ + "/ca.pem");
  fp = fopen(yaml.c_str(), "w");
  fprintf(fp, "tls:\n  cert: %s/c.pem\n  ca: %s/ca.pem\n", dir_.c_str(), dir_.c_str());
  fclose(fp);
  cl = Parse({"--config", yaml, "t.py"});
  ASSERT_FALSE(cl.ok());
  EXPECT_EQ(cl.status().message(), yaml + ":1: 'tls' needs all three of cert:, key: and ca:");
}

// torchrun 2.14's flags (issue 29, section 3): each has torchrun's meaning or a reason.
TEST(CliTest, LogLinePrefixTemplateFromCommandLinePetAndTorchelasticVariable) {
  auto cl = ParseCommandLine({"--log-line-prefix-template", "[${rank}]:", "t.py"}, {});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.log_line_prefix_template(), "[${rank}]:");
  cl = ParseCommandLine({"--log_line_prefix_template=${hostname}: ", "t.py"}, {});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.log_line_prefix_template(), "${hostname}: ");
  // torchrun reads TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE when the option is not given.
  cl = ParseCommandLine({"t.py"}, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "<${local_rank}>"}});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.log_line_prefix_template(), "<${local_rank}>");
  cl = ParseCommandLine({"t.py"}, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "<a>"},
                                   {"PET_LOG_LINE_PREFIX_TEMPLATE", "<b>"}});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.log_line_prefix_template(), "<b>");
  cl = ParseCommandLine({"--log-line-prefix-template", "<c>", "t.py"},
                        {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "<a>"}});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.log_line_prefix_template(), "<c>");
  cl = ParseCommandLine({"t.py"}, {});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->spec.log_line_prefix_template(), "");
}

TEST(CliTest, NprocPerNodeXpuIsRefusedWithItsReason) {
  auto cl = ParseCommandLine({"--nproc-per-node", "xpu", "t.py"}, {});
  ASSERT_FALSE(cl.ok());
  EXPECT_NE(cl.status().message().find("xpu"), std::string::npos);
  EXPECT_NE(cl.status().message().find("is not supported: drun counts NVIDIA GPUs only"), std::string::npos)
      << cl.status();
}

TEST(CliTest, PrintCompletionNamesAShell) {
  for (const char* shell : {"bash", "zsh", "tcsh"}) {
    auto cl = ParseCommandLine({"--print-completion", shell}, {});
    ASSERT_TRUE(cl.ok()) << cl.status();
    EXPECT_EQ(cl->print_completion, shell);
    EXPECT_FALSE(CompletionScript(shell).empty());
  }
  auto bad = ParseCommandLine({"--print-completion", "fish"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--print-completion 'fish' is not a shell drun completes; write bash, zsh or tcsh");
  // Every option's name is in every script.
  for (const OptionInfo& o : KnownOptions()) {
    for (const char* shell : {"bash", "tcsh"}) {
      EXPECT_NE(CompletionScript(shell).find(o.name), std::string::npos) << shell << " " << o.name;
    }
  }
}

}  // namespace
}  // namespace drun
