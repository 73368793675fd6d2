/* pft_slots: at most N processes of one machine compute at once. N lock files in a folder (slot.0 …
 * slot.N-1); a process computes while it holds an exclusive flock on one of them, and the kernel releases a
 * holder's lock when it ends, even by SIGKILL. A local launch of many nodes on few cores (pftnet launch
 * --compute-slots N) bounds so how many nodes hold a refit's or a head's working memory at once; a node waits
 * for a slot in its event loop, so that it keeps answering its peers meanwhile. */
#ifndef PFT_SLOTS_H
#define PFT_SLOTS_H

typedef struct pft_slots_t pft_slots_t;

/* Makes dir (if missing) and its n slot files (1 ≤ n ≤ PFT_SLOTS_MAX); an existing slot file is kept (a
 * resumed launch). 0 or PFT_EINVAL / PFT_EIO with the reason. */
int pft_slots_create(const char *dir, int n);

#define PFT_SLOTS_MAX 4096

/* Opens dir's slot files, slot.0 up to the first missing one (close-on-exec). 0 with *out set; PFT_EIO when
 * dir holds no slot.0 or a slot file cannot be opened; PFT_ENOMEM. */
int pft_slots_open(const char *dir, pft_slots_t **out);

/* Takes a free slot without waiting: 1 when one is held (already, or now), 0 when every slot is held by
 * another process, or PFT_EIO (the reason set) when the file system refuses the locks. */
int pft_slots_try(pft_slots_t *self);

/* The slot held (0 … n-1), or -1. */
int pft_slots_held(const pft_slots_t *self);

/* How many slots dir's files offer. */
int pft_slots_count(const pft_slots_t *self);

/* Gives the slot held back (nothing if none). */
void pft_slots_give_back(pft_slots_t *self);

/* Gives back what is held, closes the files; nulls *self_p; safe twice. */
void pft_slots_destroy(pft_slots_t **self_p);

#endif
