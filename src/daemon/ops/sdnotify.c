/* sdnotify: the datagram systemd waits for (see sdnotify.h). */
#include "sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void sdnotify_init(struct sdnotify *n)
{
    memset(n, 0, sizeof(*n));
    const char *path = getenv("NOTIFY_SOCKET");
    size_t len = path ? strlen(path) : 0;
    /* An absolute path, or '@' for a name in the abstract namespace (leading NUL). */
    if (len >= 2 && len < sizeof(n->addr.sun_path) && (path[0] == '/' || path[0] == '@')) {
        n->addr.sun_family = AF_UNIX;
        memcpy(n->addr.sun_path, path, len);
        if (path[0] == '@')
            n->addr.sun_path[0] = '\0';
        n->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    }
    unsetenv("NOTIFY_SOCKET");
}

int sdnotify_send(const struct sdnotify *n, const char *msg)
{
    if (!n->len)
        return 0;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    ssize_t sent =
        sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (const struct sockaddr *)&n->addr, n->len);
    int saved = errno;
    close(fd);
    errno = saved;
    return sent < 0 ? -1 : 0;
}
