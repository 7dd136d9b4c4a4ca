// Incremental parser for the PyTorch c10d TCPStore wire protocol (client -> server).
//
// The protocol has no framing: each request is an opcode byte followed by fields whose
// lengths are only known while reading them (spec: docs/c10d_store_protocol.md).
// C10dStoreParser is a pure byte-stream state machine for ONE connection: feed it the bytes
// in whatever chunks recv() returned, and it yields each complete request exactly once, in
// order, no matter where the chunk boundaries fall. It does no I/O and allocates only for
// the keys and values it returns, as their bytes arrive (a length field alone costs nothing).
//
// Dialect: decided from the connection's first bytes. Exactly `00 CE F7 85 3C` (VALIDATE with
// the magic 0x3C85F7CE) selects the 2.x numbering (spec column D); anything else selects the
// 1.13 numbering (column A). The decision waits only while the bytes seen so far are a
// prefix of that magic, so a 1.13 client that sends its opcode in a separate send() is fine.
//
// Errors are sticky: after Feed() returns an error the connection must be closed; further
// Feed() calls return the same error. Requests completed before the bad bytes are still
// returned in `out`, so the caller can answer them first.
#ifndef DRUN_RENDEZVOUS_STORE_C10D_STORE_PARSER_H_
#define DRUN_RENDEZVOUS_STORE_C10D_STORE_PARSER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace drun {
namespace c10d_store {

// Which opcode numbering a connection speaks.
enum class Dialect : uint8_t {
  kUndecided,  // fewer bytes than needed to tell
  kV113,       // torch 1.x (column A): no handshake, WATCH_KEY exists
  kV2,         // torch 2.x validated protocol (column D): VALIDATE, PING, queues
};

// Request kinds, independent of the numbering on the wire.
enum class Op : uint8_t {
  kValidate,    // 2.x only, first message only; carries no reply
  kSet,         // keys[0], values[0]
  kCompareSet,  // keys[0], values[0] = expected, values[1] = desired
  kGet,         // keys[0]
  kAdd,         // keys[0], delta
  kCheck,       // keys
  kWait,        // keys
  kGetNumKeys,  //
  kWatchKey,    // 1.13 only: keys[0]
  kDeleteKey,   // keys[0]
  kAppend,      // 2.x: keys[0], values[0]
  kMultiGet,    // 2.x: keys
  kMultiSet,    // 2.x: keys[i] = values[i]
  kCancelWait,  // 2.x
  kPing,        // 2.x: u32 nonce in `nonce`
  kQueuePush,   // 2.x: keys[0], values[0]
  kQueuePop,    // 2.x: keys[0]
  kQueueLen,    // 2.x: keys[0]
  kListKeys,    // 2.x opcode 17 (torch main since Nov 2025, first named LIST)
  kBarrier,     // 2.x opcode 18 (main since Feb 2026): keys[0], world_size
};

// Human-readable name, for logs and test output.
const char* OpName(Op op);

// One decoded request. Keys and values are raw bytes (std::string may hold NULs).
struct Request {
  Op op = Op::kGetNumKeys;
  std::vector<std::string> keys;
  std::vector<std::string> values;
  int64_t delta = 0;       // ADD
  int64_t world_size = 0;  // BARRIER
  uint32_t nonce = 0;      // PING (echoed back), VALIDATE (the magic)

