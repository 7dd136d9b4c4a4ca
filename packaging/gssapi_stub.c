// gssapi_stub.c: the GSS-API functions Debian's static libssh.a refers to, for the release
// build (packaging/portable.cmake), which links libssh statically while Debian ships MIT
// Kerberos's libgssapi_krb5 only as a shared library.
//
// Contract: drun authenticates over ssh with "none" and then public keys only
// (launcher/ssh/ssh_session.cc: ssh_userauth_none, ssh_userauth_publickey_auto), so libssh
// never calls these; should it (gssapi-with-mic), each says GSS_S_FAILURE with minor status
// 0 and libssh goes on to the next method. The OID names libssh takes the address of are
// defined with their RFC 2744 values.
#include <stddef.h>

#define HIDDEN __attribute__((visibility("hidden")))
enum { kGssFailure = 13u << 16 };  // GSS_S_FAILURE

typedef struct {
  unsigned int length;
  void* elements;
} Oid;

// 1.2.840.113554.1.2.1.1 and 1.2.840.113554.1.2.1.4 (RFC 2744, appendix A).
static Oid kUserName = {10, "\x2a\x86\x48\x86\xf7\x12\x01\x02\x01\x01"};
static Oid kHostbasedService = {10, "\x2a\x86\x48\x86\xf7\x12\x01\x02\x01\x04"};
HIDDEN Oid* GSS_C_NT_USER_NAME = &kUserName;
HIDDEN Oid* GSS_C_NT_HOSTBASED_SERVICE = &kHostbasedService;

// Every GSS-API call's first argument is its minor status; the rest are never read here.
#define STUB(name)                               \
  HIDDEN unsigned int name(unsigned int* minor) { \
    if (minor) *minor = 0;                       \
    return kGssFailure;                          \
  }
STUB(gss_accept_sec_context)
STUB(gss_acquire_cred)
STUB(gss_add_oid_set_member)
STUB(gss_create_empty_oid_set)
STUB(gss_display_name)
STUB(gss_display_status)
STUB(gss_get_mic)
STUB(gss_import_name)
STUB(gss_indicate_mechs)
STUB(gss_init_sec_context)
STUB(gss_inquire_cred)
STUB(gss_inquire_cred_by_mech)
STUB(gss_release_buffer)
STUB(gss_release_cred)
STUB(gss_release_name)
STUB(gss_release_oid_set)
STUB(gss_test_oid_set_member)
STUB(gss_verify_mic)
