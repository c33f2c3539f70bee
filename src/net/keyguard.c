// SPDX-License-Identifier: MIT
/*
 * The key limit (keyguard.h): a leaky bucket of invalid keys per peer.
 *
 * Each invalid key a peer sends adds one to its score; the score drains
 * by SHCA_KEY_LIMIT_RATE a second.  A request is carried out only while
 * the score has room for one more (below SHCA_KEY_LIMIT_BURST): a peer
 * may send 256 invalid keys in a row, and one a second after that, but
 * no more, however often it reconnects.  The invalid key that fills the
 * bucket closes the connection it came on (logged, key_limit_closes);
 * while the bucket is full, every request of that peer is refused (its
 * connection closed again, key_limit_drops), datagrams included.
 *
 * Why these numbers: a program with a wrong key in it meets the limit
 * only after hundreds of failed requests (an RC QP stops at the first);
 * a brute force of 4096 guesses stops after 256; and at one guess a
 * second, finding one of N live keys among 2^32 takes 2^31 / N seconds
 * on average: 68 years for one MR, 25 days for a thousand.
 *
 * The peers are kept in a small table; when it is full, the peer with the
 * lowest score gives its place up (a peer over the limit outranks every
 * one below it).  Engine thread; the lock is for the fuzzer and tests.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../common/log.h"
#include "../common/stat.h"
#include "../engine/engine.h"
#include "keyguard.h"
#include "net.h"

#define PEERS		256
#define LOG_EVERY_NS	(10ull * 1000000000ull)	/* per peer */

struct guard_peer {
	uint8_t gid[16];
	uint16_t port;
	bool used;
	bool full;		/* the bucket had no room at last look */
	double score;		/* at last_ns */
	uint64_t last_ns;
	uint64_t strikes;	/* invalid keys, all told */
	uint64_t closes;	/* connections closed, all told */
	uint64_t logged_ns;	/* last warning */
	uint64_t unlogged;	/* closes and drops since */
};

static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static struct guard_peer peers[PEERS];
static unsigned int nfull;	/* peers with full set: the fast path */

static double score_now(struct guard_peer *p, uint64_t now)
{
	double drained = (double)(now - p->last_ns) * SHCA_KEY_LIMIT_RATE /
			 1e9;

	p->score = p->score > drained ? p->score - drained : 0;
	p->last_ns = now;
	return p->score;
}

/* Does p's bucket have room for one more invalid key? */
static bool has_room(struct guard_peer *p, uint64_t now)
{
	bool room = score_now(p, now) + 1 <= SHCA_KEY_LIMIT_BURST;

	if (p->full && room) {
		p->full = false;
		__atomic_sub_fetch(&nfull, 1, __ATOMIC_RELAXED);
	} else if (!p->full && !room) {
		p->full = true;
		__atomic_add_fetch(&nfull, 1, __ATOMIC_RELAXED);
	}
	return room;
}

static struct guard_peer *find(const uint8_t gid[16], uint16_t port,
			       bool add, uint64_t now)
{
	struct guard_peer *p, *victim = NULL;
	unsigned int i;

	for (i = 0; i < PEERS; i++) {
		p = &peers[i];
		if (p->used && p->port == port && !memcmp(p->gid, gid, 16))
			return p;
		if (!add)
			continue;
		if (!p->used) {
			if (!victim || victim->used)
				victim = p;
		} else if (!victim || (victim->used &&
				       score_now(p, now) <
					       score_now(victim, now))) {
			victim = p;
		}
	}
	if (!add || !victim)
		return NULL;
	if (victim->used && victim->full)
		__atomic_sub_fetch(&nfull, 1, __ATOMIC_RELAXED);
	memset(victim, 0, sizeof(*victim));
	memcpy(victim->gid, gid, 16);
	victim->port = port;
	victim->used = true;
	victim->last_ns = now;
	return victim;
}

