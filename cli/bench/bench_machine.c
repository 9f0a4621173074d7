/*
 * cli/bench/bench_machine.c - what this machine can do, measured by the
 * same command that times the backend: read bandwidth (the decode floor)
 * and the CPU's name for the record. Named shapes live here too.
 */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE under strict C11 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <time.h>
#include <unistd.h>

#include "cli/bench/bench.h"

const bench_shape bench_named_shapes[] = {
    {"mixtral-8x7b", 8, 2, 4096, 14336},
    {"gpt-oss-120b", 128, 4, 2880, 2880},
    {"qwen3-30b-a3b", 128, 8, 2048, 768},
    {"deepseek-v3", 256, 8, 7168, 2048},
};
const size_t bench_n_named_shapes = sizeof bench_named_shapes / sizeof bench_named_shapes[0];

int bench_shape_parse(const char *text, bench_shape *out)
{
    for (size_t i = 0; i < bench_n_named_shapes; i++) {
        if (strcmp(text, bench_named_shapes[i].name) == 0) {
            *out = bench_named_shapes[i];
            return 0;
        }
    }
    unsigned e, k, h, in;
    char tail;
    if (sscanf(text, "%u,%u,%u,%u%c", &e, &k, &h, &in, &tail) != 4 || !e || !k || k > e || !h || !in)
        return -1;
    *out = (bench_shape){.experts = e, .top_k = k, .hidden = h, .inter = in};
    snprintf(out->name, sizeof out->name, "%u,%u,%u,%u", e, k, h, in);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The read kernel. One thread's part of the buffer is cut into STREAMS
 * contiguous pieces read in lockstep, a 256-byte block (four cache lines) of
 * each per round, XOR-folded into independent accumulators: several streams
 * keep more cache-line misses in flight than one (the hardware prefetchers
 * track each) - on the CI machine one stream per thread reads ~25 GB/s with
 * two threads, eight ~30 GB/s, as fast as any kernel of ours streams
 * weights. The widest vector loads the CPU *and* OS enable are used
 * (__builtin_cpu_supports checks XCR0 too); a portable loop otherwise. */
#define STREAMS 8
#define BLOCK   256

typedef uint64_t (*read_fn)(const unsigned char *p, size_t per_stream);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86_READERS 1

__attribute__((target("avx512f"))) static uint64_t read_avx512(const unsigned char *p, size_t per)
{
    __m512i acc[STREAMS];
    for (int s = 0; s < STREAMS; s++)
        acc[s] = _mm512_setzero_si512();
    for (size_t o = 0; o < per; o += BLOCK)
        for (int s = 0; s < STREAMS; s++) {
            const unsigned char *q = p + (size_t)s * per + o;
            __m512i v = _mm512_xor_si512(_mm512_load_si512((const void *)q), _mm512_load_si512((const void *)(q + 64)));
            v = _mm512_xor_si512(v, _mm512_load_si512((const void *)(q + 128)));
            acc[s] = _mm512_xor_si512(acc[s], _mm512_xor_si512(v, _mm512_load_si512((const void *)(q + 192))));
        }
    for (int s = 1; s < STREAMS; s++)
        acc[0] = _mm512_xor_si512(acc[0], acc[s]);
    uint64_t lanes[8];
    _mm512_storeu_si512((void *)lanes, acc[0]);
    return lanes[0] ^ lanes[3] ^ lanes[7];
}

__attribute__((target("avx2"))) static uint64_t read_avx2(const unsigned char *p, size_t per)
{
    __m256i acc[STREAMS];
    for (int s = 0; s < STREAMS; s++)
        acc[s] = _mm256_setzero_si256();
    for (size_t o = 0; o < per; o += BLOCK)
        for (int s = 0; s < STREAMS; s++) {
            const __m256i *q = (const __m256i *)(p + (size_t)s * per + o);
            __m256i v = _mm256_xor_si256(_mm256_load_si256(q), _mm256_load_si256(q + 1));
            v = _mm256_xor_si256(v, _mm256_xor_si256(_mm256_load_si256(q + 2), _mm256_load_si256(q + 3)));
            v = _mm256_xor_si256(v, _mm256_xor_si256(_mm256_load_si256(q + 4), _mm256_load_si256(q + 5)));
            v = _mm256_xor_si256(v, _mm256_xor_si256(_mm256_load_si256(q + 6), _mm256_load_si256(q + 7)));
            acc[s] = _mm256_xor_si256(acc[s], v);
        }
    for (int s = 1; s < STREAMS; s++)
        acc[0] = _mm256_xor_si256(acc[0], acc[s]);
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, acc[0]);
    return lanes[0] ^ lanes[3];
}
#endif

