/*
 * libFuzzer harness for the envelope scanner (libs/ledger/native/envelope-scan.h, compiled into the ledger kernels
 * addon): arbitrary bytes as one envelope. Built and run by scripts/fuzz-native.sh with
 * -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Werror; ASan catches any read or write outside the
 * input and the output buffers (each is an exactly sized heap allocation), UBSan any undefined behaviour.
 * Invariants checked beyond that:
 *   - a result of 0 leaves every output alone (the addon's callers rely on it);
 *   - for a recognised envelope, meta[0] is 1 and every offset/length in meta lies within the input,
 *     DATA ends inside it, and the signing bytes are the input less exactly its 97-byte "sig" member.
 */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../envelope-scan.h"

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "envelope-scan-fuzz: invariant failed: %s\n", #cond);   \
      abort();                                                                  \
    }                                                                           \
  } while (0)

static int within(double off, double n, size_t len) {
  return off >= 0 && n >= 0 && off == (double)(size_t)off && n == (double)(size_t)n && (size_t)off <= len && (size_t)n <= len - (size_t)off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Exactly sized copies so that ASan sees one byte too far. */
  uint8_t *in = malloc(size ? size : 1);
  double *meta = malloc(sizeof(double) * META);
  uint8_t *sig = malloc(64), *signing = malloc(size ? size : 1), *prev = malloc(32);
  if (!in || !meta || !sig || !signing || !prev) abort();
  memcpy(in, data, size);
  for (int i = 0; i < META; i++) meta[i] = -7;
  memset(sig, 0xa5, 64);
  memset(prev, 0xa5, 32);
  memset(signing, 0xa5, size ? size : 1);

  int r = scan_one(in, size, meta, sig, signing, prev);
  CHECK(r == 0 || r == 1);
  CHECK(memcmp(in, data, size) == 0); /* the input is only read */
  if (r == 0) {
    for (int i = 0; i < META; i++) CHECK(meta[i] == -7);
    for (int i = 0; i < 32; i++) CHECK(prev[i] == 0xa5);
  } else {
    CHECK(meta[0] == 1);
    CHECK(size >= SIG_MEMBER);
    CHECK(meta[1] > 0 && meta[1] <= (double)size); /* end of DATA */
    CHECK(within(meta[4], meta[5], size)); /* signer */
    CHECK(within(meta[6], meta[7], size)); /* stream */
    CHECK(within(meta[8], meta[9], size)); /* type */
    CHECK(meta[2] >= 0 && meta[2] <= 9007199254740991.0 && meta[3] >= 0 && meta[3] <= 9007199254740991.0);
    for (size_t i = 0; i < size; i++) CHECK(in[i] < 0x80); /* recognised only if all ASCII */
    /* The signing bytes are the input less one 97-byte "sig":"...", member. */
    const uint8_t *m = memmem(in + (size_t)meta[1], size - (size_t)meta[1], ",\"sig\":\"", 8); /* after DATA */
    CHECK(m != NULL);
    size_t at = (size_t)(m - in) + 1;
    CHECK(at + SIG_MEMBER <= size);
    CHECK(memcmp(signing, in, at) == 0);
    CHECK(memcmp(signing + at, in + at + SIG_MEMBER, size - at - SIG_MEMBER) == 0);
  }
  free(in);
  free(meta);
  free(sig);
  free(signing);
  free(prev);
  return 0;
}
