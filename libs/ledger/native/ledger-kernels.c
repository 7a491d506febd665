/*
 * Assay's ledger kernels addon (N-API): the per-event work of verifying a ledger, other than the Ed25519 signature
 * itself (which stays on node:crypto), done for a whole chunk of envelopes in one call each.
 *
 * Verifying hashes every envelope twice: SHA-256(wire bytes), the envelope hash that the next event of the stream
 * names as `prev`, and SHA-256(0x00 || wire bytes), its RFC 9162 Merkle leaf hash. Through node:crypto each digest is
 * a call from JavaScript that costs about twice the hashing itself for a ~600-byte envelope; here a chunk is hashed
 * in one call with the same OpenSSL that node:crypto uses (the symbols Node exports to addons).
 *
 *   digestAll(bytes: Uint8Array, offsets: Uint32Array, out: Uint8Array, stride: number, at: number): undefined
 *
 * Event i is bytes[offsets[i], offsets[i + 1]); there are offsets.length - 1 events. Its envelope hash is written to
 * out[stride * i + at, + 32) and its leaf hash to out[stride * i + at + 32, + 32). Offsets must not decrease and
 * must stay within `bytes`; `out` must hold every event's 64 bytes. Anything else is a TypeError or RangeError (code
 * ASSAY_KERNELS_ARGUMENT) and nothing is written.
 *
 *   subtreeRoot(leaves: Uint8Array, stride: number, at: number, count: number): Buffer
 *
 * The RFC 9162 hash of the perfect subtree over `count` leaf hashes (a power of two), leaf i being
 * leaves[stride * i + at, + 32): node hashes SHA-256(0x01 || left || right), level by level.
 *
 *   scanEnvelopes(...)  recognises envelopes in the common canonical layout and cuts them: the scan itself is pure C in
 *                       envelope-scan.h (fuzzed by fuzz/envelope-scan-fuzz.c, scripts/fuzz-native.sh); the binding is below.
 *
 * The JavaScript side (libs/ledger/src/adapters/native-kernels.ts) only uses this when it loads and agrees with
 * node:crypto on a probe; otherwise node:crypto and parseEnvelope give the same results.
 * tests/ledger/envelope-scan.int.spec.ts holds the scan to the parser over tens of thousands of damaged envelopes.
 */
#ifndef NAPI_VERSION
#define NAPI_VERSION 8
#endif
#include <node_api.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FORMAT_VERSION 1

static const EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void fetch_sha256(void) {
#if OPENSSL_VERSION_MAJOR >= 3
  /* An explicitly fetched digest: EVP_sha256() would make every EVP_DigestInit_ex look the algorithm up again. */
  sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
#endif
  if (sha256_md == NULL) sha256_md = EVP_sha256();
}

static napi_value throw_error(napi_env env, int range, const char *message) {
  if (range)
    napi_throw_range_error(env, "ASSAY_KERNELS_ARGUMENT", message);
  else
    napi_throw_type_error(env, "ASSAY_KERNELS_ARGUMENT", message);
  return NULL;
}

/* A typed array argument of the wanted type (a Buffer is a Uint8Array), or 0 after throwing. */
static int typed_arg(napi_env env, napi_value v, napi_typedarray_type want, const char *name, void **data, size_t *count) {
  bool is_typed = false;
  napi_typedarray_type type;
  napi_value ab;
  size_t offset;
  char message[96];
  if (napi_is_typedarray(env, v, &is_typed) != napi_ok || !is_typed ||
      napi_get_typedarray_info(env, v, &type, count, data, &ab, &offset) != napi_ok || type != want) {
    snprintf(message, sizeof message, "%s must be a %s", name, want == napi_float64_array ? "Float64Array" : want == napi_uint32_array ? "Uint32Array" : "Uint8Array");
    throw_error(env, 0, message);
    return 0;
  }
  return 1;
}

static int bytes_arg(napi_env env, napi_value v, const char *name, uint8_t **data, size_t *len) {
  void *p;
  if (!typed_arg(env, v, napi_uint8_array, name, &p, len)) return 0;
  *data = p;
  return 1;
}

/* Event offsets into `bytes_len` bytes: a Uint32Array of at least one element, not decreasing, within the bytes. */
static int offsets_arg(napi_env env, napi_value v, size_t bytes_len, const uint32_t **offsets, size_t *events) {
  void *data;
  size_t count;
  if (!typed_arg(env, v, napi_uint32_array, "offsets", &data, &count)) return 0;
  const uint32_t *o = data;
  if (count < 1) return throw_error(env, 1, "offsets must have at least one element"), 0;
  for (size_t i = 0; i + 1 < count; i++)
    if (o[i] > o[i + 1]) return throw_error(env, 1, "offsets must not decrease"), 0;
  if (o[count - 1] > bytes_len) return throw_error(env, 1, "offsets point past the end of bytes"), 0;
  *offsets = o;
  *events = count - 1;
  return 1;
}

