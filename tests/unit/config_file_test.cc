#include "launcher/job/config_file.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/job/cli.h"

namespace drun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

JobFile MustParse(const std::string& yaml) {
  auto job = ParseJobFile(yaml, "job.yaml");
  EXPECT_TRUE(job.ok()) << job.status() << "\n--- for ---\n" << yaml;
  return job.ok() ? *job : JobFile{};
}

std::string ErrorOf(const std::string& yaml) {
  auto job = ParseJobFile(yaml, "job.yaml");
  EXPECT_FALSE(job.ok()) << "accepted:\n" << yaml;
  if (job.ok()) return "";
  EXPECT_TRUE(absl::IsInvalidArgument(job.status())) << job.status();
  return std::string(job.status().message());
}

struct HostView {
  std::string user, host;
  int slots, max_slots;
  bool operator==(const HostView& o) const {
    return user == o.user && host == o.host && slots == o.slots && max_slots == o.max_slots;
  }
};
std::vector<HostView> Hosts(const JobFile& j) {
  std::vector<HostView> v;
  for (const auto& e : j.host_entries) v.push_back({e.user, e.host, e.slots, e.max_slots});
  return v;
}

void ExpectSameJob(const JobFile& a, const JobFile& b) {
  EXPECT_EQ(a.options, b.options);
  EXPECT_EQ(a.multi, b.multi);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.hosts, b.hosts);
  EXPECT_TRUE(Hosts(a) == Hosts(b));
  EXPECT_EQ(a.script, b.script);
  EXPECT_EQ(a.args, b.args);
}

// ---------------------------------------------------------------- keys and values

TEST(ParseJobFile, ValuesFlagsAndBothSpellings) {
  JobFile j = MustParse(
      "nproc-per-node: 4\n"
      "max_restarts: 3\n"
      "rdzv-endpoint: node01:29400\n"
      "nnodes: 2:4\n"
      "standalone: true\n"
      "no_python: false\n"
      "ssh-accept-new: yes\n"
      "shutdown-timeout: 2.5\n"
      "role: trainer\n"
      "node-setup: python3 prep.py /tmp/x\n");
  EXPECT_THAT(
      j.options,
      UnorderedElementsAre(Pair("nproc-per-node", "4"), Pair("max-restarts", "3"),
                           Pair("rdzv-endpoint", "node01:29400"), Pair("nnodes", "2:4"),
                           Pair("standalone", "1"), Pair("no-python", "0"),
                           Pair("ssh-accept-new", "1"), Pair("shutdown-timeout", "2.5"),
                           Pair("role", "trainer"), Pair("node-setup", "python3 prep.py /tmp/x")));
  EXPECT_THAT(j.multi, IsEmpty());
  EXPECT_THAT(j.env, IsEmpty());
  EXPECT_THAT(j.hosts, IsEmpty());
  EXPECT_EQ(j.script, "");
}

// Every option of the command line is a key, in both spellings.
TEST(ParseJobFile, EveryOptionIsAKeyInBothSpellings) {
  for (bool underscores : {false, true}) {
    std::string yaml;
    std::set<std::string> expected;
    for (const OptionInfo& o : KnownOptions()) {
      if (o.yaml_key.empty()) continue;  // the command line's own: --help, --config, --print-*
      if (o.name == "host" || o.name == "hostfile") continue;  // exclusive; below
      std::string key = underscores ? absl::StrReplaceAll(o.name, {{"-", "_"}}) : o.name;
      std::string value = o.is_flag ? "true" : o.repeatable ? "[A, B=1]" : "7";
      absl::StrAppend(&yaml, key, ": ", value, "\n");
      expected.insert(o.name);
    }
    JobFile j = MustParse(yaml);
    std::set<std::string> got;
    for (const auto& [k, v] : j.options) got.insert(k);
    for (const auto& [k, v] : j.multi) got.insert(k);
    EXPECT_EQ(got, expected) << yaml;
  }
  EXPECT_EQ(MustParse("hostfile: lab_hosts\n").options.at("hostfile"), "lab_hosts");
  EXPECT_EQ(MustParse("host: red01:2,red02\n").options.at("host"), "red01:2,red02");
}

