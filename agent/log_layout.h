// Where a job's log files go, with one owner (docs/semantics.md, "Logs in
// every mode"): every path drun writes a job's logs, error files or stack
// dumps to, and every decision about them, is made here; the modes only say
// which case they are (NameRun or ClaimRun) and pass the results on as data.
//
//   <log_dir>/<run>/[<host>[.N]/]attempt_<n>/<local_rank>/{stdout.log,stderr.log,error.json}
//   <log_dir>/<run>/[<host>[.N]/]attempt_<n>/{stacks_<unix ms>.txt,hang_stacks.txt}
//
// - <log_dir>: --log-dir; with -r/-t naming log files but no --log-dir, a
//   fresh private /tmp/drun_logs_XXXXXX, as torchrun (DefaultRoot, once per
//   job, where the job starts).
// - Which streams go to files: -r and -t's ranks; --log-dir alone keeps both
//   streams of every rank (ForRank).
// - <run>, the run directory, is "<run_id>_<6 letters or digits>" for every
//   run, the default run id "none" and a given one alike (torchrun's
//   <id>_<random>), so a rerun with the same run id and --log-dir never writes
//   into an earlier run's directory. It is named once for the whole job
//   (JobSpec.log_run_dir) by what starts the job: the ssh launcher claims it
//   on its own machine (ClaimRun, where every host's logs are collected),
//   --launcher slurm and the node that hosts the rendezvous name it
//   (NameRun), and the other nodes typed by hand take the
//   host's choice from their first Assignment (AwaitsRunName). A job that
//   names none (one node) claims a fresh one itself (Prepare). Whoever names
//   or claims it says where it is (RunDirLine), in every mode.
// - A job of several nodes adds the node's host, claimed with an exclusive
//   mkdir (ClaimChildDir: <host>, else <host>.1, ...), so nodes of one name
//   on a shared file system never write the same file.
// - Without --log-dir there are no log files; error files live flat in a
//   private temporary directory of the agent (/tmp/drun-XXXXXX/
//   error-<round>-<local_rank>.json), removed by RemoveTemporary.
// - At the end a launcher asks PlanCollection, for each node's report, whether
//   that node's directory is already here (same path, same inode: a shared file
//   system), is to be copied (into a directory claimed here), or stays there.
//
// Directories are made 0700 (kPrivateDirMode). Not thread-safe; each method
// does its file system work when called.
#ifndef DRUN_AGENT_LOG_LAYOUT_H_
#define DRUN_AGENT_LOG_LAYOUT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/output.h"
#include "drun/v1/job.pb.h"
#include "drun/v1/rendezvous.pb.h"

namespace drun {

class LogLayout {
 public:
  // -r/-t name log files but no --log-dir is given: makes a private
  // /tmp/drun_logs_XXXXXX and sets it as the job's --log-dir (torchrun's
  // rule), once, where the job starts. Returns the directory made, "" when
  // none was needed; on failure the one line to say.
  static absl::StatusOr<std::string> DefaultRoot(v1::JobSpec* spec);

  // Names the run directory for the whole job (JobSpec.log_run_dir), unless
  // the job keeps no logs or it is named already; the nodes make it
  // (--launcher slurm, the node that hosts the rendezvous).
  static void NameRun(v1::JobSpec* spec);
  // NameRun, and the run directory claimed here too, with an exclusive mkdir:
  // a launcher that collects every host's logs on its machine (ssh). On
  // failure the one line to say.
  static absl::Status ClaimRun(v1::JobSpec* spec);

  // <log_dir>/<run>, absolute; "" when the job keeps no logs or its run
  // directory is not named yet.
  static std::string RunDir(const v1::JobSpec& spec);

  // The line that names where a run's logs are: "logs in DIR/", and `detail`
  // in parentheses when given.
  static std::string RunDirLine(const std::string& dir, const std::string& detail);

  // A fresh run directory's name: "<run_id>_" and 6 random letters or digits.
  static std::string NewRunName(const std::string& run_id);

  // Claims a fresh run directory <root>/<run_id>_XXXXXX with an exclusive
  // mkdir (root made when missing), for a launcher that names it for the
  // whole job. Returns its name; on failure "PATH: reason" with the errno's
  // code.
  static absl::StatusOr<std::string> ClaimRunDir(const std::string& root, const std::string& run_id);

