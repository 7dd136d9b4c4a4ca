// libFuzzer target for the job description (launcher/job/): ParseCommandLine over a
// command line, a few environment variables and a YAML job file, all from the input.
//
// Input layout: three sections separated by the byte 0x01:
//   argv   NUL-separated arguments (after argv[0])
//   env    NUL-separated NAME=VALUE pairs (the environment drun would see)
//   yaml   a job file's text; when present it is written to job.yaml in the working
//          directory and "--config job.yaml" is put in front of argv
//
// The run is sealed off: the process enters a fresh network namespace (a --master-addr is
// resolved with getaddrinfo; no query may leave the machine), works in a private temporary
// directory holding job.yaml, env.txt and hosts, and '/' in any input becomes '_', so a
// file option can only name a file of that directory (never /dev/zero or a FIFO).
//
// Checks on every input: no crash or sanitizer report; an error is a non-empty message
// with a status code; an accepted job is consistent with the mode it was given (the
// contract in launcher/job/cli.h); --print-config's YAML loads back.
//
//   job_fuzz -dict=$S/tests/fuzz/job.dict -artifact_prefix=$S/build-fuzz/fuzz/
//       $S/build-fuzz/fuzz/job_corpus $S/tests/fuzz/job_corpus
// with absolute paths ($S the source tree): the fuzzer works in its own directory
// (docs/config.md, "Tests and fuzzing").
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_split.h"
#include "launcher/job/cli.h"
#include "launcher/job/config_file.h"

namespace {

void Check(bool ok, const char* what, std::string_view input) {
  if (ok) return;
  std::fprintf(stderr, "invariant broken: %s\ninput (%zu bytes)\n", what, input.size());
  std::abort();
}

std::string Sealed(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '/') c = '_';
  }
  return out;
}

std::vector<std::string> SplitNul(std::string_view s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  for (absl::string_view part : absl::StrSplit(absl::string_view(s.data(), s.size()), '\0')) {
    out.push_back(Sealed(std::string_view(part.data(), part.size())));
  }
  return out;
}

void WriteFile(const char* name, const std::string& text) {
  std::ofstream out(name, std::ios::binary | std::ios::trunc);
  out << text;
}

void CheckAccepted(const drun::CommandLine& cl, std::string_view in) {
  if (cl.help || cl.version) return;
  const drun::v1::JobSpec& s = cl.spec;
  Check(s.min_nodes() >= 1 && s.min_nodes() <= s.max_nodes(), "1 <= min_nodes <= max_nodes", in);
  Check(!s.nproc_per_node().empty(), "nproc_per_node is set", in);
  Check(!s.run_id().empty(), "run_id is set", in);
  if (!cl.print_config) Check(!s.entrypoint().empty(), "an accepted job has an entrypoint", in);
  if (cl.standalone) {
    Check(cl.mode == drun::JobMode::kSingleNode, "--standalone is a single node", in);
    Check(s.max_nodes() == 1, "--standalone has one node", in);
  }
  switch (cl.mode) {
    case drun::JobMode::kStatic:
      Check(s.min_nodes() == s.max_nodes(), "static: fixed size", in);
      Check(s.node_rank() < s.max_nodes(), "static: node rank in range", in);
      Check(!s.rdzv_endpoint().empty(), "static: endpoint derived", in);
      break;
    case drun::JobMode::kC10d:
      Check(!s.rdzv_endpoint().empty(), "c10d: endpoint given", in);
      break;
    case drun::JobMode::kSsh:
      Check(!cl.hostfile.empty() || !cl.hosts.empty(), "ssh: hosts given", in);
      break;
    default:
      break;
  }
  for (const auto& [name, origin] : cl.origins) {
    Check(!cl.Describe(name).empty(), "Describe names every origin", in);
  }
  if (cl.print_config) {
    const std::string yaml = drun::RenderJobFile(cl.resolved);
    auto back = drun::ParseJobFile(yaml, "resolved");
    Check(back.ok(), "--print-config output loads back", in);
  }
}

char g_dir[] = "/tmp/job_fuzz.XXXXXX";

// The private directory goes when the fuzzer exits normally (a crash keeps it, with the
// job.yaml of the failing input).
void RemoveDir() {
  for (const char* f : {"job.yaml", "env.txt", "hosts", "train.py"}) unlink(f);
  rmdir(g_dir);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // No name lookup may reach a real DNS server: a network namespace of our own has only
  // a loopback device that is down. Root may do it directly, others through a user
  // namespace.
  if (unshare(CLONE_NEWNET) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) {
    std::perror("job_fuzz: unshare(CLONE_NEWNET) (needs root or user namespaces)");
    std::abort();
  }
  if (!mkdtemp(g_dir) || chdir(g_dir) != 0) {
    std::perror("job_fuzz: temporary directory");
    std::abort();
  }
  WriteFile("env.txt", "FOO=1\nexport BAR='two words'\n# comment\nBAZ\n");
  WriteFile("hosts", "node1 slots=2\nnode2 slots=2 max_slots=4\n");
  WriteFile("train.py", "print('hello')\n");
  std::atexit(RemoveDir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> sections;
  for (absl::string_view part : absl::StrSplit(absl::string_view(in.data(), in.size()), '\x01')) {
    sections.emplace_back(part.data(), part.size());
  }
  std::vector<std::string> args = SplitNul(sections[0]);
  std::map<std::string, std::string> env;
  if (sections.size() > 1) {
    for (const std::string& kv : SplitNul(sections[1])) {
      const size_t eq = kv.find('=');
      if (eq != std::string::npos && eq > 0) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  if (sections.size() > 2) {
    WriteFile("job.yaml", Sealed(sections[2]));
    args.insert(args.begin(), {"--config", "job.yaml"});
  }
  const absl::StatusOr<drun::CommandLine> cl = drun::ParseCommandLine(args, env);
  if (!cl.ok()) {
    Check(!cl.status().message().empty(), "an error has a message", in);
    return 0;
  }
  CheckAccepted(*cl, in);
  return 0;
}
