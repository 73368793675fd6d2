/* pft_transport_base: what every layer of the transport uses: the clock, zmq errors and socket options,
 * bounded text copies, refusal reports, the poll arrays (pft_transport_internal.h). */
#include "pft_transport.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_transport_internal.h"

int64_t pft_transport_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int pft_transport__zerr(int code, const char *what)
{
    return pft_err(code, "transport: %s: %s", what, zmq_strerror(zmq_errno()));
}

int pft_transport__setopt_int(void *sock, int opt, int v, const char *what)
{
    if (zmq_setsockopt(sock, opt, &v, sizeof v) != 0)
        return pft_transport__zerr(PFT_ENET, what);
    return 0;
}

/* Copies text into dst[cap], truncating. */
void pft_transport__copy_text(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memmove(dst, src, n);
    dst[n] = '\0';
}

void pft_transport__refused(pft_transport_t *self, pft_transport_refusal_t kind, const char *fmt, ...)
{
    if (!self->opts.on_refusal)
        return;
    char reason[PFT_TRANSPORT_MAX_REASON + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    for (char *c = reason; *c; c++) /* parts of it may come from the network: keep it printable */
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            *c = '?';
    self->opts.on_refusal(self->opts.on_refusal_ctx, kind, reason);
}

/* Grows the poll arrays to hold the router, ZAP, router monitor and two items per peer for cap peers. */
int pft_transport__grow_items(pft_transport_t *self, int cap)
{
    size_t n = 3 + 2 * (size_t)cap;
    zmq_pollitem_t *it = pft_realloc(self->items, n * sizeof *it);
    if (it)
        self->items = it;
    item_kind_t *k = it ? pft_realloc(self->item_kind, n * sizeof *k) : NULL;
    if (k)
        self->item_kind = k;
    int *pi = k ? pft_realloc(self->item_peer, n * sizeof *pi) : NULL;
    if (pi)
        self->item_peer = pi;
    return pi ? 0 : pft_err(PFT_ENOMEM, "transport: out of memory");
}
