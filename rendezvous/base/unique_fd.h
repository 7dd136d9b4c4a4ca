// UniqueFd owns one file descriptor and closes it when it goes away, so no
// error path can leak a descriptor and no destructor has to remember one.
// Move-only; -1 means "none". Not thread-safe (like the int it replaces).
#ifndef DRUN_RENDEZVOUS_BASE_UNIQUE_FD_H_
#define DRUN_RENDEZVOUS_BASE_UNIQUE_FD_H_

#include <fcntl.h>
#include <unistd.h>

#include <utility>

namespace drun {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  // Closes the descriptor held (if any) and takes `fd`.
  void reset(int fd = -1) {
    // close() is not retried on EINTR: on Linux the descriptor is gone either way.
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Gives the descriptor up without closing it (the caller owns it now).
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// A pipe whose two ends close themselves; false (errno set) when pipe2 fails.
inline bool MakePipe(UniqueFd* read_end, UniqueFd* write_end, int flags = O_CLOEXEC) {
  int fds[2];
  if (pipe2(fds, flags) != 0) return false;
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
  return true;
}

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_UNIQUE_FD_H_
