// The option table (launcher/job/cli.h): one row per option carries its value
// rule, its default and its job-file key, and every front end reads it. A value
// out of range is refused in the same words from the command line, the
// environment and a job file; defaults land in the resolved JobSpec once.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "launcher/job/cli.h"
#include "launcher/job/config_file.h"

namespace drun {
namespace {

bool IsNumber(const ValueRule& r) { return r.type == ValueRule::kInt || r.type == ValueRule::kSeconds; }

TEST(OptionTable, RowsLineUpWithTheirOpt) {
  const std::vector<OptionInfo> all = KnownOptions();
  // One list (options.inc) makes both the enum and the table: they cannot differ in length.
  ASSERT_EQ(all.size(), kOptionCount);
  ASSERT_EQ(all.size(), static_cast<size_t>(Opt::kVersion) + 1);
  std::set<std::string> names;
  for (size_t i = 0; i < all.size(); ++i) {
    const OptionInfo& o = all[i];
    SCOPED_TRACE(o.name);
    EXPECT_EQ(static_cast<size_t>(o.id), i);
    EXPECT_EQ(OptionOf(o.id).name, o.name);
    ASSERT_NE(FindOption(o.name), nullptr);
    EXPECT_EQ(FindOption(o.name)->id, o.id);
    std::string underscored = o.name;
    for (char& c : underscored) c = c == '-' ? '_' : c;
    ASSERT_NE(FindOption(underscored), nullptr);
    EXPECT_EQ(FindOption(underscored)->id, o.id);
    EXPECT_TRUE(names.insert(o.name).second) << "twice: " << o.name;
  }
  EXPECT_EQ(FindOption("nproc-per-nod"), nullptr);
}

std::string NoSpace(std::string s) {
  s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\n'; }), s.end());
  return s;
}

TEST(OptionTable, EveryRowsRuleDefaultAndKeyAgree) {
  const std::set<Opt> command_only = {Opt::kConfig, Opt::kPrintConfig, Opt::kPrintCompletion, Opt::kHelp,
                                      Opt::kVersion};
  const std::set<Opt> no_env = {Opt::kPrintConfig, Opt::kPrintCompletion, Opt::kX, Opt::kHelp, Opt::kVersion};
  // --help wraps a long default (a list) over lines: compare without the spaces.
  const std::string all_help = NoSpace(HelpText("all"));
  // "(default 30)", "(default 'default')", "(default 0: off)": the help's own default.
  const std::regex stated(R"(\(default '?([^':;) ]+)'?[:;)])");
  for (const OptionInfo& o : KnownOptions()) {
    SCOPED_TRACE(o.name);
    EXPECT_EQ(o.is_flag, o.rule.type == ValueRule::kFlag);
    EXPECT_NE(std::string(o.rule.range), "");
    if (IsNumber(o.rule)) {
      EXPECT_LE(o.rule.lo, o.rule.hi);
    }
    if (!o.default_value.empty()) {
      EXPECT_TRUE(CheckValue(o.rule, o.default_value).ok()) << o.default_value;
      EXPECT_FALSE(o.is_flag) << "a flag's default is off";
    }
    std::smatch m;
    if (std::regex_search(o.help, m, stated)) {
      EXPECT_EQ(m[1].str(), o.default_value) << o.help;
    }
    // A row's default is stated by --help from the row, never by its help text.
    if (!o.default_value.empty()) {
      EXPECT_EQ(o.help.find("(default"), std::string::npos) << o.help;
      EXPECT_NE(all_help.find(NoSpace("(default " + o.default_value + ")")), std::string::npos) << o.name;
    }
    EXPECT_EQ(o.yaml_key.empty(), command_only.count(o.id) > 0);
    if (!o.yaml_key.empty()) {
      EXPECT_EQ(o.yaml_key, o.name);
    }
    EXPECT_EQ(o.env.empty(), no_env.count(o.id) > 0);
  }
  for (const RdzvConfKey& k : RdzvConfKeys()) {
    SCOPED_TRACE(k.key);
    if (!k.default_value.empty()) {
      EXPECT_TRUE(CheckValue(k.rule, k.default_value).ok());
    }
  }
}

// The sentence after the option's name, for one value under one rule.
std::string Tail(const ValueRule& rule, const std::string& value) {
  return std::string(CheckValue(rule, value).message());
}

TEST(OptionTable, CommandLineEnvironmentAndJobFileRefuseTheSameValuesInTheSameWords) {
  int checked = 0;
  for (const OptionInfo& o : KnownOptions()) {
    if (!IsNumber(o.rule)) continue;
    SCOPED_TRACE(o.name);
    std::vector<std::string> bad = {"x", "1x", "-1", "nan"};
    if (o.rule.type == ValueRule::kInt) bad.push_back("2.5");
    if (o.rule.lo > 0) bad.push_back("0");
    if (o.rule.hi < 1e12) bad.push_back(std::to_string(static_cast<long long>(o.rule.hi) + 1));
    for (const std::string& v : bad) {
      SCOPED_TRACE(v);
      ASSERT_FALSE(CheckValue(o.rule, v).ok());
      const std::string tail = Tail(o.rule, v);
      EXPECT_EQ(tail.rfind("must be " + std::string(o.rule.range) + ", not '", 0), 0u) << tail;

      auto cl = ParseCommandLine({"--" + o.name, v, "t.py"}, {});
      ASSERT_FALSE(cl.ok());
      EXPECT_EQ(cl.status().message(), "--" + o.name + " " + tail);

      auto env = ParseCommandLine({"t.py"}, {{o.env, v}});
      ASSERT_FALSE(env.ok());
      EXPECT_EQ(env.status().message(), o.env + " " + tail);

      auto file = ParseJobFile(o.yaml_key + ": '" + v + "'\n", "job.yaml");
      ASSERT_FALSE(file.ok());
      EXPECT_EQ(file.status().message(), "job.yaml:1: '" + o.yaml_key + "' " + tail);
      ++checked;
    }
    // The bounds themselves are valid everywhere.
    for (double bound : {o.rule.lo, o.rule.hi}) {
      if (bound > 1e12 || (bound == o.rule.lo && o.rule.lo_open)) continue;
      const std::string v = std::to_string(static_cast<long long>(bound));
      EXPECT_TRUE(CheckValue(o.rule, v).ok()) << v;
      EXPECT_TRUE(ParseJobFile(o.yaml_key + ": " + v + "\n", "job.yaml").ok()) << v;
    }
  }
  EXPECT_GE(checked, 6 * 4);  // max-restarts, node-rank, master-port and three timeouts at least
}

TEST(OptionTable, RdzvConfKeysAreCheckedByTheirRule) {
  for (const char* bad : {"read_timeout=0", "keep_alive_interval=0", "join_timeout=-1",
                          "keep_alive_max_attempt=0", "is_host=perhaps"}) {
    SCOPED_TRACE(bad);
    auto cl = ParseCommandLine({"--rdzv-conf", bad, "t.py"}, {});
    ASSERT_FALSE(cl.ok());
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_EQ(std::string(cl.status().message()).rfind("--rdzv-conf " + key + " must be ", 0), 0u)
        << cl.status().message();
  }
  auto unknown = ParseCommandLine({"--rdzv-conf", "jion_timeout=3", "t.py"}, {});
  ASSERT_FALSE(unknown.ok());
  for (const RdzvConfKey& k : RdzvConfKeys()) {
    EXPECT_NE(unknown.status().message().find(k.key), std::string::npos) << k.key;
  }
}

double Number(const std::string& s) {
  double d = -1;
  EXPECT_TRUE(absl::SimpleAtod(s, &d)) << s;
  return d;
}

std::string ConfDefault(const std::string& key) {
  for (const RdzvConfKey& k : RdzvConfKeys()) {
    if (k.key == key) return k.default_value;
  }
  ADD_FAILURE() << key;
  return "";
}

// Nothing downstream supplies a default: the resolved job carries every one,
// and they are the table's.
TEST(OptionTable, TheResolvedJobCarriesTheTablesDefaults) {
  auto cl = ParseCommandLine({"t.py"}, {});
  ASSERT_TRUE(cl.ok()) << cl.status();
  const v1::JobSpec& s = cl->spec;
  EXPECT_EQ(s.shutdown_timeout_s(), Number(OptionOf(Opt::kShutdownTimeout).default_value));
  EXPECT_EQ(s.shutdown_timeout_s(), 30);
  EXPECT_EQ(s.hang_timeout_s(), Number(OptionOf(Opt::kHangTimeout).default_value));
  EXPECT_EQ(s.max_restarts(), Number(OptionOf(Opt::kMaxRestarts).default_value));
  EXPECT_EQ(s.role(), OptionOf(Opt::kRole).default_value);
  EXPECT_EQ(s.nproc_per_node(), OptionOf(Opt::kNprocPerNode).default_value);
  EXPECT_EQ(s.max_nodes(), Number(OptionOf(Opt::kNnodes).default_value));
  EXPECT_EQ(s.join_timeout_s(), Number(ConfDefault("join_timeout")));
  EXPECT_EQ(s.last_call_timeout_s(), Number(ConfDefault("last_call_timeout")));
  EXPECT_EQ(s.close_timeout_s(), Number(ConfDefault("close_timeout")));
  EXPECT_EQ(s.read_timeout_s(), 60);
  EXPECT_EQ(s.read_timeout_s(), Number(ConfDefault("read_timeout")));
  EXPECT_EQ(s.keepalive_interval_s(), Number(ConfDefault("keep_alive_interval")));
  EXPECT_EQ(s.keepalive_timeout_s(), 2);  // 0.5 s x 4 probes
  // A --rdzv-conf that names other keys leaves these defaults in place.
  auto other = ParseCommandLine({"--rdzv-conf", "join_timeout=5", "t.py"}, {});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->spec.keepalive_timeout_s(), 2);
  EXPECT_EQ(other->spec.read_timeout_s(), 60);
  auto keep = ParseCommandLine({"--rdzv-conf", "keep_alive_interval=1,keep_alive_max_attempt=3", "t.py"}, {});
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ(keep->spec.keepalive_timeout_s(), 3);
}

TEST(OptionTable, TheVersionIsTheProjects) {
  EXPECT_FALSE(DrunVersion().empty());
  EXPECT_EQ(VersionWords(), "drun " + DrunVersion());
  EXPECT_TRUE(std::regex_match(DrunVersion(), std::regex(R"(\d+\.\d+\.\d+)"))) << DrunVersion();
}


std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(text.substr(start, nl - start));
  }
  return lines;
}

