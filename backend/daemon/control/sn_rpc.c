/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_rpc.c — JSON-RPC 2.0 server on a unix stream socket: the transport.
 *
 * Design. The control plane must never be the reason the daemon dies or
 * stalls, so every client is treated as hostile: one poll() loop owns the
 * listener and all clients, every socket is non-blocking, and each client
 * has exactly two bounded buffers.
 *
 *  - Input: at most max_request_bytes + 1 bytes (one request and its '\n').
 *    Complete lines are served in order; a partial line stays buffered
 *    across polls. A line that cannot fit gets -32600 and the connection is
 *    closed (after the error is flushed and the peer had a short chance to
 *    stop sending, so it can read the error instead of getting a reset).
 *  - Output: responses are appended as compact JSON + '\n' and flushed with
 *    send(MSG_NOSIGNAL) (a vanished peer is EPIPE, never SIGPIPE). While
 *    more than OUT_HIGH bytes are unread the client's further requests wait
 *    (back-pressure); past OUT_MAX the client is dropped.
 *  - Time: a client that moves no byte for IDLE_MS (never finishes a line,
 *    never reads its answers, or just sits there) is dropped, so max_clients
 *    slots cannot be held forever. Clients reconnect per command.
 *  - Connections beyond max_clients get -32002 and are closed. When accept()
 *    runs out of fds the listener is left alone for PAUSE_MS instead of
 *    being polled readable in a spin; refusals are logged at most once per
 *    LOG_EVERY_MS, so a connection flood cannot flood the log either.
 *
 * Each complete line is answered by sn_rpc_dispatch.c (JSON-RPC 2.0
 * request handling) after sn_rpc_params.c's schema checks.
 *
 * Concurrency: single-threaded, see sn_rpc.h. Handlers run inside
 * sn_rpc_poll() on the caller's thread and must not call
 * sn_rpc_server_destroy().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif
#include "sn_rpc_internal.h"
#include "sn_log.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define IDLE_MS       10000               /* drop a client silent this long */
#define LINGER_MS     2000                /* after an oversize error */
#define OUT_HIGH      (256u * 1024)       /* pause reading above this */
#define OUT_MAX       (16u * 1024 * 1024) /* drop the client above this */
#define ACCEPT_BURST  256                 /* accepts per poll */
#define PAUSE_MS      100                 /* accept pause when out of fds */
#define LOG_EVERY_MS  1000                /* rate of "refused" log lines */

struct client {
	int fd;
	bool eof;          /* peer shut its write side */
	bool dead;         /* close at the end of this poll */
	bool overflow;     /* dropped for OUT_MAX (counted at free) */
	uint64_t last_ms;  /* last byte moved either way */
	uint64_t close_at; /* nonzero: lingering after an oversize error */
	char *in;          /* cap = max_request_bytes + 1 */
	size_t in_len;
	size_t scan;       /* in[0..scan) holds no '\n' */
	char *out;
	size_t out_off, out_len, out_cap;
};

struct sn_rpc_server {
	int lfd;
	char *path;
	dev_t sock_dev;    /* to unlink only our own socket at destroy */
	ino_t sock_ino;
	size_t max_req;
	unsigned max_clients;
	unsigned nclients;
	struct client *clients;
	struct pollfd *pfds;
	struct sn_rpc_api api;
	uint64_t accept_resume; /* no accept before (after EMFILE/ENFILE) */
	uint64_t refused_log;   /* last "refused" log line */
	unsigned refused;       /* refused since that line */
	struct sn_rpc_stats st;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int sn_rpc_register(struct sn_rpc_server *srv, const char *method,
		    sn_rpc_handler_t fn, void *arg)
{
	struct sn_rpc_method *m;

	if (!srv || !method || !fn)
		return -EINVAL;
	m = sn_rpc_method_find(&srv->api, method);
	if (!m)
		return -ENOENT;
	if (m->fn)
		return -EEXIST;
	m->fn = fn;
	m->arg = arg;
	return 0;
}
/* ---- clients ------------------------------------------------------------- */

static size_t out_pending(const struct client *c)
{
	return c->out_len - c->out_off;
}

static void client_drop(struct client *c, const char *why)
{
	if (why && !c->dead)
		SN_LOG_RL(SN_LOG_WARNING, "rpc: client fd %d dropped: %s", c->fd, why);
	c->dead = true;
}

static void client_queue(struct client *c, json_t *resp)
{
	char *s, *n;
	size_t len, need, cap;

	s = json_dumps(resp, JSON_COMPACT);
	json_decref(resp);
	if (!s) {
		client_drop(c, "out of memory");
		return;
	}
	len = strlen(s);
	if (out_pending(c) + len + 1 > OUT_MAX) {
		free(s);
		client_drop(c, "too many unread responses");
		c->overflow = true;
		return;
	}
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, out_pending(c));
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	need = c->out_len + len + 1;
	if (need > c->out_cap) {
		cap = c->out_cap ? c->out_cap : 4096;
		while (cap < need)
			cap *= 2;
		n = realloc(c->out, cap);
		if (!n) {
			free(s);
			client_drop(c, "out of memory");
			return;
		}
		c->out = n;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, s, len);
	c->out[c->out_len + len] = '\n';
	c->out_len += len + 1;
	free(s);
}

