/* log: the daemon's levelled log (stderr, redirected to gflowd.log when detached).
 * The level is checked before anything is formatted. Never call from a signal handler. */
#ifndef GFLOWD_LOG_H
#define GFLOWD_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern enum log_level log_threshold;

/* "error", "warn", "info" or "debug"; returns -1 for anything else. */
int log_parse_level(const char *name, enum log_level *out);
void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_msg(level, ...)                                                                        \
    do {                                                                                           \
        if ((level) <= log_threshold)                                                              \
            log_write((level), __VA_ARGS__);                                                       \
    } while (0)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