TEST(ParseJobFile, FlagsAcceptYamlBooleans) {
  for (const char* t : {"true", "True", "TRUE", "yes", "on", "y"}) {
    EXPECT_EQ(MustParse(absl::StrCat("standalone: ", t, "\n")).options.at("standalone"), "1") << t;
  }
  for (const char* f : {"false", "no", "off", "n"}) {
    EXPECT_EQ(MustParse(absl::StrCat("standalone: ", f, "\n")).options.at("standalone"), "0") << f;
  }
}

TEST(ParseJobFile, ValuesAreKeptAsWritten) {
  JobFile j = MustParse(
      "nproc-per-node: gpu:0,2\n"
      "master-port: \"29500\"\n"  // quoted numbers are numbers too
      "log-dir: ''\n"
      "node-setup: |\n"
      "  set -e\n"
      "  python3 prep.py\n"
      "role: yes\n");  // a string option: the text, not a boolean
  EXPECT_EQ(j.options.at("nproc-per-node"), "gpu:0,2");
  EXPECT_EQ(j.options.at("master-port"), "29500");
  EXPECT_EQ(j.options.at("log-dir"), "");
  EXPECT_EQ(j.options.at("node-setup"), "set -e\npython3 prep.py\n");
  EXPECT_EQ(j.options.at("role"), "yes");
}

TEST(ParseJobFile, RdzvConfAsMapOrString) {
  EXPECT_EQ(MustParse("rdzv-conf:\n  join_timeout: 600\n  last_call_timeout: 30\n")
                .options.at("rdzv-conf"),
            "join_timeout=600,last_call_timeout=30");
  EXPECT_EQ(MustParse("rdzv_conf: {is_host: true}\n").options.at("rdzv-conf"), "is_host=true");
  EXPECT_EQ(MustParse("rdzv-conf: join_timeout=60\n").options.at("rdzv-conf"), "join_timeout=60");
  EXPECT_THAT(ErrorOf("rdzv-conf:\n  join_timeout: [1]\n"), HasSubstr("job.yaml:2: 'rdzv-conf'"));
  EXPECT_THAT(ErrorOf("rdzv-conf:\n  a: 1,2\n"), HasSubstr("job.yaml:2:"));
}

TEST(ParseJobFile, TlsBlockIsRdzvTls) {
  EXPECT_EQ(MustParse("tls:\n  cert: /c.pem\n  key: /k.pem\n  ca: /ca.pem\n").options.at("rdzv-tls"),
            "/c.pem,/k.pem,/ca.pem");
  EXPECT_EQ(MustParse("rdzv_tls: /c,/k,/ca\n").options.at("rdzv-tls"), "/c,/k,/ca");
  EXPECT_EQ(ErrorOf("tls:\n  cert: /c\n  key: /k\n"),
            "job.yaml:1: 'tls' needs all three of cert:, key: and ca:");
  EXPECT_EQ(ErrorOf("tls:\n  cert: /c\n  pass: x\n  ca: /ca\n"),
            "job.yaml:3: 'tls' takes cert: FILE, key: FILE and ca: FILE (paths without ',')");
  EXPECT_THAT(ErrorOf("tls: {cert: /c, key: /k, ca: /ca}\nrdzv-tls: /c,/k,/ca\n"), HasSubstr("set twice"));
  JobFile j;
  j.options = {{"rdzv-tls", "/etc/drun/node.pem,/etc/drun/node.key,/etc/drun/ca.pem"}};
  JobFile parsed = MustParse(RenderJobFile(j));
  ExpectSameJob(parsed, j);
}

TEST(ParseJobFile, RepeatableOptionAsListOrScalar) {
  EXPECT_THAT(MustParse("x: [MASTER_ADDR, NCCL_DEBUG=INFO]\n").multi.at("x"),
              ElementsAre("MASTER_ADDR", "NCCL_DEBUG=INFO"));
  EXPECT_THAT(MustParse("x:\n  - A\n  - B=1\n").multi.at("x"), ElementsAre("A", "B=1"));
  EXPECT_THAT(MustParse("x: LD_LIBRARY_PATH\n").multi.at("x"), ElementsAre("LD_LIBRARY_PATH"));
  EXPECT_EQ(ErrorOf("x:\n  - A\n  - {B: 1}\n"), "job.yaml:3: 'x' items must be strings, not a map");
}

