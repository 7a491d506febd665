/*
 * The envelope scanner of ledger-kernels.c without N-API: pure C over a byte range, so that it can be compiled
 * into the addon (ledger-kernels.c includes this file) and into the fuzz harness (fuzz/envelope-scan-fuzz.c).
 */
#ifndef ASSAY_ENVELOPE_SCAN_H
#define ASSAY_ENVELOPE_SCAN_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- scanEnvelopes: the canonical layout of envelopes, checked and cut in C ------------------------------------

   scanEnvelopes(bytes, offsets, meta: Float64Array, sigs: Uint8Array, signing: Uint8Array, digests: Uint8Array,
                 stride, prevAt): number of envelopes recognised

   An envelope is recognised only if it is all ASCII and has exactly the canonical layout

     {"data":DATA,"id":"UUID","position":INT,"prev":"HEX64","revision":INT,"sig":"SIG","signer":"SIGNER",
      "stream":"STREAM","time":"TIME","type":"TYPE"}

   with every field as envelope.ts requires (a subset: a signer with escapes, a time of 24:00:00.000 and the like are
   left to the general parser), DATA an object whose end is found by a structural scan (strings, escapes, nesting).
   The caller must still parse DATA and check that it is canonical: only then is the whole envelope canonical (a
   slice that is a complete JSON object cannot end anywhere but where the scan ended). For a recognised envelope i:

     meta[META * i ...]   1, end of DATA (offset in the envelope), position, revision, signer offset and length,
                          stream offset and length, type offset and length (offsets within the envelope)
     sigs[64 * i ...]     the decoded signature
     signing[offsets[i] ...]  the signing bytes: the envelope without its "sig":"...", member (length - 97 bytes)
     digests[stride * i + prevAt ...]  the 32 bytes of `prev`

   and meta[META * i] = 0 for any other envelope, whose outputs are left alone. */

#define META 10
#define MAX_ENVELOPE_BYTES (1024 * 1024)
#define SIG_MEMBER 97 /* "sig":"<88 characters>", */

