/* rvx/types.h: status codes, caller-owned requests, and the object types every layer names. */
#ifndef RVX_TYPES_H
#define RVX_TYPES_H

#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>

/* Every call returns one of these. Negative values are errors; RVX_INPROGRESS means the
 * operation was accepted and completes later through its request (or a flush). */
typedef enum rvx_status {
    RVX_OK                 = 0,
    RVX_INPROGRESS         = 1,
    RVX_ERR_INVALID_PARAM  = -1,  /* a wrong argument: nothing was done */
    RVX_ERR_NO_MEMORY      = -2,
    RVX_ERR_NO_RESOURCE    = -3,  /* queue or ring full: call rvx_progress() and try again */
    RVX_ERR_REMOTE_ACCESS  = -4,  /* outside the remote region or not permitted: nothing written */
    RVX_ERR_PEER_FAILED    = -5,  /* the peer process is gone */
    RVX_ERR_CANCELED       = -6,
    RVX_ERR_MSG_TRUNCATED  = -7,
    RVX_ERR_UNSUPPORTED    = -8,
    RVX_ERR_TIMED_OUT      = -9,
    RVX_ERR_NO_DEVICE      = -10,
    RVX_ERR_IO             = -11,
    RVX_ERR_EXCEEDS_LIMIT  = -12, /* larger than the configured maximum: nothing sent */
    RVX_ERR_BAD_MESSAGE    = -13  /* a malformed message from a peer (counted, dropped) */
} rvx_status_t;

static inline const char *rvx_status_str(rvx_status_t s)
{
    switch (s) {
    case RVX_OK:                return "success";
    case RVX_INPROGRESS:        return "operation in progress";
    case RVX_ERR_INVALID_PARAM: return "invalid parameter";
    case RVX_ERR_NO_MEMORY:     return "out of memory";
    case RVX_ERR_NO_RESOURCE:   return "no resource (queue full): progress and retry";
    case RVX_ERR_REMOTE_ACCESS: return "remote access error (outside the region or not permitted)";
    case RVX_ERR_PEER_FAILED:   return "peer failed (process gone or unreachable)";
    case RVX_ERR_CANCELED:      return "operation canceled";
    case RVX_ERR_MSG_TRUNCATED: return "message truncated";
    case RVX_ERR_UNSUPPORTED:   return "operation not supported by this transport or memory";
    case RVX_ERR_TIMED_OUT:     return "timed out";
    case RVX_ERR_NO_DEVICE:     return "no such device";
    case RVX_ERR_IO:            return "input/output error";
    case RVX_ERR_EXCEEDS_LIMIT: return "size exceeds the configured limit";
    case RVX_ERR_BAD_MESSAGE:   return "malformed message from a peer";
    }
    return "unknown status";
}

/* A request is owned by the caller (on its stack or in its own structure): rvx never allocates
 * on a fast path. `status` is RVX_INPROGRESS while pending and the final status afterwards. */
typedef struct rvx_request {
    volatile int status;
    uint64_t     tl_private[3]; /* rvx's while pending: a transport's links and first error, or
                                 * where a posted tag receive's data goes */
} rvx_request_t;

typedef struct rvx_context rvx_context_t;
typedef struct rvx_worker  rvx_worker_t;
typedef struct rvx_ep      rvx_ep_t;
typedef struct rvx_mem     rvx_mem_t;

/* Counters of what peers sent that could not be trusted. Each kind is also reported once on
 * stderr, the first time it happens on a worker. */
typedef struct rvx_worker_stats {
    uint64_t am_unknown_id;     /* AM for a handler id this build does not have */
    uint64_t am_bad_frame;      /* header and length disagree, too many arguments, ... */
    uint64_t am_bad_long_target;/* long AM whose payload address is not in a registered region */
    uint64_t tag_bad_frame;     /* tag-protocol frame of unknown type, wrong length or stale id */
} rvx_worker_stats_t;

/* One line on stderr, prefixed so that it is clear where it comes from. Cold paths only. */
static __attribute__((cold, format(printf, 1, 2), unused)) void rvx__log(const char *fmt, ...)
{
    va_list ap;
    char line[512];
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "rvx: %s\n", line);
}

#endif /* RVX_TYPES_H */
