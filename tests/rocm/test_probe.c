/*
 * tests/rocm/test_probe.c - what the rocm plugin reports about devices
 * (plugins/rocm/probe.h, hip_runtime.h), driven by a pretend HIP runtime:
 * no AMD GPU or ROCm install is needed, and none installed changes the
 * outcome (the real library is never loaded here).
 */
#include <string.h>

#include "plugins/rocm/hip_runtime.h"
#include "plugins/rocm/probe.h"
#include "tests/test_util.h"

/* --- a pretend HIP runtime ----------------------------------------------- */

typedef struct fake_device {
    const char *name, *arch, *pci;
    size_t memory;
    size_t arch_offset; /* where gcnArchName sits in the properties */
} fake_device;

static const fake_device fake_devices[] = {
    {"AMD Instinct MI300X", "gfx942:sramecc+:xnack-", "0000:0c:00.0", (size_t)192 << 30, 1160},
    {"AMD Radeon RX 7900 XTX", "gfx1100", "0000:83:00.0", (size_t)24 << 30, 412},
};
static int fake_count = 2, fake_count_error = 0;

static int f_count(int *n)
{
    *n = fake_count_error ? 0 : fake_count;
    return fake_count_error;
}

static int f_name(char *name, int len, int dev)
{
    snprintf(name, (size_t)len, "%s", fake_devices[dev].name);
    return 0;
}

static int f_mem(size_t *bytes, int dev)
{
    *bytes = fake_devices[dev].memory;
    return 0;
}

static int f_pci(char *id, int len, int dev)
{
    snprintf(id, (size_t)len, "%s", fake_devices[dev].pci);
    return 0;
}

static int f_props(void *props, int dev)
{
    unsigned char *p = props;
    snprintf((char *)p, 256, "%s gfx", fake_devices[dev].name); /* a "gfx" inside the name is not the arch */
    memset(p + 300, 0x41, 8);                                   /* other fields */
    memcpy(p + 400 - 8, "gfxnope!", 8);                         /* not an arch string: '!' */
    strcpy((char *)p + fake_devices[dev].arch_offset, fake_devices[dev].arch);
    return 0;
}

static int f_version(int *v)
{
    *v = 60241134; /* HIP 6.2 */
    return 0;
}

static const char *f_error_name(int e)
{
    return e == FMRO_HIP_ERROR_NO_DEVICE ? "hipErrorNoDevice" : "hipErrorUnknown";
}

static fmro_hip_api fake_api(void)
{
    fmro_hip_api a = {.get_device_count = f_count,
                      .device_get_name = f_name,
                      .device_total_mem = f_mem,
                      .device_get_pci_bus_id = f_pci,
                      .get_device_properties = f_props,
                      .driver_get_version = f_version,
                      .runtime_get_version = f_version,
                      .get_error_name = f_error_name};
    snprintf(a.library, sizeof a.library, "libfakehip.so");
    return a;
}

typedef struct reports {
    fmoe_device_report r[4];
    fmoe_device_report *p[4];
} reports;

static void reports_init(reports *rs, size_t struct_size)
{
    memset(rs, 0, sizeof *rs);
    for (int i = 0; i < 4; i++) {
        rs->r[i].struct_size = struct_size;
        rs->r[i].memory_bytes = 12345; /* a field a short report does not have */
        rs->p[i] = &rs->r[i];
    }
}

/* --- tests ------------------------------------------------------------------ */

START_TEST(missing_runtime)
{
    const char *names[] = {"libfmoe-no-such-hip-runtime.so", NULL};
    fmro_hip_api api;
    char why[256];
    ck_assert_int_eq(fmro_hip_load(names, &api, why, sizeof why), -1);
    ck_assert_str_eq(why, "no AMD GPU: libfmoe-no-such-hip-runtime.so not found (the HIP runtime of ROCm)");
    reports rs;
    reports_init(&rs, sizeof(fmoe_device_report));
    ck_assert_uint_eq(fmro_probe_reports(NULL, why, NULL, rs.p, 4), 1);
    ck_assert_int_eq(rs.r[0].kind, FMOE_DEVICE_ROCM);
    ck_assert_uint_eq(rs.r[0].available, 0);
    ck_assert_uint_eq(rs.r[0].score, 0);
    ck_assert_str_eq(rs.r[0].name, "no AMD GPU");
    ck_assert_str_eq(rs.r[0].reason, why);
    ck_assert_uint_eq(fmro_probe_reports(NULL, why, NULL, rs.p, 0), 0);
}
END_TEST

START_TEST(runtime_without_device)
{
    fmro_hip_api api = fake_api();
    reports rs;
    reports_init(&rs, sizeof(fmoe_device_report));
    fake_count_error = FMRO_HIP_ERROR_NO_DEVICE;
    ck_assert_uint_eq(fmro_probe_reports(&api, NULL, NULL, rs.p, 4), 1);
    fake_count_error = 0;
    ck_assert_uint_eq(rs.r[0].available, 0);
    ck_assert_str_eq(rs.r[0].reason, "no AMD GPU: hipGetDeviceCount: hipErrorNoDevice (100) (libfakehip.so)");
    ck_assert_str_eq(rs.r[0].driver, "HIP runtime 6.2, driver 6.2 (libfakehip.so)");
    fake_count = 0;
    ck_assert_uint_eq(fmro_probe_reports(&api, NULL, NULL, rs.p, 4), 1);
    fake_count = 2;
    ck_assert_str_eq(rs.r[0].reason, "no AMD GPU: the HIP runtime (libfakehip.so) sees no device");
}
END_TEST

