/* gflow-notify: delivers one notification for gflowd (src/daemon/notify.c), which starts
 * it once per attempt so that a slow receiver or MTA never blocks the daemon. It is the
 * only program that links libcurl (loading it costs the daemon and the CLI time and
 * memory for nothing).
 *
 *   gflow-notify webhook --timeout SECS
 *       standard input: the URL on the first line, then request headers ("Name: value")
 *       one per line, an empty line, and the body, POSTed as it is. Secrets (an
 *       Authorization header) come this way, never on the command line others can read.
 *   gflow-notify smtp --timeout SECS
 *       standard input: the SMTP URL (credentials inside, so never on the command line),
 *       the sender's address, the recipients' one a line, an empty line, the message.
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

/* The part of the message not yet handed to curl. */
struct upload {
    const char *p;
    size_t left;
};

static size_t upload_cb(char *buf, size_t size, size_t nmemb, void *arg)
{
    struct upload *u = arg;
    size_t n = size * nmemb < u->left ? size * nmemb : u->left;
    memcpy(buf, u->p, n);
    u->p += n;
    u->left -= n;
    return n;
}

/* [[notifications.emails]]: the message through the SMTP server of its smtp_url (lettre's
 * syntax, as gflow: smtps:// is TLS from the start; smtp:// with ?tls=required needs
 * STARTTLS, ?tls=opportunistic uses it when offered, else plain). */
static int smtp(long timeout)
{
    size_t len;
    char *in = read_all(stdin, &len);
    char *lines[3] = {NULL}; /* url, from, first recipient */
    char *p = in;
    for (int i = 0; p && i < 2; i++) {
        lines[i] = p;
        p = strchr(p, '\n');
        if (p)
            *p++ = '\0';
    }
    if (!in || !p || !lines[1][0]) {
        fprintf(stderr, "gflow-notify: no URL and sender on standard input\n");
        free(in);
        return EXIT_PERMANENT;
    }
    char *url = lines[0], *query = strchr(url, '?');
    long use_ssl = CURLUSESSL_NONE;
    if (query) {
        if (strstr(query, "tls=required"))
            use_ssl = CURLUSESSL_ALL;
        else if (strstr(query, "tls=opportunistic"))
            use_ssl = CURLUSESSL_TRY;
        *query = '\0';
    }
    struct curl_slist *rcpt = NULL;
    char *from = NULL;
    if (asprintf(&from, "<%s>", lines[1]) < 0)
        from = NULL;
    while (*p && *p != '\n') {
        char *end = strchr(p, '\n'), *one = NULL;
        if (!end)
            break;
        *end = '\0';
        if (asprintf(&one, "<%s>", p) >= 0) {
            rcpt = curl_slist_append(rcpt, one);
            free(one);
        }
        p = end + 1;
    }
    if (!rcpt || !from) {
        fprintf(stderr, "gflow-notify: no recipient\n");
        free(from);
        free(in);
        return EXIT_PERMANENT;
    }
    struct upload u = {.p = *p == '\n' ? p + 1 : p};
    u.left = len - (size_t)(u.p - in);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
    curl_easy_setopt(c, CURLOPT_USE_SSL, use_ssl);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, timeout);
    curl_easy_setopt(c, CURLOPT_MAIL_FROM, from);
    curl_easy_setopt(c, CURLOPT_MAIL_RCPT, rcpt);
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_CRLF, 1L); /* the message has \n; SMTP wants \r\n */
    curl_easy_setopt(c, CURLOPT_READFUNCTION, upload_cb);
    curl_easy_setopt(c, CURLOPT_READDATA, &u);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(rcpt);
    int ret = 0;
    if (rc != CURLE_OK) {
        fprintf(stderr, "%s%s%ld\n", errbuf[0] ? errbuf : curl_easy_strerror(rc),
                status ? ": SMTP " : "", status);
        /* A 5xx answer, a refused login or a bad URL will not get better. */
        ret = rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT ||
                      rc == CURLE_LOGIN_DENIED || status >= 500
                  ? EXIT_PERMANENT
                  : EXIT_RETRY;
    }
    curl_global_cleanup();
    free(from);
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
                    "       gflow-notify smtp --timeout SECS < request\n"
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
    if (!strcmp(argv[1], "smtp")) {
        long timeout = opt[0] ? strtol(opt[0], NULL, 10) : 10;
        return smtp(timeout > 0 ? timeout : 10);
    }
    if (!strcmp(argv[1], "mail") && opt[1])
        return mail(opt[1], opt[2], opt[3], opt[4]);
    return usage();
}
