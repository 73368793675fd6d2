/* pft_alloc: the one allocation wrapper; tests can make it fail after N successful calls. */
#ifndef PFT_ALLOC_H
#define PFT_ALLOC_H

#include <stddef.h>

/* malloc/calloc/realloc that return NULL on failure (including n*size overflow). */
void *pft_alloc(size_t size);
void *pft_calloc(size_t n, size_t size);
void *pft_alloc_array(size_t n, size_t size);
void *pft_realloc(void *ptr, size_t size);
/* 64-byte aligned allocation for BLAS buffers; release with pft_free as well. */
void *pft_alloc_aligned(size_t size);
void pft_free(void *ptr);
/* Frees *p and sets it to NULL; safe on NULL and twice. */
#define PFT_FREE(p) (pft_free(p), (p) = NULL)

/* Gives the pages of free heap memory back to the system (glibc's malloc_trim; nothing elsewhere): for a
 * process about to wait long after a large computation, whose freed small blocks would stay resident. */
void pft_alloc_trim(void);

/* strdup through pft_alloc; NULL on failure. */
char *pft_strdup(const char *s);

/* Test hook: the next n allocations succeed, later ones fail; n < 0 disables failures. */
void pft_alloc_fail_after(long n);

#endif
