#include "agent/log_layout.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/std_streams.h"
#include "rendezvous/base/private_files.h"
#include "rendezvous/base/random.h"

namespace drun {

namespace {

// Names tried before a fresh run directory is given up (each taken name is a
// 1 in 62^6 chance, or a directory full of runs of that id).
constexpr int kRunNameTries = 100;

absl::Status DirError(const std::string& path, int err) {
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(path, ": ", strerror(err)));
}

// A name sent by another process (Assignment.spec): one path component.
bool IsPlainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

// The same directory, seen here: the path a node reported, with its inode.
bool SameDirHere(const std::string& dir, uint64_t inode) {
  struct stat st;
  return !dir.empty() && inode != 0 && stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
         static_cast<uint64_t>(st.st_ino) == inode;
}

// --log-dir, absolute and without a trailing '/'.
std::string AbsoluteRoot(const std::string& given) {
  std::error_code ec;
  std::string root = std::filesystem::absolute(given, ec).lexically_normal().string();
  if (ec || root.empty()) root = given;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

}  // namespace

absl::StatusOr<std::string> LogLayout::DefaultRoot(v1::JobSpec* spec) {
  const bool files = FromProto(spec->redirects()).NamesLogFiles() || FromProto(spec->tee()).NamesLogFiles();
  if (!files || !spec->log_dir().empty()) return std::string();
  absl::StatusOr<std::string> dir = MakeTempDir("drun_logs_");
  if (!dir.ok()) {
    return absl::Status(dir.status().code(),
                        absl::StrCat("cannot create a log directory: ", dir.status().message()));
  }
  spec->set_log_dir(*dir);
  return dir;
}

void LogLayout::NameRun(v1::JobSpec* spec) {
  if (spec->log_dir().empty() || !spec->log_run_dir().empty()) return;
  spec->set_log_run_dir(NewRunName(spec->run_id()));
}

absl::Status LogLayout::ClaimRun(v1::JobSpec* spec) {
  if (spec->log_dir().empty() || !spec->log_run_dir().empty()) return absl::OkStatus();
  absl::StatusOr<std::string> name = ClaimRunDir(spec->log_dir(), spec->run_id());
  if (!name.ok()) {
    return absl::Status(name.status().code(),
                        absl::StrCat("cannot keep logs in --log-dir ", spec->log_dir(),
                                     " on this machine, where drun collects every host's logs: ",
                                     name.status().message(), "; give a directory you can write here"));
  }
  spec->set_log_run_dir(*name);
  return absl::OkStatus();
}

std::string LogLayout::RunDir(const v1::JobSpec& spec) {
  if (spec.log_dir().empty() || spec.log_run_dir().empty()) return "";
  return absl::StrCat(AbsoluteRoot(spec.log_dir()), "/", spec.log_run_dir());
}

std::string LogLayout::RunDirLine(const std::string& dir, const std::string& detail) {
  return absl::StrCat("logs in ", dir, "/", detail.empty() ? "" : absl::StrCat(" (", detail, ")"));
}

std::string LogLayout::NewRunName(const std::string& run_id) {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const std::string hex = RandomHex(6);
  std::string name = absl::StrCat(run_id, "_");
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    name.push_back(kChars[std::stoi(hex.substr(i, 2), nullptr, 16) % (sizeof kChars - 1)]);
  }
  return name;
}

absl::StatusOr<std::string> LogLayout::ClaimRunDir(const std::string& root, const std::string& run_id) {
  if (int err = MakePrivateDirs(root); err != 0) return DirError(root, err);
  std::string path;
  for (int i = 0; i < kRunNameTries; ++i) {
    const std::string name = NewRunName(run_id);
    path = absl::StrCat(root, "/", name);
    if (mkdir(path.c_str(), kPrivateDirMode) == 0) return name;
    if (errno != EEXIST) break;
  }
  return DirError(path, errno);
}

absl::StatusOr<std::string> LogLayout::ClaimChildDir(const std::string& parent, const std::string& name) {
  std::string dir = absl::StrCat(parent, "/", name);
  for (int i = 1; mkdir(dir.c_str(), kPrivateDirMode) != 0; ++i) {
    if (errno != EEXIST) return DirError(dir, errno);
    dir = absl::StrCat(parent, "/", name, ".", i);
  }
  return dir;
}

LogLayout::LogLayout(const v1::JobSpec& spec, std::string host, bool per_host)
    : given_(spec.log_dir()),
      run_id_(spec.run_id()),
      run_name_(spec.log_run_dir()),
      host_(std::move(host)),
      per_host_(per_host),
      redirects_(FromProto(spec.redirects())),
      tee_(FromProto(spec.tee())),
      keep_both_(!spec.has_redirects() && !spec.has_tee()) {
  if (!given_.empty()) root_ = AbsoluteRoot(given_);
}

absl::Status LogLayout::Refuse(const absl::Status& st) const {
  return absl::Status(st.code(), absl::StrCat("cannot keep logs in --log-dir ", given_, ": ", st.message(),
                                              "; give a directory you can write"));
}

