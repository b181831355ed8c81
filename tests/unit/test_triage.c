/* test_triage: the failure classifier (core/triage.h): each built-in class from the log
 * forms that frameworks print, the order (the admin's classes first, then the most
 * specific built-in), the tail's first cut line skipped, progress bars and escapes
 * cleaned, long lines cut, and [[triage.classes]] read from gflow.toml with one-line
 * errors naming the key. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "triage.h"
#include "util.h"

/* Classifies log (from its start) of a job that exited with code and signal. */
static int classify(const struct triage_config *c, const char *log, int code, int sig, char **cls,
                    char **line)
{
    struct triage_input in = {.log = log,
                              .len = log ? strlen(log) : 0,
                              .from_start = true,
                              .exit_code = code,
                              .signal = sig};
    return triage_classify(c, &in, cls, line);
}

/* Expects log to be class cls with matched line (NULL: none). */
static void expect(const struct triage_config *c, const char *log, int code, int sig,
                   const char *cls, const char *line)
{
    char *got = NULL, *matched = NULL;
    int rc = classify(c, log, code, sig, &got, &matched);
    if (!cls) {
        assert_int_equal(rc, 0);
        assert_null(got);
        assert_null(matched);
        return;
    }
    assert_int_equal(rc, 1);
    assert_string_equal(got, cls);
    if (line)
        assert_string_equal(matched, line);
    else
        assert_null(matched);
    free(got);
    free(matched);
}

static void test_cuda_oom_forms(void **state)
{
    (void)state;
    expect(NULL, "epoch 1\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n", 1, 0,
           "CudaOOM", "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB");
    expect(NULL, "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate\n",
           1, 0, "CudaOOM",
           "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate");
    expect(NULL, "error: cudaErrorMemoryAllocation\n", 1, 0, "CudaOOM",
           "error: cudaErrorMemoryAllocation");
    expect(NULL,
           "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
           "trying to allocate 8589934592 bytes.\n",
           1, 0, "CudaOOM",
           "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
           "trying to allocate 8589934592 bytes.");
    expect(NULL,
           "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when "
           "allocating tensor with shape[1024,1024]\n",
           1, 0, "CudaOOM",
           "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
           "tensor with shape[1024,1024]");
}

static void test_nccl_segfault_killed_not_found(void **state)
{
    (void)state;
    expect(NULL, "[E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout\n", 1,
           0, "NcclError",
           "[E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout");
    expect(NULL, "torch.distributed.DistBackendError: NCCL error in: ../nccl.cpp:1, unhandled\n", 1,
           0, "NcclError",
           "torch.distributed.DistBackendError: NCCL error in: ../nccl.cpp:1, unhandled");
    /* Killed by SIGSEGV itself: no line needed; a shell's report of a child's: the line. */
    expect(NULL, "starting\n", -1, SIGSEGV, "Segfault", NULL);
    expect(NULL, "bash: line 1:  4242 Segmentation fault      (core dumped) ./a.out\n", 139, 0,
           "Segfault", "bash: line 1:  4242 Segmentation fault      (core dumped) ./a.out");
    expect(NULL, "bye\n", -1, SIGKILL, "Killed (SIGKILL)", NULL);
    expect(NULL, "", -1, SIGTERM, "Killed (SIGTERM)", NULL);
    expect(NULL, "bash: line 1: trian.py: command not found\n", 127, 0, "CommandNotFound",
           "bash: line 1: trian.py: command not found");
    /* exit 127 of the job's own (shim/lookup.c): no class without the shell's line. */
    expect(NULL, NULL, 127, 0, NULL, NULL);
    /* The shim's own finding (LaunchFailed). */
    struct triage_input in = {.exit_code = 127, .launch_error = "command not found: trian.py"};
    char *cls, *line;
    assert_int_equal(triage_classify(NULL, &in, &cls, &line), 1);
    assert_string_equal(cls, "CommandNotFound");
    assert_string_equal(line, "command not found: trian.py");
    free(cls);
    free(line);
    /* An exit with nothing to go by. */
    expect(NULL, "done\n", 3, 0, NULL, NULL);
    expect(NULL, NULL, 1, 0, NULL, NULL);
}