  bool operator==(const Request& o) const {
    return op == o.op && keys == o.keys && values == o.values && delta == o.delta &&
           world_size == o.world_size && nonce == o.nonce;
  }
};

// Bounds past which a connection is considered hostile or broken. Keys and key counts follow
// torch's libuv server (the default since 2.4: keys <= 8 KiB, <= 128 Ki keys per request), so
// every client that works against it fits. Values follow the legacy and 1.13 servers, which
// take any size their memory holds: a server sizes the value bounds to its machine with
// LimitsForMemory(); the defaults here are that function's floor.
struct ParserLimits {
  uint64_t max_key_bytes = 8 * 1024;
  uint64_t max_value_bytes = 256ull * 1024 * 1024;
  uint64_t max_key_count = 128 * 1024;
  // Sum of all key and value bytes of one request (MULTI_SET could otherwise claim
  // 128 Ki values of the largest size each).
  uint64_t max_request_bytes = 256ull * 1024 * 1024;
};

// The limits for a machine with `physical_memory_bytes` of RAM: one request (and so any one
// value) may hold a quarter of it, but never less than the ParserLimits defaults.
ParserLimits LimitsForMemory(uint64_t physical_memory_bytes);

// Wire opcode numbers (u8) of each dialect, for encoders in tests and tools.
// Returns -1 when the dialect has no such operation.
int WireOpcode(Dialect dialect, Op op);

// The 2.x handshake: VALIDATE opcode 0 + u32 0x3C85F7CE in little-endian byte order.
inline constexpr uint32_t kValidateMagic = 0x3C85F7CEu;
inline constexpr std::array<uint8_t, 5> kValidatePrefix = {0x00, 0xCE, 0xF7, 0x85, 0x3C};

class C10dStoreParser {
 public:
  explicit C10dStoreParser(ParserLimits limits = {});

  // Consumes all of `data`, appending every request it completes to `*out`. Returns an
  // error (and stays in error) on an unknown opcode, a VALIDATE after the first message, or
  // a length or count past the limits.
  absl::Status Feed(absl::string_view data, std::vector<Request>* out);

  Dialect dialect() const { return dialect_; }
  // True when no request is partially read (a clean point to close the stream).
  bool idle() const {
    return (phase_ == Phase::kOpcode || phase_ == Phase::kDetect) && prefix_len_ == 0;
  }
  // Bytes fed so far; used to reject a VALIDATE that is not the first message.
  uint64_t bytes_consumed() const { return consumed_; }

 private:
  enum class Phase : uint8_t { kDetect, kOpcode, kFixed, kStringBody, kError };
  // What the next field of the current request is.
  enum class Field : uint8_t {
    kNone, kKey, kValue, kI64, kWorldSize, kU32, kCount, kPairCount
  };

  absl::Status FeedDecided(const char* p, size_t n, std::vector<Request>* out);
  absl::Status OnOpcode(uint8_t byte, std::vector<Request>* out);
  absl::Status OnFixed(std::vector<Request>* out);
  absl::Status OnStringDone(std::vector<Request>* out);
  // Moves to the next field of the current request, or emits it when complete.
  absl::Status Advance(std::vector<Request>* out);
  absl::Status StartFixed(size_t n);
  absl::Status Fail(absl::Status status);
  void Emit(std::vector<Request>* out);

  ParserLimits limits_;
  Dialect dialect_ = Dialect::kUndecided;
  Phase phase_ = Phase::kDetect;
  absl::Status error_;

  // Detection: the first bytes, held while they still match the VALIDATE prefix.
  std::array<uint8_t, 5> prefix_{};
  uint8_t prefix_len_ = 0;

  // Current request.
  Request req_;
  const Field* plan_ = nullptr;  // fields read once, in order; kNone-terminated
  const Field* group_ = nullptr; // fields repeated `count_` times after the plan
  uint8_t plan_pos_ = 0;
  uint8_t group_pos_ = 0;
  uint64_t count_ = 0;           // repetitions of group_ still to read (incl. current)
  Field field_ = Field::kNone;   // field being read
  bool reading_len_ = false;     // kKey/kValue: the u64 length is being read
  uint64_t request_bytes_ = 0;

  // Fixed-width field assembly.
  std::array<uint8_t, 8> fixed_{};
  uint8_t fixed_need_ = 0;
  uint8_t fixed_have_ = 0;

  // String body assembly.
  std::string* str_ = nullptr;
  uint64_t str_left_ = 0;

  uint64_t consumed_ = 0;
  uint64_t requests_ = 0;  // requests emitted so far (VALIDATE included)
};

}  // namespace c10d_store
}  // namespace drun

#endif  // DRUN_RENDEZVOUS_STORE_C10D_STORE_PARSER_H_
