/* gflow-notify: delivers one notification for gflowd (src/daemon/notify.c), which starts
 * it once per attempt so that a slow receiver or MTA never blocks the daemon. It is the
 * only program that links libcurl (loading it costs the daemon and the CLI time and
 * memory for nothing).
 *
 *   gflow-notify webhook --timeout SECS
 *       standard input: the URL on the first line, then request headers ("Name: value")
 *       one per line, an empty line, and the body, POSTed as it is. Secrets (an
 *       Authorization header) come this way, never on the command line others can read.
 *   gflow-notify mail --sendmail PATH [--user NAME --uid UID --gid GID]
 *       standard input: the message; runs PATH -t -i on it (a name without '/' is looked
 *       up in PATH), as the user given (root only: the groups, gid and uid are set first).
 *
 * Exit status: 0 delivered; 75 (EX_TEMPFAIL) worth retrying (HTTP 5xx, 408, 429, no
 * connection, timeout, sendmail's own 75 or a crash); anything else is permanent (other
 * HTTP statuses, a bad URL, no sendmail). One line on standard error says why. */
#include <curl/curl.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gflow_build.h"

#define EXIT_RETRY 75
#define EXIT_PERMANENT 1
#define INPUT_MAX (16 * 1024 * 1024)

static char *read_all(FILE *f, size_t *len)
{
    size_t cap = 8192;
    char *buf = malloc(cap + 1);
    *len = 0;
    size_t n;
    while (buf && (n = fread(buf + *len, 1, cap - *len, f)) > 0) {
        *len += n;
        if (*len == cap) {
            if (cap >= INPUT_MAX)
                break;
            cap *= 2;
            char *more = realloc(buf, cap + 1);
            if (!more) {
                free(buf);
                return NULL;
            }
            buf = more;
        }
    }
    if (buf)
        buf[*len] = '\0';
    return buf;
}

static int webhook(long timeout)
{
    size_t len;
    char *in = read_all(stdin, &len);
    if (!in) {
        fprintf(stderr, "gflow-notify: cannot read the request\n");
        return EXIT_PERMANENT;
    }
    char *url = in, *p = strchr(in, '\n');
    if (!p) {
        fprintf(stderr, "gflow-notify: no URL on standard input\n");
        return EXIT_PERMANENT;
    }
    *p++ = '\0';
    struct curl_slist *headers = NULL;
    /* No "Expect: 100-continue" round trip. */
    headers = curl_slist_append(headers, "Expect:");
    while (*p && *p != '\n') {
        char *end = strchr(p, '\n');
        if (!end)
            break;
        *end = '\0';
        headers = curl_slist_append(headers, p);
        p = end + 1;
    }
    const char *body = *p == '\n' ? p + 1 : p;
    size_t body_len = len - (size_t)(body - in);

    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, timeout);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gflow-notify/" GFLOW_VERSION);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    /* The response body is not wanted. */
    FILE *devnull = fopen("/dev/null", "w");
    curl_easy_setopt(c, CURLOPT_WRITEDATA, devnull ? devnull : stdout);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(headers);
    int ret;
    if (rc != CURLE_OK) {
        fprintf(stderr, "%s\n", errbuf[0] ? errbuf : curl_easy_strerror(rc));
        ret = rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT ? EXIT_PERMANENT
                                                                            : EXIT_RETRY;
    } else if (status >= 200 && status < 300) {
        ret = 0;
    } else {
        fprintf(stderr, "HTTP %ld\n", status);
        ret = status >= 500 || status == 408 || status == 429 ? EXIT_RETRY : EXIT_PERMANENT;
    }
    if (devnull)
        fclose(devnull);
    curl_global_cleanup();
    free(in);
    return ret;
}

static int mail(const char *sendmail, const char *user, const char *uid_s, const char *gid_s)
{
    if (user && uid_s && gid_s) {
        uid_t uid = (uid_t)strtoul(uid_s, NULL, 10);
        gid_t gid = (gid_t)strtoul(gid_s, NULL, 10);
        /* The groups first: setgroups and setgid need root. */
        if (initgroups(user, gid) < 0 || setgid(gid) < 0 || setuid(uid) < 0 ||
            (uid != 0 && setuid(0) == 0)) {
            fprintf(stderr, "cannot become user %s (uid %u): %s\n", user, (unsigned)uid,
                    strerror(errno));
            return EXIT_PERMANENT;
        }
        setenv("USER", user, 1);
        setenv("LOGNAME", user, 1);
    }
    char *argv[] = {(char *)sendmail, "-t", "-i", NULL};
    execvp(sendmail, argv);
    fprintf(stderr, "cannot run %s: %s\n", sendmail, strerror(errno));
    return EXIT_PERMANENT;
}

static int usage(void)
{
    fprintf(stderr, "usage: gflow-notify webhook --timeout SECS < request\n"
                    "       gflow-notify mail --sendmail PATH [--user NAME --uid UID --gid GID] "
                    "< message\n"
                    "(started by gflowd for each notification; see docs/usage.md)\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *opt[5] = {NULL}; /* timeout, sendmail, user, uid, gid */
    static const char *const names[5] = {"--timeout", "--sendmail", "--user", "--uid", "--gid"};
    for (int i = 2; i < argc; i++) {
        int k = 0;
        while (k < 5 && strcmp(argv[i], names[k]))
            k++;
        if (k == 5 || i + 1 >= argc)
            return usage();
        opt[k] = argv[++i];
    }
    if (!strcmp(argv[1], "webhook")) {
        long timeout = opt[0] ? strtol(opt[0], NULL, 10) : 10;
        return webhook(timeout > 0 ? timeout : 10);
    }
    if (!strcmp(argv[1], "mail") && opt[1])
        return mail(opt[1], opt[2], opt[3], opt[4]);
    return usage();
}
