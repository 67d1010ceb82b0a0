/* toolgate wrap's stdin and stdout, whatever a shell gives: pipes, ttys
 * and Unix sockets are read and written by the loop as they are; anything
 * libuv cannot poll (a regular file, /dev/null or another character
 * device, a TCP socket) is put behind a private pipe that a thread fills
 * from it (stdin) or empties into it with blocking writes (stdout). The
 * session then sees a pipe on fd 0 and fd 1 in every case, and the frames
 * go through the same framing path (io.h: tg_in, tg_out).
 *
 * Ownership: the runner owns the tg_relay_t; tg_relay_finish joins the
 * stdout thread (so every byte written reaches the file before toolgate
 * exits) and lets the stdin thread end by itself.
 */
#ifndef TG_ROUTER_FRONT_RELAY_H
#define TG_ROUTER_FRONT_RELAY_H

#include <pthread.h>
#include <stdbool.h>

typedef struct tg_relay {
    pthread_t in_thr, out_thr;
    bool in_on, out_on;
    int in_src, in_dst;   /* stdin thread: the original stdin, the pipe's write end */
    int out_src, out_dst; /* stdout thread: the pipe's read end, the original stdout */
} tg_relay_t;

/* Make fd 0 and fd 1 something the loop can poll: fds 0 to 2 that are
 * closed are opened on /dev/null first (so no pipe toolgate makes later
 * lands on them); a stdin or stdout that is neither a tty nor a pipe nor
 * a Unix socket is relayed through a pipe by a thread. 0, or a negative
 * errno with nothing relayed (the session then reports what it found). */
int tg_relay_start(tg_relay_t *r);

/* After the loop and the teardown (fd 1 closed by the session or not):
 * end the stdout relay once everything written is out, and let go of the
 * stdin relay (a thread blocked reading a device ends with the process). */
void tg_relay_finish(tg_relay_t *r);

#endif
