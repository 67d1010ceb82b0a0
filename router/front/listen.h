/* Unix listening sockets of `toolgate serve`, bound so that the socket
 * file is never wider than its configured mode, and changed later only
 * while it is still the file toolgate bound.
 *
 * Why not uv_pipe_bind then chmod(path):
 *   - bind(2) creates the socket file with the mode of the socket's own
 *     inode (0777) less the umask, so the file stood 0777 (umask 0) until
 *     the chmod. Linux takes that mode from the socket inode, which
 *     fchmod on the socket sets before bind: the file is then born at the
 *     configured mode less the umask, never wider. (fchmod on the socket
 *     after bind changes nothing on the file; where fchmod on a socket
 *     fails, a umask that clears every bit outside the mode does the same
 *     around bind.)
 *   - chmod(path) follows a symlink planted at the path since: a reload
 *     made a file the symlink named world-writable. Every later change
 *     goes through the directory opened at bind: the name is opened with
 *     O_PATH|O_NOFOLLOW, checked to be a socket with the device and inode
 *     recorded at bind, and changed through that descriptor only
 *     (/proc/self/fd for the mode, fchownat AT_EMPTY_PATH for the owner),
 *     so nothing can be swapped between the check and the change.
 *   - libuv turns ENOENT from bind into EACCES ("permission denied" for a
 *     directory that does not exist).
 * The directory's own path is followed once, at bind (/var/run is a
 * symlink on many hosts); after that toolgate works in the directory it
 * opened, whatever its path comes to name.
 *
 * Error convention: tg_lsock_bind is setup (tg_err_t); the others return
 * 0 or a negative errno, -ESTALE when the path no longer holds the socket
 * toolgate bound (removed, or replaced by anything else). */
#ifndef TG_ROUTER_LISTEN_H
#define TG_ROUTER_LISTEN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "config/err.h"

#define TG_LSOCK_PATH_MAX 108 /* fixed internal bound: sun_path, with its NUL */

/* One bound socket. Owned by its listener; tg_lsock_release frees it. */
typedef struct tg_lsock {
    int fd;                       /* the bound socket until handed over; -1 then */
    int dirfd;                    /* O_PATH of its directory; -1 when not bound */
    char name[TG_LSOCK_PATH_MAX]; /* the file's name in that directory */
    dev_t dev;                    /* the socket file that bind created */
    ino_t ino;
    bool inherited;               /* passed by the service manager: its file, never unlinked */
} tg_lsock_t;

/* A socket nobody has bound: release is a no-op on it. */
void tg_lsock_init(tg_lsock_t *ls);

/* ---- Socket activation (sd_listen_fds(3) semantics, no libsystemd) ----
 * When $LISTEN_PID is this process, $LISTEN_FDS listening sockets start at
 * fd 3, named by $LISTEN_FDNAMES (':'-separated, FileDescriptorName=). Each
 * is matched to a router.listen[] entry: a Unix one by its path
 * (getsockname, or the same file), an HTTP one by its address and port
 * (a wildcard address matches a wildcard of either family). A matched
 * listener adopts the fd instead of binding, so connections queued while
 * toolgate restarted are accepted; a Unix socket's file stays the service
 * manager's (toolgate sets its mode and owner, never unlinks it). */
#define TG_LSOCK_ACTIVATED_MAX 64 /* fixed internal bound: inherited listening sockets */

/* Read and unset LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES; keep the
 * listening sockets among fds 3.. (close-on-exec from now on, so no agent
 * inherits them). Returns how many were kept; what is not a listening
 * stream socket is logged and closed. */
int tg_lsock_activation_init(void);
/* The inherited fd listening at Unix <path>, taken from the table, or -1. */
int tg_lsock_inherited_unix(const char *path);
/* The inherited fd listening at <sa> (AF_INET, AF_INET6), or -1. */
int tg_lsock_inherited_inet(const struct sockaddr *sa);
/* Close the inherited fds no listener took, each with a log line naming
 * it and how to fix the socket unit. */
void tg_lsock_activation_done(void);

/* Bind a new socket at absolute <path>, not yet listening, its file born
 * at <mode> less the process umask: never wider than <mode>, at any
 * instant (tg_lsock_set_access then makes it exactly <mode>). A stale socket file there
 * (nobody accepts on it) is replaced; anything else at the path (a live
 * socket, a file, a directory, a symlink) is refused, as is a directory
 * that does not exist. A socket passed for <path> by the service manager
 * (tg_lsock_inherited_unix) is adopted instead, already listening.
 * 0, or -1 with <err> filled ("router.listen: ..."). */
int tg_lsock_bind(tg_lsock_t *ls, const char *path, uint32_t mode, tg_err_t *err);

/* Give <ls>'s file <owner> and <group> (-1: leave that one) and <mode>,
 * granting at no instant more than the old or the new setting would: when
 * the owner changes, the mode is first narrowed to what the old and new
 * modes share. Returns the mode's outcome; <owner_rc> gets the owner's (0
 * or a negative errno; a failed owner still gets the mode). */
int tg_lsock_set_access(const tg_lsock_t *ls, uint32_t mode, int64_t owner, int64_t group,
                        int *owner_rc);

/* Close what <ls> holds; with <unlink>, first remove its file if it is
 * still the one bound. */
void tg_lsock_release(tg_lsock_t *ls, bool unlink);

#endif
