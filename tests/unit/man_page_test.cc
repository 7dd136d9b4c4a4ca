#include "launcher/job/man_page.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/job/cli.h"

namespace drun {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Runs a shell command; returns its exit status and standard output.
std::pair<int, std::string> RunShell(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, out};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

bool Have(const std::string& tool) {
  return RunShell(absl::StrCat("command -v ", tool, " >/dev/null 2>&1")).first == 0;
}

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char tmpl[] = "/tmp/man_page_test.XXXXXX";
    int fd = mkstemp(tmpl);
    path_ = tmpl;
    close(fd);
    std::ofstream(path_) << text;
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ManPage, HasTheSections) {
  const std::string m = ManPage();
  EXPECT_EQ(m.find(".TH DRUN 1 "), m.find('\n') + 1);  // after the comment line
  for (const char* section : {"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "JOB FILES",
                              "ENVIRONMENT", "EXIT STATUS", "FILES", "EXAMPLES", "SEE ALSO"}) {
    EXPECT_THAT(m, HasSubstr(absl::StrCat("\n.SH ", section, "\n"))) << section;
  }
  for (const char* group :
       {"Job options", "Rendezvous options", "Output options", "SSH options", "Slurm options"}) {
    EXPECT_THAT(m, HasSubstr(absl::StrCat("\n.SS ", group, "\n"))) << group;
  }
  EXPECT_THAT(m, HasSubstr("\n.SH NAME\ndrun \\- "));
}

// Each option's stated default is its row's, and the page names the help topics.
TEST(ManPage, DefaultsAreTheRowsAndTopicsAreNamed) {
  const std::string m = ManPage();
  for (const OptionInfo& o : KnownOptions()) {
    if (o.default_value.empty()) continue;
    std::string value;
    for (char c : o.default_value) value += c == '-' ? std::string("\\-") : std::string(1, c);
    EXPECT_TRUE(absl::StrContains(m, absl::StrCat("(default ", o.default_value, ")")) ||
                absl::StrContains(m, absl::StrCat("(default ", value, ")")))
        << o.name;
  }
  for (const std::string& topic : HelpTopics()) EXPECT_THAT(m, HasSubstr(topic)) << topic;
  EXPECT_THAT(m, HasSubstr("\\fB\\-\\-help\\fR [\\fITOPIC\\fR]"));
  EXPECT_THAT(m, HasSubstr("bash-completion/completions/drun"));
}

// Every option, with its troff-escaped dashes, and every environment variable.
TEST(ManPage, ListsEveryOptionAndVariable) {
  const std::string m = ManPage();
  for (const OptionInfo& o : KnownOptions()) {
    std::string name;
    for (char c : o.name) name += c == '-' ? std::string("\\-") : std::string(1, c);
    if (o.name.size() == 1) {  // mpirun's -x: no long form to show
      EXPECT_THAT(m, HasSubstr(absl::StrCat("\n.TP\n\\fB\\-", name, "\\fR \\fI"))) << o.name;
      EXPECT_THAT(m, Not(HasSubstr(absl::StrCat("\\fB\\-\\-", name, "\\fR")))) << o.name;
      continue;
    }
    EXPECT_THAT(m, HasSubstr(absl::StrCat("\\fB\\-\\-", name, "\\fR"))) << o.name;
    if (o.short_name) {
      EXPECT_THAT(m, HasSubstr(absl::StrCat("\\fB\\-", std::string(1, o.short_name), "\\fR")));
    }
    if (!o.env.empty()) {
      EXPECT_THAT(m, HasSubstr(absl::StrCat("\n.TP\n\\fB", o.env, "\\fR\n"))) << o.env;
      EXPECT_THAT(m, HasSubstr(absl::StrCat("Environment: \\fB", o.env, "\\fR."))) << o.env;
    }
  }
  for (const char* var : {"PYTHON_EXEC", "DRUN_RDZV_TOKEN"}) {
    EXPECT_THAT(m, HasSubstr(absl::StrCat("\\fB", var, "\\fR"))) << var;
  }
}