static void test_python_exceptions(void **state)
{
    (void)state;
    const char *plain = "Traceback (most recent call last):\n"
                        "  File \"train.py\", line 3, in <module>\n"
                        "    main()\n"
                        "    ^^^^^^\n"
                        "ValueError: bad learning rate\n";
    expect(NULL, plain, 1, 0, "PythonException: ValueError", "ValueError: bad learning rate");
    /* Chained: the last block's exception. */
    const char *chained = "Traceback (most recent call last):\n"
                          "  File \"a.py\", line 1\n"
                          "KeyError: 'x'\n"
                          "\n"
                          "During handling of the above exception, another exception occurred:\n"
                          "\n"
                          "Traceback (most recent call last):\n"
                          "  File \"a.py\", line 4\n"
                          "json.decoder.JSONDecodeError: Expecting value: line 1 column 1\n"
                          "some later output\n";
    expect(NULL, chained, 1, 0, "PythonException: json.decoder.JSONDecodeError",
           "json.decoder.JSONDecodeError: Expecting value: line 1 column 1");
    /* torchrun's rank prefix; a bare exception name. */
    expect(NULL,
           "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"x.py\", line 2\n"
           "[rank0]: KeyboardInterrupt\n",
           1, 0, "PythonException: KeyboardInterrupt", "[rank0]: KeyboardInterrupt");
    /* A CUDA OOM inside a traceback is CudaOOM: the more specific class wins. */
    expect(NULL,
           "Traceback (most recent call last):\n  File \"t.py\", line 9\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n",
           1, 0, "CudaOOM",
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB");
    /* A traceback cut before its exception line names nothing. */
    expect(NULL, "Traceback (most recent call last):\n  File \"t.py\", line 9\n", 1, 0, NULL, NULL);
}

static void test_host_oom_first(void **state)
{
    (void)state;
    struct triage_input in = {.log = "CUDA out of memory\n", .len = 19, .oom = true};
    char *cls, *line;
    assert_int_equal(triage_classify(NULL, &in, &cls, &line), 1);
    assert_string_equal(cls, "HostOOM");
    assert_null(line);
    free(cls);
}

static void test_tail_cleaning(void **state)
{
    (void)state;
    /* The tail's first line is cut: it is not read. */
    struct triage_input in = {.log = "CUDA out of memory, old\nall fine\n",
                              .len = 33,
                              .from_start = false,
                              .exit_code = 1};
    char *cls, *line;
    assert_int_equal(triage_classify(NULL, &in, &cls, &line), 0);
    /* A progress bar redrawn with \r, colours, CRLF. */
    expect(NULL, "10%\r50%\r\x1b[31mRuntimeError: CUDA out of memory.\x1b[0m\r\n", 1, 0, "CudaOOM",
           "RuntimeError: CUDA out of memory.");
    /* A long line is cut on a character boundary, with "...". */
    char *log = xmalloc(2000);
    strcpy(log, "CUDA out of memory ");
    size_t n = strlen(log);
    while (n < 1990) {
        memcpy(log + n, "\xc3\xa9", 2); /* é */
        n += 2;
    }
    log[n] = '\0';
    assert_int_equal(classify(NULL, log, 1, 0, &cls, &line), 1);
    assert_true(strlen(line) <= TRIAGE_LINE_MAX);
    assert_true(strlen(line) >= TRIAGE_LINE_MAX - 5);
    assert_string_equal(line + strlen(line) - 3, "...");
    assert_true(((unsigned char)line[strlen(line) - 4] & 0xc0) != 0xc0); /* no cut é */
    free(cls);
    free(line);
    free(log);
}

static void test_admin_classes_first(void **state)
{
    (void)state;
    struct triage_config c;
    triage_config_init(&c);
    char *err = NULL;
    assert_int_equal(triage_config_add(&c, "DiskFull", "No space left on device", &err), 0);
    assert_int_equal(triage_config_add(&c, "BadShard", "^corrupt shard [0-9]+$", &err), 0);
    expect(&c, "RuntimeError: CUDA out of memory.\nOSError: [Errno 28] No space left on device\n",
           1, 0, "DiskFull", "OSError: [Errno 28] No space left on device");
    expect(&c, "corrupt shard 17\n", -1, SIGKILL, "BadShard", "corrupt shard 17");
    expect(&c, "x corrupt shard 17\n", 2, 0, NULL, NULL);
    struct triage_config d;
    triage_config_copy(&d, &c);
    assert_true(triage_config_equal(&c, &d));
    expect(&d, "corrupt shard 1\n", 2, 0, "BadShard", "corrupt shard 1");
    triage_config_free(&d);
    /* Bad classes. */
    assert_int_equal(triage_config_add(&c, "X", "unclosed (paren", &err), -1);
    assert_non_null(strstr(err, "not a POSIX extended regular expression"));
    free(err);
    assert_int_equal(triage_config_add(&c, "", "x", &err), -1);
    assert_non_null(strstr(err, "is empty"));
    free(err);
    assert_int_equal(triage_config_add(&c, "A\tB", "x", &err), -1);
    free(err);
    assert_int_equal(triage_config_add(&c, "Y", "", &err), -1);
    free(err);
    assert_int_equal(c.n_classes, 2);
    triage_config_free(&c);
}

static int load(struct gflow_config *c, const char *text, char **err)
{
    config_init(c);
    return config_load_text(c, "g.toml", text, strlen(text), err);
}

static void test_config_file(void **state)
{
    (void)state;
    struct gflow_config c;
    char *err = NULL;
    assert_int_equal(load(&c,
                          "[triage]\ntail_bytes = 4096\ntimeout_secs = 3\n"
                          "[[triage.classes]]\nname = \"DiskFull\"\n"
                          "pattern = \"No space left on device\"\n"
                          "[[triage.classes]]\nname = \"Nan\"\npattern = \"loss is nan\"\n",
                          &err),
                     0);
    assert_int_equal(c.triage_tail_bytes, 4096);
    assert_int_equal(c.triage_timeout_secs, 3);
    assert_int_equal(c.triage.n_classes, 2);
    assert_string_equal(c.triage.classes[1].name, "Nan");
    config_free(&c);
    config_init(&c);
    assert_int_equal(c.triage_tail_bytes, 65536);
    assert_int_equal(c.triage.n_classes, 0);
    config_free(&c);
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"[[triage.classes]]\nname = \"X\"\npattern = \"a(\"\n",
         "g.toml:3: triage.classes[1].pattern \"a(\" is not a POSIX extended regular expression"},
        {"[[triage.classes]]\nname = \"X\"\n",
         "g.toml:1: triage.classes[1].pattern must be a string"},
        {"[[triage.classes]]\nname = \"X\"\npattern = \"a\"\ncolour = 1\n",
         "g.toml:4: triage.classes[1]: unknown key 'colour'"},
        {"[triage]\nclasses = \"x\"\n", "triage.classes must be an array of tables"},
        {"[triage]\ntail_bytes = 10\n", "triage.tail_bytes"},
        {"[triage]\nmystery = 1\n", "unknown key 'triage.mystery'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(load(&c, bad[i].text, &err), -1);
        if (!strstr(err, bad[i].needle))
            fail_msg("%s: got '%s'", bad[i].text, err);
        assert_null(strchr(err, '\n'));
        free(err);
        config_free(&c);
    }
    /* GFLOW_TRIAGE__TAIL_BYTES */
    config_init(&c);
    char *env[] = {"GFLOW_TRIAGE__TAIL_BYTES=8192", NULL};
    assert_int_equal(config_load_env(&c, env, &err), 0);
    assert_int_equal(c.triage_tail_bytes, 8192);
    config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_oom_forms),
        cmocka_unit_test(test_nccl_segfault_killed_not_found),
        cmocka_unit_test(test_python_exceptions),
        cmocka_unit_test(test_host_oom_first),
        cmocka_unit_test(test_tail_cleaning),
        cmocka_unit_test(test_admin_classes_first),
        cmocka_unit_test(test_config_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
