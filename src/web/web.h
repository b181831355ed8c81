/* web: `gflowd web`, the dashboard's server. A process the user runs (not the daemon):
 * it listens on 127.0.0.1 only, serves the dashboard's files (built into the binary,
 * web_assets.c) and passes /v1/... requests on to the daemon's Unix socket as that user
 * (the daemon sees the user's SO_PEERCRED identity; its auth does not change). A browser
 * gets in with the one token printed in the URL, which becomes an HttpOnly cookie; Host
 * and Origin are checked (docs/security.md, "Web dashboard"). */
#ifndef GFLOW_WEB_H
#define GFLOW_WEB_H

struct web_opts {
    const char *bind;   /* only a loopback address: "127.0.0.1" (default) or "localhost" */
    int port;           /* 0: the kernel picks a free one */
    const char *socket; /* the daemon's socket; NULL: the CLI's search (src/client) */
};

/* Serves until SIGINT or SIGTERM. Prints the URL (with its token) on stdout. Returns the
 * exit status; errors are one line on stderr. */
int web_run(const struct web_opts *o);

#endif