// EXIT STATUS names every code drun itself returns (launcher/main_light.cc, main_net.cc,
// node.cc, agent/agent.cc): the ones drun exits with when it is signalled (128+N, 130 for
// Ctrl-C) and when drun-net is missing (127) included. Their behaviour is tested end to end
// (e2e.process_cleanup: 130 and 143; e2e.docs: 127, 2).
TEST(ManPage, ExitStatusNamesEveryCode) {
  const std::string m = ManPage();
  const size_t start = m.find("\n.SH EXIT STATUS\n");
  ASSERT_NE(start, std::string::npos);
  const size_t end = m.find("\n.SH ", start + 1);
  const std::string section = m.substr(start, end - start);
  for (const char* code : {"0", "1", "2", "127", "128+N"}) {
    EXPECT_THAT(section, HasSubstr(absl::StrCat("\n.TP\n\\fB", code, "\\fR\n"))) << code;
  }
  EXPECT_THAT(section, HasSubstr("\n.TP\n\\fIN\\fR\n"));  // a worker's own code
  for (const char* text : {"130 for SIGINT", "143 for SIGTERM", "--node-setup", "drun-net",
                           "../lib/drun/"}) {
    std::string escaped;
    for (char c : std::string(text)) escaped += c == '-' ? std::string("\\-") : std::string(1, c);
    EXPECT_TRUE(absl::StrContains(section, text) || absl::StrContains(section, escaped))
        << text << "\n" << section;
  }
}

// No line of running text may start with '.' or '\'' unless it is a request we wrote.
TEST(ManPage, TextLinesAreNotRequests) {
  for (absl::string_view line : absl::StrSplit(ManPage(), '\n')) {
    if (line.empty() || (line[0] != '.' && line[0] != '\'')) continue;
    const std::string request(line.substr(0, line.find(' ')));
    EXPECT_THAT((std::vector<std::string>{".\\\"", ".TH", ".nh", ".ad", ".SH", ".SS", ".TP", ".PP",
                                          ".RS", ".RE", ".nf", ".fi", ".B", ".br"}),
                ::testing::Contains(request))
        << line;
  }
}

// The build's drun.1 is what ManPage() says (the custom command ran the generator).
TEST(ManPage, BuildWroteDrun1) {
  std::ifstream f(DRUN_MAN_PAGE);
  ASSERT_TRUE(f.good()) << DRUN_MAN_PAGE;
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_EQ(text.str(), ManPage());
}

// Rendered by man(1) (or groff), without warnings, every option is there as typed.
TEST(ManPage, RendersWithEveryOption) {
  TempFile page(ManPage());
  std::string render;
  if (Have("man") && Have("col")) {
    render = absl::StrCat("MANWIDTH=100 MAN_KEEP_FORMATTING= man --warnings=w -l ", page.path(),
                          " 2>&1 | col -bx");
  } else if (Have("groff")) {
    render = absl::StrCat("groff -man -ww -Tutf8 -P-cbou ", page.path(), " 2>&1");
  } else {
    GTEST_SKIP() << "neither man nor groff is installed; the macro checks above still ran";
  }
  auto [status, text] = RunShell(render);
  ASSERT_EQ(status, 0) << text;
  // groff warnings look like "<file>:<line>: warning: ...".
  EXPECT_THAT(text, ::testing::Not(HasSubstr("warning"))) << text;
  EXPECT_THAT(text, HasSubstr("NAME"));
  EXPECT_THAT(text, HasSubstr("drun - launch and supervise distributed PyTorch jobs"));
  for (const OptionInfo& o : KnownOptions()) {
    if (o.name.size() == 1) {
      EXPECT_THAT(text, HasSubstr(absl::StrCat("-", o.name, " ", o.metavar))) << o.name;
      EXPECT_THAT(text, Not(HasSubstr(absl::StrCat("--", o.name, " ")))) << o.name;
      continue;
    }
    EXPECT_THAT(text, HasSubstr(absl::StrCat("--", o.name))) << o.name << "\n" << text;
    if (o.short_name) {
      EXPECT_THAT(text, HasSubstr(absl::StrCat("-", std::string(1, o.short_name), ", --", o.name)));
    }
  }
  EXPECT_THAT(text, HasSubstr("PET_NPROC_PER_NODE"));
  EXPECT_THAT(text, HasSubstr("drun --nnodes 2:4 --nproc-per-node 4 --max-restarts 3 \\"));
}

}  // namespace
}  // namespace drun
