/* mpdist-delayline: a one-way delay and a random loss for the box's links (cluster/box), where
 * the kernel has no netem. It reads the packets of one netfilter queue (the host namespace's
 * iptables rule sends what arrives on its eth0 there, cluster/box/shape.sh) and gives each its
 * verdict DELAY after it arrived, in arrival order: accept, or drop with probability LOSS. Only
 * the verdicts go through user space, not the payloads (NFQNL_COPY_META), and whole GSO packets
 * are queued (NFQA_CFG_F_GSO), so a 64 KB TCP segment costs one message. It runs SCHED_FIFO
 * where it may, so that it wakes on time on cores the ranks keep busy; its wake-ups still add
 * 0.05-0.15 ms to each delay on the 2-core VM measured (tests/integration/box_links.sh prints
 * the round trips). SIGTERM or SIGINT accepts what is queued and ends it with 0; with the
 * rule's --queue-bypass the link then has no delay.
 * Usage: mpdist-delayline --queue N --delay-us D [--loss PCT] [--seed S]
 * A bad argument: one line on stderr, exit 2; a netlink failure: one line, exit 1. */
#define _GNU_SOURCE /* ppoll */
#include <arpa/inet.h> /* first: glibc's netinet/in.h before the kernel's linux/in.h */
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

enum { RING = 1 << 16 }; /* packets held at once (the queue's length in the kernel too) */

typedef struct held {
    uint32_t id;
    int64_t due_ns;
} held;

typedef struct line {
    struct nfq_q_handle *q;
    int64_t delay_ns;
    double loss;      /* probability in [0, 1] */
    uint64_t rng;     /* xorshift64 state */
    held ring[RING];
    size_t head, count;
    uint32_t last_id; /* the newest id read */
    int seen;
} line;

static volatile sig_atomic_t stop_asked;

static void on_signal(int sig) { (void)sig, stop_asked = 1; }

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A uniform number in [0, 1) from the line's generator. */
static double uniform(line *l)
{
    l->rng ^= l->rng << 13, l->rng ^= l->rng >> 7, l->rng ^= l->rng << 17;
    return (double)(l->rng >> 11) * 0x1p-53;
}

/* A packet arrived: dropped now with probability loss, else held until now + delay (accepted
 * at once when the ring is full). */
static int on_packet(struct nfq_q_handle *q, struct nfgenmsg *msg, struct nfq_data *nfa,
                     void *arg)
{
    (void)msg;
    line *l = arg;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph)
        return 0;
    uint32_t id = ntohl(ph->packet_id);
    l->last_id = id, l->seen = 1;
    if (l->loss > 0 && uniform(l) < l->loss)
        return nfq_set_verdict(q, id, NF_DROP, 0, NULL) < 0 ? -1 : 0;
    if (l->count == RING)
        return nfq_set_verdict(q, id, NF_ACCEPT, 0, NULL) < 0 ? -1 : 0;
    l->ring[(l->head + l->count++) % RING] = (held){id, now_ns() + l->delay_ns};
    return 0;
}

/* Accepts the held packets that are due by t (all of them when t < 0), in one batch verdict:
 * the kernel accepts every queued id up to the newest one due. */
static int release(line *l, int64_t t)
{
    uint32_t upto = 0;
    int any = 0;
    while (l->count > 0 && (t < 0 || l->ring[l->head].due_ns <= t)) {
        upto = l->ring[l->head].id, any = 1;
        l->head = (l->head + 1) % RING, l->count--;
    }
    if (t < 0 && l->seen)
        upto = l->last_id, any = 1;
    return any && nfq_set_verdict_batch(l->q, upto, NF_ACCEPT) < 0 ? -1 : 0;
}

/* Reads the queue's messages until none is waiting (at most 256: releases stay on time). A
 * message the socket had no room for never comes: the kernel passed its packet on undelayed
 * (NFQA_CFG_F_FAIL_OPEN). */
