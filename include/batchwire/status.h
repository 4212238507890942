/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one status enum that travels on the wire and that every module and the client use.
 * Values are part of protocol v1 (docs/protocol.md): never renumber, only append.
 * The names and meanings follow gRPC's canonical codes so operators read them at a glance.
 */
#ifndef BATCHWIRE_STATUS_H
#define BATCHWIRE_STATUS_H

#include <stdint.h>

enum bw_status {
	BW_STATUS_OK = 0,
	BW_STATUS_INVALID_ARGUMENT = 1,   /* malformed request: the client must change it */
	BW_STATUS_NOT_FOUND = 2,          /* unknown model id */
	BW_STATUS_RESOURCE_EXHAUSTED = 3, /* out of buffers or request slots: retry later */
	BW_STATUS_DEADLINE_EXCEEDED = 4,  /* the request's budget ran out before it ran */
	BW_STATUS_UNAVAILABLE = 5,        /* batch queue full, stopping, or not ready: retry later */
	BW_STATUS_INTERNAL = 6,           /* a server bug or a failed kernel: report it */
	BW_STATUS_UNAUTHENTICATED = 7,    /* authentication trailer missing or wrong */
	BW_STATUS_UNIMPLEMENTED = 8,      /* valid v1 feature this server does not implement yet */
	BW_STATUS_COUNT
};

/* Upper-case name as written in docs/protocol.md and telemetry; "UNKNOWN" for values outside v1. */
static inline const char *bw_status_name(uint32_t status)
{
	static const char *const names[BW_STATUS_COUNT] = {
		[BW_STATUS_OK] = "OK",
		[BW_STATUS_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
		[BW_STATUS_NOT_FOUND] = "NOT_FOUND",
		[BW_STATUS_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
		[BW_STATUS_DEADLINE_EXCEEDED] = "DEADLINE_EXCEEDED",
		[BW_STATUS_UNAVAILABLE] = "UNAVAILABLE",
		[BW_STATUS_INTERNAL] = "INTERNAL",
		[BW_STATUS_UNAUTHENTICATED] = "UNAUTHENTICATED",
		[BW_STATUS_UNIMPLEMENTED] = "UNIMPLEMENTED",
	};
	return status < BW_STATUS_COUNT ? names[status] : "UNKNOWN";
}

#endif /* BATCHWIRE_STATUS_H */