static int u32_arg(napi_env env, napi_value v, const char *name, uint32_t *out) {
  char message[96];
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || !(d >= 0) || d > 4294967295.0 || d != (double)(uint32_t)d) {
    snprintf(message, sizeof message, "%s must be an integer from 0 to 2^32 - 1", name);
    throw_error(env, 1, message);
    return 0;
  }
  *out = (uint32_t)d;
  return 1;
}

/* Exactly `n` arguments into argv (n <= 8), or 0 after throwing with the call's usage. */
static int args(napi_env env, napi_callback_info info, size_t n, napi_value *argv, const char *usage) {
  size_t argc = n;
  char message[160];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return 0;
  if (argc != n) {
    snprintf(message, sizeof message, "%s takes %zu arguments", usage, n);
    throw_error(env, 0, message);
    return 0;
  }
  return 1;
}

static napi_value digest_all(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  if (!args(env, info, 5, argv, "digestAll(bytes, offsets, out, stride, at)")) return NULL;

  uint8_t *bytes, *out;
  size_t bytes_len, out_len;
  if (!bytes_arg(env, argv[0], "bytes", &bytes, &bytes_len)) return NULL;

  const uint32_t *offsets;
  size_t events;
  if (!offsets_arg(env, argv[1], bytes_len, &offsets, &events)) return NULL;
  if (!bytes_arg(env, argv[2], "out", &out, &out_len)) return NULL;
  uint32_t stride, at;
  if (!u32_arg(env, argv[3], "stride", &stride) || !u32_arg(env, argv[4], "at", &at)) return NULL;
  if (stride < 64 || (uint64_t)at + 64 > stride) return throw_error(env, 1, "stride must be at least 64 and at + 64 must fit in it");
  if (events > 0 && (uint64_t)stride * events > out_len) return throw_error(env, 1, "out is too small for every event's two digests");

  pthread_once(&sha256_once, fetch_sha256);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (ctx == NULL || sha256_md == NULL) {
    EVP_MD_CTX_free(ctx);
    napi_throw_error(env, "ASSAY_KERNELS_OPENSSL", "OpenSSL could not set up SHA-256");
    return NULL;
  }
  static const uint8_t leaf_prefix = 0x00;
  int ok = 1;
  for (size_t i = 0; ok && i < events; i++) {
    const uint8_t *p = bytes + offsets[i];
    size_t len = offsets[i + 1] - offsets[i];
    uint8_t *d = out + (size_t)stride * i + at;
    unsigned int n;
    ok = EVP_DigestInit_ex(ctx, sha256_md, NULL) && EVP_DigestUpdate(ctx, p, len) && EVP_DigestFinal_ex(ctx, d, &n) &&
         EVP_DigestInit_ex(ctx, sha256_md, NULL) && EVP_DigestUpdate(ctx, &leaf_prefix, 1) &&
         EVP_DigestUpdate(ctx, p, len) && EVP_DigestFinal_ex(ctx, d + 32, &n);
  }
  EVP_MD_CTX_free(ctx);
  if (!ok) napi_throw_error(env, "ASSAY_KERNELS_OPENSSL", "OpenSSL failed while hashing");
  return NULL;
}

static napi_value subtree_root(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  if (!args(env, info, 4, argv, "subtreeRoot(leaves, stride, at, count)")) return NULL;
  uint8_t *leaves;
  size_t leaves_len;
  uint32_t stride, at, count;
  if (!bytes_arg(env, argv[0], "leaves", &leaves, &leaves_len)) return NULL;
  if (!u32_arg(env, argv[1], "stride", &stride) || !u32_arg(env, argv[2], "at", &at) || !u32_arg(env, argv[3], "count", &count)) return NULL;
  if (count == 0 || (count & (count - 1)) != 0) return throw_error(env, 1, "count must be a power of two");
  if (stride < 32 || (uint64_t)at + 32 > stride) return throw_error(env, 1, "stride must be at least 32 and at + 32 must fit in it");
  if ((uint64_t)stride * count > leaves_len) return throw_error(env, 1, "leaves is too small for count leaf hashes");

  uint8_t *level = malloc((size_t)count * 32);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  pthread_once(&sha256_once, fetch_sha256);
  if (level == NULL || ctx == NULL || sha256_md == NULL) {
    free(level);
    EVP_MD_CTX_free(ctx);
    napi_throw_error(env, "ASSAY_KERNELS_OPENSSL", "could not set up SHA-256");
    return NULL;
  }
  for (uint32_t i = 0; i < count; i++) memcpy(level + (size_t)i * 32, leaves + (size_t)stride * i + at, 32);
  static const uint8_t node_prefix = 0x01;
  int ok = 1;
  unsigned int n;
  /* Each pass halves the level in place: node j is written to slot j, whose old value is an input only of node j / 2,
     computed earlier in the same pass (node 0 reads slots 0 and 1 before it writes slot 0). */
  for (uint32_t width = count; ok && width > 1; width /= 2)
    for (uint32_t j = 0; ok && j < width / 2; j++)
      ok = EVP_DigestInit_ex(ctx, sha256_md, NULL) && EVP_DigestUpdate(ctx, &node_prefix, 1) &&
           EVP_DigestUpdate(ctx, level + (size_t)(2 * j) * 32, 64) && EVP_DigestFinal_ex(ctx, level + (size_t)j * 32, &n);
  EVP_MD_CTX_free(ctx);
  napi_value result = NULL;
  if (!ok)
    napi_throw_error(env, "ASSAY_KERNELS_OPENSSL", "OpenSSL failed while hashing");
  else {
    void *data;
    if (napi_create_buffer_copy(env, 32, level, &data, &result) != napi_ok) result = NULL;
  }
  free(level);
  return result;
}

