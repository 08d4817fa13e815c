/* Logging to stderr: one line per event, with a UTC timestamp and a level. */
#ifndef OPFORGE_LOG_H
#define OPFORGE_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Lines below this level are dropped (default LOG_INFO; OPFORGE_LOG=debug lowers it). */
void log_set_level(enum log_level level);

/* Writes one line; thread-safe (a single write per line). */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
