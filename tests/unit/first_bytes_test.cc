// ClassifyFirstBytes: which service a connection on a shared port belongs to
// (rendezvous/first_bytes.h).
#include "rendezvous/first_bytes.h"

#include <string>

#include <gtest/gtest.h>

#include "tests/unit/c10d_store_wire.h"

namespace drun {
namespace {

using c10d_store::Dialect;
using c10d_store::Op;
using c10d_store::Request;
using c10d_store::kValidatePrefix;
namespace wire = c10d_store::wire;

std::string Encode(Dialect d, Op op, std::vector<std::string> keys,
                   std::vector<std::string> values = {}, int64_t delta = 0) {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.delta = delta;
  return wire::Encode(d, r);
}

// What a gRPC client (grpc-core's chttp2) sends first: the preface, then a SETTINGS frame.
std::string GrpcOpening() {
  return std::string(kHttp2Preface) + std::string("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);
}

TEST(FirstBytes, NothingYetNeedsMore) {
  EXPECT_EQ(ClassifyFirstBytes(""), FirstBytes::kNeedMore);
}

TEST(FirstBytes, Http2PrefaceIsGrpc) {
  EXPECT_EQ(ClassifyFirstBytes(kHttp2Preface), FirstBytes::kGrpc);
  EXPECT_EQ(ClassifyFirstBytes(GrpcOpening()), FirstBytes::kGrpc);
}

TEST(FirstBytes, EveryProperPrefixOfThePrefaceNeedsMore) {
  for (size_t n = 1; n < kHttp2Preface.size(); ++n) {
    EXPECT_EQ(ClassifyFirstBytes(kHttp2Preface.substr(0, n)), FirstBytes::kNeedMore) << n;
  }
}

TEST(FirstBytes, APrefaceThatGoesWrongIsGarbage) {
  EXPECT_EQ(ClassifyFirstBytes("PRI * HTTP/1.1\r\n"), FirstBytes::kGarbage);
  EXPECT_EQ(ClassifyFirstBytes("POST / HTTP/1.1\r\n"), FirstBytes::kGarbage);
  EXPECT_EQ(ClassifyFirstBytes("PX"), FirstBytes::kGarbage);
}

TEST(FirstBytes, Torch113FirstRequestsAreStore) {
  // torch 1.13 sends SET (world_size=None) or ADD "init/" (world_size given) first.
  EXPECT_EQ(ClassifyFirstBytes(Encode(Dialect::kV113, Op::kSet, {"/k"}, {"v"})),
            FirstBytes::kStore);
  EXPECT_EQ(ClassifyFirstBytes(Encode(Dialect::kV113, Op::kAdd, {"init/"}, {}, 1)),
            FirstBytes::kStore);
  EXPECT_EQ(ClassifyFirstBytes(Encode(Dialect::kV113, Op::kWatchKey, {"/k"})),
            FirstBytes::kStore);
  // A client whose opcode arrives alone (a separate send()).
  EXPECT_EQ(ClassifyFirstBytes(std::string("\x03", 1)), FirstBytes::kStore);
}

TEST(FirstBytes, Torch2ValidateIsStore) {
  const std::string validate(reinterpret_cast<const char*>(kValidatePrefix.data()),
                             kValidatePrefix.size());
  // VALIDATE + PING in one segment, as captured from torch 2.6.
  EXPECT_EQ(ClassifyFirstBytes(validate + std::string("\x0d\x71\x5a\x00\x00", 5)),
            FirstBytes::kStore);
  for (size_t n = 1; n <= validate.size(); ++n) {
    EXPECT_EQ(ClassifyFirstBytes(validate.substr(0, n)), FirstBytes::kStore) << n;
  }
}

TEST(FirstBytes, WhatTheStoreWouldRefuseIsGarbage) {
  EXPECT_EQ(ClassifyFirstBytes("GET / HTTP/1.1\r\n\r\n"), FirstBytes::kGarbage);
  EXPECT_EQ(ClassifyFirstBytes("SSH-2.0-OpenSSH_9.2\r\n"), FirstBytes::kGarbage);
  // A TLS hello is kTls now (--rdzv-tls); the store never gets it, and a
  // rendezvous without --rdzv-tls closes it as it closes garbage.
  EXPECT_EQ(ClassifyFirstBytes(std::string("\x16\x03\x01\x02\x00", 5)),  // a TLS hello
            FirstBytes::kTls);
  EXPECT_EQ(ClassifyFirstBytes(std::string(1, '\xff')), FirstBytes::kGarbage);
  // A SET whose key length is past the store's limit (8 KiB).
  EXPECT_EQ(ClassifyFirstBytes(wire::Byte(0) + wire::U64(1u << 20)), FirstBytes::kGarbage);
}

TEST(FirstBytes, OnlyThePeekedBytesCount) {
  // A valid first request followed, past kFirstBytesPeek, by junk: the store's parser
  // deals with the junk later; the classifier's verdict stays "store".
  std::string s = Encode(Dialect::kV113, Op::kSet, {"/key"}, {"value"});
  ASSERT_GE(s.size(), kFirstBytesPeek);
  EXPECT_EQ(ClassifyFirstBytes(s + std::string(64, '\xff')), FirstBytes::kStore);
}

// What an OpenSSL client sends first: a handshake record (ClientHello), record
// version 3.1 whatever the protocol it offers.
TEST(FirstBytes, ATlsHandshakeRecordIsTls) {
  const std::string hello("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
  EXPECT_EQ(ClassifyFirstBytes(hello), FirstBytes::kTls);
  EXPECT_EQ(ClassifyFirstBytes(hello.substr(0, 3)), FirstBytes::kTls);
  EXPECT_EQ(ClassifyFirstBytes(hello.substr(0, 1)), FirstBytes::kNeedMore);
  EXPECT_EQ(ClassifyFirstBytes(hello.substr(0, 2)), FirstBytes::kNeedMore);
  EXPECT_EQ(ClassifyFirstBytes(std::string("\x16\x02\x01", 3)), FirstBytes::kGarbage);
  EXPECT_EQ(ClassifyFirstBytes(std::string("\x16\x03\x09", 3)), FirstBytes::kGarbage);
  EXPECT_STREQ(FirstBytesName(FirstBytes::kTls), "tls");
}

TEST(FirstBytes, Names) {
  EXPECT_STREQ(FirstBytesName(FirstBytes::kGrpc), "grpc");
  EXPECT_STREQ(FirstBytesName(FirstBytes::kStore), "store");
  EXPECT_STREQ(FirstBytesName(FirstBytes::kGarbage), "garbage");
  EXPECT_STREQ(FirstBytesName(FirstBytes::kNeedMore), "need-more");
}

}  // namespace
}  // namespace drun