#include "envelope-scan.h"

static napi_value scan_envelopes(napi_env env, napi_callback_info info) {
  napi_value argv[8];
  if (!args(env, info, 8, argv, "scanEnvelopes(bytes, offsets, meta, sigs, signing, digests, stride, prevAt)")) return NULL;
  void *bytes_v, *meta_v, *sigs_v, *signing_v, *digests_v;
  size_t bytes_len, events, meta_len, sigs_len, signing_len, digests_len;
  const uint32_t *offsets;
  uint32_t stride, prev_at;
  if (!typed_arg(env, argv[0], napi_uint8_array, "bytes", &bytes_v, &bytes_len) ||
      !offsets_arg(env, argv[1], bytes_len, &offsets, &events) ||
      !typed_arg(env, argv[2], napi_float64_array, "meta", &meta_v, &meta_len) ||
      !typed_arg(env, argv[3], napi_uint8_array, "sigs", &sigs_v, &sigs_len) ||
      !typed_arg(env, argv[4], napi_uint8_array, "signing", &signing_v, &signing_len) ||
      !typed_arg(env, argv[5], napi_uint8_array, "digests", &digests_v, &digests_len) ||
      !u32_arg(env, argv[6], "stride", &stride) || !u32_arg(env, argv[7], "prevAt", &prev_at))
    return NULL;
  if (meta_len < (uint64_t)META * events) return throw_error(env, 1, "meta is too small (10 numbers an event)");
  if (sigs_len < (uint64_t)64 * events) return throw_error(env, 1, "sigs is too small (64 bytes an event)");
  if (signing_len < offsets[events]) return throw_error(env, 1, "signing must be as long as bytes");
  if ((uint8_t *)signing_v < (uint8_t *)bytes_v + bytes_len && (uint8_t *)bytes_v < (uint8_t *)signing_v + signing_len)
    return throw_error(env, 1, "signing must not overlap bytes");
  if ((uint64_t)prev_at + 32 > stride) return throw_error(env, 1, "prevAt + 32 must fit in stride");
  if (events > 0 && (uint64_t)stride * events > digests_len) return throw_error(env, 1, "digests is too small for every event's prev");

  const uint8_t *bytes = bytes_v;
  uint8_t *sigs = sigs_v, *signing = signing_v, *digests = digests_v;
  double *meta = meta_v;
  uint32_t recognised = 0;
  for (size_t i = 0; i < events; i++) {
    double *m = meta + (size_t)META * i;
    m[0] = 0;
    recognised += (uint32_t)scan_one(bytes + offsets[i], offsets[i + 1] - offsets[i], m, sigs + (size_t)64 * i,
                                     signing + offsets[i], digests + (size_t)stride * i + prev_at);
  }
  napi_value result;
  if (napi_create_uint32(env, recognised, &result) != napi_ok) return NULL;
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn, version;
  if (napi_create_function(env, "digestAll", NAPI_AUTO_LENGTH, digest_all, NULL, &fn) != napi_ok ||
      napi_set_named_property(env, exports, "digestAll", fn) != napi_ok ||
      napi_create_function(env, "subtreeRoot", NAPI_AUTO_LENGTH, subtree_root, NULL, &fn) != napi_ok ||
      napi_set_named_property(env, exports, "subtreeRoot", fn) != napi_ok ||
      napi_create_function(env, "scanEnvelopes", NAPI_AUTO_LENGTH, scan_envelopes, NULL, &fn) != napi_ok ||
      napi_set_named_property(env, exports, "scanEnvelopes", fn) != napi_ok ||
      napi_create_uint32(env, FORMAT_VERSION, &version) != napi_ok ||
      napi_set_named_property(env, exports, "formatVersion", version) != napi_ok)
    return NULL;
  return exports;
}
