// Test helpers: encode c10d store requests and replies the way torch's clients and servers
// put them on the wire (little-endian u64 lengths, see docs/c10d_store_protocol.md).
#ifndef DRUN_TESTS_UNIT_C10D_STORE_WIRE_H_
#define DRUN_TESTS_UNIT_C10D_STORE_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "rendezvous/store/c10d_store_parser.h"

namespace drun {
namespace c10d_store {
namespace wire {

inline std::string U64(uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(&s[0], &v, 8);
  return s;
}
inline std::string I64(int64_t v) { return U64(static_cast<uint64_t>(v)); }
inline std::string U32(uint32_t v) {
  std::string s(4, '\0');
  std::memcpy(&s[0], &v, 4);
  return s;
}
inline std::string Byte(uint8_t b) { return std::string(1, static_cast<char>(b)); }
// A string/bytes field: u64 length + raw bytes.
inline std::string Str(const std::string& v) { return U64(v.size()) + v; }

inline std::string Hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

// The bytes a client of `dialect` sends for `r` (VALIDATE encodes as the 2.x handshake).
inline std::string Encode(Dialect dialect, const Request& r) {
  if (r.op == Op::kValidate) return Byte(0) + U32(r.nonce);
  std::string s = Byte(static_cast<uint8_t>(WireOpcode(dialect, r.op)));
  switch (r.op) {
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      return s + Str(r.keys[0]) + Str(r.values[0]);
    case Op::kCompareSet:
      return s + Str(r.keys[0]) + Str(r.values[0]) + Str(r.values[1]);
    case Op::kGet:
    case Op::kWatchKey:
    case Op::kDeleteKey:
    case Op::kQueuePop:
    case Op::kQueueLen:
      return s + Str(r.keys[0]);
    case Op::kAdd:
      return s + Str(r.keys[0]) + I64(r.delta);
    case Op::kBarrier:
      return s + Str(r.keys[0]) + I64(r.world_size);
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      s += U64(r.keys.size());
      for (const auto& k : r.keys) s += Str(k);
      return s;
    case Op::kMultiSet:
      s += I64(static_cast<int64_t>(r.keys.size()));
      for (size_t i = 0; i < r.keys.size(); ++i) s += Str(r.keys[i]) + Str(r.values[i]);
      return s;
    case Op::kPing:
      return s + U32(r.nonce);
    case Op::kGetNumKeys:
    case Op::kCancelWait:
    case Op::kListKeys:
    case Op::kValidate:
      return s;
  }
  return s;
}

inline Request Req(Op op, std::vector<std::string> keys = {},
                   std::vector<std::string> values = {}, int64_t delta = 0,
                   uint32_t nonce = 0) {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.delta = delta;
  r.nonce = nonce;
  return r;
}

// A BARRIER request: `key`, `world_size` arrivals expected.
inline Request Barrier(std::string key, int64_t world_size) {
  Request r = Req(Op::kBarrier, {std::move(key)});
  r.world_size = world_size;
  return r;
}

// The 2.x handshake: VALIDATE + PING(nonce).
inline std::string Handshake(uint32_t nonce) {
  return Encode(Dialect::kV2, Req(Op::kValidate, {}, {}, 0, kValidateMagic)) +
         Encode(Dialect::kV2, Req(Op::kPing, {}, {}, 0, nonce));
}

}  // namespace wire
}  // namespace c10d_store
}  // namespace drun

#endif  // DRUN_TESTS_UNIT_C10D_STORE_WIRE_H_
