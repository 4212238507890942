/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cost of authenticating one request on a polling lcore, by crypto library: batchwire's tag
 * (include/batchwire/auth.h: OpenSSL's SHA-256 with the key's HMAC states computed once) against
 * libsodium's crypto_auth_hmacsha256 with its state copied the same way, on datagrams of a bare
 * header, a 1500-byte MTU and a 9000-byte one. One thread; the best of several rounds. Prints ns per
 * tag and libsodium ÷ OpenSSL; without libsodium (libsodium-dev) it says so and measures OpenSSL
 * alone. docs/security.md says what was chosen by it; docs/performance.md has the runs.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <batchwire/auth.h>

#ifdef BENCH_HAVE_SODIUM
#include <sodium.h>
#endif

#define ROUNDS 5
#define ITERATIONS 100000

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint8_t g_dgram[9000];

static double openssl_ns(const struct bw_hmac_key *k, const struct bw_auth_pseudo *p, uint32_t body_len)
{
	double best = 1e30;
	uint8_t tag[BW_AUTH_TAG_LEN];

	for (int r = 0; r < ROUNDS; r++) {
		double t0 = now_s();

		for (int i = 0; i < ITERATIONS; i++) {
			bw_auth_tag(k, p, g_dgram, (uint32_t)sizeof(struct bw_hdr) + body_len + BW_AUTH_COVERED_TRAILER, tag);
			g_dgram[50] ^= tag[0]; /* a dependency: no iteration can be skipped */
		}
		double ns = (now_s() - t0) / ITERATIONS * 1e9;
		best = ns < best ? ns : best;
	}
	return best;
}

#ifdef BENCH_HAVE_SODIUM
static double sodium_ns(const crypto_auth_hmacsha256_state *st0, const struct bw_auth_pseudo *p, uint32_t body_len)
{
	size_t len = sizeof(struct bw_hdr) + body_len + BW_AUTH_COVERED_TRAILER;
	double best = 1e30;
	uint8_t tag[BW_AUTH_TAG_LEN];

	for (int r = 0; r < ROUNDS; r++) {
		double t0 = now_s();

		for (int i = 0; i < ITERATIONS; i++) {
			crypto_auth_hmacsha256_state st = *st0;

			crypto_auth_hmacsha256_update(&st, (const uint8_t *)p, sizeof(*p));
			crypto_auth_hmacsha256_update(&st, g_dgram, len);
			crypto_auth_hmacsha256_final(&st, tag);
			g_dgram[50] ^= tag[0];
		}
		double ns = (now_s() - t0) / ITERATIONS * 1e9;
		best = ns < best ? ns : best;
	}
	return best;
}
#endif

int main(void)
{
	static const uint32_t bodies[] = { 0, 1500 - 28 - 40 - 40, 9000 - 28 - 40 - 40 };
	static const uint8_t key[32] = "benchmark key of thirty-two byte";
	struct bw_auth_pseudo pseudo = { 0x0100000a, 0x0200000a, 0x1234, 0xc61e };
	struct bw_hmac_key k;
	char line[256];
	size_t off = 0;

	memset(g_dgram, 0x5a, sizeof(g_dgram));
	bw_hmac_key_init(&k, key, sizeof(key));
#ifdef BENCH_HAVE_SODIUM
	crypto_auth_hmacsha256_state st0;

	if (sodium_init() < 0) {
		fprintf(stderr, "bench_hmac: libsodium did not initialise\n");
		return 1;
	}
	crypto_auth_hmacsha256_init(&st0, key, sizeof(key));
#else
	printf("libsodium not found at build time (libsodium-dev): OpenSSL alone\n");
#endif
	printf("%-28s %12s %14s %10s\n", "datagram", "openssl_ns", "libsodium_ns", "ratio");
	for (unsigned int i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		uint32_t bytes = 40 + bodies[i] + 40;
		double o = openssl_ns(&k, &pseudo, bodies[i]);
#ifdef BENCH_HAVE_SODIUM
		double s = sodium_ns(&st0, &pseudo, bodies[i]);

		printf("%5u bytes (body %4u)       %12.0f %14.0f %10.2f\n", bytes, bodies[i], o, s, s / o);
		off += (size_t)snprintf(line + off, sizeof(line) - off, "%shmac_%u_sodium_vs_openssl=%.2f", i ? " " : "",
					bytes, s / o);
#else
		printf("%5u bytes (body %4u)       %12.0f %14s %10s\n", bytes, bodies[i], o, "na", "na");
		off += (size_t)snprintf(line + off, sizeof(line) - off, "%shmac_%u_openssl_ns=%.0f", i ? " " : "", bytes,
					o);
#endif
	}
	printf("%s\n", line);
	return 0;
}
