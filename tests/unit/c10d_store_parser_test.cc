#include "rendezvous/store/c10d_store_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/c10d_store_wire.h"

namespace drun {
namespace c10d_store {
namespace {

using wire::Byte;
using wire::Encode;
using wire::Handshake;
using wire::Hex;
using wire::I64;
using wire::Req;
using wire::Str;
using wire::U32;
using wire::U64;

std::string BinaryValue() { return std::string("a\0b\xff\x01", 5); }

// One request of every kind a 1.13 client can send (column A).
std::vector<Request> AllV113() {
  return {
      Req(Op::kSet, {"/k1"}, {"v1"}),
      Req(Op::kSet, {""}, {""}),
      Req(Op::kSet, {"/bin"}, {BinaryValue()}),
      Req(Op::kCompareSet, {"/k"}, {"old", "new"}),
      Req(Op::kCompareSet, {"/k"}, {"", "new"}),
      Req(Op::kGet, {"/k1"}),
      Req(Op::kAdd, {"init/"}, {}, 1),
      Req(Op::kAdd, {"/cnt"}, {}, -2),
      Req(Op::kAdd, {"/cnt"}, {}, INT64_MIN),
      Req(Op::kCheck, {"/a", "/b"}),
      Req(Op::kCheck, {}),
      Req(Op::kWait, {"/a"}),
      Req(Op::kWait, {}),
      Req(Op::kGetNumKeys),
      Req(Op::kWatchKey, {"/w"}),
      Req(Op::kDeleteKey, {"/k1"}),
  };
}

// One request of every kind a validated 2.x client can send (column D), after VALIDATE.
std::vector<Request> AllV2() {
  return {
      Req(Op::kPing, {}, {}, 0, 0x5a71),
      Req(Op::kSet, {"/k1"}, {"v1"}),
      Req(Op::kSet, {"/bin"}, {BinaryValue()}),
      Req(Op::kCompareSet, {"/k"}, {"old", "new"}),
      Req(Op::kGet, {"/k1"}),
      Req(Op::kAdd, {"init/"}, {}, 1),
      Req(Op::kCheck, {"/a", "/b"}),
      Req(Op::kWait, {"/a", "/b", "/c"}),
      Req(Op::kGetNumKeys),
      Req(Op::kDeleteKey, {"/k1"}),
      Req(Op::kAppend, {"/ap"}, {"x"}),
      Req(Op::kMultiGet, {"/m1", "/m2"}),
      Req(Op::kMultiGet, {}),
      Req(Op::kMultiSet, {"/m1", "/m2"}, {"a", "b"}),
      Req(Op::kMultiSet, {}, {}),
      Req(Op::kCancelWait),
      Req(Op::kQueuePush, {"/q"}, {"item"}),
      Req(Op::kQueuePop, {"/q"}),
      Req(Op::kQueueLen, {"/q"}),
      Req(Op::kListKeys),
      wire::Barrier("/bar", 4),
      wire::Barrier("/bar", 0),
      wire::Barrier("/bar", -1),
  };
}

std::string EncodeAll(Dialect d, const std::vector<Request>& reqs) {
  std::string s;
  if (d == Dialect::kV2) s = Byte(0) + U32(kValidateMagic);
  for (const auto& r : reqs) s += Encode(d, r);
  return s;
}

std::vector<Request> Expected(Dialect d, std::vector<Request> reqs) {
  if (d == Dialect::kV2) reqs.insert(reqs.begin(), Req(Op::kValidate, {}, {}, 0, kValidateMagic));
  return reqs;
}

// Feeds `bytes` split at the given chunk size; fails the test on a parse error.
std::vector<Request> ParseChunked(const std::string& bytes, size_t chunk,
                                  Dialect* dialect = nullptr) {
  C10dStoreParser parser;
  std::vector<Request> out;
  for (size_t i = 0; i < bytes.size(); i += chunk) {
    absl::Status s = parser.Feed(absl::string_view(bytes).substr(i, chunk), &out);
    EXPECT_TRUE(s.ok()) << s << " at byte " << i;
    if (!s.ok()) break;
  }
  EXPECT_TRUE(parser.idle());
  if (dialect) *dialect = parser.dialect();
  return out;
}

class ParserDialectTest : public ::testing::TestWithParam<Dialect> {
 protected:
  std::vector<Request> All() const {
    return GetParam() == Dialect::kV2 ? AllV2() : AllV113();
  }
};

TEST_P(ParserDialectTest, EveryOpcodeInOneChunk) {
  const std::string bytes = EncodeAll(GetParam(), All());
  Dialect d;
  std::vector<Request> got = ParseChunked(bytes, bytes.size(), &d);
  EXPECT_EQ(d, GetParam());
  std::vector<Request> want = Expected(GetParam(), All());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << "request " << i << " " << OpName(want[i].op);
}

TEST_P(ParserDialectTest, EveryOpcodeByteByByte) {
  const std::string bytes = EncodeAll(GetParam(), All());
  EXPECT_EQ(ParseChunked(bytes, 1), Expected(GetParam(), All()));
}

TEST_P(ParserDialectTest, EverySplitPointOfPipelinedStream) {
  const std::string bytes = EncodeAll(GetParam(), All());
  const std::vector<Request> want = Expected(GetParam(), All());
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    C10dStoreParser parser;
    std::vector<Request> out;
    ASSERT_TRUE(parser.Feed(absl::string_view(bytes).substr(0, cut), &out).ok()) << cut;
    ASSERT_TRUE(parser.Feed(absl::string_view(bytes).substr(cut), &out).ok()) << cut;
    ASSERT_EQ(out, want) << "cut at " << cut;
  }
}

TEST_P(ParserDialectTest, RequestsAreYieldedAsSoonAsComplete) {
  const std::vector<Request> all = All();
  std::string bytes = EncodeAll(GetParam(), {});
  C10dStoreParser parser;
  std::vector<Request> out;
  ASSERT_TRUE(parser.Feed(bytes, &out).ok());
  out.clear();
  for (const Request& r : all) {
    const std::string one = Encode(GetParam(), r);
    // Everything but the last byte: nothing yet.
    ASSERT_TRUE(parser.Feed(one.substr(0, one.size() - 1), &out).ok());
    EXPECT_TRUE(out.empty()) << OpName(r.op);
    ASSERT_TRUE(parser.Feed(one.substr(one.size() - 1), &out).ok());
    ASSERT_EQ(out.size(), 1u) << OpName(r.op);
    EXPECT_EQ(out[0], r);
    out.clear();
  }
}

INSTANTIATE_TEST_SUITE_P(Dialects, ParserDialectTest,
                         ::testing::Values(Dialect::kV113, Dialect::kV2),
                         [](const auto& info) {
                           return info.param == Dialect::kV2 ? "Torch2x" : "Torch113";
                         });

TEST(ParserTest, SpecCaptureTorch113Set) {
  // 1.13 capture: SET "/k1" = "v1".
  std::string bytes = Byte(0) + U64(3) + "/k1" + U64(2) + "v1";
  EXPECT_EQ(Hex(bytes), "0003000000000000002f6b3102000000000000007631");
  Dialect d;
  auto got = ParseChunked(bytes, 1, &d);
  EXPECT_EQ(d, Dialect::kV113);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], Req(Op::kSet, {"/k1"}, {"v1"}));
}

