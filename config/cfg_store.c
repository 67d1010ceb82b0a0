/* The store section's schema: its URL and key prefix checks and the one
 * rule between keys (a redis store needs a URL). Every other store key is
 * a plain row of the key table.
 */
#include <stdio.h>
#include <string.h>

#include "config/cfg_impl.h"

/* Never echoes the URL: it may hold a password. */
TG_KCHECK(tg__cfg_check_store_url)
{
    (void)len;
    return tg__cfg_redis_scheme(s)
               ? 0
               : tg__cfg_why(-1, msg, cap,
                             "not a store URL (expected redis://[user:password@]"
                             "host:port/db or unix:/path?db=N)");
}

TG_KCHECK(tg__cfg_check_prefix)
{
    if (!strpbrk(s, "{}") && len <= 48)
        return 0;
    return tg__cfg_why(-1, msg, cap,
                       "\"%s\" is not a key prefix (expected up to 48 bytes without braces)", s);
}

TG_KLOAD(tg__cfg_load_store)
{
    if (tg__cfg_want_object(c, v) < 0 || tg__cfg_walk(c, v, k->path) < 0)
        return -1;
    if (c->cfg->store.redis && !c->cfg->store.url)
        return tg__cfg_at_err(c, false, "a redis store needs \"url\"");
    return 0;
}