TEST(ParseJobFile, EnvScriptAndArgs) {
  JobFile j = MustParse(
      "env:\n"
      "  OMP_NUM_THREADS: 2\n"
      "  NCCL_DEBUG: INFO\n"
      "  EMPTY: ''\n"
      "script: examples/mnist_ddp.py\n"
      "args: [--epochs, 1, --data-dir, /tmp/fmnist, '']\n");
  EXPECT_THAT(j.env, UnorderedElementsAre(Pair("OMP_NUM_THREADS", "2"), Pair("NCCL_DEBUG", "INFO"),
                                          Pair("EMPTY", "")));
  EXPECT_EQ(j.script, "examples/mnist_ddp.py");
  EXPECT_THAT(j.args, ElementsAre("--epochs", "1", "--data-dir", "/tmp/fmnist", ""));
  EXPECT_THAT(MustParse("args:\n  - --lr\n  - 1e-3\n").args, ElementsAre("--lr", "1e-3"));
}

TEST(ParseJobFile, EmptyDocumentsAreEmptyJobs) {
  for (const char* text : {"", "\n", "# nothing yet\n", "---\n", "{}\n"}) {
    JobFile j = MustParse(text);
    EXPECT_THAT(j.options, IsEmpty()) << text;
    EXPECT_EQ(j.script, "") << text;
  }
}

// ---------------------------------------------------------------- hosts

TEST(ParseJobFile, HostsInEveryForm) {
  JobFile j = MustParse(
      "hosts:\n"
      "  - red01\n"                                    // line 2
      "  - orange07:2\n"                               // line 3
      "  - alice@purple11:3\n"                         // line 4
      "  - {host: green05, slots: 2, max_slots: 4}\n"  // line 5
      "  - host: blue02\n"                             // line 6
      "    max_slots: 2\n"
      "    user: bob\n"
      "  - host: fe80::1\n"  // line 9
      "    slots: 2\n");
  EXPECT_THAT(j.hosts, ElementsAre("red01", "orange07:2", "alice@purple11:3", "green05:2",
                                   "bob@blue02", "[fe80::1]:2"));
  EXPECT_TRUE(Hosts(j) == (std::vector<HostView>{{"", "red01", 0, 0},
                                                 {"", "orange07", 2, 0},
                                                 {"alice", "purple11", 3, 0},
                                                 {"", "green05", 2, 4},
                                                 {"bob", "blue02", 0, 2},
                                                 {"", "fe80::1", 2, 0}}));
  std::vector<int> lines;
  for (const auto& e : j.host_entries) lines.push_back(e.line);
  EXPECT_THAT(lines, ElementsAre(2, 3, 4, 5, 6, 9));
}

TEST(ParseJobFile, HostsAsOneDashHString) {
  JobFile j = MustParse("hosts: red01:2,red02\n");
  EXPECT_THAT(j.hosts, ElementsAre("red01:2", "red02"));
}

// Repeated hosts merge as in a host file or -H: slots add up, max_slots when all give it.
TEST(ParseJobFile, RepeatedHostsMerge) {
  JobFile j = MustParse(
      "hosts:\n"
      "  - red01:2\n"
      "  - red02\n"
      "  - red01\n"
      "  - {host: blue, max_slots: 1}\n"
      "  - {host: blue, max_slots: 2}\n");
  EXPECT_THAT(j.hosts, ElementsAre("red01:3", "red02", "blue:2"));
  EXPECT_EQ(j.host_entries[2].max_slots, 3);
}

