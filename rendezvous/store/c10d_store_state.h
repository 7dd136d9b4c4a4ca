// The state of a c10d TCPStore server, independent of sockets.
//
// C10dStoreState applies decoded requests (rendezvous/store/c10d_store_parser.h) to one shared
// key/value map and produces the bytes each connection must receive, through a ReplySink.
// It reproduces the servers of torch 1.13 and 2.x (spec §4-§5, docs/c10d_store_protocol.md):
// ADD stores ASCII decimal, COMPARE_SET "lies" when the key is absent, WAIT is answered late
// through per-wait counters, WATCH_KEY (1.13) gets events, 2.x queues live beside the map,
// BARRIER counts arrivals in its key and answers them all when the last one comes, and a GET
// of a missing key closes a 1.13 connection but gets an empty value on a 2.x one (as torch's
// libuv server, the 2.x default). It is single-threaded and deterministic; C10dStoreServer
// drives it from its event loop, tests drive it directly.
//
// Ordering contract: for one connection, the replies to its requests are sent in request
// order, each during the Apply() of its request, except WAIT and BARRIER, whose STOP_WAITING
// byte may be sent later during the Apply() of another connection's request that writes the
// last missing key (for BARRIER: the last arrival, or any other write of its key). Watch
// events are sent to the watching connection during the Apply() that changed the key.
#ifndef DRUN_RENDEZVOUS_STORE_C10D_STORE_STATE_H_
#define DRUN_RENDEZVOUS_STORE_C10D_STORE_STATE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "rendezvous/store/c10d_store_parser.h"

namespace drun {
namespace c10d_store {

// Identifies a client connection for the lifetime of a state object; never reused.
using ConnId = uint64_t;

// Receives the bytes the state wants written to a connection.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  virtual void Send(ConnId conn, absl::string_view bytes) = 0;
};

// Reply enums on the wire (spec §3).
inline constexpr uint8_t kCheckReady = 0;
inline constexpr uint8_t kCheckNotReady = 1;
inline constexpr uint8_t kStopWaiting = 0;
inline constexpr uint8_t kWaitCanceled = 1;
inline constexpr uint8_t kWatchKeyUpdated = 0;
inline constexpr uint8_t kWatchKeyCreated = 1;
inline constexpr uint8_t kWatchKeyDeleted = 2;
inline constexpr uint8_t kWatchCallbackRegistered = 3;
inline constexpr uint8_t kWatchKeyAppended = 4;

class C10dStoreState {
 public:
  C10dStoreState() = default;
  C10dStoreState(const C10dStoreState&) = delete;
  C10dStoreState& operator=(const C10dStoreState&) = delete;

  // Applies `req`, received on `conn`, which speaks `dialect`. Replies (and wake-ups or watch
  // events for other connections) go to `sink`. An error means the request cannot be served
  // the way torch's servers would (GET of a missing key, ADD on a non-number, ...): the
  // caller must close `conn` and call Disconnect(conn); nothing was changed and nothing was
  // sent for the failed request.
  //
  // On a 1.13 connection a new request while a WAIT of that connection is still parked
  // cancels the parked WAIT silently: 1.13 clients are strictly request/response, so that
  // only happens after the client gave up waiting (its timeout is purely client-side), and
  // a late STOP_WAITING would be misread as the reply to a later request.
  absl::Status Apply(ConnId conn, Dialect dialect, Request&& req, ReplySink& sink);

  // Forgets a closed connection: its parked WAITs and its watch registrations.
  void Disconnect(ConnId conn);

  // Observers for tests and stats.
  size_t num_keys() const { return data_.size(); }
  size_t num_parked_waits() const { return waiters_.size(); }
  size_t num_watches() const;
  std::optional<std::string> Get(absl::string_view key) const;
  size_t queue_len(absl::string_view key) const;

 private:
  // One handler per request with more than a line to it (Apply dispatches).
  absl::Status OnCompareSet(ConnId conn, Request& req, ReplySink& sink);
  absl::Status OnGet(ConnId conn, Dialect dialect, Request& req, ReplySink& sink);
  absl::Status OnAdd(ConnId conn, Request& req, ReplySink& sink);
  absl::Status OnCheck(ConnId conn, Request& req, ReplySink& sink);
  absl::Status OnWait(ConnId conn, Request& req, ReplySink& sink);
  absl::Status OnWatchKey(ConnId conn, Request& req, ReplySink& sink);
  absl::Status OnDeleteKey(ConnId conn, Request& req, ReplySink& sink);
  absl::Status OnAppend(ConnId conn, Request& req, ReplySink& sink);
  absl::Status OnMultiGet(ConnId conn, Dialect dialect, Request& req, ReplySink& sink);
  absl::Status OnPing(ConnId conn, Request& req, ReplySink& sink);
  absl::Status OnQueuePush(ConnId conn, Request& req, ReplySink& sink);
  absl::Status OnQueuePop(ConnId conn, Request& req, ReplySink& sink);
  absl::Status OnListKeys(ConnId conn, Request& req, ReplySink& sink);
  absl::Status OnBarrier(ConnId conn, Request& req, ReplySink& sink);
  struct Waiter {
    ConnId conn;
    size_t missing;                 // keys still to be written (BARRIER: 1, its key)
    std::vector<std::string> keys;  // the keys it was parked on (for cleanup)
  };

  // Writes `value` to `key` as SET/ADD/APPEND/COMPARE_SET do: stores it, wakes every WAIT
  // parked on the key, and sends watch events. `event` is the watch type to use when the key
  // existed before (UPDATED or APPENDED).
  void Store(const std::string& key, std::string value, uint8_t event, ReplySink& sink);
  // Store without the wake-ups (a BARRIER arrival that is not the last).
  void Write(const std::string& key, std::string value, uint8_t event, ReplySink& sink);
  // Parks a WAIT of `conn` until each of `keys` (distinct) has been written once.
  void Park(ConnId conn, std::vector<std::string> keys);
  void WakeAll(const std::string& key, ReplySink& sink);
  void WakeOne(const std::string& key, ReplySink& sink);
  // Decrements one waiter's count for a key that appeared; replies when it reaches zero.
  // Returns true when it replied.
  bool Satisfy(uint64_t waiter_id, ReplySink& sink);
  void CancelWaits(ConnId conn);
  void Notify(const std::string& key, uint8_t type, absl::string_view old_value,
              absl::string_view new_value, ReplySink& sink);
  bool Present(const std::string& key) const;

  absl::flat_hash_map<std::string, std::string> data_;
  absl::flat_hash_map<std::string, std::deque<std::string>> queues_;

  uint64_t next_waiter_id_ = 1;
  absl::flat_hash_map<uint64_t, Waiter> waiters_;
  absl::flat_hash_map<std::string, std::vector<uint64_t>> waiting_;  // key -> FIFO of ids
  absl::flat_hash_map<ConnId, std::vector<uint64_t>> conn_waiters_;

  absl::flat_hash_map<std::string, std::vector<ConnId>> watchers_;
  absl::flat_hash_map<ConnId, std::vector<std::string>> conn_watches_;
};

}  // namespace c10d_store
}  // namespace drun

#endif  // DRUN_RENDEZVOUS_STORE_C10D_STORE_STATE_H_