static void say(struct guard_peer *p, const char *what, uint32_t qpn,
		uint64_t now)
{
	char a[INET6_ADDRSTRLEN], last[48] = "", more[96] = "";
	const void *src = p->gid;
	int af = AF_INET6;

	p->unlogged++;
	if (p->logged_ns && now - p->logged_ns < LOG_EVERY_NS)
		return;
	if (!memcmp(p->gid, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)) {
		af = AF_INET;
		src = p->gid + 12;
	}
	if (!inet_ntop(af, src, a, sizeof(a)))
		snprintf(a, sizeof(a), "?");
	if (qpn)
		snprintf(last, sizeof(last), " (the last for QP 0x%06x)", qpn);
	if (p->unlogged > 1)
		snprintf(more, sizeof(more), "; %llu closes and refusals "
			 "since the last warning",
			 (unsigned long long)p->unlogged - 1);
	shca_warn("net: %s %s port %u: %llu invalid keys%s, over the limit "
		  "of %d at once and %d a second%s",
		  what, a, p->port, (unsigned long long)p->strikes, last,
		  SHCA_KEY_LIMIT_BURST, SHCA_KEY_LIMIT_RATE, more);
	p->logged_ns = now;
	p->unlogged = 0;
}

bool shca_keyguard_admit_conn(struct shca_conn *c)
{
	struct guard_peer *p;
	uint8_t gid[16];
	uint16_t port;
	bool ok = true;
	uint64_t now;

	if (shca_net_conn_aborted(c)) {
		shca_stat_add(shca_stat_proc(), SHCA_STAT_KEY_LIMIT_DROPS, 1);
		return false;
	}
	if (!__atomic_load_n(&nfull, __ATOMIC_RELAXED))
		return true;
	shca_net_conn_peer(c, gid, &port);
	now = shca_now_ns();
	pthread_mutex_lock(&guard_lock);
	p = find(gid, port, false, now);
	if (p && !has_room(p, now)) {
		ok = false;
		say(p, "refusing the connection from", 0, now);
	}
	pthread_mutex_unlock(&guard_lock);
	if (!ok) {
		shca_stat_add(shca_stat_proc(), SHCA_STAT_KEY_LIMIT_DROPS, 1);
		shca_net_conn_abort(c);
	}
	return ok;
}

bool shca_keyguard_admit_src(const struct shca_net_addr *addr)
{
	struct guard_peer *p;
	bool ok = true;
	uint64_t now;

	if (!__atomic_load_n(&nfull, __ATOMIC_RELAXED))
		return true;
	now = shca_now_ns();
	pthread_mutex_lock(&guard_lock);
	p = find(addr->src, addr->src_port, false, now);
	if (p && !has_room(p, now)) {
		ok = false;
		say(p, "dropping datagrams from", 0, now);
	}
	pthread_mutex_unlock(&guard_lock);
	if (!ok)
		shca_stat_add(shca_stat_proc(), SHCA_STAT_KEY_LIMIT_DROPS, 1);
	return ok;
}

/* One more invalid key from gid/port: true when its bucket is full now. */
static bool strike(const uint8_t gid[16], uint16_t port, uint32_t qpn,
		   const char *what)
{
	uint64_t now = shca_now_ns();
	struct guard_peer *p;
	bool full = false;

	pthread_mutex_lock(&guard_lock);
	p = find(gid, port, true, now);
	if (p) {
		p->strikes++;
		score_now(p, now);
		p->score += 1;
		full = !has_room(p, now);
		if (full) {
			p->closes++;
			say(p, what, qpn, now);
		}
	}
	pthread_mutex_unlock(&guard_lock);
	return full;
}

bool shca_keyguard_strike_conn(struct shca_conn *c, uint32_t qpn)
{
	uint8_t gid[16];
	uint16_t port;

	shca_net_conn_peer(c, gid, &port);
	if (!strike(gid, port, qpn, "closing the connection from"))
		return false;
	shca_stat_add(shca_stat_proc(), SHCA_STAT_KEY_LIMIT_CLOSES, 1);
	return true;
}

void shca_keyguard_strike_src(const struct shca_net_addr *addr,
			      uint32_t qpn)
{
	strike(addr->src, addr->src_port, qpn, "dropping datagrams from");
}

void shca_keyguard_reset(void)
{
	pthread_mutex_lock(&guard_lock);
	memset(peers, 0, sizeof(peers));
	__atomic_store_n(&nfull, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&guard_lock);
}
