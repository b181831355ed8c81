/* sha256: SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the signature a webhook
 * carries (X-Gflow-Signature). Small and dependency-free so that the daemon, which must
 * not load libcurl or libcrypto, can sign what gflow-notify sends. */
#ifndef GFLOW_SHA256_H
#define GFLOW_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_LEN 32

struct sha256 {
    uint32_t h[8];
    uint64_t len; /* bytes hashed so far */
    uint8_t block[64];
    size_t fill;
};

void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const void *data, size_t len);
void sha256_final(struct sha256 *c, uint8_t out[SHA256_DIGEST_LEN]);
void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_LEN]);
void hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                 uint8_t out[SHA256_DIGEST_LEN]);
/* The digest in lower-case hex into hex (65 bytes with the NUL). */
void sha256_hex(const uint8_t digest[SHA256_DIGEST_LEN], char hex[2 * SHA256_DIGEST_LEN + 1]);

#endif
