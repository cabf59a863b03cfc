/*
 * mscclpp-bench --plot: the sweep as an SVG picture, written directly (no plotting library):
 * bus bandwidth and time against message size, one line per series (a collective or plan and
 * its placement, MPI's collective under --mpi).
 */
#ifndef MSCCLPP_TOOLS_BENCH_PLOT_H
#define MSCCLPP_TOOLS_BENCH_PLOT_H

#include <stddef.h>

typedef struct bench_plot bench_plot_t;

/** A new, empty plot titled `title` (copied); NULL when out of memory. */
bench_plot_t *bench_plot_new(const char *title);
void bench_plot_free(bench_plot_t *plot);

/**
 * Add one measurement to the series named `series` (created on first use, in order of first
 * use: that is the legend's order). busbw in GB/s, time in microseconds; bytes > 0 and
 * time_us > 0, else the point is ignored. Returns 0, or -1 when out of memory.
 */
int bench_plot_add(bench_plot_t *plot, const char *series, size_t bytes, double time_us,
                   double busbw);

/** Number of series so far. */
int bench_plot_series_count(const bench_plot_t *plot);

/**
 * Write the SVG to `path`. Returns 0, or -1 with errno set when the file cannot be written
 * (a plot without points is still a valid picture that says so).
 */
int bench_plot_write(const bench_plot_t *plot, const char *path);

#endif