TEST(ParseJobFile, HostErrorsNameTheLine) {
  EXPECT_EQ(ErrorOf("hosts:\n  - red01\n  - {host: red02, slot: 2}\n"),
            "job.yaml:3: hosts: unknown key 'slot'; did you mean 'slots'?");
  EXPECT_EQ(ErrorOf("hosts:\n  - red01\n  - {host: red02, max-slot: 2}\n"),
            "job.yaml:3: hosts: unknown key 'max-slot'; did you mean 'max_slots'?");
  EXPECT_EQ(ErrorOf("hosts:\n  - {slots: 2}\n"), "job.yaml:2: hosts: this entry has no 'host'");
  EXPECT_EQ(ErrorOf("hosts:\n  - {host: red01, slots: two}\n"),
            "job.yaml:2: hosts: 'slots' must be a whole number from 1 to 1000000, not 'two'");
  EXPECT_EQ(ErrorOf("hosts:\n  - {host: red01, slots: 0}\n"),
            "job.yaml:2: hosts: 'slots' must be a whole number from 1 to 1000000, not '0'");
  EXPECT_EQ(ErrorOf("hosts:\n  - {host: red01, slots: 4, max_slots: 2}\n"),
            "job.yaml:2: hosts: max_slots=2 is less than slots=4 for red01");
  EXPECT_THAT(ErrorOf("hosts:\n  - ok1\n  - {host: 'red 01'}\n"),
              HasSubstr("job.yaml:3: hosts: invalid host name 'red 01'"));
  EXPECT_THAT(ErrorOf("hosts:\n  - {host: 'red01:2'}\n"),
              HasSubstr("job.yaml:2: hosts: invalid host name 'red01:2'"));
  EXPECT_THAT(ErrorOf("hosts:\n  - a\n  - b\n  - red01:0\n"),
              HasSubstr("job.yaml:4: hosts: entry 'red01:0'"));
  EXPECT_THAT(ErrorOf("hosts:\n  - -bad\n"), HasSubstr("job.yaml:2: hosts:"));
  // A merge error points at the entry that conflicts.
  EXPECT_THAT(ErrorOf("hosts:\n  - alice@red01\n  - red02\n  - bob@red01\n"),
              HasSubstr("job.yaml:4: hosts: host 'red01' is given with user 'bob'"));
  EXPECT_EQ(ErrorOf("hosts:\n  - [red01]\n"),
            "job.yaml:2: hosts: an entry must be 'host[:slots]' or a map {host, slots, "
            "max_slots, user}, not a list");
  EXPECT_EQ(ErrorOf("hosts: {host: red01}\n"),
            "job.yaml:1: 'hosts' must be a list of hosts, not a map");
  EXPECT_EQ(ErrorOf("hosts: []\n"), "job.yaml:1: 'hosts' is empty; list at least one host");
}

TEST(ParseJobFile, HostSourcesExcludeEachOther) {
  EXPECT_EQ(ErrorOf("hostfile: lab\nnproc-per-node: 2\nhosts: [red01]\n"),
            "job.yaml:3: 'hosts' and 'hostfile' (line 1) both name the hosts; keep one");
  EXPECT_EQ(ErrorOf("hosts: [red01]\nhost: red02\n"),
            "job.yaml:2: 'host' and 'hosts' (line 1) both name the hosts; keep one");
}

// ---------------------------------------------------------------- errors

TEST(ParseJobFile, UnknownKeysSuggestTheNearestName) {
  EXPECT_EQ(ErrorOf("nnodes: 1\n\n\nnproc-per-nod: 4\n"),
            "job.yaml:4: unknown key 'nproc-per-nod'; did you mean 'nproc-per-node'?");
  EXPECT_EQ(ErrorOf("max_restart: 4\n"),
            "job.yaml:1: unknown key 'max_restart'; did you mean 'max-restarts'?");
  EXPECT_EQ(ErrorOf("scirpt: train.py\n"),
            "job.yaml:1: unknown key 'scirpt'; did you mean 'script'?");
  EXPECT_EQ(ErrorOf("environment:\n  A: 1\n"),
            "job.yaml:1: unknown key 'environment'; the keys are drun's options (drun --help) "
            "and env, hosts, script, args");
  EXPECT_EQ(ErrorOf("help: true\n"),
            "job.yaml:1: 'help' belongs on the command line, not in a job file");
  EXPECT_EQ(ErrorOf("? [a, b]\n: 1\n"),
            "job.yaml:1: keys are setting names such as nproc-per-node, not a list");
}

