// Modes of what drun writes with a job's content (logs, error files, reports,
// stack dumps): directories 0700 and files 0600, so a worker's output, which
// may print a key, is the job owner's alone. The umask can only narrow them.
#ifndef DRUN_RENDEZVOUS_BASE_PRIVATE_FILES_H_
#define DRUN_RENDEZVOUS_BASE_PRIVATE_FILES_H_

#include <sys/types.h>

#include <string>

namespace drun {

inline constexpr mode_t kPrivateDirMode = 0700;
inline constexpr mode_t kPrivateFileMode = 0600;

// Creates `path` and every missing parent, each new one with kPrivateDirMode
// (existing ones are left as they are). 0, or the errno of the first failure.
int MakePrivateDirs(const std::string& path);

// A run's log directory under `root` (which must exist): `root/name` (made if
// missing), or with `unique`, a fresh `root/name_XXXXXX` (torchrun 2.x's
// directory per run, so a rerun never replaces a run's logs). Sets *path to
// the directory made, or to the one that failed; 0, or that errno.
int MakeRunDir(const std::string& root, const std::string& name, bool unique, std::string* path);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_PRIVATE_FILES_H_
