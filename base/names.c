/* Near misses among names (base/names.h). */
#include "base/names.h"

#include <string.h>

int names_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63 || (n > m ? n - m : m - n) > 2) return 3;
    int d[64][64];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m] > 3 ? 3 : d[n][m];
}

const char *names_nearest(const char *s, const char *const *names)
{
    const char *best = NULL;
    int bd = 3;
    for (; *names; names++) {
        int d = names_distance(s, *names);
        if (d < bd) {
            bd = d;
            best = *names;
        }
    }
    return best;
}