static void client_flush(struct client *c, uint64_t now)
{
	ssize_t n;

	while (!c->dead && out_pending(c)) {
		n = send(c->fd, c->out + c->out_off, out_pending(c),
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			c->out_off += (size_t)n;
			c->last_ms = now;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return;
		} else {
			client_drop(c, NULL); /* EPIPE/ECONNRESET: peer is gone */
		}
	}
	if (!out_pending(c)) {
		c->out_off = c->out_len = 0;
		if (c->out_cap > OUT_HIGH) {
			free(c->out);
			c->out = NULL;
			c->out_cap = 0;
		}
	}
}

static void client_read(struct sn_rpc_server *srv, struct client *c, uint64_t now)
{
	char sink[4096];
	ssize_t n;

	for (;;) {
		if (c->close_at) /* lingering: discard whatever still comes */
			n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
		else
			n = recv(c->fd, c->in + c->in_len, srv->max_req + 1 - c->in_len,
				 MSG_DONTWAIT);
		if (n > 0) {
			c->last_ms = now;
			if (!c->close_at)
				c->in_len += (size_t)n;
			if (!c->close_at && c->in_len == srv->max_req + 1)
				return;
		} else if (n == 0) {
			c->eof = true;
			return;
		} else if (errno == EINTR) {
			continue;
		} else {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				client_drop(c, NULL);
			return;
		}
	}
}

static bool is_blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return false;
	return true;
}

/* Serves one line; returns 1 if it was a request (even an invalid one). */
static int serve_line(struct sn_rpc_server *srv, struct client *c, const char *line, size_t len)
{
	json_t *resp;

	if (is_blank(line, len))
		return 0;
	resp = sn_rpc_answer(&srv->api, &srv->st, line, len);
	if (resp)
		client_queue(c, resp);
	return 1;
}

/* Serves the complete lines buffered (as long as the output is not backed
 * up), handles oversize and end of input; returns requests served. */
static int client_process(struct sn_rpc_server *srv, struct client *c, uint64_t now)
{
	size_t start = 0;
	char *nl;
	int served = 0;

	while (!c->dead && !c->close_at && out_pending(c) < OUT_HIGH) {
		nl = memchr(c->in + c->scan, '\n', c->in_len - c->scan);
		if (!nl) {
			c->scan = c->in_len;
			break;
		}
		served += serve_line(srv, c, c->in + start, (size_t)(nl - (c->in + start)));
		start = (size_t)(nl - c->in) + 1;
		c->scan = start;
	}
	if (start) {
		memmove(c->in, c->in + start, c->in_len - start);
		c->in_len -= start;
		c->scan -= start;
	}
	if (!c->dead && !c->close_at && c->scan == c->in_len) {
		if (c->in_len > srv->max_req) {
			char msg[96];

			snprintf(msg, sizeof(msg), "request exceeds max_request_bytes (%zu)",
				 srv->max_req);
			client_queue(c, sn_rpc_error_response(NULL, SN_RPC_INVALID_REQUEST, msg));
			SN_LOG_RL(SN_LOG_WARNING, "rpc: client fd %d: %s, closing", c->fd, msg);
			srv->st.requests++;
			srv->st.oversize++;
			c->close_at = now + LINGER_MS;
			c->in_len = c->scan = 0;
			served++;
		} else if (c->eof) {
			if (c->in_len && !is_blank(c->in, c->in_len))
				srv->st.partial_hangups++;
			c->in_len = c->scan = 0; /* hung up mid-request: discard */
		}
	}
	client_flush(c, now);
	if (c->dead)
		return served;
	if (c->close_at && !out_pending(c))
		shutdown(c->fd, SHUT_WR); /* error delivered; wait for peer EOF */
	if ((c->eof || c->close_at) && !out_pending(c) && c->scan == c->in_len &&
	    (c->eof || now >= c->close_at))
		client_drop(c, NULL);
	return served;
}

static bool client_has_work(const struct client *c)
{
	return !c->dead && !c->close_at && c->scan < c->in_len && out_pending(c) < OUT_HIGH;
}

