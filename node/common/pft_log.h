/* pft_log: levelled log lines on stderr, each naming the program/node: "2026-11-22T10:00:00.123 INFO  [b] text". */
#ifndef PFT_LOG_H
#define PFT_LOG_H

typedef enum { PFT_LOG_DEBUG = 0, PFT_LOG_INFO = 1, PFT_LOG_WARN = 2, PFT_LOG_ERROR = 3 } pft_log_level_t;

/* Sets the name shown in brackets (copied) and the lowest level printed. */
void pft_log_init(const char *name, pft_log_level_t level);
/* Parses "debug|info|warn|error"; returns 0 or PFT_EINVAL. */
int pft_log_parse_level(const char *text, pft_log_level_t *out);
void pft_log(pft_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pft_debug(...) pft_log(PFT_LOG_DEBUG, __VA_ARGS__)
#define pft_info(...) pft_log(PFT_LOG_INFO, __VA_ARGS__)
#define pft_warn(...) pft_log(PFT_LOG_WARN, __VA_ARGS__)
#define pft_error(...) pft_log(PFT_LOG_ERROR, __VA_ARGS__)

#endif
