/* pft_error: the error table, and a per-thread context message carried up to the one place that reports it. */
#include "pft_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PFT_ERRMSG_MAX 1024

static _Thread_local char s_msg[PFT_ERRMSG_MAX];
static _Thread_local int s_code;

const char *pft_strerror(int code)
{
    switch (code) {
#define PFT_X_TEXT(name, value, text) \
    case value:                       \
        return text;
        PFT_ERROR_TABLE(PFT_X_TEXT)
#undef PFT_X_TEXT
    default:
        return "unknown error";
    }
}

const char *pft_errname(int code)
{
    switch (code) {
#define PFT_X_NAME(name, value, text) \
    case value:                       \
        return #name;
        PFT_ERROR_TABLE(PFT_X_NAME)
#undef PFT_X_NAME
    default:
        return "PFT_E?";
    }
}

int pft_err(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s_msg, sizeof s_msg, fmt, ap);
    va_end(ap);
    s_code = code;
    return code;
}

int pft_err_wrap(int code, const char *fmt, ...)
{
    char old[PFT_ERRMSG_MAX];
    if (s_msg[0])
        memcpy(old, s_msg, sizeof old);
    else
        snprintf(old, sizeof old, "%s", pft_strerror(code));
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s_msg, sizeof s_msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n + 2 < sizeof s_msg) {
        size_t room = sizeof s_msg - (size_t)n - 3, len = strlen(old);
        if (len > room)
            len = room;
        memcpy(s_msg + n, ": ", 2);
        memcpy(s_msg + n + 2, old, len);
        s_msg[n + 2 + len] = '\0';
    }
    s_code = code;
    return code;
}

const char *pft_errmsg(void)
{
    if (s_msg[0])
        return s_msg;
    return pft_strerror(s_code);
}

void pft_err_clear(void)
{
    s_msg[0] = '\0';
    s_code = 0;
}
