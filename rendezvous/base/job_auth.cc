#include "rendezvous/base/job_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace drun {

namespace {

constexpr size_t kIvBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr size_t kKeyBytes = 32;

// Versioned labels: a change of the scheme changes every proof and key.
constexpr absl::string_view kAgentLabel = "drun-agent-proof-v1";
constexpr absl::string_view kServerLabel = "drun-server-proof-v1";
constexpr absl::string_view kSealLabel = "drun-seal-v1";

const unsigned char* Bytes(absl::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

// label, then each field with its length, so no two transcripts encode alike.
std::string Encode(absl::string_view label, const Transcript& t) {
  std::string out(label);
  for (absl::string_view field : {absl::string_view(t.run_id), absl::string_view(t.server_nonce),
                                  absl::string_view(t.agent_nonce)}) {
    const uint32_t n = static_cast<uint32_t>(field.size());
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
    out.append(field.data(), field.size());
  }
  return out;
}

bool NoncesValid(const Transcript& t) {
  return t.server_nonce.size() == kNonceBytes && t.agent_nonce.size() == kNonceBytes;
}

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* c) const { EVP_PKEY_CTX_free(c); }
};

}  // namespace

std::string NewNonce() {
  std::string n(kNonceBytes, '\0');
  // RAND_bytes fails only without any entropy source; then no nonce at all is
  // safer than a predictable one: every proof over it is refused (NoncesValid).
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1) return "";
  return n;
}

std::string HmacSha256(absl::string_view key, absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), Bytes(data), data.size(), out, &len) ==
      nullptr) {
    return "";
  }
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string HkdfSha256(absl::string_view ikm, absl::string_view salt, absl::string_view info,
                       size_t length) {
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr));
  std::string out(length, '\0');
  size_t out_len = length;
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) <= 0 ||
      EVP_PKEY_CTX_set_hkdf_md(ctx.get(), EVP_sha256()) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_salt(ctx.get(), Bytes(salt), static_cast<int>(salt.size())) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_key(ctx.get(), Bytes(ikm), static_cast<int>(ikm.size())) <= 0 ||
      EVP_PKEY_CTX_add1_hkdf_info(ctx.get(), Bytes(info), static_cast<int>(info.size())) <= 0 ||
      EVP_PKEY_derive(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &out_len) <= 0 ||
      out_len != length) {
    return "";
  }
  return out;
}

std::string AgentProof(absl::string_view token, const Transcript& t) {
  if (token.empty() || !NoncesValid(t)) return "";
  return HmacSha256(token, Encode(kAgentLabel, t));
}

std::string ServerProof(absl::string_view token, const Transcript& t) {
  if (token.empty() || !NoncesValid(t)) return "";
  return HmacSha256(token, Encode(kServerLabel, t));
}

bool ProofMatches(absl::string_view expected, absl::string_view got) {
  if (expected.empty() || expected.size() != got.size()) return false;
  return CRYPTO_memcmp(expected.data(), got.data(), expected.size()) == 0;
}

SealKey SealKey::ForStream(absl::string_view token, const Transcript& t) {
  return SealKey(HkdfSha256(token, absl::StrCat(t.server_nonce, t.agent_nonce),
                            absl::StrCat(kSealLabel, t.run_id), kKeyBytes));
}

std::string SealKey::Seal(absl::string_view plaintext, absl::string_view aad) {
  std::string iv(kIvBytes, '\0');
  const uint64_t n = sealed_++;
  for (int i = 0; i < 8; ++i) iv[kIvBytes - 1 - i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return SealWithIv(iv, plaintext, aad);
}

std::string SealKey::SealWithIv(absl::string_view iv, absl::string_view plaintext,
                                absl::string_view aad) const {
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  std::string out(iv);
  out.resize(kIvBytes + plaintext.size() + kTagBytes);
  unsigned char* ct = reinterpret_cast<unsigned char*>(out.data()) + kIvBytes;
  int len = 0, total = 0;
  if (!ctx || key_.size() != kKeyBytes || iv.size() != kIvBytes ||
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, Bytes(key_), Bytes(iv)) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, Bytes(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), ct, &len, Bytes(plaintext), static_cast<int>(plaintext.size())) != 1) {
    return "";
  }
  total = len;
  if (EVP_EncryptFinal_ex(ctx.get(), ct + total, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, ct + plaintext.size()) != 1) {
    return "";
  }
  return out;
}

absl::StatusOr<std::string> SealKey::Open(absl::string_view sealed, absl::string_view aad) const {
  const auto refused = absl::DataLossError("sealed data does not open with this job's token");
  if (sealed.size() < kIvBytes + kTagBytes || key_.size() != kKeyBytes) return refused;
  const absl::string_view iv = sealed.substr(0, kIvBytes);
  const absl::string_view ct = sealed.substr(kIvBytes, sealed.size() - kIvBytes - kTagBytes);
  std::string tag(sealed.substr(sealed.size() - kTagBytes));
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  std::string out(ct.size(), '\0');
  int len = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, Bytes(key_), Bytes(iv)) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, Bytes(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &len, Bytes(ct),
                        static_cast<int>(ct.size())) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) != 1) {
    return refused;
  }
  int tail = 0;
  // The tag is checked here: altered bytes end in an error, and `out` is dropped.
  if (EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(out.data()) + len, &tail) != 1) {
    return refused;
  }
  return out;
}

}  // namespace drun
