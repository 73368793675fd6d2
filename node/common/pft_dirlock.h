/* pft_dirlock: one process per folder. An exclusive flock held on the folder itself for the life of the
 * process: the kernel releases it when the process ends (even by SIGKILL), and no file a user might delete
 * carries it (removing the folder takes everything in it). A file beside it records the holder's pid; where
 * the file system refuses locks on folders (some network file systems), that file is locked instead. */
#ifndef PFT_DIRLOCK_H
#define PFT_DIRLOCK_H

typedef struct pft_dirlock_t pft_dirlock_t;

/* Takes dir's lock (dir must exist) and writes this process's pid into dir/name. Returns 0 with *out set;
 * PFT_EUNSUPPORTED when another process holds it (nothing written; *holder gets its pid from dir/name, or 0
 * if unknown); PFT_EIO when dir or dir/name cannot be opened or locked, with the reason. The descriptors
 * are close-on-exec: a child started with exec does not inherit the lock. */
int pft_dirlock_take(const char *dir, const char *name, pft_dirlock_t **out, long *holder);

/* Releases the lock (the pid file stays); nulls *self_p; safe twice. */
void pft_dirlock_destroy(pft_dirlock_t **self_p);

/* 1 if another process holds dir's lock (*holder: its pid from dir/name, 0 if unknown), 0 if it is free or
 * dir does not exist. Writes nothing: a free lock is taken and released at once. */
int pft_dirlock_held(const char *dir, const char *name, long *holder);

#endif
