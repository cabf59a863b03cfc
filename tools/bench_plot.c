/*
 * mscclpp-bench --plot: an SVG with two panels sharing a log2 size axis, bus bandwidth (linear)
 * above and time (log10) below, one polyline per series and a legend on the right. Written
 * with fprintf so the tool keeps no dependency beyond libc and libm; structure (a <g> per panel
 * and per series, with data-series names) is stable so tests can read it back.
 */
#include "tools/bench_plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double bytes, time_us, busbw;
} point_t;

typedef struct {
    char *name;
    point_t *pts;
    size_t n, cap;
} series_t;

struct bench_plot {
    char *title;
    series_t *series;
    int n, cap;
};

/* Canvas geometry (pixels): two panels on the left, the legend on the right. */
enum { MIN_W = 960, MIN_H = 780, PX0 = 84, PX1 = 660, LEGEND_X = 684 };
static const int panel_y0[2] = {70, 430}, panel_y1[2] = {360, 720};

/* Colour-blind-friendly palette (Okabe-Ito, then greys); series cycle through it. */
static const char *const colors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                     "#56B4E9", "#000000", "#F0E442", "#999999", "#882255"};
#define NCOLORS (sizeof(colors) / sizeof(colors[0]))

bench_plot_t *bench_plot_new(const char *title)
{
    bench_plot_t *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    p->title = strdup(title ? title : "");
    if (!p->title) {
        free(p);
        return NULL;
    }
    return p;
}

void bench_plot_free(bench_plot_t *p)
{
    if (!p) return;
    for (int i = 0; i < p->n; i++) {
        free(p->series[i].name);
        free(p->series[i].pts);
    }
    free(p->series);
    free(p->title);
    free(p);
}

int bench_plot_series_count(const bench_plot_t *p) { return p ? p->n : 0; }

static series_t *series_get(bench_plot_t *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->series[i].name, name) == 0) return &p->series[i];
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 8;
        series_t *s = realloc(p->series, (size_t)cap * sizeof(*s));
        if (!s) return NULL;
        p->series = s;
        p->cap = cap;
    }
    series_t *s = &p->series[p->n];
    memset(s, 0, sizeof(*s));
    if (!(s->name = strdup(name))) return NULL;
    p->n++;
    return s;
}

int bench_plot_add(bench_plot_t *p, const char *series, size_t bytes, double time_us,
                   double busbw)
{
    if (!p || !series) return -1;
    /* A failed or unmeasured cell has no place on a log axis. */
    if (bytes == 0 || !(time_us > 0) || !isfinite(time_us) || !isfinite(busbw)) return 0;
    series_t *s = series_get(p, series);
    if (!s) return -1;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        point_t *pts = realloc(s->pts, cap * sizeof(*pts));
        if (!pts) return -1;
        s->pts = pts;
        s->cap = cap;
    }
    s->pts[s->n++] = (point_t){(double)bytes, time_us, busbw};
    return 0;
}

/* ---- drawing helpers ------------------------------------------------------------------------ */

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            /* control characters are not allowed in XML 1.0 text */
            if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
            break;
        }
    }
}

/* 1, 2, ... 512, 1K ... 512K, 1M ...: sizes the way users type them for -b/-e. */
static void size_label(double bytes, char *buf, size_t len)
{
    static const char units[] = " KMGTP";
    int u = 0;
    while (bytes >= 1024 && u < 5) bytes /= 1024, u++;
    if (u == 0)
        snprintf(buf, len, "%.0f", bytes);
    else
        snprintf(buf, len, "%.0f%c", bytes, units[u]);
}

/* Smallest of 1, 2, 5 x 10^k at or above v (v > 0). */
static double nice_ceil(double v)
{
    double e = pow(10, floor(log10(v)));
    for (int k = 0; k < 3; k++) {
        double m = (double[]){1, 2, 5}[k] * e;
        if (m >= v * (1 - 1e-12)) return m;
    }
    return 10 * e;
}