static int is_lower_hex(uint8_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
static int is_alnum(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int hex_value(uint8_t c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* Base64 values (standard alphabet), 0xff for any other byte; filled once. */
static uint8_t b64_table[256];
static pthread_once_t b64_once = PTHREAD_ONCE_INIT;
static void fill_b64_table(void) {
  memset(b64_table, 0xff, sizeof b64_table);
  for (int i = 0; i < 26; i++) {
    b64_table['A' + i] = (uint8_t)i;
    b64_table['a' + i] = (uint8_t)(26 + i);
  }
  for (int i = 0; i < 10; i++) b64_table['0' + i] = (uint8_t)(52 + i);
  b64_table['+'] = 62;
  b64_table['/'] = 63;
}

typedef struct {
  const uint8_t *p;
  size_t len;
  size_t k;
} cursor;

static inline int lit_n(cursor *c, const char *s, size_t n) {
  if (c->len - c->k < n || memcmp(c->p + c->k, s, n) != 0) return 0;
  c->k += n;
  return 1;
}
/* The literal's length is known at compile time. */
#define lit(c, s) lit_n((c), (s), sizeof(s) - 1)

/* A canonical non-negative safe integer: 0, or 1-16 digits without a leading zero, at most 2^53 - 1. */
static int integer(cursor *c, double *out) {
  size_t start = c->k;
  uint64_t v = 0;
  while (c->k < c->len && is_digit(c->p[c->k]) && c->k - start < 17) v = v * 10 + (uint64_t)(c->p[c->k++] - '0');
  size_t n = c->k - start;
  if (n == 0 || n > 16 || (n > 1 && c->p[start] == '0') || v > 9007199254740991ULL) return 0;
  if (c->k < c->len && is_digit(c->p[c->k])) return 0;
  *out = (double)v;
  return 1;
}

static int two_digits(const uint8_t *p, int max) {
  if (!is_digit(p[0]) || !is_digit(p[1])) return -1;
  int v = (p[0] - '0') * 10 + (p[1] - '0');
  return v <= max ? v : -1;
}

/* YYYY-MM-DDTHH:MM:SS.sssZ with month 1-12, day 1-31, hour 0-23, minute and second 0-59 (all of which Date.parse
   accepts; anything else goes to the general parser). */
static int time_ok(const uint8_t *t) {
  for (int i = 0; i < 4; i++)
    if (!is_digit(t[i])) return 0;
  if (t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':' || t[19] != '.' || t[23] != 'Z') return 0;
  if (!is_digit(t[20]) || !is_digit(t[21]) || !is_digit(t[22])) return 0;
  int month = two_digits(t + 5, 12), day = two_digits(t + 8, 31);
  return month >= 1 && day >= 1 && two_digits(t + 11, 23) >= 0 && two_digits(t + 14, 59) >= 0 && two_digits(t + 17, 59) >= 0;
}

static int scan_one(const uint8_t *p, size_t len, double *meta, uint8_t *sig_out, uint8_t *signing_out, uint8_t *prev_out) {
  if (len > MAX_ENVELOPE_BYTES) return 0;
  /* All ASCII: the scan of DATA below refuses any other byte, and every other field only admits ASCII. */
  cursor c = {p, len, 0};
  if (!lit(&c, "{\"data\":{")) return 0;
  /* The end of DATA: a structural scan from its opening brace. Bytes that matter neither inside nor outside
     strings are skipped in tight loops (most of DATA). */
  int depth = 1;
  while (depth > 0) {
    while (c.k < len && !(p[c.k] & 0x80) && p[c.k] != '"' && p[c.k] != '{' && p[c.k] != '}' && p[c.k] != '[' && p[c.k] != ']') c.k++;
    if (c.k >= len || (p[c.k] & 0x80)) return 0;
    uint8_t ch = p[c.k++];
    if (ch == '"') {
      for (;;) {
        while (c.k < len && !(p[c.k] & 0x80) && p[c.k] != '"' && p[c.k] != '\\') c.k++;
        if (c.k >= len || (p[c.k] & 0x80)) return 0;
        if (p[c.k++] == '"') break;
        /* a backslash: the escaped byte is skipped (JSON.parse of DATA judges it) */
        if (c.k >= len || (p[c.k] & 0x80)) return 0;
        c.k++;
      }
    } else if (ch == '{' || ch == '[')
      depth++;
    else
      depth--;
  }
  size_t data_end = c.k;

  if (!lit(&c, ",\"id\":\"") || len - c.k < 36) return 0;
  for (size_t i = 0; i < 36; i++) {
    uint8_t ch = p[c.k + i];
    if ((i == 8 || i == 13 || i == 18 || i == 23) ? ch != '-' : !is_lower_hex(ch)) return 0;
  }
  c.k += 36;
  double position, revision;
  if (!lit(&c, "\",\"position\":") || !integer(&c, &position)) return 0;
  if (!lit(&c, ",\"prev\":\"") || len - c.k < 64) return 0;
  const uint8_t *prev = p + c.k;
  for (int i = 0; i < 64; i++)
    if (!is_lower_hex(prev[i])) return 0;
  c.k += 64;
  if (!lit(&c, "\",\"revision\":") || !integer(&c, &revision) || !lit(&c, ",")) return 0;

  size_t sig_member = c.k;
  if (!lit(&c, "\"sig\":\"") || len - c.k < 88) return 0;
  const uint8_t *sig = p + c.k;
  pthread_once(&b64_once, fill_b64_table);
  for (int i = 0; i < 86; i++)
    if (b64_table[sig[i]] == 0xff) return 0;
  if (sig[86] != '=' || sig[87] != '=') return 0;
  if (sig[85] != 'A' && sig[85] != 'Q' && sig[85] != 'g' && sig[85] != 'w') return 0; /* unused bits zero */
  c.k += 88;

  if (!lit(&c, "\",\"signer\":\"")) return 0;
  size_t signer = c.k;
  while (c.k < len && p[c.k] != '"') {
    uint8_t ch = p[c.k];
    if (ch <= 0x20 || ch >= 0x7f || ch == '\\') return 0; /* whitespace, controls, escapes, non-ASCII: the general parser */
    c.k++;
  }
  size_t signer_len = c.k - signer;
  if (signer_len < 10 || signer_len > 137 || p[signer + signer_len - 9] != '+') return 0;
  for (size_t i = 0; i < signer_len - 9; i++)
    if (p[signer + i] == '+') return 0;
  for (size_t i = signer_len - 8; i < signer_len; i++)
    if (!is_lower_hex(p[signer + i])) return 0;

  if (!lit(&c, "\",\"stream\":\"")) return 0;
  size_t stream = c.k;
  if (c.k >= len || !(p[c.k] >= 'a' && p[c.k] <= 'z')) return 0;
  c.k++;
  while (c.k < len && ((p[c.k] >= 'a' && p[c.k] <= 'z') || is_digit(p[c.k]))) c.k++;
  if (c.k - stream > 32 || c.k >= len || p[c.k] != '-') return 0;
  c.k++;
  size_t stream_id = c.k;
  if (c.k >= len || !is_alnum(p[c.k])) return 0;
  c.k++;
  while (c.k < len && (is_alnum(p[c.k]) || p[c.k] == '.' || p[c.k] == '_' || p[c.k] == ':' || p[c.k] == '-')) c.k++;
  if (c.k - stream_id > 128) return 0;
  size_t stream_len = c.k - stream;

  if (!lit(&c, "\",\"time\":\"") || len - c.k < 24 || !time_ok(p + c.k)) return 0;
  c.k += 24;
  if (!lit(&c, "\",\"type\":\"")) return 0;
  size_t type = c.k;
  if (c.k >= len || !(p[c.k] >= 'A' && p[c.k] <= 'Z')) return 0;
  c.k++;
  while (c.k < len && is_alnum(p[c.k])) c.k++;
  size_t type_len = c.k - type;
  if (type_len > 64 || !lit(&c, "\"}") || c.k != len) return 0;

  /* Recognised: decode and cut. */
  for (int g = 0; g < 21; g++) {
    uint32_t v = (uint32_t)b64_table[sig[4 * g]] << 18 | (uint32_t)b64_table[sig[4 * g + 1]] << 12 |
                 (uint32_t)b64_table[sig[4 * g + 2]] << 6 | (uint32_t)b64_table[sig[4 * g + 3]];
    sig_out[3 * g] = (uint8_t)(v >> 16);
    sig_out[3 * g + 1] = (uint8_t)(v >> 8);
    sig_out[3 * g + 2] = (uint8_t)v;
  }
  sig_out[63] = (uint8_t)((b64_table[sig[84]] << 2) | (b64_table[sig[85]] >> 4));
  for (int i = 0; i < 32; i++) prev_out[i] = (uint8_t)(hex_value(prev[2 * i]) << 4 | hex_value(prev[2 * i + 1]));
  memcpy(signing_out, p, sig_member);
  memcpy(signing_out + sig_member, p + sig_member + SIG_MEMBER, len - sig_member - SIG_MEMBER);
  meta[0] = 1;
  meta[1] = (double)data_end;
  meta[2] = position;
  meta[3] = revision;
  meta[4] = (double)signer;
  meta[5] = (double)signer_len;
  meta[6] = (double)stream;
  meta[7] = (double)stream_len;
  meta[8] = (double)type;
  meta[9] = (double)type_len;
  return 1;
}

#endif
