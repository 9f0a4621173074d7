/*
 * tests/cuda/test_cuda_memory_table.c - the device-memory table the cuda
 * and megamoe plugins lend (plugins/cuda/memory_table.c), against fakes of
 * the runtime and timing calls it forwards to: what reaches them, what
 * comes back (status, the runtime's reason unchanged), what is refused
 * before any runtime call. No GPU needed; nothing of the machine's CUDA
 * installation is used.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/memory_table.h"

/* ------------------------------------------------------------------------ */
/* Fakes: the host's error_set, and runtime.cu's and timing.cu's calls       */
/* ------------------------------------------------------------------------ */

static struct {
    int calls;
    fmoe_status status;
    char text[256];
} reported;

static fmoe_status fake_error_set(fmoe_error *err, fmoe_status status, const char *fmt, ...)
{
    (void)err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reported.text, sizeof reported.text, fmt, ap);
    va_end(ap);
    reported.calls++;
    reported.status = status;
    return status;
}

static fmoe_host host = {.struct_size = sizeof(fmoe_host), .error_set = fake_error_set};

/* A plugin state as memory_table.h asks: the host table first. */
static struct {
    const fmoe_host *host;
    int other;
} state = {&host, 7};

static struct {
    int calls, device, to_device, n_enqueued, enqueue_failed;
    size_t bytes;
    void *ptr, *dst, *stream;
    const void *src;
    uint64_t rate_bytes;
    uint32_t reps;
} seen;

static int fail_with(char *err, size_t cap, const char *why)
{
    snprintf(err, cap, "%s", why);
    return -1;
}

int fmcu_malloc(int device, void **ptr, size_t bytes, char *err, size_t cap)
{
    seen.calls++;
    seen.device = device;
    seen.bytes = bytes;
    if (bytes == 999)
        return fail_with(err, cap, "cudaMalloc(999 bytes): out of memory (cudaErrorMemoryAllocation)");
    *ptr = (void *)0x1000;
    return 0;
}

void fmcu_free(int device, void *ptr)
{
    seen.calls++;
    seen.device = device;
    seen.ptr = ptr;
}

int fmcu_copy(int device, int to_device, void *dst, const void *src, size_t bytes, void *stream, char *err, size_t cap)
{
    seen.calls++;
    seen.device = device;
    seen.to_device = to_device;
    seen.dst = dst;
    seen.src = src;
    seen.bytes = bytes;
    seen.stream = stream;
    return bytes == 13 ? fail_with(err, cap, "copy to the device: an illegal memory access") : 0;
}

int fmcu_synchronize(int device, void *stream, char *err, size_t cap)
{
    seen.calls++;
    seen.device = device;
    seen.stream = stream;
    return device == 3 ? fail_with(err, cap, "cudaDeviceSynchronize: a launch failure") : 0;
}

int fmcu_time_replays(int device, uint32_t n_graphs, uint32_t warmup, uint32_t reps,
                      int (*enqueue)(void *ctx, uint32_t index, void *stream), void *ctx, double *seconds, char *err,
                      size_t cap)
{
    (void)warmup;
    seen.calls++;
    seen.device = device;
    for (uint32_t i = 0; i < n_graphs; i++) {
        if (enqueue(ctx, i, (void *)0x77) != 0)
            return fail_with(err, cap, "capture: the enqueue function failed");
        seen.n_enqueued++;
    }
    for (uint32_t r = 0; r < reps; r++)
        seconds[r] = 1e-6 * (r + 1);
    return 0;
}

int fmcu_copy_rate(int device, uint64_t bytes, uint32_t reps, double *bytes_per_second, char *err, size_t cap)
{
    seen.calls++;
    seen.device = device;
    seen.rate_bytes = bytes;
    seen.reps = reps;
    if (device == 2)
        return fail_with(err, cap, "cudaMalloc (copy-rate buffers): out of memory");
    *bytes_per_second = 4.2e12;
    return 0;
}

int fmcu_read_rate(int device, uint64_t bytes, uint32_t reps, double *bytes_per_second, char *err, size_t cap)
{
    seen.calls++;
    seen.device = device;
    seen.rate_bytes = bytes;
    seen.reps = reps;
    if (device == 2)
        return fail_with(err, cap, "read kernel summed the chunk marks to 00000001, expected 00000000");
    *bytes_per_second = 4.6e12;
    return 0;
}

/* The host's enqueue: index i of the replays; index 2 fails. */
static fmoe_status enqueue(void *ctx, uint32_t index, void *stream)
{
    int *last = ctx;
    *last = (int)index;
    if (stream != (void *)0x77)
        return FMOE_STATUS_INVALID_ARGUMENT;
    return index == 2 ? FMOE_STATUS_DEVICE_ERROR : FMOE_STATUS_OK;
}

