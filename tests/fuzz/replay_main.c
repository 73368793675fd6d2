/* replay_main: runs a libFuzzer harness (LLVMFuzzerTestOneInput) over corpus files without libFuzzer, so
 * ctest replays the corpora with any compiler under the test build's sanitizers. */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional, as in libFuzzer: a harness may define it to set itself up once. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Provided by ASan/UBSan when linked in: called before a sanitizer report ends the process. */
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static long s_files;                   /* inputs run so far */
static size_t s_bytes;                 /* their total size */
static const char *volatile s_current; /* the input being run, named if the process dies */

static void name_current(void)
{
    const char *p = s_current;
    if (p) {
        static const char pre[] = "replay: died on input ";
        ssize_t rc = write(2, pre, sizeof pre - 1);
        rc = write(2, p, strlen(p));
        rc = write(2, "\n", 1);
        (void)rc;
    }
}

static void on_signal(int sig)
{
    name_current();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Reads path whole into a buffer of exactly its size (so ASan sees a read one past the end) and runs
 * the harness on it. Returns 0, or -1 if the file cannot be read. */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
        fprintf(stderr, "replay: cannot stat %s\n", path);
        fclose(f);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf || (size && fread(buf, 1, size, f) != size)) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    if (getenv("PFT_REPLAY_VERBOSE"))
        fprintf(stderr, "replay: %s (%zu bytes)\n", path, size);
    s_current = path;
    LLVMFuzzerTestOneInput(buf, size);
    s_current = NULL;
    free(buf);
    s_files++;
    s_bytes += size;
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Runs every regular, non-hidden file of a directory (not recursive), in name order. */
static int run_dir(const char *dir)
{
    struct dirent **ents = NULL;
    int n = scandir(dir, &ents, NULL, by_name);
    if (n < 0) {
        fprintf(stderr, "replay: cannot list %s\n", dir);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (ents[i]->d_name[0] != '.' && rc == 0) {
            size_t len = strlen(dir) + strlen(ents[i]->d_name) + 2;
            char *path = malloc(len);
            struct stat st;
            if (!path) {
                rc = -1;
            } else {
                snprintf(path, len, "%s/%s", dir, ents[i]->d_name);
                if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
                    rc = run_file(path);
                free(path);
            }
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr,
                "usage: %s DIR|FILE...\n  runs the fuzz harness on every file given or found in DIR\n",
                argv[0]);
        return 2;
    }
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(name_current);
    signal(SIGABRT, on_signal); /* the harnesses abort() on a violated invariant */
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
            return 1;
        }
        if ((S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i])) != 0)
            return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("replay: %ld inputs, %zu bytes, %.2f s\n", s_files, s_bytes, secs);
    if (s_files == 0) { /* an empty or missing corpus must not pass silently */
        fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    return 0;
}