static void drain(struct nfq_handle *h, int fd, char *buf, size_t size)
{
    for (int i = 0; i < 256; i++) {
        ssize_t got = recv(fd, buf, size, MSG_DONTWAIT);
        if (got < 0 && errno == ENOBUFS)
            continue;
        if (got <= 0)
            return;
        nfq_handle_packet(h, buf, (int)got);
    }
}

static int bad_arg(const char *msg, const char *val)
{
    fprintf(stderr, "mpdist-delayline: %s (got '%s'); usage: mpdist-delayline --queue N "
                    "--delay-us D [--loss PCT] [--seed S]\n", msg, val ? val : "");
    return 2;
}

/* A decimal number in [lo, hi] from s, or -1. */
static double number(const char *s, double lo, double hi)
{
    char *end = NULL;
    errno = 0;
    double v = s ? strtod(s, &end) : -1;
    return s && *s && end && *end == '\0' && errno == 0 && v >= lo && v <= hi ? v : -1;
}

int main(int argc, char **argv)
{
    static line l;
    double queue = -1, delay_us = -1, loss = 0, seed = (double)(getpid() ^ time(NULL));
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double *dst = !strcmp(argv[i], "--queue")      ? &queue
                      : !strcmp(argv[i], "--delay-us") ? &delay_us
                      : !strcmp(argv[i], "--loss")     ? &loss
                      : !strcmp(argv[i], "--seed")     ? &seed
                                                       : NULL;
        if (!dst)
            return bad_arg("unknown option", argv[i]);
        double hi = dst == &queue ? 65535 : dst == &loss ? 100 : dst == &delay_us ? 60e6 : 1e15;
        if ((*dst = number(v, 0, hi)) < 0)
            return bad_arg("a number in range expected", v);
    }
    if (queue < 0 || delay_us < 0)
        return bad_arg("--queue and --delay-us are required", "");
    l.delay_ns = (int64_t)(delay_us * 1000);
    l.loss = loss / 100;
    l.rng = (uint64_t)seed * 0x9e3779b97f4a7c15ull | 1;

    struct nfq_handle *h = nfq_open();
    if (!h || !(l.q = nfq_create_queue(h, (uint16_t)queue, on_packet, &l)) ||
        nfq_set_mode(l.q, NFQNL_COPY_META, 0) < 0 || nfq_set_queue_maxlen(l.q, RING) < 0 ||
        nfq_set_queue_flags(l.q, NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN,
                            NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN) < 0) {
        fprintf(stderr, "mpdist-delayline: cannot open netfilter queue %.0f: %s\n", queue,
                strerror(errno));
        return 1;
    }
    nfnl_rcvbufsiz(nfq_nfnlh(h), 8u << 20);
    /* On time: a real-time priority where allowed, no timer slack, no page faults. */
    struct sched_param sp = {.sched_priority = 10};
    (void)sched_setscheduler(0, SCHED_FIFO, &sp);
    (void)prctl(PR_SET_TIMERSLACK, 1UL);
    (void)mlockall(MCL_CURRENT);
    /* The signals arrive only inside ppoll, so none is lost between the check and the wait. */
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigset_t block, waiting;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &waiting);

    int fd = nfq_fd(h), rc = 0;
    static char buf[1 << 16];
    while (!stop_asked) {
        struct timespec wait, *tp = NULL;
        if (l.count > 0) {
            int64_t left = l.ring[l.head].due_ns - now_ns();
            left = left < 0 ? 0 : left;
            wait = (struct timespec){left / 1000000000, left % 1000000000};
            tp = &wait;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int n = ppoll(&p, 1, tp, &waiting);
        if (n < 0 && errno != EINTR) {
            rc = 1;
            break;
        }
        if (n > 0)
            drain(h, fd, buf, sizeof buf);
        if (release(&l, now_ns()) < 0) {
            rc = 1;
            break;
        }
    }
    if (rc)
        fprintf(stderr, "mpdist-delayline: netlink failed: %s\n", strerror(errno));
    drain(h, fd, buf, sizeof buf); /* what was sent before the end, accepted below */
    release(&l, -1);
    nfq_destroy_queue(l.q);
    nfq_close(h);
    return rc;
}