static bool client_wants_input(const struct sn_rpc_server *srv, const struct client *c)
{
	if (c->eof)
		return false;
	if (c->close_at)
		return true;
	return out_pending(c) < OUT_HIGH && c->in_len <= srv->max_req;
}

static uint64_t client_deadline(const struct client *c)
{
	uint64_t d = c->last_ms + IDLE_MS;

	return c->close_at && c->close_at < d ? c->close_at : d;
}

static void client_free(struct client *c)
{
	close(c->fd);
	free(c->in);
	free(c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

static void accept_clients(struct sn_rpc_server *srv, uint64_t now)
{
	static const char busy[] =
		"{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32002,"
		"\"message\":\"too many clients\"},\"id\":null}\n";
	struct client *c;
	int fd;

	for (int i = 0; i < ACCEPT_BURST; i++) {
		fd = accept4(srv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* the connection stays queued: retry later, not in a spin */
				if (!srv->accept_resume)
					sn_log_err("rpc: accept: %s, pausing", strerror(errno));
				srv->accept_resume = now + PAUSE_MS;
				return;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				sn_log_err("rpc: accept: %s", strerror(errno));
			break;
		}
		if (srv->nclients == srv->max_clients) {
			(void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			close(fd);
			srv->refused++;
			srv->st.refused++;
			continue;
		}
		c = &srv->clients[srv->nclients];
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->last_ms = now;
		c->in = malloc(srv->max_req + 1);
		if (!c->in) {
			close(fd);
			srv->refused++;
			srv->st.refused++;
			continue;
		}
		srv->nclients++;
		srv->st.accepted++;
	}
	srv->accept_resume = 0;
}

static void log_refused(struct sn_rpc_server *srv, uint64_t now)
{
	if (!srv->refused || now < srv->refused_log + LOG_EVERY_MS)
		return;
	SN_LOG_RL(SN_LOG_WARNING, "rpc: refused %u connection(s): max_clients (%u) reached",
	       srv->refused, srv->max_clients);
	srv->refused = 0;
	srv->refused_log = now;
}

int sn_rpc_poll(struct sn_rpc_server *srv, int timeout_ms)
{
	uint64_t now = now_ms(), d;
	int served = 0, n, timeout = timeout_ms;
	unsigned i, j, nfds;

	for (i = 0; i < srv->nclients; i++) {
		struct client *c = &srv->clients[i];

		if (client_has_work(c)) {
			timeout = 0;
			continue;
		}
		d = client_deadline(c);
		d = d > now ? d - now : 0;
		if (timeout < 0 || d < (uint64_t)timeout)
			timeout = (int)d;
	}
	if (srv->accept_resume) {
		d = srv->accept_resume > now ? srv->accept_resume - now : 0;
		if (timeout < 0 || d < (uint64_t)timeout)
			timeout = (int)d;
	}
	if (srv->refused && (timeout < 0 || timeout > LOG_EVERY_MS))
		timeout = LOG_EVERY_MS;
	srv->pfds[0] = (struct pollfd){
		.fd = srv->lfd, .events = now < srv->accept_resume ? 0 : POLLIN };
	for (i = 0; i < srv->nclients; i++) {
		struct client *c = &srv->clients[i];
		short ev = 0;

		if (client_wants_input(srv, c))
			ev |= POLLIN;
		if (out_pending(c))
			ev |= POLLOUT;
		srv->pfds[i + 1] = (struct pollfd){ .fd = c->fd, .events = ev };
	}
	nfds = srv->nclients + 1;
	n = poll(srv->pfds, nfds, timeout);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	now = now_ms();

	for (i = 0; i < srv->nclients; i++) {
		struct client *c = &srv->clients[i];
		short re = srv->pfds[i + 1].revents;

		if (re & POLLNVAL) {
			client_drop(c, "invalid fd");
			continue;
		}
		if (re & POLLOUT)
			client_flush(c, now);
		if (!c->dead && (re & (POLLIN | POLLHUP | POLLERR)) && client_wants_input(srv, c))
			client_read(srv, c, now);
		if (!c->dead)
			served += client_process(srv, c, now);
		if (!c->dead && now >= c->last_ms + IDLE_MS) {
			client_drop(c, out_pending(c) ? "idle timeout, responses unread"
				    : c->in_len ? "idle timeout, request unfinished"
				    : NULL);
			srv->st.idle_timeouts++;
		}
		if (!c->dead && c->close_at && now >= c->close_at)
			client_drop(c, NULL);
		if (!c->dead && c->eof && (re & POLLHUP) && out_pending(c))
			client_drop(c, NULL); /* both directions gone */
	}
	for (i = j = 0; i < srv->nclients; i++) {
		if (srv->clients[i].dead) {
			srv->st.output_overflow += srv->clients[i].overflow;
			client_free(&srv->clients[i]);
			continue;
		}
		if (i != j)
			srv->clients[j] = srv->clients[i];
		j++;
	}
	srv->nclients = j;

	if (srv->pfds[0].revents & (POLLERR | POLLNVAL))
		return -EIO;
	if ((srv->pfds[0].revents & POLLIN) || (srv->accept_resume && now >= srv->accept_resume))
		accept_clients(srv, now);
	log_refused(srv, now);
	return served;
}

void sn_rpc_stats_read(const struct sn_rpc_server *srv, struct sn_rpc_stats *st)
{
	*st = srv->st;
}

/* ---- listener ------------------------------------------------------------ */

static int mkdir_parents(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	size_t len = strlen(path);

	memcpy(dir, path, len + 1);
	for (size_t i = 1; i < len; i++) {
		if (dir[i] != '/')
			continue;
		dir[i] = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return -errno;
		dir[i] = '/';
	}
	return 0;
}

/* Removes a stale socket at path; -EADDRINUSE if a server answers there,
 * -EEXIST if path is something other than a socket. */
static int remove_stale(const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, rc;

	if (lstat(sa->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	if (rc == 0)
		return -EADDRINUSE;
	if (unlink(sa->sun_path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static int listen_on(struct sn_rpc_server *srv, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	rc = mkdir_parents(path);
	if (rc)
		return rc;
	rc = remove_stale(&sa);
	if (rc)
		return rc;
	srv->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (srv->lfd < 0)
		return -errno;
	old = umask(0177); /* the socket is created 0600, never wider */
	rc = bind(srv->lfd, (const struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0)
		return -errno;
	if (chmod(path, 0600) < 0 || listen(srv->lfd, 64) < 0 || stat(path, &st) < 0) {
		rc = -errno;
		unlink(path);
		return rc;
	}
	srv->sock_dev = st.st_dev;
	srv->sock_ino = st.st_ino;
	return 0;
}

/* The server's own memory (the listening socket and clients are closed
 * by the caller): shared by the create error path and destroy. */
static void server_free(struct sn_rpc_server *srv)
{
	sn_rpc_api_free(&srv->api);
	free(srv->pfds);
	free(srv->clients);
	free(srv->path);
	free(srv);
}

struct sn_rpc_server *sn_rpc_server_create(const struct sn_rpc_config *cfg)
{
	struct sn_rpc_server *srv;
	int rc = -EINVAL;

	if (!cfg || !cfg->path || !cfg->path[0] || !cfg->api_json ||
	    cfg->max_request_bytes < 64 || cfg->max_request_bytes > (64u << 20) ||
	    cfg->max_clients == 0 || cfg->max_clients > 4096) {
		errno = EINVAL;
		return NULL;
	}
	srv = calloc(1, sizeof(*srv));
	if (!srv) {
		errno = ENOMEM;
		return NULL;
	}
	srv->lfd = -1;
	srv->max_req = cfg->max_request_bytes;
	srv->max_clients = cfg->max_clients;
	srv->path = strdup(cfg->path);
	srv->clients = calloc(cfg->max_clients, sizeof(*srv->clients));
	srv->pfds = calloc(cfg->max_clients + 1, sizeof(*srv->pfds));
	if (!srv->path || !srv->clients || !srv->pfds) {
		rc = -ENOMEM;
		goto err_free;
	}
	rc = sn_rpc_api_load(&srv->api, cfg->api_json);
	if (rc)
		goto err_free;
	rc = listen_on(srv, cfg->path);
	if (rc) {
		sn_log_err("rpc: %s: %s", cfg->path, rc == -EEXIST ? "exists and is not a socket (left alone)"
		       : rc == -EADDRINUSE ? "a process listens on this socket (another schednicd?)"
		       : strerror(-rc));
		goto err_free;
	}
	return srv;

err_free:
	if (srv->lfd >= 0)
		close(srv->lfd);
	server_free(srv);
	errno = -rc;
	return NULL;
}

void sn_rpc_server_destroy(struct sn_rpc_server *srv)
{
	struct stat st;

	if (!srv)
		return;
	for (unsigned i = 0; i < srv->nclients; i++) {
		client_flush(&srv->clients[i], now_ms()); /* best effort, no wait */
		client_free(&srv->clients[i]);
	}
	close(srv->lfd);
	if (stat(srv->path, &st) == 0 && st.st_dev == srv->sock_dev &&
	    st.st_ino == srv->sock_ino)
		unlink(srv->path);
	server_free(srv);
}
