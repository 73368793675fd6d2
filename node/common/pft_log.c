/* pft_log: one line per event, flushed at once, so interleaved node logs stay readable. */
#include "pft_log.h"

#include "pft_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static char s_name[64] = "pftnet";
static pft_log_level_t s_level = PFT_LOG_INFO;
static const char *const s_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

void pft_log_init(const char *name, pft_log_level_t level)
{
    snprintf(s_name, sizeof s_name, "%s", name ? name : "pftnet");
    s_level = level;
}

int pft_log_parse_level(const char *text, pft_log_level_t *out)
{
    for (int i = 0; i < 4; i++)
        if (strcasecmp(text, s_names[i]) == 0 || (i == 2 && strcasecmp(text, "warning") == 0)) {
            *out = (pft_log_level_t)i;
            return 0;
        }
    return pft_err(PFT_EINVAL, "log level '%s': expected debug, info, warn or error", text);
}

void pft_log(pft_log_level_t level, const char *fmt, ...)
{
    if (level < s_level)
        return;
    char line[2048];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, ".%03d %-5s [%s] ", (int)(tv.tv_usec / 1000),
                  s_names[level], s_name);
    va_list ap;
    va_start(ap, fmt);
    if (n < (int)sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
}