TEST(ParserTest, SpecCaptureTorch2Handshake) {
  // 2.6 capture: VALIDATE and PING(pid 0x5A71) in one segment.
  const std::string bytes("\x00\xce\xf7\x85\x3c\x0d\x71\x5a\x00\x00", 10);
  EXPECT_EQ(bytes, Handshake(0x5a71));
  Dialect d;
  auto got = ParseChunked(bytes, bytes.size(), &d);
  EXPECT_EQ(d, Dialect::kV2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].op, Op::kValidate);
  EXPECT_EQ(got[1], Req(Op::kPing, {}, {}, 0, 0x5a71));
}

TEST(ParserTest, SpecCaptureTorch2MultiSet) {
  std::string bytes = Handshake(1) + Byte(0x0b) + U64(2) + Str("/m1") + Str("a") + Str("/m2") +
                      Str("b");
  auto got = ParseChunked(bytes, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2], Req(Op::kMultiSet, {"/m1", "/m2"}, {"a", "b"}));
}

// The newest ops, byte for byte as torch's TCPStore.cpp writes them (docs/c10d_store_protocol.md
// §4): listKeys() is the opcode alone; barrier(key, world_size) is the opcode, the prefixed
// key and an int64 world size.
TEST(ParserTest, NewestClientListKeysAndBarrierBytes) {
  const std::string bytes =
      Handshake(0x5a71) + std::string("\x11", 1) +
      std::string("\x12\x05\x00\x00\x00\x00\x00\x00\x00/done\x08\x00\x00\x00\x00\x00\x00\x00",
                  22);
  for (size_t chunk : {bytes.size(), size_t{1}}) {
    Dialect d;
    auto got = ParseChunked(bytes, chunk, &d);
    EXPECT_EQ(d, Dialect::kV2);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[2], Req(Op::kListKeys));
    EXPECT_EQ(got[3], wire::Barrier("/done", 8));
  }
}

