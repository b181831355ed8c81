/* gctl_timeline: the reservations as a picture (see gctl_timeline.h). Its parts follow
 * gflow's: a title with the time now, an axis with hour marks and "Now", the bars (█
 * active, ░ pending, ▓ completed, ▒ cancelled), a summary and a legend. */
#include "gctl_timeline.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timefmt.h"
#include "util.h"

#define LABEL_W 8                         /* "GPU 12  " */
#define PLOT_W (TIMELINE_WIDTH - LABEL_W) /* the columns time runs across */
#define MAX_GPUS 64                       /* reservations name GPUs 0..63 */

/* One line of the plot: an ASCII character per column, or a glyph where one is set. */
struct plot_row {
    char ascii[PLOT_W];
    const char *glyph[PLOT_W];
};

static void row_init(struct plot_row *r, char fill)
{
    memset(r->ascii, fill, sizeof(r->ascii));
    memset(r->glyph, 0, sizeof(r->glyph));
}

static void row_text(struct plot_row *r, int at, const char *text)
{
    for (int i = 0; text[i] && at + i < PLOT_W; i++) {
        r->ascii[at + i] = text[i];
        r->glyph[at + i] = NULL;
    }
}

static void row_print(const struct plot_row *r, const char *label, FILE *out)
{
    int last = PLOT_W; /* no trailing blanks */
    while (last > 0 && !r->glyph[last - 1] && r->ascii[last - 1] == ' ')
        last--;
    fprintf(out, "%-*s", last ? LABEL_W : 0, label);
    for (int i = 0; i < last; i++) {
        if (r->glyph[i])
            fputs(r->glyph[i], out);
        else
            fputc(r->ascii[i], out);
    }
    fputc('\n', out);
}

static void rule(const char *glyph, FILE *out)
{
    for (int i = 0; i < TIMELINE_WIDTH; i++)
        fputs(glyph, out);
    fputc('\n', out);
}

/* The column of time t on an axis from start to end (PLOT_W: past the end). */
static int column(double t, double start, double end)
{
    double c = round((t - start) / (end - start) * PLOT_W);
    return c < 0 ? 0 : c > PLOT_W ? PLOT_W : (int)c;
}

/* Hours between marks: about a dozen marks or fewer across the plot. */
static int mark_hours(double span)
{
    static const int steps[] = {1, 2, 4, 6, 12, 24, 48, 168};
    double hours = span / 3600;
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        if (hours / steps[i] <= 12)
            return steps[i];
    return 168;
}

/* The mark at or before t: a whole multiple of step hours into the local day (midnight
 * for a day or more). */
static struct tm first_mark(double t, int step)
{
    timefmt_ready();
    time_t secs = (time_t)t;
    struct tm tm;
    localtime_r(&secs, &tm);
    tm.tm_hour = step >= 24 ? 0 : tm.tm_hour / step * step;
    tm.tm_min = tm.tm_sec = 0;
    tm.tm_isdst = -1;
    return tm;
}

/* The axis and its labels; *start becomes the first mark (at or before the range's
 * start) so that the axis begins at a labelled point, as gflow's does. */
static void print_axis(double *start, double end, double now, FILE *out)
{
    int step = mark_hours(end - *start);
    struct tm tm = first_mark(*start, step);
    *start = (double)mktime(&tm);
    struct plot_row axis, labels;
    row_init(&axis, ' ');
    row_init(&labels, ' ');
    for (int i = 0; i < PLOT_W; i++)
        axis.glyph[i] = "─";
    /* "Now" at the very end (--range -24h) is drawn in the last column. */
    int now_col = now >= *start && now <= end ? column(now, *start, end) : -1;
    if (now_col >= PLOT_W)
        now_col = PLOT_W - 1;
    int taken = 0; /* labels end before this column */
    if (now_col >= 0) {
        axis.glyph[now_col] = "┃";
        row_text(&labels, now_col > 0 ? now_col - 1 : 0, "Now");
    }
    int last_day = -1;
    for (int k = 0; k < 1000; k++) {
        struct tm mark = tm;
        mark.tm_hour += k * step;
        mark.tm_isdst = -1;
        double t = (double)mktime(&mark);
        if (t > end)
            break;
        int col = column(t, *start, end);
        if (col >= PLOT_W)
            break;
        axis.glyph[col] = col == now_col ? "┃" : "┬";
        bool new_day = mark.tm_yday != last_day;
        char *text = format_time_as(t, new_day ? "%m/%d %H:%M" : "%H:%M");
        int len = (int)strlen(text);
        /* Room for it: after the last label, inside the plot, clear of "Now". */
        bool clear = now_col < 0 || col + len < now_col - 2 || col > now_col + 3;
        if (col >= taken && col + len <= PLOT_W && clear) {
            row_text(&labels, col, text);
            taken = col + len + 1;
            last_day = mark.tm_yday;
        }
        free(text);
    }
    row_print(&axis, "", out);
    row_print(&labels, "", out);
}

