/* pft_error: error codes shared by every pftnet module, and the context message that travels with them. */
#ifndef PFT_ERROR_H
#define PFT_ERROR_H

/* Every fallible pftnet function returns 0 (PFT_OK) or one of these negative codes.
 * X(name, value, text): one table gives the enum, pft_strerror() and pft_errname(). */
#define PFT_ERROR_TABLE(X)                                                   \
    X(PFT_OK, 0, "success")                                                  \
    X(PFT_ENOMEM, -1, "out of memory")                                       \
    X(PFT_EINVAL, -2, "invalid argument")                                    \
    X(PFT_EIO, -3, "input/output error")                                     \
    X(PFT_EFORMAT, -4, "malformed input")                                    \
    X(PFT_ENUMERIC, -5, "numerical failure")                                 \
    X(PFT_ERANGE, -6, "value out of range")                                  \
    X(PFT_ETOPO, -7, "invalid topology")                                     \
    X(PFT_ENET, -8, "network error")                                         \
    X(PFT_ETIMEOUT, -9, "deadline passed")                                   \
    X(PFT_EAUTH, -10, "authentication failed")                               \
    X(PFT_EREJECT, -11, "rejected by peer")                                  \
    X(PFT_EBUDGET, -12, "privacy budget exhausted")                          \
    X(PFT_EINTR, -13, "interrupted")                                         \
    X(PFT_EUNSUPPORTED, -14, "not supported")                                \
    X(PFT_EPOLICY, -15, "refused by policy")

typedef enum {
#define PFT_X_ENUM(name, value, text) name = value,
    PFT_ERROR_TABLE(PFT_X_ENUM)
#undef PFT_X_ENUM
} pft_err_t;

/* Human-readable text for a code ("unknown error" for codes not in the table). */
const char *pft_strerror(int code);

/* Symbolic name of a code, e.g. "PFT_EFORMAT". */
const char *pft_errname(int code);

/* Records a context message for the calling thread and returns code, so callers write
 *     return pft_err(PFT_EFORMAT, "%s: header length %u exceeds %u", path, n, max);
 * The message replaces any earlier one. */
int pft_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends context to the calling thread's message ("loading node a: " + old) and returns code. */
int pft_err_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The calling thread's last context message; falls back to pft_strerror of the last code.
 * Never NULL. Valid until the next pft_err* call on this thread. */
const char *pft_errmsg(void);

/* Forgets the calling thread's message. */
void pft_err_clear(void);

#endif