typedef struct {
    double xmin, xmax; /* log2(bytes) */
    double bmax;       /* busbw axis top */
    double tmin, tmax; /* log10(time_us) */
} ranges_t;

static void data_ranges(const bench_plot_t *p, ranges_t *r, size_t *npoints)
{
    double xlo = INFINITY, xhi = -INFINITY, tlo = INFINITY, thi = -INFINITY, bhi = 0;
    size_t n = 0;
    for (int i = 0; i < p->n; i++)
        for (size_t k = 0; k < p->series[i].n; k++) {
            const point_t *pt = &p->series[i].pts[k];
            double x = log2(pt->bytes), t = log10(pt->time_us);
            if (x < xlo) xlo = x;
            if (x > xhi) xhi = x;
            if (t < tlo) tlo = t;
            if (t > thi) thi = t;
            if (pt->busbw > bhi) bhi = pt->busbw;
            n++;
        }
    *npoints = n;
    if (n == 0) xlo = 0, xhi = 1, tlo = 0, thi = 1;
    /* One size (or one time) still gets an axis with a visible span around it. */
    if (xhi - xlo < 1) xlo -= 0.5, xhi += 0.5;
    r->xmin = floor(xlo), r->xmax = ceil(xhi);
    r->tmin = floor(tlo), r->tmax = ceil(thi);
    if (r->tmax - r->tmin < 1) r->tmax = r->tmin + 1;
    r->bmax = bhi > 0 ? nice_ceil(bhi * 1.05) : 1;
}

static double px_x(const ranges_t *r, double bytes)
{
    return PX0 + (log2(bytes) - r->xmin) / (r->xmax - r->xmin) * (PX1 - PX0);
}

static double px_y(const ranges_t *r, int panel, const point_t *pt)
{
    double y0 = panel_y0[panel], y1 = panel_y1[panel], frac;
    if (panel == 0)
        frac = pt->busbw / r->bmax;
    else
        frac = (log10(pt->time_us) - r->tmin) / (r->tmax - r->tmin);
    return y1 - frac * (y1 - y0);
}

static void draw_axes(FILE *f, const ranges_t *r, int panel)
{
    int y0 = panel_y0[panel], y1 = panel_y1[panel];
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" "
               "stroke=\"#444\"/>\n", PX0, y0, PX1 - PX0, y1 - y0);
    /* x: powers of two, at most about 12 labels */
    int span = (int)(r->xmax - r->xmin), step = span / 12 + 1;
    for (int e = (int)r->xmin; e <= (int)r->xmax; e += step) {
        double x = PX0 + (e - r->xmin) / (r->xmax - r->xmin) * (PX1 - PX0);
        char lbl[32];
        size_label(ldexp(1, e), lbl, sizeof(lbl));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, y0,
                x, y1);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, y1 + 16,
                lbl);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">message size (bytes)</text>\n",
            (PX0 + PX1) / 2, y1 + 36);
    /* y: five linear steps of busbw, or decades of time */
    int nt = panel == 0 ? 5 : (int)(r->tmax - r->tmin);
    for (int k = 0; k <= nt; k++) {
        double y = y1 - (double)k / nt * (y1 - y0);
        char lbl[32];
        if (panel == 0)
            snprintf(lbl, sizeof(lbl), "%g", r->bmax * k / nt);
        else
            snprintf(lbl, sizeof(lbl), "%g", pow(10, r->tmin + k));
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", PX0, y,
                PX1, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", PX0 - 6, y + 4,
                lbl);
    }
    fprintf(f, "<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\">%s"
               "</text>\n", 20, (y0 + y1) / 2, panel == 0 ? "bus bandwidth (GB/s)" : "time (us)");
}

static int cmp_point(const void *a, const void *b)
{
    double x = ((const point_t *)a)->bytes, y = ((const point_t *)b)->bytes;
    return (x > y) - (x < y);
}