// The help an option is shown under: "  -m, --module", "      --nnodes N|MIN:MAX", "  -x VAR[=VALUE]".
std::string Shown(const OptionInfo& o) {
  if (o.name.size() == 1) return "  -" + o.name + " ";
  return o.short_name ? std::string("  -") + o.short_name + ", --" + o.name : "      --" + o.name;
}

// issue 31, item 9: `drun --help` fits one screen, every option is reachable from it
// (its topic is named there), and `--help all` and each topic list their options.
TEST(HelpTopics, OneScreenAndEveryOptionInATopic) {
  const std::string common = HelpText("");
  const std::vector<std::string> lines = Lines(common);
  EXPECT_LE(lines.size(), 80u) << common;
  for (const std::string& l : lines) EXPECT_LE(l.size(), 80u) << l;
  const std::vector<std::string> topics = HelpTopics();
  ASSERT_EQ(topics.front(), "all");
  for (const std::string& t : topics) EXPECT_NE(common.find(t), std::string::npos) << t;
  const std::string all = HelpText("all");
  for (const OptionInfo& o : KnownOptions()) {
    SCOPED_TRACE(o.name);
    EXPECT_NE(all.find(Shown(o)), std::string::npos);
    EXPECT_NE(std::find(topics.begin(), topics.end(), o.group), topics.end());
    const std::string topic = HelpText(o.group);
    EXPECT_NE(topic.find(Shown(o)), std::string::npos);
    EXPECT_EQ(common.find(Shown(o)) != std::string::npos, o.common);
    for (const std::string& l : Lines(topic)) EXPECT_LE(l.size(), 80u) << l;
  }
  for (const std::string& l : Lines(all)) EXPECT_LE(l.size(), 80u) << l;
}

TEST(HelpTopics, TopicsAreParsedAndAMisspeltOneIsRefused) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help", "slurm"}, {"--help=slurm"}, {"-h", "slurm"}}) {
    auto cl = ParseCommandLine(args, {});
    ASSERT_TRUE(cl.ok()) << cl.status();
    EXPECT_TRUE(cl->help);
    EXPECT_EQ(cl->help_topic, "slurm");
  }
  auto plain = ParseCommandLine({"--help"}, {});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->help_topic, "");
  auto bad = ParseCommandLine({"--help", "slrum"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--help has no topic 'slrum'; did you mean slurm? topics: all, job, "
                                    "rendezvous, output, ssh, slurm, other");
}

}  // namespace
}  // namespace drun