static double num(const json_t *x, const char *key)
{
    return json_number_value(json_object_get(x, key));
}

static const char *status_glyph(const char *status)
{
    return !strcmp(status, "active")      ? "█"
           : !strcmp(status, "pending")   ? "░"
           : !strcmp(status, "completed") ? "▓"
                                          : "▒";
}

/* Drawing order: ended ones first, so that a live reservation is drawn over them. */
static int status_rank(const char *status)
{
    return !strcmp(status, "active") ? 3 : !strcmp(status, "pending") ? 2 : 1;
}

static const char *status_word(const char *s)
{
    return !strcmp(s, "pending")     ? "Pending"
           : !strcmp(s, "active")    ? "Active"
           : !strcmp(s, "completed") ? "Completed"
           : !strcmp(s, "cancelled") ? "Cancelled"
                                     : s;
}

static const char *status_of(const json_t *x)
{
    const char *s = json_string_value(json_object_get(x, "status"));
    return s ? s : "?";
}

static int by_start(const void *a, const void *b)
{
    double x = num(*(const json_t *const *)a, "start"), y = num(*(const json_t *const *)b, "start");
    return x < y ? -1 : x > y;
}

/* Marks the GPUs of the picture in rows[]: the daemon's and the reservations'. */
static void gpu_rows(const json_t *reservations, const json_t *gpu_indices, bool rows[MAX_GPUS])
{
    size_t i, j;
    const json_t *v, *x;
    json_array_foreach (gpu_indices, i, v)
        if (json_integer_value(v) >= 0 && json_integer_value(v) < MAX_GPUS)
            rows[json_integer_value(v)] = true;
    json_array_foreach (reservations, i, x)
        json_array_foreach (json_object_get(x, "gpus"), j, v)
            if (json_integer_value(v) >= 0 && json_integer_value(v) < MAX_GPUS)
                rows[json_integer_value(v)] = true;
}

/* Draws reservation x in its GPUs' rows, "#ID" at the start of a bar long enough. */
static void draw(const json_t *x, double start, double end, struct plot_row *rows)
{
    int b0 = column(fmax(num(x, "start"), start), start, end);
    int b1 = column(fmin(num(x, "end"), end), start, end);
    if (b0 >= PLOT_W)
        b0 = PLOT_W - 1;
    if (b1 <= b0)
        b1 = b0 + 1;
    char id[32];
    snprintf(id, sizeof(id), "#%lld", (long long)json_integer_value(json_object_get(x, "id")));
    size_t j;
    const json_t *v;
    json_array_foreach (json_object_get(x, "gpus"), j, v) {
        json_int_t g = json_integer_value(v);
        if (g < 0 || g >= MAX_GPUS)
            continue;
        for (int c = b0; c < b1; c++) {
            rows[g].glyph[c] = status_glyph(status_of(x));
            rows[g].ascii[c] = ' ';
        }
        if (b1 - b0 > (int)strlen(id))
            row_text(&rows[g], b0, id);
    }
}

