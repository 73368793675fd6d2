/* pft_alloc: the one allocation wrapper, with a failure switch for tests. */
#include "pft_alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

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

/* Blocks from PFT_ALLOC_HUGE up (a d×d matrix of doubles at d = 1280 is 13 MB) are marked for transparent
 * huge pages (MADV_HUGEPAGE, where the kernel's THP mode is "madvise", Debian's default), as glibc's tunable
 * glibc.malloc.hugetlb=1 marks every mapping it makes: the first touch of such a block then costs a few
 * faults of 2 MiB where it cost one per 4 KiB page. Measured on the 64-node exact chain (bench/README.md,
 * "Huge pages for the d×d blocks"). Smaller blocks: malloc as it is. */
#define PFT_ALLOC_HUGE ((size_t)2 << 20)

static void *advise_huge(void *p, size_t size)
{
#ifdef MADV_HUGEPAGE
    if (p && size >= PFT_ALLOC_HUGE) { /* madvise wants a page-aligned start */
        uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095;
        (void)madvise((void *)a, size + ((uintptr_t)p - a), MADV_HUGEPAGE); /* advice: may be refused */
    }
#else
    (void)size;
#endif
    return p;
}

void pft_alloc_trim(void)
{
#ifdef __GLIBC__
    (void)malloc_trim(0);
#endif
}

void *pft_alloc(size_t size)
{
    if (should_fail())
        return NULL;
    return advise_huge(malloc(size ? size : 1), size);
}

void *pft_calloc(size_t n, size_t size)
{
    if (should_fail())
        return NULL;
    if (n == 0 || size == 0)
        return calloc(1, 1);
    if (n > SIZE_MAX / size)
        return NULL;
    return advise_huge(calloc(n, size), n * size);
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
    return advise_huge(realloc(ptr, size ? size : 1), size);
}

void *pft_alloc_aligned(size_t size)
{
    if (should_fail())
        return NULL;
    void *p = NULL;
    size = (size + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, size ? size : 64) != 0)
        return NULL;
    return advise_huge(p, size);
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
