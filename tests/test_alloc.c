/* Tests of pft_alloc: large blocks are marked for transparent huge pages (MADV_HUGEPAGE) and behave as
 * malloc's; overflow and the failure switch. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_test.h"

/* Whether the mapping of /proc/self/smaps holding p carries the flag "hg" (MADV_HUGEPAGE); -1 if p's mapping
 * is not found or smaps cannot be read. */
static int advised_huge(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int in = 0, found = -1;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (line[strspn(line, "0123456789abcdef")] == '-' && sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            in = a >= lo && a < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            found = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

/* Whether this kernel does transparent huge pages on advice ("madvise" or "always" selected). */
static int thp_available(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char buf[128] = "";
    if (!f)
        return 0;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = 0;
    fclose(f);
    return strstr(buf, "[madvise]") || strstr(buf, "[always]");
}

/* A d×d matrix of doubles at d = 1280 (13 MB): advised, usable, calloc's zeroed, realloc keeps it. */
static void test_large_blocks(void)
{
    size_t n = (size_t)1280 * 1280;
    double *w = pft_alloc_array(n, sizeof *w);
    double *z = pft_calloc(n, sizeof *z);
    CHECK(w && z);
    for (size_t i = 0; i < n; i += 4096)
        CHECK(z[i] == 0.0);
    CHECK(z[n - 1] == 0.0);
    for (size_t i = 0; i < n; i++)
        w[i] = (double)i;
    if (thp_available()) {
        CHECK_MSG(advised_huge(w) == 1, "a 13 MB block from pft_alloc_array is not marked MADV_HUGEPAGE");
        CHECK_MSG(advised_huge(z) == 1, "a 13 MB block from pft_calloc is not marked MADV_HUGEPAGE");
    } else {
        printf("  this kernel does no transparent huge pages: the advice is not checked\n");
    }
    double *r = pft_realloc(w, 2 * n * sizeof *w);
    CHECK(r != NULL);
    if (r) {
        w = r;
        CHECK(w[0] == 0.0 && w[n - 1] == (double)(n - 1) && w[n / 2] == (double)(n / 2));
        if (thp_available())
            CHECK_MSG(advised_huge(w) == 1,
                      "a block grown by pft_realloc to 26 MB is not marked MADV_HUGEPAGE");
    }
    double *al = pft_alloc_aligned(n * sizeof *al);
    CHECK(al && ((uintptr_t)al & 63) == 0);
    if (al && thp_available())
        CHECK(advised_huge(al) == 1);
    pft_free(al);
    pft_free(w);
    pft_free(z);
}

static void test_overflow_and_failure_switch(void)
{
    CHECK(pft_alloc_array(SIZE_MAX / 2, 4) == NULL);
    CHECK(pft_calloc(SIZE_MAX / 2, 4) == NULL);
    pft_alloc_fail_after(1);
    void *a = pft_alloc(10), *b = pft_alloc((size_t)16 << 20);
    pft_alloc_fail_after(-1);
    CHECK(a != NULL && b == NULL);
    pft_free(a);
    void *z = pft_calloc(0, 8); /* a zero-size request still gives a block to free */
    CHECK(z != NULL);
    pft_free(z);
}

int main(void)
{
    RUN(test_large_blocks);
    RUN(test_overflow_and_failure_switch);
    return pft_test_done();
}
