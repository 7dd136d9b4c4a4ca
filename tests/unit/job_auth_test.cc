// rendezvous/base/job_auth.h: known answers (RFC 4231 HMAC-SHA256, RFC 5869
// HKDF-SHA256, the GCM paper's AES-256 vectors), and the promises the
// rendezvous relies on: labels keep the two sides' proofs apart, a proof is
// bound to its stream's nonces, a sealed message opens only unaltered.
#include "rendezvous/base/job_auth.h"

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"

namespace drun {
namespace {

std::string Hex(absl::string_view bytes) { return absl::BytesToHexString(bytes); }
std::string Unhex(absl::string_view hex) { return absl::HexStringToBytes(hex); }

TEST(JobAuthTest, HmacSha256Rfc4231) {
  // Test case 1.
  EXPECT_EQ(Hex(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2: a key shorter than the block.
  EXPECT_EQ(Hex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 3.
  EXPECT_EQ(Hex(HmacSha256(std::string(20, '\xaa'), std::string(50, '\xdd'))),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // Test case 6: a key longer than the block (hashed first).
  EXPECT_EQ(Hex(HmacSha256(std::string(131, '\xaa'),
                           "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(JobAuthTest, HkdfSha256Rfc5869) {
  // Test case 1.
  EXPECT_EQ(Hex(HkdfSha256(std::string(22, '\x0b'), Unhex("000102030405060708090a0b0c"),
                           Unhex("f0f1f2f3f4f5f6f7f8f9"), 42)),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
}

TEST(JobAuthTest, AesGcm256KnownAnswers) {
  // McGrew & Viega, "The Galois/Counter Mode of Operation", test cases 13 and 14.
  const SealKey zero = SealKey::FromBytes(std::string(32, '\0'));
  const std::string iv(12, '\0');
  std::string sealed = zero.SealWithIv(iv, "", "");
  EXPECT_EQ(Hex(sealed.substr(12)), "530f8afbc74536b9a963b4f1c4cb738b");
  sealed = zero.SealWithIv(iv, std::string(16, '\0'), "");
  EXPECT_EQ(Hex(sealed.substr(12)),
            "cea7403d4d606b6e074ec5d3baf39d18" "d0d1c8a799996bf0265b98b5d48ab919");
  auto opened = zero.Open(sealed, "");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, std::string(16, '\0'));
}

Transcript Stream(const std::string& run_id = "job") { return {run_id, NewNonce(), NewNonce()}; }

TEST(JobAuthTest, ProofsAreBoundToTheStreamAndTheSide) {
  const Transcript t = Stream();
  const std::string agent = AgentProof("tok", t);
  ASSERT_EQ(agent.size(), 32u);
  EXPECT_TRUE(ProofMatches(AgentProof("tok", t), agent));
  EXPECT_FALSE(ProofMatches(AgentProof("other", t), agent));
  // The server's proof is never the agent's (no reflection).
  EXPECT_FALSE(ProofMatches(ServerProof("tok", t), agent));
  // A captured proof, replayed on a new stream (the server's fresh nonce): refused.
  Transcript replayed = t;
  replayed.server_nonce = NewNonce();
  EXPECT_FALSE(ProofMatches(AgentProof("tok", replayed), agent));
  Transcript other_job = t;
  other_job.run_id = "job2";
  EXPECT_FALSE(ProofMatches(AgentProof("tok", other_job), agent));
  // Nonces of the wrong size, an empty token or an empty proof never prove anything.
  Transcript short_nonce = t;
  short_nonce.server_nonce = "";
  EXPECT_EQ(AgentProof("tok", short_nonce), "");
  EXPECT_EQ(AgentProof("", t), "");
  EXPECT_FALSE(ProofMatches("", ""));
  EXPECT_FALSE(ProofMatches(agent, agent.substr(0, 31)));
  EXPECT_NE(NewNonce(), NewNonce());
}

TEST(JobAuthTest, SealedTextOpensOnlyUnaltered) {
  const Transcript t = Stream();
  SealKey server = SealKey::ForStream("tok", t);
  const SealKey agent = SealKey::ForStream("tok", t);
  const std::string plain = "SECRET_VALUE=api-key-42";
  const std::string sealed = server.Seal(plain, "round/0");
  EXPECT_EQ(sealed.find("api-key-42"), std::string::npos);
  ASSERT_EQ(sealed.size(), 12 + plain.size() + 16);
  auto opened = agent.Open(sealed, "round/0");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, plain);
  // Every byte matters: IV, ciphertext, tag.
  for (size_t i = 0; i < sealed.size(); ++i) {
    std::string tampered = sealed;
    tampered[i] ^= 0x01;
    EXPECT_EQ(agent.Open(tampered, "round/0").status().code(), absl::StatusCode::kDataLoss) << i;
  }
  EXPECT_FALSE(agent.Open(sealed, "round/1").ok());  // other associated data
  EXPECT_FALSE(agent.Open(sealed.substr(0, 20), "round/0").ok());
  // Another token, or another stream, gives another key.
  EXPECT_FALSE(SealKey::ForStream("other", t).Open(sealed, "round/0").ok());
  EXPECT_FALSE(SealKey::ForStream("tok", Stream()).Open(sealed, "round/0").ok());
  // The IV is a counter: the same text sealed twice differs.
  EXPECT_NE(server.Seal(plain, "round/0"), sealed);
}

}  // namespace
}  // namespace drun