TEST(ParserTest, BarrierAndListKeysAreNot113Opcodes) {
  // In the 1.13 numbering 17 and 18 do not exist (its last opcode is DELETE_KEY, 8).
  for (int op : {17, 18}) {
    C10dStoreParser p;
    std::vector<Request> out;
    EXPECT_FALSE(p.Feed(Byte(static_cast<uint8_t>(op)), &out).ok()) << op;
  }
}

TEST(ParserTest, Torch113OpcodeInItsOwnSegmentThenSetAndWaitInOne) {
  // 1.13 sends the opcode byte alone, then the rest; SET is pipelined with the next WAIT.
  C10dStoreParser parser;
  std::vector<Request> out;
  ASSERT_TRUE(parser.Feed(Byte(0), &out).ok());
  EXPECT_EQ(parser.dialect(), Dialect::kUndecided);
  ASSERT_TRUE(parser.Feed(Str("/key") + Str("value") + Byte(5) + U64(1) + Str("/key"), &out)
                  .ok());
  EXPECT_EQ(parser.dialect(), Dialect::kV113);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], Req(Op::kSet, {"/key"}, {"value"}));
  EXPECT_EQ(out[1], Req(Op::kWait, {"/key"}));
}

TEST(ParserTest, DialectIsDecidedAtFirstDivergingByte) {
  C10dStoreParser a;
  std::vector<Request> out;
  ASSERT_TRUE(a.Feed(Byte(3), &out).ok());  // ADD: not a VALIDATE prefix
  EXPECT_EQ(a.dialect(), Dialect::kV113);

  C10dStoreParser b;
  ASSERT_TRUE(b.Feed(std::string("\x00\xce\xf7\x85", 4), &out).ok());
  EXPECT_EQ(b.dialect(), Dialect::kUndecided);
  ASSERT_TRUE(b.Feed(std::string("\x3c", 1), &out).ok());
  EXPECT_EQ(b.dialect(), Dialect::kV2);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].op, Op::kValidate);
}

TEST(ParserTest, WrongValidateMagicIsA113SetWithAnAbsurdKeyAndFails) {
  // 00 CE F7 85 3D ... reads as a 1.13 SET whose key length is ~0x3D85F7CE: over the limit.
  C10dStoreParser parser;
  std::vector<Request> out;
  std::string bytes = std::string("\x00\xce\xf7\x85\x3d\x0d\x01\x00\x00", 9);
  absl::Status s = parser.Feed(bytes, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(parser.dialect(), Dialect::kV113);
  EXPECT_TRUE(out.empty());
}

TEST(ParserTest, ValidateAfterFirstMessageFails) {
  C10dStoreParser parser;
  std::vector<Request> out;
  absl::Status s = parser.Feed(Handshake(7) + Byte(0) + U32(kValidateMagic), &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("VALIDATE"), absl::string_view::npos) << s;
  // What came before the bad message is still delivered.
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].op, Op::kPing);
}

