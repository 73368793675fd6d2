/* pft_alloc: the one allocation wrapper, with a failure switch for tests. */
#include "pft_alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static _Atomic long s_fail_after = -1;

static int should_fail(void)
{
    if (s_fail_after < 0)
        return 0;
    if (s_fail_after == 0)
        return 1;
    s_fail_after--;
    return 0;
}

void pft_alloc_fail_after(long n)
{
    s_fail_after = n;
}

void *pft_alloc(size_t size)
{
    if (should_fail())
        return NULL;
    return malloc(size ? size : 1);
}

void *pft_calloc(size_t n, size_t size)
{
    if (should_fail())
        return NULL;
    if (n == 0 || size == 0)
        return calloc(1, 1);
    return calloc(n, size);
}

void *pft_alloc_array(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return pft_alloc(n * size);
}

void *pft_realloc(void *ptr, size_t size)
{
    if (should_fail())
        return NULL;
    return realloc(ptr, size ? size : 1);
}

void *pft_alloc_aligned(size_t size)
{
    if (should_fail())
        return NULL;
    void *p = NULL;
    size = (size + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, size ? size : 64) != 0)
        return NULL;
    return p;
}

void pft_free(void *ptr)
{
    free(ptr);
}

char *pft_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = pft_alloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}