  // Claims <parent>/<name>, or <name>.1, ... when taken, with an exclusive
  // mkdir. Returns its path; on failure "PATH: reason" with the errno's code.
  static absl::StatusOr<std::string> ClaimChildDir(const std::string& parent, const std::string& name);

  // The layout of one node of `spec` whose host is `host`; `per_host`: the
  // job can span several nodes, so the host level is added. Touches nothing.
  LogLayout(const v1::JobSpec& spec, std::string host, bool per_host);
  LogLayout() = default;  // no job yet: no logs, no error files

  bool keeps_logs() const { return !root_.empty(); }  // --log-dir was given

  // Before the node joins, with --log-dir: makes it when missing, proves it
  // writable, and claims this node's directory unless its run directory's
  // name is still to come (AwaitsRunName). On failure the one line to say.
  absl::Status Prepare();

  // Without --log-dir: makes the private temporary directory of the error
  // files. On failure (error files are then not kept) the one line to say.
  absl::Status MakeTemporary();

  // The job can span several nodes and no one has named its run directory
  // yet: the first Assignment's spec names it (Claim then).
  bool AwaitsRunName() const;

  // Claims this node's directory: the run directory `run_name` (made when
  // missing, shared by the job's nodes; "": a fresh one claimed here), and in
  // it, per host, <host>[.N]. On failure the one line to say.
  absl::Status Claim(const std::string& run_name);

  bool claimed() const { return !node_dir_.empty(); }
  // This node's directory of the run (absolute) and its inode, once claimed.
  const std::string& node_dir() const { return node_dir_; }
  uint64_t node_dir_inode() const { return node_dir_inode_; }

  // <node_dir>/attempt_<round>; "" until claimed.
  std::string AttemptDir(int round) const;

  // One worker's files in round `round`: under a claimed node directory its
  // attempt directory (made here; a failure shows when a file is opened), the
  // log file of each stream kept (-r and -t for this local rank; both with
  // --log-dir alone; "" for a stream not kept) and the error file; else only
  // the error file in the temporary directory; else nothing (every path empty).
  struct RankFiles {
    std::string stdout_log;
    std::string stderr_log;
    std::string error_file;
  };
  RankFiles ForRank(int round, int local_rank) const;

  // Where a stack dump of round `round` is kept: <attempt dir>/hang_stacks.txt
  // for a --hang-timeout dump, else stacks_<unix_ms>.txt; "" until claimed
  // (without --log-dir a dump is not kept as a file).
  std::string StacksFile(int round, bool hang, int64_t unix_ms) const;

  const std::string& Temporary() const { return tmp_dir_; }
  // Removes the temporary directory of the error files, if any.
  void RemoveTemporary();

  // What a launcher does with a node's logs at the end of the job, collecting
  // them under `run_dir` (<log_dir>/<run> on its machine).
  struct Collection {
    enum class Kind {
      kNoLogs,  // the node kept none
      kHere,    // its directory is this very one here: nothing to copy
      kCopy,    // to be copied into `dir`, claimed here
      kStays,   // it stays on its node, `why`
    };
    Kind kind = Kind::kNoLogs;
    std::string dir;  // kHere: the node's directory; kCopy: the claimed copy
    std::string why;  // kStays
  };
  // `cannot_copy`: why this launcher cannot read that node's files ("" when it can).
  static Collection PlanCollection(const v1::NodeReport& node, const std::string& run_dir,
                                   const std::string& cannot_copy);

 private:
  absl::Status Refuse(const absl::Status& st) const;  // "cannot keep logs in --log-dir ..."

  std::string given_;    // --log-dir as given, for messages
  std::string root_;     // --log-dir, absolute; "" without
  std::string run_id_;
  std::string run_name_;  // JobSpec.log_run_dir as the job started
  std::string host_;
  bool per_host_ = false;
  // The streams kept in files: -r and -t's, or both with --log-dir alone.
  StdSpec redirects_;
  StdSpec tee_;
  bool keep_both_ = false;

  std::string node_dir_;
  uint64_t node_dir_inode_ = 0;
  std::string tmp_dir_;
};

}  // namespace drun

#endif  // DRUN_AGENT_LOG_LAYOUT_H_
