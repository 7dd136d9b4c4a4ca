#include "rendezvous/store/c10d_store_state.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace drun {
namespace c10d_store {
namespace {

// Integers go out in host byte order, as torch's servers send them (spec §1).
void PutU64(std::string* s, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  s->append(b, 8);
}

void PutBytes(std::string* s, absl::string_view v) {
  PutU64(s, v.size());
  s->append(v.data(), v.size());
}

std::string I64Reply(int64_t v) {
  std::string s;
  PutU64(&s, static_cast<uint64_t>(v));
  return s;
}

std::string U64Bytes(uint64_t v) {
  std::string s;
  PutU64(&s, v);
  return s;
}

// a + b, wrapping around on overflow instead of torch's undefined behaviour.
int64_t WrappingAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

std::string ByteReply(uint8_t b) { return std::string(1, static_cast<char>(b)); }

// std::stoll's reading of a stored value (what torch's ADD does): optional leading
// whitespace and sign, at least one decimal digit, anything after the digits ignored.
// Fails when there is no digit or the number does not fit in int64.
bool ParseLikeStoll(absl::string_view s, int64_t* out) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))) ++i;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    negative = s[i] == '-';
    ++i;
  }
  const uint64_t limit = negative ? (uint64_t{1} << 63) : (uint64_t{1} << 63) - 1;
  uint64_t magnitude = 0;
  const size_t first_digit = i;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (magnitude > (limit - d) / 10) return false;
    magnitude = magnitude * 10 + d;
  }
  if (i == first_digit) return false;
  *out = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

template <typename V>
void EraseValue(std::vector<V>* v, const V& x) {
  auto it = std::find(v->begin(), v->end(), x);
  if (it != v->end()) v->erase(it);
}

}  // namespace

size_t C10dStoreState::num_watches() const {
  size_t n = 0;
  for (const auto& [key, conns] : watchers_) n += conns.size();
  return n;
}

std::optional<std::string> C10dStoreState::Get(absl::string_view key) const {
  auto it = data_.find(key);
  if (it == data_.end()) return std::nullopt;
  return it->second;
}

size_t C10dStoreState::queue_len(absl::string_view key) const {
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : it->second.size();
}

bool C10dStoreState::Present(const std::string& key) const {
  if (data_.contains(key)) return true;
  // As in torch's libuv server, a non-empty queue satisfies CHECK and WAIT (blocking pop).
  auto q = queues_.find(key);
  return q != queues_.end() && !q->second.empty();
}