TEST(ParserTest, UnknownOpcodesFail) {
  for (int op : {9, 10, 13, 0x7f, 0xff}) {
    C10dStoreParser p;
    std::vector<Request> out;
    EXPECT_FALSE(p.Feed(Byte(static_cast<uint8_t>(op)), &out).ok()) << "1.13 op " << op;
  }
  for (int op : {19, 20, 0x80, 0xff}) {
    C10dStoreParser p;
    std::vector<Request> out;
    EXPECT_FALSE(p.Feed(Handshake(1) + Byte(static_cast<uint8_t>(op)), &out).ok())
        << "2.x op " << op;
    EXPECT_EQ(out.size(), 2u);
  }
}

TEST(ParserTest, ErrorsAreSticky) {
  C10dStoreParser p;
  std::vector<Request> out;
  ASSERT_FALSE(p.Feed(Byte(0xee), &out).ok());
  EXPECT_FALSE(p.Feed(Encode(Dialect::kV113, Req(Op::kGetNumKeys)), &out).ok());
  EXPECT_TRUE(out.empty());
}

TEST(ParserTest, RequestsBeforeGarbageAreDelivered) {
  C10dStoreParser p;
  std::vector<Request> out;
  std::string bytes = Encode(Dialect::kV113, Req(Op::kSet, {"/a"}, {"1"})) +
                      Encode(Dialect::kV113, Req(Op::kGetNumKeys)) + "garbage";
  EXPECT_FALSE(p.Feed(bytes, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].op, Op::kGetNumKeys);
}

TEST(ParserTest, DefaultLimits) {
  ParserLimits limits;
  EXPECT_EQ(limits.max_key_bytes, 8u * 1024);
  EXPECT_EQ(limits.max_value_bytes, 256u * 1024 * 1024);
  EXPECT_EQ(limits.max_key_count, 128u * 1024);
  EXPECT_EQ(limits.max_request_bytes, 256u * 1024 * 1024);

  // A key of exactly the limit is fine; one byte more is not.
  std::string key(8 * 1024, 'k');
  std::vector<Request> out;
  C10dStoreParser ok;
  ASSERT_TRUE(ok.Feed(Encode(Dialect::kV113, Req(Op::kGet, {key})), &out).ok());
  EXPECT_EQ(out.size(), 1u);
  C10dStoreParser bad;
  // Only the length is needed to refuse: nothing of the key body has to arrive.
  EXPECT_FALSE(bad.Feed(Byte(2) + U64(8 * 1024 + 1), &out).ok());

  // torch's servers take values past 64 MiB (a 65 MiB SET from torch 1.13 must work).
  C10dStoreParser value_65m;
  EXPECT_TRUE(value_65m.Feed(Byte(0) + Str("/k") + U64(65u << 20), &out).ok());
  C10dStoreParser big_value;
  EXPECT_FALSE(big_value.Feed(Byte(0) + Str("/k") + U64((256u << 20) + 1), &out).ok());

  C10dStoreParser many;
  EXPECT_FALSE(many.Feed(Byte(5) + U64(128 * 1024 + 1), &out).ok());
  C10dStoreParser at_count_limit;
  EXPECT_TRUE(at_count_limit.Feed(Byte(5) + U64(128 * 1024), &out).ok());
}

TEST(ParserTest, LimitsForMemoryGiveOneRequestAQuarterOfTheMachine) {
  const uint64_t gib = 1ull << 30;
  ParserLimits big = LimitsForMemory(64 * gib);
  EXPECT_EQ(big.max_value_bytes, 16 * gib);
  EXPECT_EQ(big.max_request_bytes, 16 * gib);
  EXPECT_EQ(big.max_key_bytes, 8u * 1024);  // keys and counts do not scale
  EXPECT_EQ(big.max_key_count, 128u * 1024);
  // Never below the defaults, even on a small machine (or when memory is unknown: 0).
  for (uint64_t mem : {uint64_t{0}, gib / 2, gib}) {
    ParserLimits small = LimitsForMemory(mem);
    EXPECT_EQ(small.max_value_bytes, ParserLimits().max_value_bytes) << mem;
    EXPECT_EQ(small.max_request_bytes, ParserLimits().max_request_bytes) << mem;
  }
}