/* Kernels loaded: the gfx942 is available, the gfx1100 is not a target. */
START_TEST(two_devices)
{
    fmro_hip_api api = fake_api();
    reports rs;
    reports_init(&rs, sizeof(fmoe_device_report));
    ck_assert_uint_eq(fmro_probe_reports(&api, NULL, NULL, rs.p, 4), 2);
    ck_assert_uint_eq(rs.r[0].available, 1);
    ck_assert_uint_eq(rs.r[0].score, FMRO_PROBE_SCORE);
    ck_assert_uint_eq(rs.r[1].available, 0);
    ck_assert_uint_eq(rs.r[1].score, 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(rs.r[i].kind, FMOE_DEVICE_ROCM);
        ck_assert_int_eq(rs.r[i].index, i);
        ck_assert_str_eq(rs.r[i].name, fake_devices[i].name);
        ck_assert_str_eq(rs.r[i].arch, fake_devices[i].arch);
        ck_assert_str_eq(rs.r[i].id, fake_devices[i].pci);
        ck_assert_uint_eq(rs.r[i].memory_bytes, fake_devices[i].memory);
    }
    ck_assert_str_eq(rs.r[0].reason, "gfx942: " FMRO_PATH_NOTE);
    ck_assert_str_eq(rs.r[1].reason, "gfx1100: not a target of this plugin (gfx90a, gfx940, gfx941, gfx942)");
    /* one slot: one report */
    reports_init(&rs, sizeof(fmoe_device_report));
    ck_assert_uint_eq(fmro_probe_reports(&api, NULL, NULL, rs.p, 1), 1);
    ck_assert_str_eq(rs.r[1].name, "");
}
END_TEST

/* No kernel library: a targeted GPU is unavailable and says why. */
START_TEST(targeted_without_kernels)
{
    fmro_hip_api api = fake_api();
    reports rs;
    reports_init(&rs, sizeof(fmoe_device_report));
    ck_assert_uint_eq(fmro_probe_reports(&api, NULL, FMRO_NO_KERNELS, rs.p, 4), 2);
    ck_assert_uint_eq(rs.r[0].available, 0);
    ck_assert_uint_eq(rs.r[0].score, 0);
    ck_assert_str_eq(rs.r[0].reason, "gfx942: " FMRO_NO_KERNELS);
    ck_assert_str_eq(rs.r[1].reason, "gfx1100: not a target of this plugin (gfx90a, gfx940, gfx941, gfx942)");
}
END_TEST

/* An ABI 1.0 host's report ends at `reason`: memory_bytes is not written. */
START_TEST(short_report)
{
    fmro_hip_api api = fake_api();
    reports rs;
    reports_init(&rs, FMOE_STRUCT_SIZE_UPTO(fmoe_device_report, reason));
    ck_assert_uint_eq(fmro_probe_reports(&api, NULL, NULL, rs.p, 4), 2);
    ck_assert_uint_eq(rs.r[0].memory_bytes, 12345);
    ck_assert_str_eq(rs.r[0].arch, "gfx942:sramecc+:xnack-");
}
END_TEST

START_TEST(arch_names)
{
    unsigned char props[1024];
    char arch[64];
    memset(props, 0, sizeof props);
    ck_assert_int_eq(fmro_arch_from_props(props, sizeof props, arch, sizeof arch), -1);
    strcpy((char *)props, "gfx90a"); /* inside the name field: not the arch */
    ck_assert_int_eq(fmro_arch_from_props(props, sizeof props, arch, sizeof arch), -1);
    memcpy(props + 600, "gfx90a:sramecc+:xnack-", 23);
    ck_assert_int_eq(fmro_arch_from_props(props, sizeof props, arch, sizeof arch), 0);
    ck_assert_str_eq(arch, "gfx90a:sramecc+:xnack-");
    ck_assert_int_eq(fmro_arch_from_props(props, sizeof props, arch, 8), -1); /* does not fit */
    memcpy(props + 1018, "gfx942", 6);                                        /* runs to the end unterminated */
    ck_assert_int_eq(fmro_arch_from_props(props + 700, 324, arch, sizeof arch), -1);
    char base[16];
    fmro_arch_base("gfx942:sramecc+:xnack-", base, sizeof base);
    ck_assert_str_eq(base, "gfx942");
    fmro_arch_base("gfx90a", base, sizeof base);
    ck_assert_str_eq(base, "gfx90a");
    ck_assert_int_eq(fmro_arch_targeted("gfx90a"), 1);
    ck_assert_int_eq(fmro_arch_targeted("gfx940"), 1);
    ck_assert_int_eq(fmro_arch_targeted("gfx942"), 1);
    ck_assert_int_eq(fmro_arch_targeted("gfx950"), 0);
    ck_assert_int_eq(fmro_arch_targeted("gfx908"), 0);
    ck_assert_int_eq(fmro_arch_targeted("gfx1100"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rocm_probe");
    TCase *tc = tcase_create("probe");
    tcase_add_test(tc, missing_runtime);
    tcase_add_test(tc, runtime_without_device);
    tcase_add_test(tc, two_devices);
    tcase_add_test(tc, targeted_without_kernels);
    tcase_add_test(tc, short_report);
    tcase_add_test(tc, arch_names);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 5);
}
