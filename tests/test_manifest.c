/*
 * tests/test_manifest.c - the plugin manifest reader (registry/manifest.c):
 * a full and a minimal manifest, library resolution, architecture matching,
 * and the exact text of each error. Error cases are written to a scratch
 * directory so that each can be one small manifest.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "registry/manifest.h"
#include "test_util.h"

#define DATA FMOE_TEST_DATA_DIR "/manifest"

static fmoe_manifest *load_ok(const char *path)
{
    fmoe_manifest *m = NULL;
    fmoe_status st = fmoe_manifest_load(path, &m);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s: status %d: %s", path, st, fmoe_error_text());
    ck_assert_ptr_nonnull(m);
    return m;
}

static void assert_strings(char *const *got, size_t n_got, const char *const *want, size_t n_want)
{
    ck_assert_uint_eq(n_got, n_want);
    for (size_t i = 0; i < n_want; i++)
        ck_assert_str_eq(got[i], want[i]);
}

/* ---- valid manifests ------------------------------------------------------ */

START_TEST(test_valid)
{
    fmoe_manifest *m = load_ok(DATA "/valid.toml");
    ck_assert_str_eq(m->path, DATA "/valid.toml");
    ck_assert_str_eq(m->name, "cuda_fp8-2");
    ck_assert_str_eq(m->library, DATA "/lib/libfmoe-cuda.so");
    ck_assert_str_eq(m->version, "0.3.1");
    ck_assert_str_eq(m->vendor, "NVIDIA");
    ck_assert_str_eq(m->description, "FP8 and BF16 grouped GEMMs");
    ck_assert_uint_eq(m->abi_major, 1);
    ck_assert_uint_eq(m->abi_minor, 2);
    const char *arch[] = {"x86_64", "aarch64"};
    assert_strings(m->arch, m->n_arch, arch, 2);
    const char *devices[] = {"cuda", "cpu"};
    assert_strings(m->devices, m->n_devices, devices, 2);
    const char *schemes[] = {"fp8-*", "bf16"};
    assert_strings(m->schemes, m->n_schemes, schemes, 2);
    const char *requires[] = {"cuda>=12.8", "sm>=90"};
    assert_strings(m->requires, m->n_requires, requires, 2);
    ck_assert_uint_eq(m->n_tolerances, 1);
    const char *tol_schemes[] = {"fp8-*"};
    assert_strings(m->tolerances[0].schemes, m->tolerances[0].n_schemes, tol_schemes, 1);
    ck_assert_str_eq(m->tolerances[0].joined, "fp8-*");
    ck_assert(m->tolerances[0].mismatch == 0.001);
    ck_assert_str_eq(m->tolerances[0].reason, "fp8 tensor cores accumulate with fewer bits than f32");
    ck_assert_str_eq(m->tolerances[0].link, "https://arxiv.org/abs/2412.19437");
    fmoe_manifest_free(m);
}
END_TEST

START_TEST(test_minimal)
{
    fmoe_manifest *m = load_ok(DATA "/minimal.toml");
    ck_assert_str_eq(m->name, "reference");
    /* An absolute library path is kept as written. */
    ck_assert_str_eq(m->library, "/usr/lib/fusedmoe/plugins/libfmoe-reference.so");
    ck_assert_str_eq(m->description, "");
    ck_assert_uint_eq(m->abi_major, 0);
    ck_assert_uint_eq(m->abi_minor, 2147483647u);
    ck_assert_uint_eq(m->n_requires, 0);
    ck_assert_ptr_null(m->requires);
    ck_assert_uint_eq(m->n_tolerances, 0);
    fmoe_manifest_free(m);
    fmoe_manifest_free(NULL);
}
END_TEST

