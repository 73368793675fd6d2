/* pft_test: a minimal test harness; each tests/test_<module>.c is one executable registered with ctest. */
#ifndef PFT_TEST_H
#define PFT_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Exit code ctest treats as "skipped" (SKIP_RETURN_CODE). */
#define PFT_TEST_SKIP 77

static int pft_t_failed_checks;
static int pft_t_passed;
static int pft_t_failed;
static int pft_t_skips;   /* SKIP_TEST calls so far */
static int pft_t_skipped; /* test functions that skipped (part of) their checks and failed none */

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                \
            pft_t_failed_checks++;                                                                           \
        }                                                                                                    \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                                 \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fprintf(stderr, "\n");                                                                           \
            pft_t_failed_checks++;                                                                           \
        }                                                                                                    \
    } while (0)

/* |a - b| <= tol */
#define CHECK_NEAR(a, b, tol)                                                                                \
    do {                                                                                                     \
        double pft_t_a = (double)(a), pft_t_b = (double)(b);                                                 \
        if (!(fabs(pft_t_a - pft_t_b) <= (tol))) {                                                           \
            fprintf(stderr, "  FAIL %s:%d: %s = %.9g, %s = %.9g, tol %.3g\n", __FILE__, __LINE__, #a,        \
                    pft_t_a, #b, pft_t_b, (double)(tol));                                                    \
            pft_t_failed_checks++;                                                                           \
        }                                                                                                    \
    } while (0)

/* Records that the calling test function could not run (some of) its checks, and why; the caller then
 * returns. A test function that skipped counts as skipped, never as passed, and the executable exits
 * PFT_TEST_SKIP. */
#define SKIP_TEST(...)                                                                                       \
    do {                                                                                                     \
        fprintf(stderr, "  SKIPPED %s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                                        \
        fprintf(stderr, "\n");                                                                               \
        pft_t_skips++;                                                                                       \
    } while (0)

/* Call a test function; it passes when it adds no failed check and did not skip. */
#define RUN(fn)                                                                                              \
    do {                                                                                                     \
        int pft_t_before = pft_t_failed_checks, pft_t_skips_before = pft_t_skips;                            \
        fprintf(stderr, "- %s\n", #fn);                                                                      \
        fn();                                                                                                \
        if (pft_t_failed_checks != pft_t_before)                                                             \
            pft_t_failed++;                                                                                  \
        else if (pft_t_skips != pft_t_skips_before)                                                          \
            pft_t_skipped++;                                                                                 \
        else                                                                                                 \
            pft_t_passed++;                                                                                  \
    } while (0)

/* Print the closing line and return the exit status for main(): 1 when a test failed, else PFT_TEST_SKIP
 * (ctest reports the executable as skipped) when one skipped, else 0. */
static inline int pft_test_done(void)
{
    printf("%d passed, %d failed, %d skipped\n", pft_t_passed, pft_t_failed, pft_t_skipped);
    return pft_t_failed ? 1 : pft_t_skipped ? PFT_TEST_SKIP : 0;
}

/* Path to the bundled example features examples/data/pacs-small/<file> (a stratified float16 subset of the
 * PACS MobileNetV2 features, 300 train and 100 test rows per class; its PROVENANCE.md), in a static buffer.
 * They are part of the repository, so a test never skips for want of data; the larger data sets beside the
 * repository are for benchmarks and experiments only. */
static inline const char *pft_test_example_data(const char *file)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/examples/data/pacs-small/%s", PFT_SOURCE_DIR, file);
    return buf;
}

#endif