TEST(ParseJobFile, WrongTypesNameFileLineAndKey) {
  EXPECT_EQ(ErrorOf("nnodes: 2\n\n\n\n\n\nmax-restarts:\n  - 1\n"),
            "job.yaml:7: 'max-restarts' must be a number, not a list");
  EXPECT_EQ(ErrorOf("max-restarts: three\n"),
            "job.yaml:1: 'max-restarts' must be a whole number of 0 or more, not 'three'");
  EXPECT_EQ(ErrorOf("max-restarts: -1\n"),
            "job.yaml:1: 'max-restarts' must be a whole number of 0 or more, not '-1'");
  EXPECT_EQ(ErrorOf("master-port: 70000\n"),
            "job.yaml:1: 'master-port' must be a TCP port number (1-65535), not '70000'");
  EXPECT_EQ(ErrorOf("shutdown-timeout: soon\n"),
            "job.yaml:1: 'shutdown-timeout' must be a number of seconds (0 or more), not 'soon'");
  EXPECT_EQ(ErrorOf("standalone: 1\n"), "job.yaml:1: 'standalone' must be true or false, not '1'");
  EXPECT_EQ(ErrorOf("standalone: [true]\n"),
            "job.yaml:1: 'standalone' must be true or false, not a list");
  EXPECT_EQ(ErrorOf("standalone:\n"), "job.yaml:1: 'standalone' has no value; write true or false");
  EXPECT_EQ(ErrorOf("log-dir: {a: 1}\n"), "job.yaml:1: 'log-dir' must be a string, not a map");
  EXPECT_EQ(ErrorOf("rdzv-endpoint:\n"),
            "job.yaml:1: 'rdzv-endpoint' has no value; give one, or delete the line");
  EXPECT_EQ(ErrorOf("script: [a.py]\n"), "job.yaml:1: 'script' must be a string, not a list");
  EXPECT_EQ(ErrorOf("script: ''\n"), "job.yaml:1: 'script' is empty");
  EXPECT_EQ(ErrorOf("args: --epochs 1\n"),
            "job.yaml:1: 'args' must be a list, one item per argument, not a string; write "
            "args: [--epochs, 1] or one item per line");
  EXPECT_EQ(ErrorOf("args:\n  - a\n  - [b]\n"),
            "job.yaml:3: args: items must be strings, not a list");
  EXPECT_EQ(ErrorOf("args:\n  - a\n  -\n"),
            "job.yaml:1: args: item 2 is empty; write '' for an empty argument");
  EXPECT_EQ(ErrorOf("x:\n  - a\n  -\n  - b\n"), "job.yaml:1: 'x' item 2 is empty");
  EXPECT_EQ(ErrorOf("hosts:\n  -\n  - b\n"), "job.yaml:1: hosts: item 1 is empty");
  EXPECT_EQ(ErrorOf("env: [A=1]\n"), "job.yaml:1: 'env' must be a map of VAR: value, not a list");
  EXPECT_EQ(ErrorOf("env:\n  A: 1\n  1B: 2\n"),
            "job.yaml:3: env: '1B' is not a variable name (letters, digits, '_'; not starting "
            "with a digit)");
  EXPECT_THAT(ErrorOf("env:\n  A:\n"), HasSubstr("job.yaml:2: env: A has no value"));
  EXPECT_EQ(ErrorOf("env:\n  A: {b: 1}\n"), "job.yaml:2: env: A must be a string, not a map");
}

// The list suggested for `args: <a string>`, as written in the message.
std::string SuggestedArgs(const std::string& yaml) {
  const std::string message = ErrorOf(yaml);
  const std::string marker = "; write args: ";
  const size_t at = message.find(marker);
  const size_t end = message.rfind(" or one item per line");
  if (at == std::string::npos || end == std::string::npos || end < at) {
    ADD_FAILURE() << "no suggested list in: " << message;
    return "";
  }
  return message.substr(at + marker.size(), end - at - marker.size());
}

// `args: --epochs 5` meant two arguments: the message suggests them as two list items, and
// the suggestion, pasted into the job file, gives exactly the arguments the words were.
TEST(ParseJobFile, ArgsStringSuggestsOneItemPerWord) {
  EXPECT_EQ(SuggestedArgs("args: --epochs 5\n"), "[--epochs, 5]");
  EXPECT_EQ(SuggestedArgs("args: train.py\n"), "[train.py]");
  EXPECT_EQ(SuggestedArgs("args: ''\n"), "[]");
  EXPECT_EQ(SuggestedArgs("args: \"--gpus 0,1 --note it's #1 --x=[a] yes\"\n"),
            "[--gpus, '0,1', --note, 'it''s', '#1', '--x=[a]', 'yes']");
  const struct {
    std::string yaml;
    std::vector<std::string> args;
  } cases[] = {
      {"args: --epochs 5 --lr 1e-3\n", {"--epochs", "5", "--lr", "1e-3"}},
      {"args: \"--gpus 0,1 --note it's #1 --x=[a] yes ~ null a:b {c}\"\n",
       {"--gpus", "0,1", "--note", "it's", "#1", "--x=[a]", "yes", "~", "null", "a:b", "{c}"}},
      {"args: \"--tab\\t--bell\\a \\\" \\\\ h\xc3\xa9llo\"\n",
       {"--tab", "--bell\a", "\"", "\\", "h\xc3\xa9llo"}},
  };
  for (const auto& c : cases) {
    const std::string suggested = SuggestedArgs(c.yaml);
    EXPECT_EQ(suggested.find_first_of(std::string("\0\a\t\n", 4)), std::string::npos) << suggested;
    EXPECT_EQ(MustParse(absl::StrCat("args: ", suggested, "\n")).args, c.args) << suggested;
  }
  // A long string is cut, the message stays short.
  const std::string many = SuggestedArgs(absl::StrCat("args: ", std::string(300, 'a'), "\n"));
  EXPECT_EQ(many, absl::StrCat("[", std::string(80, 'a'), "...]"));
  std::string words;
  for (int i = 0; i < 100; ++i) absl::StrAppend(&words, " --w", i);
  EXPECT_LT(SuggestedArgs(absl::StrCat("args:", words, "\n")).size(), 100u);
}