static uint64_t read_portable(const unsigned char *p, size_t per)
{
    uint64_t acc[STREAMS] = {0};
    for (size_t o = 0; o < per; o += BLOCK)
        for (int s = 0; s < STREAMS; s++) {
            const uint64_t *q = (const uint64_t *)(const void *)(p + (size_t)s * per + o);
            uint64_t v = 0;
            for (int i = 0; i < BLOCK / 8; i++)
                v ^= q[i];
            acc[s] ^= v;
        }
    for (int s = 1; s < STREAMS; s++)
        acc[0] ^= acc[s];
    return acc[0];
}

static read_fn pick_reader(const char **name)
{
#ifdef HAVE_X86_READERS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return *name = "avx512", read_avx512;
    if (__builtin_cpu_supports("avx2"))
        return *name = "avx2", read_avx2;
#endif
    return *name = "portable", read_portable;
}

const char *bench_read_method(void)
{
    static char text[96];
    const char *isa;
    pick_reader(&isa);
    snprintf(text, sizeof text, "%s loads, %d streams per thread, best of reps", isa, STREAMS);
    return text;
}

size_t bench_read_bytes(void)
{
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t bytes = 4 * (size_t)(llc > 0 ? llc : 0);
    return bytes > ((size_t)512 << 20) ? bytes : (size_t)512 << 20;
}

typedef struct sweep {
    read_fn fn;
    const unsigned char *data;
    size_t per_stream;
    uint64_t sum; /* kept so the reads cannot be optimized away */
} sweep;

static void *sweep_run(void *arg)
{
    sweep *s = arg;
    s->sum = s->fn(s->data, s->per_stream);
    return NULL;
}

double bench_read_bandwidth(size_t bytes, int threads, int reps)
{
    if (threads < 1 || threads > 256)
        return 0.0;
    /* Every thread's part is STREAMS pieces of whole blocks, 4 KiB-aligned. */
    size_t per = bytes / (size_t)threads / STREAMS / 4096 * 4096;
    size_t part = per * STREAMS, used = part * (size_t)threads;
    unsigned char *buf = NULL;
    if (per == 0 || posix_memalign((void **)&buf, (size_t)2 << 20, used) != 0)
        return 0.0;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Huge pages where the kernel gives them, as plugins/cpu asks for its
     * weights: the floor is what the machine can read at best, and 4 KiB
     * pages read slower (a page walk per 4 KiB, prefetchers stop at page
     * boundaries). Advisory: without them the floor is only lower. */
    (void)madvise(buf, used / ((size_t)2 << 20) * ((size_t)2 << 20), MADV_HUGEPAGE);
#endif
    memset(buf, 0x5A, used); /* touches every page; not zeros */
    const char *isa;
    read_fn fn = pick_reader(&isa);
    sweep parts[256];
    pthread_t tid[256];
    double best = 0;
    uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (int t = 0; t < threads; t++) {
            parts[t] = (sweep){fn, buf + part * (size_t)t, per, 0};
            if (t > 0)
                pthread_create(&tid[t], NULL, sweep_run, &parts[t]);
        }
        sweep_run(&parts[0]);
        for (int t = 1; t < threads; t++)
            pthread_join(tid[t], NULL);
        double dt = now_s() - t0;
        for (int t = 0; t < threads; t++)
            sink ^= parts[t].sum;
        if (dt > 0 && (double)used / dt > best)
            best = (double)used / dt;
    }
    free(buf);
    /* Every 64-bit word is 0x5A5A...: an even number of them XORs to 0 (per
     * is a multiple of 4 KiB); anything else means a read went wrong. */
    return sink ? 0.0 : best;
}