static fmoe_error *const err = (fmoe_error *)&reported; /* opaque to the table: passed through */

static void reset(void)
{
    memset(&reported, 0, sizeof reported);
    memset(&seen, 0, sizeof seen);
}

/* ------------------------------------------------------------------------ */

START_TEST(the_table_is_whole)
{
    const fmoe_device_memory *m = &fmcu_memory_table;
    ck_assert_uint_eq(m->struct_size, sizeof(fmoe_device_memory));
    ck_assert_ptr_nonnull(m->alloc);
    ck_assert_ptr_nonnull(m->free);
    ck_assert_ptr_nonnull(m->copy);
    ck_assert_ptr_nonnull(m->synchronize);
    ck_assert_ptr_nonnull(m->time_replays);
    ck_assert_ptr_nonnull(m->copy_rate);
    ck_assert_ptr_nonnull(m->read_rate);
}
END_TEST

START_TEST(alloc_forwards_and_passes_the_reason_on)
{
    reset();
    fmoe_memory_args a = {.struct_size = sizeof a,
                          .err = err,
                          .state = &state,
                          .device_kind = FMOE_DEVICE_CUDA,
                          .device_index = 1,
                          .bytes = 4096};
    ck_assert_int_eq(fmcu_memory_table.alloc(&a), FMOE_STATUS_OK);
    ck_assert_ptr_eq(a.ptr, (void *)0x1000);
    ck_assert_int_eq(seen.device, 1);
    ck_assert_uint_eq(seen.bytes, 4096);
    ck_assert_int_eq(reported.calls, 0);

    a.bytes = 999;
    ck_assert_int_eq(fmcu_memory_table.alloc(&a), FMOE_STATUS_OUT_OF_MEMORY);
    ck_assert_str_eq(reported.text, "cudaMalloc(999 bytes): out of memory (cudaErrorMemoryAllocation)");
}
END_TEST