TEST(ParseJobFile, RepeatedKeysInEitherSpelling) {
  EXPECT_EQ(ErrorOf("nproc-per-node: 2\nmax-restarts: 1\nnproc_per_node: 4\n"),
            "job.yaml:3: 'nproc_per_node' is set twice (also as 'nproc-per-node' on line 1)");
  EXPECT_EQ(ErrorOf("env:\n  A: 1\n  A: 2\n"), "job.yaml:3: env: A is set twice");
}

TEST(ParseJobFile, NotAMapOrNotYaml) {
  EXPECT_EQ(ErrorOf("- nproc-per-node: 4\n"),
            "job.yaml:1: a job file is a map of settings (key: value), not a list");
  EXPECT_EQ(ErrorOf("train.py\n"),
            "job.yaml:1: a job file is a map of settings (key: value), not 'train.py'");
  EXPECT_THAT(ErrorOf("nnodes: 1\nenv:\n  A: 1\n B: 2\n"),
              HasSubstr("job.yaml:4: not valid YAML: "));
  EXPECT_THAT(ErrorOf("nnodes: [1, 2\n"), HasSubstr("job.yaml:"));
  EXPECT_EQ(ErrorOf("nnodes: 1\n---\nnnodes: 2\n"),
            "job.yaml:3: a job file holds one YAML document; remove the second '---'");
  // Control bytes in keys are escaped, long keys cut.
  EXPECT_THAT(ErrorOf("\"a\\x01b\": 1\n"), HasSubstr("unknown key 'a\\x01"));
  EXPECT_THAT(ErrorOf(std::string(200, 'q') + ": 1\n"), HasSubstr("...'"));
}

// ---------------------------------------------------------------- files

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/config_file_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(LoadJobFile, ReadsAndNamesThePathInErrors) {
  TempDir dir;
  std::string p = dir.Write("job.yaml", "nproc-per-node: 2\nscript: t.py\n");
  auto job = LoadJobFile(p);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->options.at("nproc-per-node"), "2");

  std::string bad = dir.Write("bad.yaml", "nnodes: 1\nnproc-per-nod: 4\n");
  EXPECT_EQ(LoadJobFile(bad).status().message(),
            p.substr(0, p.size() - 8) +
                "bad.yaml:2: unknown key 'nproc-per-nod'; did you mean "
                "'nproc-per-node'?");

  auto missing = LoadJobFile(dir.path() + "/nope.yaml");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.yaml"));

  EXPECT_FALSE(LoadJobFile(dir.path()).ok());  // a directory
}

// ---------------------------------------------------------------- round trip

TEST(RenderJobFile, RoundTripsThroughParseJobFile) {
  JobFile j;
  j.options = {{"nnodes", "2:4"},
               {"nproc-per-node", "gpu:0,2"},
               {"max-restarts", "3"},
               {"standalone", "0"},
               {"no-agent-store", "1"},
               {"rdzv-conf", "join_timeout=600,last_call_timeout=30"},
               {"rdzv-endpoint", "node01:29400"},
               {"node-setup", "set -e\npython3 'prep data.py' # \"quoted\" \\ back\n"},
               {"role", "true"},
               {"log-dir", ""},
               {"run-id", "null"},
               {"local-ranks-filter", "0,1"},
               {"tee", "3"},
               {"master-addr", "- dash"},
               {"redirects", ":colon"},
               {"rsh", "ssh -p 2222"}};
  j.multi = {{"x", {"NCCL_DEBUG=INFO", "A", "B=#x", "C=  spaced "}}};
  j.env = {{"OMP_NUM_THREADS", "1"}, {"GREETING", "héllo: wörld"}, {"EMPTY", ""}, {"T", "~"}};
  j.script = "train script.py";
  j.args = {"--epochs", "5", "", "-", "--", "---", "a b", "{x}", "[y]", "1e3", "yes", "'q'", "\t"};
  JobFile parsed = MustParse(RenderJobFile(j));
  ExpectSameJob(parsed, j);
  // Rendering is stable.
  EXPECT_EQ(RenderJobFile(parsed), RenderJobFile(j));
}

