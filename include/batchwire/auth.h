/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Protocol v1 authentication (docs/protocol.md, "Authentication trailer"): what the tag covers, the
 * HMAC-SHA256 that computes it, and one line of a key file. The server and the client library both
 * build on this header, so they cannot disagree about a byte.
 *
 * The HMAC (RFC 2104) is written over OpenSSL's SHA-256 block functions rather than its EVP_MAC
 * objects: a key's inner and outer states are computed once, when the key is loaded, and each tag is
 * a copy of two plain structs and three updates. Nothing is allocated, locked or asked of the kernel
 * per request, and OpenSSL's SHA-256 runs on the CPU's SHA extensions where it has them (5x
 * libsodium's portable code on the machines measured: docs/security.md). Those functions are
 * deprecated in OpenSSL 3 in favour of EVP, whose context copy allocates; they are kept there.
 */
#ifndef BATCHWIRE_AUTH_H
#define BATCHWIRE_AUTH_H

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef OPENSSL_SUPPRESS_DEPRECATED
#define OPENSSL_SUPPRESS_DEPRECATED
#endif
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <batchwire/wire.h>

#define BW_AUTH_TAG_LEN 32
#define BW_AUTH_KEY_MIN 16  /* bytes of secret: below 128 bits a key is guessable */
#define BW_AUTH_KEY_MAX 64  /* one SHA-256 block; longer keys would be hashed down to 32 bytes anyway */
#define BW_AUTH_COVERED_TRAILER 8 /* key_id and reserved: the trailer's bytes before the tag */

/*
 * The addresses the tag binds a datagram to, in network byte order as on the wire: the client's
 * IPv4 address and UDP port as the server sees them, and the server's. A datagram replayed from
 * another source, or to another server sharing the key, fails its tag. The server keeps its replay
 * state per source on the polling lcore that source's packets reach, which is only sound because a
 * replay cannot change its source.
 */
struct bw_auth_pseudo {
	uint32_t src_addr;
	uint32_t dst_addr;
	uint16_t src_port;
	uint16_t dst_port;
} __attribute__((packed));
static_assert(sizeof(struct bw_auth_pseudo) == 12, "bw_auth_pseudo size");

/* A key ready to tag with: SHA-256 after its ipad block, and after its opad block. */
struct bw_hmac_key {
	SHA256_CTX inner;
	SHA256_CTX outer;
};

/** Prepares key (len 1..BW_AUTH_KEY_MAX bytes) for bw_hmac_parts. */
static inline void bw_hmac_key_init(struct bw_hmac_key *k, const uint8_t *key, size_t len)
{
	uint8_t pad[SHA256_CBLOCK];

	for (size_t i = 0; i < sizeof(pad); i++)
		pad[i] = (uint8_t)((i < len ? key[i] : 0) ^ 0x36);
	SHA256_Init(&k->inner);
	SHA256_Update(&k->inner, pad, sizeof(pad));
	for (size_t i = 0; i < sizeof(pad); i++)
		pad[i] = (uint8_t)((i < len ? key[i] : 0) ^ 0x5c);
	SHA256_Init(&k->outer);
	SHA256_Update(&k->outer, pad, sizeof(pad));
	OPENSSL_cleanse(pad, sizeof(pad));
}

/** HMAC-SHA256 under k of the concatenation of n parts. */
static inline void bw_hmac_parts(const struct bw_hmac_key *k, const void *const *parts, const size_t *lens,
				 unsigned int n, uint8_t out[BW_AUTH_TAG_LEN])
{
	uint8_t inner[BW_AUTH_TAG_LEN];
	SHA256_CTX c = k->inner;

	for (unsigned int i = 0; i < n; i++)
		SHA256_Update(&c, parts[i], lens[i]);
	SHA256_Final(inner, &c);
	c = k->outer;
	SHA256_Update(&c, inner, sizeof(inner));
	SHA256_Final(out, &c);
}

/**
 * The tag of a datagram: HMAC-SHA256 of pseudo, then the datagram's first covered bytes: everything
 * before the tag (header, body, any padding, key_id, reserved), that is its length less 32.
 */
static inline void bw_auth_tag(const struct bw_hmac_key *k, const struct bw_auth_pseudo *pseudo, const void *dgram,
			       uint32_t covered, uint8_t out[BW_AUTH_TAG_LEN])
{
	const void *parts[2] = { pseudo, dgram };
	size_t lens[2] = { sizeof(*pseudo), covered };

	bw_hmac_parts(k, parts, lens, 2, out);
}

/** \return whether two tags are equal, in time that does not depend on where they differ. */
static inline bool bw_auth_tag_equal(const uint8_t *a, const uint8_t *b)
{
	return CRYPTO_memcmp(a, b, BW_AUTH_TAG_LEN) == 0;
}

/*
 * One line of a key file: "KEY_ID HEX_SECRET", the id a decimal in 1..4294967295 and the secret
 * 32..128 hex digits (16..64 bytes); blank lines and lines starting with '#' hold no key.
 * \return 1 with *id, secret and *len set; 0 for a line without a key; -EINVAL with *why set.
 */
static inline int bw_key_line_parse(const char *line, uint32_t *id, uint8_t secret[BW_AUTH_KEY_MAX], size_t *len,
				    const char **why)
{
	const char *p = line, *hex;
	unsigned long long v = 0;
	size_t digits = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\0' || *p == '\n' || *p == '#')
		return 0;
	if (!isdigit((unsigned char)*p)) {
		*why = "expected a key id (a decimal integer) first";
		return -EINVAL;
	}
	while (isdigit((unsigned char)*p) && v <= UINT32_MAX)
		v = v * 10 + (unsigned long long)(*p++ - '0');
	if (v == 0 || v > UINT32_MAX) {
		*why = "the key id must be in 1..4294967295";
		return -EINVAL;
	}
	if (*p != ' ' && *p != '\t') {
		*why = "expected a space between the key id and the secret";
		return -EINVAL;
	}
	while (*p == ' ' || *p == '\t')
		p++;
	hex = p;
	while (isxdigit((unsigned char)hex[digits]))
		digits++;
	for (p = hex + digits; *p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'; p++)
		;
	if (*p != '\0') {
		*why = "the secret must be hex digits only, and nothing may follow it";
		return -EINVAL;
	}
	if (digits % 2 != 0 || digits < 2 * BW_AUTH_KEY_MIN || digits > 2 * BW_AUTH_KEY_MAX) {
		*why = "the secret must be 32..128 hex digits (16..64 bytes), an even number";
		return -EINVAL;
	}
	for (size_t i = 0; i < digits / 2; i++) {
		char byte[3] = { hex[2 * i], hex[2 * i + 1], '\0' };

		secret[i] = (uint8_t)strtoul(byte, NULL, 16);
	}
	*id = (uint32_t)v;
	*len = digits / 2;
	return 1;
}

#endif /* BATCHWIRE_AUTH_H */