void timeline_print(const json_t *reservations, const json_t *gpu_indices, double from, double to,
                    double now, FILE *out)
{
    char *title = format_time_zone(now);
    fprintf(out, "\nGPU Reservations Timeline (%s)\n", title);
    free(title);
    rule("═", out);
    double start = from;
    print_axis(&start, to, now, out);
    fputc('\n', out);

    size_t n = json_array_size(reservations), shown = 0;
    const json_t **in_range = xcalloc(n ? n : 1, sizeof(*in_range));
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(reservations, i);
        if (num(x, "end") > start && num(x, "start") < to)
            in_range[shown++] = x;
    }
    qsort(in_range, shown, sizeof(*in_range), by_start);

    static struct plot_row rows[MAX_GPUS];
    bool used[MAX_GPUS] = {false};
    gpu_rows(reservations, gpu_indices, used);
    for (int g = 0; g < MAX_GPUS; g++)
        row_init(&rows[g], ' ');
    for (int rank = 1; rank <= 3; rank++)
        for (size_t i = 0; i < shown; i++)
            if (status_rank(status_of(in_range[i])) == rank)
                draw(in_range[i], start, to, rows);
    for (int g = 0; g < MAX_GPUS; g++) {
        if (!used[g])
            continue;
        char label[16];
        snprintf(label, sizeof(label), "GPU %d", g);
        row_print(&rows[g], label, out);
    }

    rule("─", out);
    for (size_t i = 0; i < shown; i++) {
        const json_t *x = in_range[i];
        char *gpus = NULL;
        struct strbuf sb;
        strbuf_init(&sb);
        size_t j;
        const json_t *v;
        json_array_foreach (json_object_get(x, "gpus"), j, v)
            strbuf_addf(&sb, "%s%lld", j ? "," : "", (long long)json_integer_value(v));
        gpus = strbuf_detach(&sb);
        char *a = format_time_as(num(x, "start"), "%m/%d %H:%M");
        char *b = format_time_as(num(x, "end"), "%m/%d %H:%M");
        fprintf(out, "#%-4lld %-12s GPU %-8s %-9s %s → %s\n",
                (long long)json_integer_value(json_object_get(x, "id")),
                json_string_value(json_object_get(x, "user")), gpus, status_word(status_of(x)), a,
                b);
        free(a);
        free(b);
        free(gpus);
    }
    if (shown < n)
        fprintf(out, "(%zu more outside this range: widen it with --range or --from/--to)\n",
                n - shown);

    /* As gflow: counted from the daemon's statuses, over every reservation listed. */
    size_t active = 0, pending = 0;
    long long gpus_now = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(reservations, i);
        if (!strcmp(status_of(x), "active")) {
            active++;
            gpus_now += (long long)json_array_size(json_object_get(x, "gpus"));
        } else if (!strcmp(status_of(x), "pending")) {
            pending++;
        }
    }
    fprintf(out, "Summary: %zu active, %zu pending | %lld GPU%s currently reserved\n", active,
            pending, gpus_now, gpus_now == 1 ? "" : "s");
    fprintf(out, "\nLegend: █ Active  ░ Pending  ▓ Completed  ▒ Cancelled  ┃ Now\n");
    free(in_range);
}

/* One side of --range: [+-]N<unit>[N<unit>...] in seconds, signed. */
static int range_side(const char *s, double *secs)
{
    double sign = 1;
    if (*s == '+' || *s == '-')
        sign = *s++ == '-' ? -1 : 1;
    if (!*s)
        return -1;
    double total = 0;
    while (*s) {
        char *end;
        if (*s < '0' || *s > '9')
            return -1;
        long long n = strtoll(s, &end, 10);
        const char *units = "smhdw";
        static const double scale[] = {1, 60, 3600, 86400, 604800};
        const char *u = *end ? strchr(units, *end) : NULL;
        if (!u || n > 100000)
            return -1;
        total += (double)n * scale[u - units];
        s = end + 1;
    }
    *secs = sign * total;
    return 0;
}

int timeline_parse_range(const char *spec, double now, double *from, double *to, char **err)
{
    const char *colon = strchr(spec, ':');
    double a = 0, b = 0;
    bool ok;
    if (colon) {
        char *left = xstrndup(spec, (size_t)(colon - spec));
        ok = range_side(left, &a) == 0 && range_side(colon + 1, &b) == 0;
        free(left);
        *from = now + a;
        *to = now + b;
    } else {
        ok = range_side(spec, &a) == 0;
        *from = a < 0 ? now + a : now;
        *to = a < 0 ? now : now + a;
    }
    if (!ok) {
        *err = xasprintf("invalid --range '%s': use 48h (from now), -24h (up to now) or "
                         "-24h:+24h, with s, m, h, d or w",
                         spec);
        return -1;
    }
    if (*to <= *from) {
        *err = xasprintf("invalid --range '%s': the end must be after the start", spec);
        return -1;
    }
    return 0;
}