START_TEST(a_device_of_another_kind_is_refused_before_the_runtime)
{
    reset();
    fmoe_memory_args a = {
        .struct_size = sizeof a, .err = err, .state = &state, .device_kind = FMOE_DEVICE_CPU, .bytes = 64};
    ck_assert_int_eq(fmcu_memory_table.alloc(&a), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(reported.text, "alloc: not a CUDA device");
    a.ptr = (void *)0x2000;
    fmcu_memory_table.free(&a); /* not ours: nothing freed */
    fmoe_sync_args s = {.struct_size = sizeof s, .err = err, .state = &state, .device_kind = FMOE_DEVICE_ROCM};
    ck_assert_int_eq(fmcu_memory_table.synchronize(&s), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(reported.text, "synchronize: not a CUDA device");
    ck_assert_int_eq(seen.calls, 0);

    a.device_kind = FMOE_DEVICE_CUDA;
    fmcu_memory_table.free(&a);
    ck_assert_int_eq(seen.calls, 1);
    ck_assert_ptr_eq(seen.ptr, (void *)0x2000);
}
END_TEST

START_TEST(copy_maps_the_direction_and_refuses_others)
{
    reset();
    char host_buf[16];
    fmoe_copy_args c = {.struct_size = sizeof c,
                        .err = err,
                        .state = &state,
                        .device_kind = FMOE_DEVICE_CUDA,
                        .device_index = 0,
                        .direction = FMOE_COPY_TO_DEVICE,
                        .dst = (void *)0x3000,
                        .src = host_buf,
                        .bytes = 16,
                        .stream = (void *)0x55};
    ck_assert_int_eq(fmcu_memory_table.copy(&c), FMOE_STATUS_OK);
    ck_assert_int_eq(seen.to_device, 1);
    ck_assert_ptr_eq(seen.dst, (void *)0x3000);
    ck_assert_ptr_eq(seen.src, host_buf);
    ck_assert_ptr_eq(seen.stream, (void *)0x55);

    c.direction = FMOE_COPY_FROM_DEVICE;
    c.dst = host_buf;
    c.src = (const void *)0x3000;
    ck_assert_int_eq(fmcu_memory_table.copy(&c), FMOE_STATUS_OK);
    ck_assert_int_eq(seen.to_device, 0);

    c.bytes = 13;
    ck_assert_int_eq(fmcu_memory_table.copy(&c), FMOE_STATUS_DEVICE_ERROR);
    ck_assert_str_eq(reported.text, "copy to the device: an illegal memory access");

    const int calls = seen.calls;
    c.direction = 7;
    ck_assert_int_eq(fmcu_memory_table.copy(&c), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(seen.calls, calls);
}
END_TEST

START_TEST(synchronize_passes_the_stream_and_the_reason)
{
    reset();
    fmoe_sync_args s = {.struct_size = sizeof s,
                        .err = err,
                        .state = &state,
                        .device_kind = FMOE_DEVICE_CUDA,
                        .device_index = 1,
                        .stream = (void *)0x66};
    ck_assert_int_eq(fmcu_memory_table.synchronize(&s), FMOE_STATUS_OK);
    ck_assert_ptr_eq(seen.stream, (void *)0x66);
    s.device_index = 3;
    ck_assert_int_eq(fmcu_memory_table.synchronize(&s), FMOE_STATUS_DEVICE_ERROR);
    ck_assert_str_eq(reported.text, "cudaDeviceSynchronize: a launch failure");
}
END_TEST

START_TEST(time_replays_hands_the_enqueue_through)
{
    reset();
    double seconds[3] = {0};
    int last = -1;
    fmoe_replay_args r = {.struct_size = sizeof r,
                          .err = err,
                          .state = &state,
                          .device_kind = FMOE_DEVICE_CUDA,
                          .n_graphs = 2,
                          .warmup = 1,
                          .reps = 3,
                          .enqueue = enqueue,
                          .ctx = &last,
                          .seconds = seconds};
    ck_assert_int_eq(fmcu_memory_table.time_replays(&r), FMOE_STATUS_OK);
    ck_assert_int_eq(seen.n_enqueued, 2);
    ck_assert_int_eq(last, 1);
    ck_assert(seconds[2] == 3e-6);

    r.n_graphs = 3; /* the third enqueue fails: the capture fails with the runtime side's reason */
    ck_assert_int_eq(fmcu_memory_table.time_replays(&r), FMOE_STATUS_DEVICE_ERROR);
    ck_assert_int_eq(last, 2);
    ck_assert_str_eq(reported.text, "capture: the enqueue function failed");

    const int calls = seen.calls;
    r.enqueue = NULL;
    ck_assert_int_eq(fmcu_memory_table.time_replays(&r), FMOE_STATUS_INVALID_ARGUMENT);
    r.enqueue = enqueue;
    r.n_graphs = 0;
    ck_assert_int_eq(fmcu_memory_table.time_replays(&r), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(seen.calls, calls);
}
END_TEST

START_TEST(copy_and_read_rates_reach_their_own_kernel)
{
    reset();
    fmoe_copy_rate_args a = {.struct_size = sizeof a,
                             .err = err,
                             .state = &state,
                             .device_kind = FMOE_DEVICE_CUDA,
                             .device_index = 0,
                             .bytes = 1u << 30,
                             .reps = 10};
    ck_assert_int_eq(fmcu_memory_table.copy_rate(&a), FMOE_STATUS_OK);
    ck_assert(a.bytes_per_second == 4.2e12);
    ck_assert_int_eq(fmcu_memory_table.read_rate(&a), FMOE_STATUS_OK);
    ck_assert(a.bytes_per_second == 4.6e12);
    ck_assert_uint_eq(seen.rate_bytes, 1u << 30);
    ck_assert_uint_eq(seen.reps, 10);

    a.device_index = 2;
    ck_assert_int_eq(fmcu_memory_table.read_rate(&a), FMOE_STATUS_DEVICE_ERROR);
    ck_assert_str_eq(reported.text, "read kernel summed the chunk marks to 00000001, expected 00000000");

    const int calls = seen.calls;
    a.bytes = 0;
    ck_assert_int_eq(fmcu_memory_table.read_rate(&a), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(reported.text, "read_rate: a CUDA device and 1 byte or more are required");
    ck_assert_int_eq(fmcu_memory_table.copy_rate(&a), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(reported.text, "copy_rate: a CUDA device and 1 byte or more are required");
    ck_assert_int_eq(seen.calls, calls);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_memory_table");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, the_table_is_whole);
    tcase_add_test(tc, alloc_forwards_and_passes_the_reason_on);
    tcase_add_test(tc, a_device_of_another_kind_is_refused_before_the_runtime);
    tcase_add_test(tc, copy_maps_the_direction_and_refuses_others);
    tcase_add_test(tc, synchronize_passes_the_stream_and_the_reason);
    tcase_add_test(tc, time_replays_hands_the_enqueue_through);
    tcase_add_test(tc, copy_and_read_rates_reach_their_own_kernel);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