absl::Status C10dStoreState::OnCompareSet(ConnId conn, Request& req, ReplySink& sink) {
  std::string& key = req.keys[0];
  std::string& expected = req.values[0];
  std::string& desired = req.values[1];
  auto it = data_.find(key);
  if (it == data_.end()) {
    if (expected.empty()) {
      std::string reply;
      PutBytes(&reply, desired);
      Store(key, std::move(desired), kWatchKeyUpdated, sink);
      sink.Send(conn, reply);
    } else {
      // torch's servers reply `expected` here ("lying to the caller").
      std::string reply;
      PutBytes(&reply, expected);
      sink.Send(conn, reply);
    }
  } else {
    if (it->second == expected) {
      std::string reply;
      PutBytes(&reply, desired);
      Store(key, std::move(desired), kWatchKeyUpdated, sink);
      sink.Send(conn, reply);
    } else {
      std::string reply;
      PutBytes(&reply, it->second);
      sink.Send(conn, reply);
    }
  }
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnGet(ConnId conn, Dialect dialect, Request& req,
                                   ReplySink& sink) {
  auto it = data_.find(req.keys[0]);
  if (it == data_.end()) {
    // torch 1.13 and the legacy 2.x server throw and drop the connection here; the libuv
    // server, the 2.x default, answers an empty value.
    if (dialect == Dialect::kV113)
      return absl::NotFoundError(absl::StrCat("GET of a missing key (", req.keys[0].size(),
                                              " bytes)"));
    sink.Send(conn, U64Bytes(0));
    return absl::OkStatus();
  }
  std::string reply;
  reply.reserve(8 + it->second.size());
  PutBytes(&reply, it->second);
  sink.Send(conn, reply);
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnAdd(ConnId conn, Request& req, ReplySink& sink) {
  const std::string& key = req.keys[0];
  int64_t value = 0;
  auto it = data_.find(key);
  if (it != data_.end()) {
    if (!ParseLikeStoll(it->second, &value))
      return absl::InvalidArgumentError("ADD on a value that is not a decimal integer");
  }
  value = WrappingAdd(value, req.delta);
  Store(key, absl::StrCat(value), kWatchKeyUpdated, sink);
  sink.Send(conn, I64Reply(value));
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnCheck(ConnId conn, Request& req, ReplySink& sink) {
  bool all = true;
  for (const std::string& k : req.keys) {
    if (!Present(k)) {
      all = false;
      break;
    }
  }
  sink.Send(conn, ByteReply(all ? kCheckReady : kCheckNotReady));
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnWait(ConnId conn, Request& req, ReplySink& sink) {
  std::vector<std::string> missing;
  for (std::string& k : req.keys) {
    if (!Present(k) && std::find(missing.begin(), missing.end(), k) == missing.end())
      missing.push_back(std::move(k));
  }
  if (missing.empty()) {
    sink.Send(conn, ByteReply(kStopWaiting));
    return absl::OkStatus();
  }
  Park(conn, std::move(missing));
  return absl::OkStatus();
}

void C10dStoreState::Park(ConnId conn, std::vector<std::string> keys) {
  const uint64_t id = next_waiter_id_++;
  for (const std::string& k : keys) waiting_[k].push_back(id);
  conn_waiters_[conn].push_back(id);
  waiters_.emplace(id, Waiter{conn, keys.size(), std::move(keys)});
}

absl::Status C10dStoreState::OnBarrier(ConnId conn, Request& req, ReplySink& sink) {
  const std::string& key = req.keys[0];
  int64_t arrived = 0;
  auto it = data_.find(key);
  if (it != data_.end() && !ParseLikeStoll(it->second, &arrived))
    return absl::InvalidArgumentError("BARRIER on a value that is not a decimal integer");
  const int64_t count = WrappingAdd(arrived, 1);
  if (count >= req.world_size) {
    // The last one in: the count is stored like SET does it, which releases every
    // connection parked on the key (the earlier arrivals), then this one is answered.
    Store(key, absl::StrCat(count), kWatchKeyUpdated, sink);
    sink.Send(conn, ByteReply(kStopWaiting));
    return absl::OkStatus();
  }
  // As torch's servers: an earlier arrival stores the count without waking anybody and
  // waits on the key until a write to it (the last arrival's) releases it.
  Write(key, absl::StrCat(count), kWatchKeyUpdated, sink);
  Park(conn, {key});
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnWatchKey(ConnId conn, Request& req, ReplySink& sink) {
  std::vector<ConnId>& conns = watchers_[req.keys[0]];
  // One registration per (connection, key): the 1.13 client keeps one callback per key.
  if (std::find(conns.begin(), conns.end(), conn) == conns.end()) {
    conns.push_back(conn);
    conn_watches_[conn].push_back(req.keys[0]);
  }
  sink.Send(conn, ByteReply(kWatchCallbackRegistered));
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnDeleteKey(ConnId conn, Request& req, ReplySink& sink) {
  auto it = data_.find(req.keys[0]);
  int64_t deleted = 0;
  if (it != data_.end()) {
    std::string old = std::move(it->second);
    data_.erase(it);
    deleted = 1;
    // Parked WAITs stay parked (spec: DELETE does not affect waiters).
    Notify(req.keys[0], kWatchKeyDeleted, old, "", sink);
  }
  sink.Send(conn, I64Reply(deleted));
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnAppend(ConnId conn, Request& req, ReplySink& sink) {
  const std::string& key = req.keys[0];
  auto it = data_.find(key);
  std::string value;
  if (it != data_.end()) {
    value.reserve(it->second.size() + req.values[0].size());
    value = it->second;
    value += req.values[0];
  } else {
    value = std::move(req.values[0]);
  }
  Store(key, std::move(value), kWatchKeyAppended, sink);
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnMultiGet(ConnId conn, Dialect dialect, Request& req,
                                        ReplySink& sink) {
  size_t total = 0;
  for (const std::string& k : req.keys) {
    auto it = data_.find(k);
    // Like GET: the legacy server drops the connection, libuv answers an empty value.
    if (it == data_.end()) {
      if (dialect == Dialect::kV113) return absl::NotFoundError("MULTI_GET of a missing key");
      total += 8;
    } else {
      total += 8 + it->second.size();
    }
  }
  std::string reply;
  reply.reserve(total);
  for (const std::string& k : req.keys) {
    auto it = data_.find(k);
    PutBytes(&reply, it == data_.end() ? absl::string_view() : absl::string_view(it->second));
  }
  sink.Send(conn, reply);
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnPing(ConnId conn, Request& req, ReplySink& sink) {
  char b[4];
  std::memcpy(b, &req.nonce, 4);
  sink.Send(conn, absl::string_view(b, 4));
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnQueuePush(ConnId conn, Request& req, ReplySink& sink) {
  const std::string& key = req.keys[0];
  queues_[key].push_back(std::move(req.values[0]));
  WakeOne(key, sink);
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnQueuePop(ConnId conn, Request& req, ReplySink& sink) {
  auto it = queues_.find(req.keys[0]);
  std::string reply;
  if (it == queues_.end() || it->second.empty()) {
    PutU64(&reply, 0);
  } else {
    PutU64(&reply, it->second.size());
    PutBytes(&reply, it->second.front());
    it->second.pop_front();
    if (it->second.empty()) queues_.erase(it);
  }
  sink.Send(conn, reply);
  return absl::OkStatus();
}

absl::Status C10dStoreState::OnListKeys(ConnId conn, Request& req, ReplySink& sink) {
  std::string reply;
  PutU64(&reply, data_.size());
  for (const auto& [key, value] : data_) PutBytes(&reply, key);
  sink.Send(conn, reply);
  return absl::OkStatus();
}

absl::Status C10dStoreState::Apply(ConnId conn, Dialect dialect, Request&& req,
                                   ReplySink& sink) {
  if (dialect == Dialect::kV113 && !conn_waiters_.empty() && conn_waiters_.contains(conn))
    CancelWaits(conn);

  switch (req.op) {
    case Op::kValidate:
      return absl::OkStatus();

    case Op::kSet:
      Store(req.keys[0], std::move(req.values[0]), kWatchKeyUpdated, sink);
      return absl::OkStatus();

    case Op::kCompareSet:
      return OnCompareSet(conn, req, sink);

    case Op::kGet:
      return OnGet(conn, dialect, req, sink);

    case Op::kAdd:
      return OnAdd(conn, req, sink);

    case Op::kCheck:
      return OnCheck(conn, req, sink);

    case Op::kWait:
      return OnWait(conn, req, sink);

    case Op::kGetNumKeys:
      sink.Send(conn, I64Reply(static_cast<int64_t>(data_.size())));
      return absl::OkStatus();

    case Op::kWatchKey:
      return OnWatchKey(conn, req, sink);

    case Op::kDeleteKey:
      return OnDeleteKey(conn, req, sink);

    case Op::kAppend:
      return OnAppend(conn, req, sink);

    case Op::kMultiGet:
      return OnMultiGet(conn, dialect, req, sink);

    case Op::kMultiSet:
      for (size_t i = 0; i < req.keys.size(); ++i)
        Store(req.keys[i], std::move(req.values[i]), kWatchKeyUpdated, sink);
      return absl::OkStatus();

    case Op::kCancelWait:
      CancelWaits(conn);
      sink.Send(conn, ByteReply(kWaitCanceled));
      return absl::OkStatus();

    case Op::kPing:
      return OnPing(conn, req, sink);

    case Op::kQueuePush:
      return OnQueuePush(conn, req, sink);

    case Op::kQueuePop:
      return OnQueuePop(conn, req, sink);

    case Op::kQueueLen:
      sink.Send(conn, I64Reply(static_cast<int64_t>(queue_len(req.keys[0]))));
      return absl::OkStatus();

    case Op::kListKeys:
      return OnListKeys(conn, req, sink);

    case Op::kBarrier:
      return OnBarrier(conn, req, sink);
  }
  return absl::InternalError("unhandled store request");
}

void C10dStoreState::Store(const std::string& key, std::string value, uint8_t event,
                           ReplySink& sink) {
  Write(key, std::move(value), event, sink);
  WakeAll(key, sink);
}

void C10dStoreState::Write(const std::string& key, std::string value, uint8_t event,
                           ReplySink& sink) {
  auto [it, created] = data_.try_emplace(key);
  if (watchers_.empty()) {
    it->second = std::move(value);
  } else {
    std::string old = std::move(it->second);
    it->second = std::move(value);
    Notify(key, created ? kWatchKeyCreated : event, old, it->second, sink);
  }
}

void C10dStoreState::Notify(const std::string& key, uint8_t type, absl::string_view old_value,
                            absl::string_view new_value, ReplySink& sink) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) return;
  // u8 type, key, old value, new value (spec §4 WATCH_KEY).
  std::string event(1, static_cast<char>(type));
  PutBytes(&event, key);
  PutBytes(&event, old_value);
  PutBytes(&event, new_value);
  for (ConnId c : it->second) sink.Send(c, event);
}

void C10dStoreState::WakeAll(const std::string& key, ReplySink& sink) {
  if (waiting_.empty()) return;
  auto node = waiting_.extract(key);
  if (node.empty()) return;
  for (uint64_t id : node.mapped()) Satisfy(id, sink);
}

void C10dStoreState::WakeOne(const std::string& key, ReplySink& sink) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  // Like torch's libuv server: walk the parked WAITs in arrival order until one completes,
  // so one pushed item releases at most one blocked pop.
  std::vector<uint64_t>& ids = it->second;
  size_t i = 0;
  bool woke = false;
  while (i < ids.size() && !woke) woke = Satisfy(ids[i++], sink);
  ids.erase(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(i));
  if (ids.empty()) waiting_.erase(it);
}

bool C10dStoreState::Satisfy(uint64_t waiter_id, ReplySink& sink) {
  auto it = waiters_.find(waiter_id);
  if (it == waiters_.end()) return false;
  if (--it->second.missing > 0) return false;
  const ConnId conn = it->second.conn;
  waiters_.erase(it);
  auto cw = conn_waiters_.find(conn);
  if (cw != conn_waiters_.end()) {
    EraseValue(&cw->second, waiter_id);
    if (cw->second.empty()) conn_waiters_.erase(cw);
  }
  sink.Send(conn, ByteReply(kStopWaiting));
  return true;
}

void C10dStoreState::CancelWaits(ConnId conn) {
  auto cw = conn_waiters_.find(conn);
  if (cw == conn_waiters_.end()) return;
  for (uint64_t id : cw->second) {
    auto w = waiters_.find(id);
    if (w == waiters_.end()) continue;
    for (const std::string& k : w->second.keys) {
      auto list = waiting_.find(k);
      if (list == waiting_.end()) continue;
      EraseValue(&list->second, id);
      if (list->second.empty()) waiting_.erase(list);
    }
    waiters_.erase(w);
  }
  conn_waiters_.erase(cw);
}

void C10dStoreState::Disconnect(ConnId conn) {
  CancelWaits(conn);
  auto cw = conn_watches_.find(conn);
  if (cw == conn_watches_.end()) return;
  for (const std::string& k : cw->second) {
    auto list = watchers_.find(k);
    if (list == watchers_.end()) continue;
    EraseValue(&list->second, conn);
    if (list->second.empty()) watchers_.erase(list);
  }
  conn_watches_.erase(cw);
}

}  // namespace c10d_store
}  // namespace drun
