/* cli/rng.c - seeded streams of random numbers (see rng.h). */
#include "cli/rng.h"

#include <math.h>
#include <time.h>
#include <unistd.h>

static uint64_t mix64(uint64_t z)
{
    /* The splitmix64 finalizer: a bijection that spreads every input bit. */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void cli_rng_init(cli_rng *r, uint64_t seed, const char *stream, uint64_t index)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the stream name */
    for (const unsigned char *p = (const unsigned char *)stream; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    r->state = mix64(seed ^ mix64(h ^ mix64(index + 0x9e3779b97f4a7c15ull)));
    r->have_spare = 0;
    r->spare = 0;
}

uint64_t cli_rng_next(cli_rng *r)
{
    r->state += 0x9e3779b97f4a7c15ull;
    return mix64(r->state);
}

double cli_rng_normal(cli_rng *r)
{
    if (r->have_spare) {
        r->have_spare = 0;
        return r->spare;
    }
    /* u1 in (0, 1] so the log is finite; u2 in [0, 1). 53 bits each. */
    double u1 = (double)((cli_rng_next(r) >> 11) + 1) * 0x1.0p-53;
    double u2 = (double)(cli_rng_next(r) >> 11) * 0x1.0p-53;
    double radius = sqrt(-2.0 * log(u1));
    double angle = 6.283185307179586476925 * u2;
    r->spare = radius * sin(angle);
    r->have_spare = 1;
    return radius * cos(angle);
}

void cli_rng_fill_normal(float *out, size_t n, float scale, uint64_t seed, const char *stream, uint64_t index)
{
    cli_rng r;
    cli_rng_init(&r, seed, stream, index);
    for (size_t i = 0; i < n; i++)
        out[i] = scale * (float)cli_rng_normal(&r);
}

uint64_t cli_rng_fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = mix64((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ mix64((uint64_t)getpid());
    /* Kept below 2^32 so that the seed printed for a rerun is short to type. */
    return z & 0xffffffffull;
}