static int is_mpi(const char *name) { return strncmp(name, "MPI", 3) == 0; }

static void draw_series(FILE *f, const ranges_t *r, int panel, int idx, const series_t *s)
{
    const char *color = colors[(size_t)idx % NCOLORS];
    fprintf(f, "<g class=\"series\" data-series=\"");
    xml_text(f, s->name);
    fprintf(f, "\" stroke=\"%s\" fill=\"%s\">\n", color, color);
    fprintf(f, "<polyline fill=\"none\" stroke-width=\"2\"%s points=\"",
            is_mpi(s->name) ? " stroke-dasharray=\"6 4\"" : "");
    for (size_t k = 0; k < s->n; k++)
        fprintf(f, "%s%.1f,%.1f", k ? " " : "", px_x(r, s->pts[k].bytes),
                px_y(r, panel, &s->pts[k]));
    fprintf(f, "\"/>\n");
    for (size_t k = 0; k < s->n; k++) {
        char lbl[32];
        size_label(s->pts[k].bytes, lbl, sizeof(lbl));
        fprintf(f, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"><title>", px_x(r,
                s->pts[k].bytes), px_y(r, panel, &s->pts[k]));
        xml_text(f, s->name);
        fprintf(f, " %s: %.2f us, %.2f GB/s</title></circle>\n", lbl, s->pts[k].time_us,
                s->pts[k].busbw);
    }
    fprintf(f, "</g>\n");
}

int bench_plot_write(const bench_plot_t *p, const char *path)
{
    if (!p || !path) {
        errno = EINVAL;
        return -1;
    }
    /* Lines go left to right whatever order the rows came in. */
    for (int i = 0; i < p->n; i++)
        qsort(p->series[i].pts, p->series[i].n, sizeof(point_t), cmp_point);
    ranges_t r;
    size_t npoints;
    data_ranges(p, &r, &npoints);
    /* The canvas grows to the right so that the longest legend entry fits (about 7 px per
       character at font-size 12). */
    size_t longest = 0;
    for (int i = 0; i < p->n; i++)
        if (strlen(p->series[i].name) > longest) longest = strlen(p->series[i].name);
    int W = LEGEND_X + 36 + 7 * (int)longest + 16;
    if (W < MIN_W) W = MIN_W;
    int H = panel_y0[0] + 10 + 22 * p->n + 20; /* and down, for a long legend */
    if (H < MIN_H) H = MIN_H;
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fafafa\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"32\" font-size=\"17\" text-anchor=\"middle\">", W / 2);
    xml_text(f, p->title);
    fprintf(f, "</text>\n");
    static const char *const ids[2] = {"busbw", "time"};
    for (int panel = 0; panel < 2; panel++) {
        fprintf(f, "<g id=\"%s\">\n", ids[panel]);
        draw_axes(f, &r, panel);
        for (int i = 0; i < p->n; i++) draw_series(f, &r, panel, i, &p->series[i]);
        if (npoints == 0)
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no successful calls to "
                       "plot</text>\n", (PX0 + PX1) / 2, (panel_y0[panel] + panel_y1[panel]) / 2);
        fprintf(f, "</g>\n");
    }
    fprintf(f, "<g id=\"legend\">\n");
    for (int i = 0; i < p->n; i++) {
        int y = panel_y0[0] + 10 + 22 * i;
        const char *color = colors[(size_t)i % NCOLORS];
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                   "stroke-width=\"3\"%s/>\n", LEGEND_X, y, LEGEND_X + 28, y, color,
                is_mpi(p->series[i].name) ? " stroke-dasharray=\"6 4\"" : "");
        fprintf(f, "<text x=\"%d\" y=\"%d\">", LEGEND_X + 36, y + 4);
        xml_text(f, p->series[i].name);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</g>\n</svg>\n");
    int err = ferror(f);
    if (fclose(f) != 0 || err) {
        if (!errno) errno = EIO;
        return -1;
    }
    return 0;
}