absl::Status LogLayout::Prepare() {
  if (!keeps_logs()) return absl::OkStatus();
  if (int err = MakePrivateDirs(root_); err != 0) return Refuse(DirError(given_, err));
  if (access(root_.c_str(), W_OK | X_OK) != 0) return Refuse(DirError(given_, errno));
  if (AwaitsRunName()) return absl::OkStatus();
  return Claim(run_name_);
}

absl::Status LogLayout::MakeTemporary() {
  if (keeps_logs() || !tmp_dir_.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> dir = MakeTempDir("drun-");
  if (!dir.ok()) {
    return absl::Status(dir.status().code(),
                        absl::StrCat("no directory for the workers' error files (", dir.status().message(),
                                     "): root causes will show exit codes only"));
  }
  tmp_dir_ = *dir;
  return absl::OkStatus();
}

bool LogLayout::AwaitsRunName() const { return per_host_ && run_name_.empty(); }

absl::Status LogLayout::Claim(const std::string& run_name) {
  std::string run_dir;
  if (run_name.empty()) {
    absl::StatusOr<std::string> name = ClaimRunDir(root_, run_id_);
    if (!name.ok()) return Refuse(name.status());
    run_dir = absl::StrCat(root_, "/", *name);
  } else if (!IsPlainName(run_name)) {
    return Refuse(absl::InvalidArgumentError(
        absl::StrCat("the run directory's name '", run_name, "' is not one directory's name")));
  } else {
    run_dir = absl::StrCat(root_, "/", run_name);
    if (int err = MakePrivateDirs(run_dir); err != 0) return Refuse(DirError(run_dir, err));
  }
  std::string node = run_dir;
  if (per_host_) {
    // Nodes may share the file system (and a host name): each claims its own.
    absl::StatusOr<std::string> claimed = ClaimChildDir(run_dir, host_);
    if (!claimed.ok()) return Refuse(claimed.status());
    node = *claimed;
  }
  struct stat st;
  if (access(node.c_str(), W_OK | X_OK) != 0 || stat(node.c_str(), &st) != 0) {
    return Refuse(DirError(node, errno));
  }
  node_dir_ = node;
  node_dir_inode_ = static_cast<uint64_t>(st.st_ino);
  return absl::OkStatus();
}

std::string LogLayout::AttemptDir(int round) const {
  if (!claimed()) return "";
  return absl::StrCat(node_dir_, "/attempt_", round);
}

LogLayout::RankFiles LogLayout::ForRank(int round, int local_rank) const {
  RankFiles f;
  if (claimed()) {
    // torchrun's layout: attempt_<n>/<local_rank>/{error.json,stdout.log,stderr.log}.
    const std::string dir = absl::StrCat(AttemptDir(round), "/", local_rank);
    MakePrivateDirs(dir);  // a failure shows when a log file is opened
    const Streams kept = keep_both_ ? Streams::Both() : redirects_.ForRank(local_rank) | tee_.ForRank(local_rank);
    if (kept.out) f.stdout_log = dir + "/stdout.log";
    if (kept.err) f.stderr_log = dir + "/stderr.log";
    f.error_file = dir + "/error.json";
  } else if (!tmp_dir_.empty()) {
    // Flat, in a directory no one else sees: three directory levels per
    // worker cost a thousand agents real time.
    f.error_file = absl::StrCat(tmp_dir_, "/error-", round, "-", local_rank, ".json");
  }
  return f;
}

std::string LogLayout::StacksFile(int round, bool hang, int64_t unix_ms) const {
  if (!claimed()) return "";
  return absl::StrCat(AttemptDir(round), "/", hang ? std::string("hang_stacks.txt")
                                                   : absl::StrCat("stacks_", unix_ms, ".txt"));
}

void LogLayout::RemoveTemporary() {
  if (tmp_dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(tmp_dir_, ec);
  tmp_dir_.clear();
}

LogLayout::Collection LogLayout::PlanCollection(const v1::NodeReport& node, const std::string& run_dir,
                                                const std::string& cannot_copy) {
  Collection c;
  const std::string& dir = node.log_dir();
  if (dir.empty()) return c;
  if (SameDirHere(dir, node.log_dir_inode())) {
    c.kind = Collection::Kind::kHere;
    c.dir = dir;
    return c;
  }
  c.kind = Collection::Kind::kStays;
  if (!cannot_copy.empty()) {
    c.why = cannot_copy;
    return c;
  }
  // The copy keeps the node's own name (<host>[.N]), claimed again here.
  absl::StatusOr<std::string> copy = ClaimChildDir(run_dir, dir.substr(dir.rfind('/') + 1));
  if (!copy.ok()) {
    c.why = std::string(copy.status().message());
    return c;
  }
  c.kind = Collection::Kind::kCopy;
  c.dir = *copy;
  return c;
}

}  // namespace drun