TEST(RenderJobFile, HostsKeepMaxSlots) {
  JobFile j = MustParse(
      "hosts:\n"
      "  - red01\n"
      "  - orange07:2\n"
      "  - {host: purple11, max_slots: 3, user: alice}\n"
      "  - {host: 'fe80::1', slots: 2, max_slots: 2}\n"
      "  - bob@[fe80::2]:4\n");
  const std::string text = RenderJobFile(j);
  EXPECT_THAT(text, HasSubstr("max_slots: 3"));
  ExpectSameJob(MustParse(text), j);

  // A job built from -H strings alone (no host_entries) renders them as they are.
  JobFile h;
  h.hosts = {"red01:2", "bob@red02"};
  ExpectSameJob(MustParse(RenderJobFile(h)), MustParse("hosts: [red01:2, bob@red02]\n"));
}

TEST(RenderJobFile, ReadableOutput) {
  JobFile j;
  j.options = {{"max-restarts", "3"}, {"nnodes", "2"}, {"standalone", "1"}};
  j.script = "train.py";
  j.args = {"--epochs", "5"};
  EXPECT_EQ(RenderJobFile(j),
            "nnodes: 2\n"
            "standalone: true\n"
            "max-restarts: 3\n"
            "script: train.py\n"
            "args:\n"
            "  - --epochs\n"
            "  - 5\n");
  EXPECT_EQ(RenderJobFile(JobFile{}), "{}\n");
  ExpectSameJob(MustParse(RenderJobFile(JobFile{})), JobFile{});
}

// ---------------------------------------------------------------- configs/

std::vector<std::string> ConfigFiles() {
  std::vector<std::string> files;
  const std::string dir = std::string(DRUN_SOURCE_DIR) + "/configs";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".yaml") files.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Configs, EveryExampleLoadsAndRoundTrips) {
  std::vector<std::string> files = ConfigFiles();
  ASSERT_GE(files.size(), 4u);
  for (const std::string& f : files) {
    auto job = LoadJobFile(f);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_FALSE(job->script.empty()) << f;
    ExpectSameJob(MustParse(RenderJobFile(*job)), *job);
  }
}

JobFile LoadConfig(const std::string& name) {
  auto job = LoadJobFile(std::string(DRUN_SOURCE_DIR) + "/configs/" + name);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : JobFile{};
}

TEST(Configs, TheSeedsCases) {
  JobFile one = LoadConfig("one_lab_pc.yaml");
  EXPECT_EQ(one.options.at("nproc-per-node"), "4");
  EXPECT_EQ(one.options.at("standalone"), "1");
  EXPECT_THAT(one.options.at("node-setup"), HasSubstr("prepare_fashion_mnist.py"));
  EXPECT_EQ(one.script, "examples/mnist_ddp.py");

  JobFile ssh = LoadConfig("lab_pcs_ssh.yaml");
  ASSERT_GE(ssh.host_entries.size(), 3u);
  EXPECT_EQ(ssh.host_entries[0].host, "red01");
  EXPECT_EQ(ssh.host_entries[0].max_slots, 2);

  JobFile slurm = LoadConfig("slurm_allocation.yaml");
  EXPECT_EQ(slurm.options.at("launcher"), "slurm");

  JobFile elastic = LoadConfig("elastic_2_4.yaml");
  EXPECT_EQ(elastic.options.at("nnodes"), "2:4");
  EXPECT_FALSE(elastic.options.at("rdzv-endpoint").empty());
  EXPECT_GT(std::stoi(elastic.options.at("max-restarts")), 0);
}

}  // namespace
}  // namespace drun