TEST(ParserTest, CustomLimits) {
  ParserLimits limits;
  limits.max_key_bytes = 4;
  limits.max_value_bytes = 8;
  limits.max_key_count = 2;
  limits.max_request_bytes = 12;
  std::vector<Request> out;

  EXPECT_TRUE(C10dStoreParser(limits).Feed(Byte(0) + Str("abcd") + Str("12345678"), &out).ok());
  EXPECT_FALSE(C10dStoreParser(limits).Feed(Byte(0) + Str("abcde"), &out).ok());
  EXPECT_FALSE(C10dStoreParser(limits).Feed(Byte(0) + Str("a") + U64(9), &out).ok());
  EXPECT_FALSE(C10dStoreParser(limits).Feed(Byte(4) + U64(3), &out).ok());
  // Each field within bounds, but together over max_request_bytes.
  EXPECT_FALSE(
      C10dStoreParser(limits).Feed(Byte(1) + Str("abcd") + Str("12345678") + U64(1), &out).ok());
}

TEST(ParserTest, NegativeMultiSetCountFails) {
  C10dStoreParser p;
  std::vector<Request> out;
  EXPECT_FALSE(p.Feed(Handshake(1) + Byte(0x0b) + I64(-1), &out).ok());
}

TEST(ParserTest, ValidateMagicCollisionIsTreatedAs2x) {
  // The one ambiguity of the detection (spec §2.3): a 1.13 SET whose key length has
  // 0x3C85F7CE as its low bytes. It is over the key limit anyway.
  C10dStoreParser p;
  std::vector<Request> out;
  ASSERT_TRUE(p.Feed(Byte(0) + U64(kValidateMagic).substr(0, 4), &out).ok());
  EXPECT_EQ(p.dialect(), Dialect::kV2);
}

TEST(ParserTest, LargeValueInManyChunks) {
  const std::string value(1 << 20, 'v');
  const std::string bytes = Encode(Dialect::kV113, Req(Op::kSet, {"/big"}, {value}));
  auto got = ParseChunked(bytes, 1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].values[0], value);
  // The value is stored as it comes out: without the growth slack of its buffer.
  EXPECT_LE(got[0].values[0].capacity(), value.size() + 64 * 1024);
}

TEST(ParserTest, IdleOnlyBetweenRequests) {
  C10dStoreParser p;
  std::vector<Request> out;
  EXPECT_TRUE(p.idle());
  ASSERT_TRUE(p.Feed(Byte(6), &out).ok());  // 1.13 GETNUMKEYS: complete at once
  EXPECT_TRUE(p.idle());
  ASSERT_TRUE(p.Feed(Byte(2) + U64(3) + "ab", &out).ok());
  EXPECT_FALSE(p.idle());
  ASSERT_TRUE(p.Feed("c", &out).ok());
  EXPECT_TRUE(p.idle());
  EXPECT_EQ(out.size(), 2u);
}

TEST(ParserTest, WireOpcodeNumbering) {
  EXPECT_EQ(WireOpcode(Dialect::kV113, Op::kSet), 0);
  EXPECT_EQ(WireOpcode(Dialect::kV113, Op::kWatchKey), 7);
  EXPECT_EQ(WireOpcode(Dialect::kV113, Op::kDeleteKey), 8);
  EXPECT_EQ(WireOpcode(Dialect::kV113, Op::kAppend), -1);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kValidate), 0);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kSet), 1);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kGetNumKeys), 7);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kDeleteKey), 8);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kCancelWait), 12);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kPing), 13);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kQueuePush), 14);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kQueuePop), 15);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kQueueLen), 16);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kListKeys), 17);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kBarrier), 18);
  EXPECT_EQ(WireOpcode(Dialect::kV2, Op::kWatchKey), -1);
  EXPECT_EQ(WireOpcode(Dialect::kV113, Op::kListKeys), -1);
  EXPECT_EQ(WireOpcode(Dialect::kV113, Op::kBarrier), -1);
}

}  // namespace
}  // namespace c10d_store
}  // namespace drun
