/* The setup error (see err.h). */
#include "config/err.h"

#include <stdarg.h>
#include <stdio.h>

int tg_err_set(tg_err_t *err, int rc, const char *fmt, ...)
{
    va_list ap;

    if (err) {
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return rc;
}