START_TEST(test_arch_matching)
{
    fmoe_manifest *m = load_ok(DATA "/valid.toml");
    ck_assert_int_eq(fmoe_manifest_matches_arch(m, "x86_64"), 1);
    ck_assert_int_eq(fmoe_manifest_matches_arch(m, "aarch64"), 1);
    /* Exact names only: no prefixes, no aliases, no case folding. */
    ck_assert_int_eq(fmoe_manifest_matches_arch(m, "x86"), 0);
    ck_assert_int_eq(fmoe_manifest_matches_arch(m, "x86_64_v3"), 0);
    ck_assert_int_eq(fmoe_manifest_matches_arch(m, "amd64"), 0);
    ck_assert_int_eq(fmoe_manifest_matches_arch(m, "X86_64"), 0);
    ck_assert_int_eq(fmoe_manifest_matches_arch(m, "riscv64"), 0);
    ck_assert_int_eq(fmoe_manifest_matches_arch(m, "any"), 0);
    fmoe_manifest_free(m);

    m = load_ok(DATA "/minimal.toml");
    ck_assert_int_eq(fmoe_manifest_matches_arch(m, "riscv64"), 1);
    ck_assert_int_eq(fmoe_manifest_matches_arch(m, "x86_64"), 1);
    fmoe_manifest_free(m);
}
END_TEST

/* A manifest path that is itself relative: the library resolves through the
 * current directory to the manifest's own directory. */
START_TEST(test_library_relative_manifest_path)
{
    char saved[PATH_MAX], cwd[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(saved, sizeof saved));
    ck_assert_int_eq(chdir(FMOE_TEST_DATA_DIR), 0);
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    fmoe_manifest *m = NULL;
    fmoe_status st = fmoe_manifest_load("manifest/valid.toml", &m);
    ck_assert_int_eq(chdir(saved), 0);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s", fmoe_error_text());
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s/manifest/lib/libfmoe-cuda.so", cwd);
    ck_assert_str_eq(m->library, want);
    ck_assert_str_eq(m->path, "manifest/valid.toml");
    fmoe_manifest_free(m);
}
END_TEST

/* ---- errors from the data files ------------------------------------------- */

static void assert_file_error(const char *path, fmoe_status want_status, const char *want_text)
{
    fmoe_manifest *m = (fmoe_manifest *)1;
    fmoe_status st = fmoe_manifest_load(path, &m);
    ck_assert_ptr_null(m);
    ck_assert_msg(st == want_status, "status %d, want %d: %s", st, want_status, fmoe_error_text());
    ck_assert_str_eq(fmoe_error_text(), want_text);
}

START_TEST(test_bad_device_file)
{
    assert_file_error(DATA "/bad_device.toml", FMOE_STATUS_PARSE_ERROR,
                      DATA
                      "/bad_device.toml:8:19: devices[1] = \"tpu\" is not a device (expected one of cpu, cuda, rocm)");
}
END_TEST

START_TEST(test_missing_library_file)
{
    assert_file_error(DATA "/missing_library.toml", FMOE_STATUS_PARSE_ERROR,
                      DATA "/missing_library.toml: missing required key 'library' "
                           "(expected a path to the plugin library, relative to the manifest)");
}
END_TEST

START_TEST(test_missing_file)
{
    assert_file_error(DATA "/absent.toml", FMOE_STATUS_NOT_FOUND, DATA "/absent.toml: No such file or directory");
}
END_TEST

/* ---- generated error cases ------------------------------------------------ */

/* A scratch manifest "m.toml" in a fresh directory, removed by scratch_done. */
typedef struct scratch {
    char dir[64];
    char path[96];
} scratch;

