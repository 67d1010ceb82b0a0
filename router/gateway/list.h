/* Intrusive doubly linked lists with a head pointer, newest first: the
 * engines' sessions and connections, a pool's places, the admin endpoint's
 * and the HTTP front's connections. A node names its two link fields; the
 * list is its head pointer (an lvalue). Unlinking is O(1) and leaves the
 * node's links NULL. */
#ifndef TG_ROUTER_GATEWAY_LIST_H
#define TG_ROUTER_GATEWAY_LIST_H

#include <stddef.h>

/* Put node <n> first in list <head>. */
#define TG_LIST_PUSH(head, n, prev, next)                                                  \
    do {                                                                                 \
        (n)->prev = NULL;                                                                \
        (n)->next = (head);                                                              \
        if ((head) != NULL)                                                              \
            (head)->prev = (n);                                                          \
        (head) = (n);                                                                    \
    } while (0)

/* Take node <n> out of list <head>. */
#define TG_LIST_UNLINK(head, n, prev, next)                                                \
    do {                                                                                 \
        if ((n)->prev != NULL)                                                           \
            (n)->prev->next = (n)->next;                                                 \
        else                                                                             \
            (head) = (n)->next;                                                          \
        if ((n)->next != NULL)                                                           \
            (n)->next->prev = (n)->prev;                                                 \
        (n)->prev = (n)->next = NULL;                                                    \
    } while (0)

#endif
