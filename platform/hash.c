/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Keyed hashing of keys that a peer chooses (SipHash-2-4, Aumasson and Bernstein, 2012). A table
 * whose buckets come from an unkeyed mix of sender-chosen fields can be driven onto one chain by
 * anyone who reads the mix; with a secret key per table, nobody who does not know it can aim.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "platform.h"

static inline uint64_t rotl64(uint64_t x, unsigned int b)
{
	return (x << b) | (x >> (64 - b));
}

static inline void sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = rotl64(v[1], 13);
	v[1] ^= v[0];
	v[0] = rotl64(v[0], 32);
	v[2] += v[3];
	v[3] = rotl64(v[3], 16);
	v[3] ^= v[2];
	v[0] += v[3];
	v[3] = rotl64(v[3], 21);
	v[3] ^= v[0];
	v[2] += v[1];
	v[1] = rotl64(v[1], 17);
	v[1] ^= v[2];
	v[2] = rotl64(v[2], 32);
}

static inline void sip_block(uint64_t v[4], uint64_t m)
{
	v[3] ^= m;
	sip_round(v);
	sip_round(v);
	v[0] ^= m;
}

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t x = 0;

	for (unsigned int i = 0; i < 8; i++)
		x |= (uint64_t)p[i] << (8 * i);
	return x;
}

uint64_t plat_siphash(const struct plat_hash_key *key, const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t v[4] = {
		UINT64_C(0x736f6d6570736575) ^ key->k0, UINT64_C(0x646f72616e646f6d) ^ key->k1,
		UINT64_C(0x6c7967656e657261) ^ key->k0, UINT64_C(0x7465646279746573) ^ key->k1,
	};
	uint64_t last = (uint64_t)len << 56;
	size_t full = len & ~(size_t)7;

	for (size_t i = 0; i < full; i += 8)
		sip_block(v, load_le64(p + i));
	for (size_t i = full; i < len; i++)
		last |= (uint64_t)p[i] << (8 * (i - full));
	sip_block(v, last);
	v[2] ^= 0xff;
	for (unsigned int r = 0; r < 4; r++)
		sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

int plat_hash_key_random(struct plat_hash_key *key)
{
	uint8_t bytes[16];
	size_t got = 0;

	while (got < sizeof(bytes)) {
		ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	key->k0 = load_le64(bytes);
	key->k1 = load_le64(bytes + 8);
	return 0;
}
