/* timefmt: the one style in which times are shown, and the zone they are shown and read
 * in. The style is gflow's: a moment is "YYYY-MM-DD HH:MM:SS" in the zone in use, a
 * length of time "HH:MM:SS" whose hours go past 24 (gflow has no days form).
 *
 * The zone is this process's own (TZ, as localtime and mktime use it): the `timezone`
 * setting, or local time without one. Whoever knows where the setting comes from installs
 * a loader (the CLI does: cli.c); it runs once, the first time a moment is printed or a
 * time without an offset is read, so a command that shows no time never reads the
 * config file. */
#ifndef GFLOW_TIMEFMT_H
#define GFLOW_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

/* 0 if name is a time zone this machine knows: "UTC", or an IANA name ("Asia/Shanghai")
 * with a zone file under $TZDIR or /usr/share/zoneinfo; else -1 with *err saying so. */
int timefmt_zone_check(const char *name, char **err);

/* Shows and reads times in zone name from now on (it overrides the loader, which then
 * never runs). NULL: local time. 0, or -1 with *err (timefmt_zone_check). */
int timefmt_use_zone(const char *name, char **err);

/* The loader of the zone: called once, before the first moment is formatted or a naive
 * time is read; it calls timefmt_use_zone (or nothing, for local time). */
typedef void timefmt_loader_fn(void);
void timefmt_set_loader(timefmt_loader_fn *fn);
/* Runs the loader if it has not run yet (the formatters and parse_datetime call it). */
void timefmt_ready(void);

/* "2026-12-05 06:48:29", or "-" when t <= 0 (it has not happened). Malloc'd. */
char *format_time(double t);
/* The same into buf (at least 20 bytes for a time; "-" fits anything). */
void format_time_buf(char *buf, size_t cap, double t);
/* With the zone's abbreviation, as gflow's reservation details: "2026-12-05 14:00:00 CST". */
char *format_time_zone(double t);
/* Any strftime pattern in the zone in use (the timeline's axis labels). Malloc'd. */
char *format_time_as(double t, const char *pattern);

/* "00:00:02", "02:30:00", "25:00:00"; negative counts as 0. Malloc'd. */
char *format_duration(int64_t secs);
/* The same into buf (32 bytes hold any int64_t). */
void format_duration_buf(char *buf, size_t cap, int64_t secs);

#endif