static void scratch_write(scratch *s, const char *text)
{
    snprintf(s->dir, sizeof s->dir, "/tmp/fmoe-manifest-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s->dir));
    snprintf(s->path, sizeof s->path, "%s/m.toml", s->dir);
    FILE *f = fopen(s->path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void scratch_done(scratch *s)
{
    unlink(s->path);
    rmdir(s->dir);
}

/* Load `text` as a manifest; the error must be PARSE_ERROR "<path><rest>". */
static void assert_text_error(const char *text, const char *rest)
{
    scratch s;
    scratch_write(&s, text);
    fmoe_manifest *m = (fmoe_manifest *)1;
    fmoe_status st = fmoe_manifest_load(s.path, &m);
    char error[FMOE_ERROR_MAX];
    snprintf(error, sizeof error, "%s", fmoe_error_text());
    char want[FMOE_ERROR_MAX];
    snprintf(want, sizeof want, "%s%s", s.path, rest);
    scratch_done(&s);
    ck_assert_ptr_null(m);
    ck_assert_msg(st == FMOE_STATUS_PARSE_ERROR, "status %d: %s for:\n%s", st, error, text);
    ck_assert_str_eq(error, want);
}

/* One line per key, in schema order; the generated cases edit single lines. */
static const char *const valid_lines[] = {
    "name = \"cpu\"\n",
    "library = \"libfmoe-cpu.so\"\n",
    "version = \"0.1.0\"\n",
    "vendor = \"fusedmoe\"\n",
    "description = \"portable CPU kernels\"\n",
    "abi_major = 1\n",
    "abi_minor = 0\n",
    "arch = [\"x86_64\"]\n",
    "devices = [\"cpu\"]\n",
    "schemes = [\"bf16\"]\n",
    "requires = []\n",
};
#define N_LINES (sizeof valid_lines / sizeof valid_lines[0])

/* The valid manifest with line `skip` left out and `extra` appended. */
static void manifest_text(char *buf, size_t cap, size_t skip, const char *extra)
{
    buf[0] = '\0';
    for (size_t i = 0; i < N_LINES; i++)
        if (i != skip)
            strncat(buf, valid_lines[i], cap - strlen(buf) - 1);
    strncat(buf, extra, cap - strlen(buf) - 1);
}

START_TEST(test_generated_text_is_valid)
{
    char text[1024];
    manifest_text(text, sizeof text, N_LINES, "");
    scratch s;
    scratch_write(&s, text);
    fmoe_manifest *m = NULL;
    fmoe_status st = fmoe_manifest_load(s.path, &m);
    char want[160];
    snprintf(want, sizeof want, "%s/libfmoe-cpu.so", s.dir);
    scratch_done(&s);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s", fmoe_error_text());
    ck_assert_str_eq(m->library, want);
    ck_assert_str_eq(m->description, "portable CPU kernels");
    fmoe_manifest_free(m);
}
END_TEST

static const struct {
    size_t line;
    const char *key;
    const char *expected;
} required[] = {
    {0, "name", "a plugin name of a-z, 0-9, '_' and '-'"},
    {1, "library", "a path to the plugin library, relative to the manifest"},
    {2, "version", "a version string such as \"1.2.0\""},
    {3, "vendor", "a non-empty string"},
    {5, "abi_major", "an integer in [0, 2^31)"},
    {6, "abi_minor", "an integer in [0, 2^31)"},
    {7, "arch", "a non-empty array of architectures (uname -m, or \"any\")"},
    {8, "devices", "a non-empty array of devices (cpu, cuda, rocm)"},
    {9, "schemes", "a non-empty array of scheme-key globs"},
};

START_TEST(test_missing_required_key)
{
    char text[1024];
    manifest_text(text, sizeof text, required[_i].line, "");
    char rest[256];
    snprintf(rest, sizeof rest, ": missing required key '%s' (expected %s)", required[_i].key, required[_i].expected);
    assert_text_error(text, rest);
}
END_TEST

/* Optional keys may be left out. */
START_TEST(test_optional_keys)
{
    char text[1024];
    manifest_text(text, sizeof text, 4, "");
    scratch s;
    scratch_write(&s, text);
    fmoe_manifest *m = NULL;
    fmoe_status st = fmoe_manifest_load(s.path, &m);
    scratch_done(&s);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s", fmoe_error_text());
    ck_assert_str_eq(m->description, "");
    fmoe_manifest_free(m);

    manifest_text(text, sizeof text, 10, "");
    scratch_write(&s, text);
    st = fmoe_manifest_load(s.path, &m);
    scratch_done(&s);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s", fmoe_error_text());
    ck_assert_uint_eq(m->n_requires, 0);
    fmoe_manifest_free(m);
}
END_TEST

/* [[tolerance]] entries: each key checked, the allowance capped at 1%. */
static const struct {
    const char *table; /* appended after the valid lines */
    const char *error; /* after "<path>:" */
} bad_tolerances[] = {
    {"tolerance = 1\n", "12:13: tolerance is an integer (expected an array of tables ([[tolerance]]))"},
    {"[[tolerance]]\nschemes = [\"bf16\"]\nmismatch = 0.5\nreason = \"r\"\nlink = \"https://x.org/1\"\n",
     "14:12: tolerance[0]: mismatch = 0.5 (expected a fraction of elements in (0, 0.01])"},
    {"[[tolerance]]\nschemes = [\"bf16\"]\nmismatch = 0.0\nreason = \"r\"\nlink = \"https://x.org/1\"\n",
     "14:12: tolerance[0]: mismatch = 0 (expected a fraction of elements in (0, 0.01])"},
    {"[[tolerance]]\nschemes = [\"bf16\"]\nmismatch = 1\nreason = \"r\"\nlink = \"https://x.org/1\"\n",
     "14:12: mismatch is an integer (expected a fraction of elements in (0, 0.01])"},
    {"[[tolerance]]\nschemes = [\"bf16\"]\nmismatch = 0.001\nreason = \"r\"\n",
     "12:1: tolerance[0]: missing required key 'link'"},
    {"[[tolerance]]\nschemes = [\"bf16\"]\nmismatch = 0.001\nreason = \"r\"\nlink = \"see the issue\"\n",
     "16:8: tolerance[0]: link = \"see the issue\" (expected an http(s) URL)"},
    {"[[tolerance]]\nschemes = []\nmismatch = 0.001\nreason = \"r\"\nlink = \"https://x.org/1\"\n",
     "13:11: schemes is empty (expected a non-empty array of scheme-key globs)"},
    {"[[tolerance]]\nschemes = [\"bf16\"]\nmismatch = 0.001\nreason = \"r\"\nlink = \"https://x.org/1\"\nnmse = 1\n",
     "17:1: unknown key 'nmse' in tolerance[0] (expected one of: schemes, mismatch, reason, link)"},
};

START_TEST(test_bad_tolerance)
{
    char text[1024];
    manifest_text(text, sizeof text, N_LINES, bad_tolerances[_i].table);
    char rest[512];
    snprintf(rest, sizeof rest, ":%s", bad_tolerances[_i].error);
    assert_text_error(text, rest);
}
END_TEST

/* Replace line `line` of the valid manifest (it becomes the last line, so
 * the expected position is on line N_LINES). */
static const struct {
    size_t line;
    const char *replacement;
    const char *error; /* after "<path>:11:" */
} bad_values[] = {
    {0, "name = 7\n", "8: name is an integer (expected a plugin name of a-z, 0-9, '_' and '-')"},
    {0, "name = \"\"\n", "8: name is empty (expected a plugin name of a-z, 0-9, '_' and '-')"},
    {0, "name = \"Cpu\"\n", "8: name = \"Cpu\" is not a valid plugin name (expected only a-z, 0-9, '_' and '-')"},
    {0, "name = \"my plugin\"\n",
     "8: name = \"my plugin\" is not a valid plugin name (expected only a-z, 0-9, '_' and '-')"},
    {1, "library = [\"a.so\"]\n",
     "11: library is an array (expected a path to the plugin library, relative to the manifest)"},
    {1, "library = \"\"\n", "11: library is empty (expected a path to the plugin library, relative to the manifest)"},
    {2, "version = 1.0\n", "11: version is a float (expected a version string such as \"1.2.0\")"},
    {3, "vendor = true\n", "10: vendor is a boolean (expected a non-empty string)"},
    {4, "description = 3\n", "15: description is an integer (expected a string)"},
    {5, "abi_major = \"1\"\n", "13: abi_major is a string (expected an integer in [0, 2^31))"},
    {5, "abi_major = 1.0\n", "13: abi_major is a float (expected an integer in [0, 2^31))"},
    {5, "abi_major = -1\n", "13: abi_major = -1 is out of range (expected an integer in [0, 2^31))"},
    {6, "abi_minor = 2147483648\n", "13: abi_minor = 2147483648 is out of range (expected an integer in [0, 2^31))"},
    {7, "arch = \"x86_64\"\n",
     "8: arch is a string (expected a non-empty array of architectures (uname -m, or \"any\"))"},
    {7, "arch = []\n", "8: arch is empty (expected a non-empty array of architectures (uname -m, or \"any\"))"},
    {7, "arch = [\"x86_64\", \"\"]\n", "19: arch[1] is empty (expected an architecture such as \"x86_64\" or \"any\")"},
    {8, "devices = []\n", "11: devices is empty (expected a non-empty array of devices (cpu, cuda, rocm))"},
    {8, "devices = [\"gpu\"]\n", "12: devices[0] = \"gpu\" is not a device (expected one of cpu, cuda, rocm)"},
    {8, "devices = [\"CUDA\"]\n", "12: devices[0] = \"CUDA\" is not a device (expected one of cpu, cuda, rocm)"},
    {8, "devices = [0]\n", "12: devices[0] is an integer (expected one of cpu, cuda, rocm)"},
    {9, "schemes = [\"bf16\", [\"fp8\"]]\n", "20: schemes[1] is an array (expected a scheme-key glob)"},
    {9, "schemes = []\n", "11: schemes is empty (expected a non-empty array of scheme-key globs)"},
    {10, "requires = \"cuda\"\n", "12: requires is a string (expected an array of requirement strings)"},
    {10, "requires = [\"\"]\n", "13: requires[0] is empty (expected a requirement such as \"cuda>=12.8\")"},
};

START_TEST(test_bad_value)
{
    char text[1024];
    manifest_text(text, sizeof text, bad_values[_i].line, bad_values[_i].replacement);
    char rest[512];
    snprintf(rest, sizeof rest, ":%zu:%s", N_LINES, bad_values[_i].error);
    assert_text_error(text, rest);
}
END_TEST

START_TEST(test_unknown_key)
{
    char text[1024];
    manifest_text(text, sizeof text, N_LINES, "[build]\ncompiler = \"nvcc\"\n");
    assert_text_error(
        text,
        ":12:2: unknown key 'build' in a plugin manifest (expected one of: name, library, "
        "version, vendor, description, abi_major, abi_minor, arch, devices, schemes, requires, tolerance, option)");
    manifest_text(text, sizeof text, N_LINES, "licence = \"MIT\"\n");
    assert_text_error(
        text,
        ":12:1: unknown key 'licence' in a plugin manifest (expected one of: name, library, "
        "version, vendor, description, abi_major, abi_minor, arch, devices, schemes, requires, tolerance, option)");
}
END_TEST

START_TEST(test_syntax_error)
{
    char text[1024];
    manifest_text(text, sizeof text, N_LINES, "arch = [\"aarch64\"]\n");
    assert_text_error(text, ":12:8: Error while parsing key-value pair: cannot redefine existing array 'arch'");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("manifest");
    TCase *tc = tcase_create("manifest");
    tcase_add_test(tc, test_valid);
    tcase_add_test(tc, test_minimal);
    tcase_add_test(tc, test_arch_matching);
    tcase_add_test(tc, test_library_relative_manifest_path);
    tcase_add_test(tc, test_bad_device_file);
    tcase_add_test(tc, test_missing_library_file);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_generated_text_is_valid);
    tcase_add_loop_test(tc, test_missing_required_key, 0, (int)(sizeof required / sizeof required[0]));
    tcase_add_test(tc, test_optional_keys);
    tcase_add_loop_test(tc, test_bad_tolerance, 0, (int)(sizeof bad_tolerances / sizeof bad_tolerances[0]));
    tcase_add_loop_test(tc, test_bad_value, 0, (int)(sizeof bad_values / sizeof bad_values[0]));
    tcase_add_test(tc, test_unknown_key);
    tcase_add_test(tc, test_syntax_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 44);
}
