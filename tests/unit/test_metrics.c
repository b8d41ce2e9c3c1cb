/* The JSON Lines metrics sink: records read back and parsed with cJSON ("type" first, every
 * field and value), flushing per record, parent directory creation, truncation, non-finite
 * losses as valid JSON, empty paths, unopenable paths, the once-only write error report and
 * whole lines after a failed write. */
#include "tests/util/test_util.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/metrics.h"

/* Reads the whole file into a NUL-terminated malloc'd string. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = calloc(1 << 16, 1);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Splits text into lines (in place) and parses each; returns how many. */
static int parse_lines(char *text, cJSON **out, int cap)
{
    int n = 0;
    char *save = NULL;
    size_t len = strlen(text);
    assert_true(len > 0 && text[len - 1] == '\n');
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        assert_true(n < cap);
        out[n] = cJSON_Parse(line);
        if (!out[n])
            fail_msg("line %d is not JSON: %s", n + 1, line);
        n++;
    }
    return n;
}

static int count_keys(const cJSON *o)
{
    int n = 0;
    for (const cJSON *c = o->child; c; c = c->next)
        n++;
    return n;
}

static void check_type_first(const cJSON *o, const char *type)
{
    assert_true(cJSON_IsObject(o));
    assert_non_null(o->child);
    assert_string_equal(o->child->string, "type");
    assert_true(cJSON_IsString(o->child));
    assert_string_equal(o->child->valuestring, type);
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        fail_msg("\"%s\" is missing or not a number", key);
    return v->valuedouble;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v))
        fail_msg("\"%s\" is missing or not a string", key);
    return v->valuestring;
}

static void test_records(void **state)
{
    (void)state;
    char path[1100];
    snprintf(path, sizeof path, "%s/a/b/c/metrics.jsonl", mp_test_dir("metrics_rec"));
    mp_metrics *m = NULL;
    assert_int_equal(mp_metrics_open(&m, path), MP_OK);
    assert_non_null(m);
    mp_step_record st = {.step = 17, .epoch = 2, .loss = 0.4321, .lr = 0.1, .loss_scale = 65536,
                         .skipped = true, .images_per_s = 6523.25, .step_ms = 12.5,
                         .device_ms = 11.75, .comm_ms = 1.0 / 3.0, .comm_hidden = 0.75,
                         .comm_last_ms = 0.25, .comm_skew_ms = 0.125};
    mp_metrics_step(m, &st);
    /* Flushed: the line is in the file before anything else happens. */
    char *early = slurp(path);
    assert_non_null(strstr(early, "\"step\":17"));
    assert_int_equal(early[strlen(early) - 1], '\n');
    free(early);
    st.step = 18;
    st.skipped = false;
    st.comm_hidden = st.comm_last_ms = st.comm_skew_ms = -1.0; /* one rank: none */
    st.device_ms = -1.0; /* no clock marks */
    mp_metrics_step(m, &st);
    mp_eval_record ev = {.epoch = 2, .loss = 0.375, .accuracy = 0.8765};
    mp_metrics_eval(m, &ev);
    mp_summary_record su = {.world_size = 4, .opt_level = "O2", .half = "bf16",
                            .backend = "cpu", .model = "cnn_bn", .wall_s = 12.75,
                            .step_s = 10.5, .comm_exposed_s = 1.25, .input_wait_s = 0.75,
                            .images_per_s = 9876.5, .accuracy = 0.9, .final_loss = 0.25,
                            .loss_scale = 32768, .steps = 5000, .skipped_steps = 3,
                            .peak_mem_bytes = 123456789012LL, .device_peak_bytes = 100000000000LL,
                            .host_peak_bytes = 23456789012LL, .device_used_peak_bytes = -1,
                            .n_mem = 2,
                            .mem_bytes = {1024, 4096}, .mem_names = {"weights", "data"},
                            .loader_fills = 40, .loader_fill_s = 0.5, .loader_fence_s = 0.25,
                            .loader_slot_wait_s = 0.125};
    mp_metrics_summary(m, &su);
    mp_metrics_close(m);

    char *text = slurp(path);
    cJSON *rec[8];
    assert_int_equal(parse_lines(text, rec, 8), 4);

    for (int i = 0; i < 2; i++) {
        check_type_first(rec[i], "step");
        assert_int_equal(count_keys(rec[i]), 14);
        assert_true(num(rec[i], "step") == 17 + i);
        assert_true(num(rec[i], "epoch") == 2);
        assert_true(num(rec[i], "loss") == 0.4321);
        assert_true(num(rec[i], "lr") == 0.1);
        assert_true(num(rec[i], "loss_scale") == 65536);
        assert_true(num(rec[i], "images_per_s") == 6523.25);
        assert_true(num(rec[i], "step_ms") == 12.5);
        cJSON *dev = cJSON_GetObjectItemCaseSensitive(rec[i], "device_ms");
        assert_true(i == 0 ? cJSON_IsNumber(dev) && dev->valuedouble == 11.75 : cJSON_IsNull(dev));
        assert_true(num(rec[i], "comm_ms") == 1.0 / 3.0);
        cJSON *hidden = cJSON_GetObjectItemCaseSensitive(rec[i], "comm_hidden");
        assert_true(i == 0 ? cJSON_IsNumber(hidden) && hidden->valuedouble == 0.75
                           : cJSON_IsNull(hidden));
        cJSON *last = cJSON_GetObjectItemCaseSensitive(rec[i], "comm_last_ms");
        cJSON *skew = cJSON_GetObjectItemCaseSensitive(rec[i], "comm_skew_ms");
        assert_true(i == 0 ? cJSON_IsNumber(last) && last->valuedouble == 0.25
                           : cJSON_IsNull(last));
        assert_true(i == 0 ? cJSON_IsNumber(skew) && skew->valuedouble == 0.125
                           : cJSON_IsNull(skew));
        const cJSON *sk = cJSON_GetObjectItemCaseSensitive(rec[i], "skipped");
        assert_true(cJSON_IsBool(sk));
        assert_int_equal(cJSON_IsTrue(sk), i == 0);
    }
    check_type_first(rec[2], "eval");
    assert_int_equal(count_keys(rec[2]), 4);
    assert_true(num(rec[2], "epoch") == 2);
    assert_true(num(rec[2], "loss") == 0.375);
    assert_true(num(rec[2], "accuracy") == 0.8765);

    const cJSON *s = rec[3];
    check_type_first(s, "summary");
    /* ... "time_s", "loader", "amp" (opt-level table), "mem_bytes"; no device_used_peak_bytes
     * (unknown) */
    assert_int_equal(count_keys(s), 20);
    const cJSON *loader = cJSON_GetObjectItemCaseSensitive(s, "loader");
    assert_int_equal(count_keys(loader), 4);
    assert_true(num(loader, "batches") == 40 && num(loader, "fill_s") == 0.5);
    assert_true(num(loader, "fence_wait_s") == 0.25 && num(loader, "slot_wait_s") == 0.125);
    const cJSON *time = cJSON_GetObjectItemCaseSensitive(s, "time_s");
    assert_int_equal(count_keys(time), 4);
    assert_true(num(time, "steps") == 10.5 && num(time, "comm_exposed") == 1.25);
    assert_true(num(time, "input_wait") == 0.75 && num(time, "compute") == 8.5);
    const cJSON *amp = cJSON_GetObjectItemCaseSensitive(s, "amp");
    assert_true(cJSON_IsObject(amp));
    assert_int_equal(count_keys(amp), 7);
    assert_true(num(s, "world_size") == 4);
    assert_string_equal(str(s, "opt_level"), "O2");
    assert_string_equal(str(s, "half"), "bf16");
    assert_string_equal(str(s, "backend"), "cpu");
    assert_string_equal(str(s, "model"), "cnn_bn");
    assert_true(num(s, "wall_s") == 12.75);
    assert_true(num(s, "images_per_s") == 9876.5);
    assert_true(num(s, "accuracy") == 0.9);
    assert_true(num(s, "final_loss") == 0.25);
    assert_true(num(s, "loss_scale") == 32768);
    assert_true(num(s, "steps") == 5000);
    assert_true(num(s, "skipped_steps") == 3);
    assert_true(num(s, "peak_mem_bytes") == 123456789012.0);
    assert_true(num(s, "device_peak_bytes") == 100000000000.0);
    assert_true(num(s, "host_peak_bytes") == 23456789012.0);
    assert_null(cJSON_GetObjectItemCaseSensitive(s, "device_used_peak_bytes"));
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(s, "mem_bytes");
    assert_true(cJSON_IsObject(mem));
    assert_int_equal(count_keys(mem), 2);
    assert_true(num(mem, "weights") == 1024);
    assert_true(num(mem, "data") == 4096);
    for (int i = 0; i < 4; i++)
        cJSON_Delete(rec[i]);
    free(text);
}

static void test_nonfinite_and_nulls(void **state)
{
    (void)state;
    char path[1100];
    snprintf(path, sizeof path, "%s/m.jsonl", mp_test_dir("metrics_nan"));
    /* An existing metrics file is truncated. */
    mp_test_write_file(path, "{\"type\":\"old junk\"}\n", 21, 0);
    mp_metrics *m;
    assert_int_equal(mp_metrics_open(&m, path), MP_OK);
    mp_step_record st = {.step = 1, .loss = NAN, .lr = 0.1, .loss_scale = INFINITY,
                         .images_per_s = -INFINITY};
    mp_metrics_step(m, &st);
    mp_eval_record ev = {.epoch = 0, .loss = NAN, .accuracy = 0.5};
    mp_metrics_eval(m, &ev);
    mp_summary_record su = {.world_size = 1, .final_loss = NAN, .n_mem = 0};
    mp_metrics_summary(m, &su);
    mp_metrics_close(m);

    char *text = slurp(path);
    assert_null(strstr(text, "old junk"));
    assert_null(strstr(text, "nan"));
    assert_null(strstr(text, "inf"));
    cJSON *rec[4];
    assert_int_equal(parse_lines(text, rec, 4), 3);
    check_type_first(rec[0], "step");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rec[0], "loss")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rec[0], "loss_scale")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rec[0], "images_per_s")));
    assert_true(num(rec[0], "lr") == 0.1);
    check_type_first(rec[1], "eval");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rec[1], "loss")));
    check_type_first(rec[2], "summary");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rec[2], "final_loss")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rec[2], "opt_level")));
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(rec[2], "mem_bytes");
    assert_true(cJSON_IsObject(mem));
    assert_int_equal(count_keys(mem), 0);
    for (int i = 0; i < 3; i++)
        cJSON_Delete(rec[i]);
    free(text);
}

static void test_empty_path(void **state)
{
    (void)state;
    char dir[1024], cwd[4096];
    snprintf(dir, sizeof dir, "%s", mp_test_dir("metrics_empty"));
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    const char *paths[2] = {"", NULL};
    for (int i = 0; i < 2; i++) {
        mp_metrics *m = NULL;
        assert_int_equal(mp_metrics_open(&m, paths[i]), MP_OK);
        assert_non_null(m);
        mp_step_record st = {.step = 1, .loss = 1.0};
        mp_metrics_step(m, &st);
        mp_eval_record ev = {0};
        mp_metrics_eval(m, &ev);
        mp_summary_record su = {0};
        mp_metrics_summary(m, &su);
        mp_metrics_close(m);
    }
    mp_metrics_close(NULL);
    /* Nothing was created where a relative path would have gone. */
    char out[256];
    assert_int_equal(mp_test_run("ls -A .", out, sizeof out), 0);
    assert_string_equal(out, "");
    /* A bare relative file name works too (no parent to create). */
    mp_metrics *m;
    assert_int_equal(mp_metrics_open(&m, "rel.jsonl"), MP_OK);
    mp_metrics_close(m);
    struct stat sb;
    assert_int_equal(stat("rel.jsonl", &sb), 0);
    assert_int_equal(chdir(cwd), 0);
}

static void expect_open_fail(const char *path, const char *what)
{
    mp_metrics *m = (mp_metrics *)&m;
    mp_error_clear();
    assert_int_equal(mp_metrics_open(&m, path), MP_EUSAGE);
    assert_null(m);
    char prefix[1200];
    snprintf(prefix, sizeof prefix, "log.metrics: %s: ", path);
    const char *msg = mp_error_message();
    if (strncmp(msg, prefix, strlen(prefix)) != 0 || !strstr(msg, what))
        fail_msg("message \"%s\" should start with \"%s\" and contain \"%s\"", msg, prefix, what);
}

static void test_unopenable(void **state)
{
    (void)state;
    char dir[1024], file[1100], path[1200];
    snprintf(dir, sizeof dir, "%s", mp_test_dir("metrics_bad"));
    snprintf(file, sizeof file, "%s/plain", dir);
    mp_test_write_file(file, "x", 1, 0);
    snprintf(path, sizeof path, "%s/m.jsonl", file);
    expect_open_fail(path, "Not a directory");
    snprintf(path, sizeof path, "%s/sub/deeper/m.jsonl", file);
    expect_open_fail(path, "Not a directory");
    expect_open_fail(dir, "Is a directory");
    /* The failed attempts created nothing. */
    snprintf(path, sizeof path, "%s/sub", file);
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);
}

static void test_write_error_reported_once(void **state)
{
    (void)state;
    struct stat sb;
    if (stat("/dev/full", &sb) != 0)
        skip();
    char log[1100];
    snprintf(log, sizeof log, "%s/stderr.txt", mp_test_dir("metrics_full"));
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    close(fd);
    mp_metrics *m;
    mp_status st = mp_metrics_open(&m, "/dev/full");
    mp_step_record r = {.step = 1};
    mp_metrics_step(m, &r);
    mp_metrics_step(m, &r);
    mp_metrics_close(m);
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    assert_int_equal(st, MP_OK);
    char *text = slurp(log);
    const char *first = strstr(text, "log.metrics: /dev/full: ");
    assert_non_null(first);
    assert_null(strstr(first + 1, "log.metrics"));
    free(text);
}

/* A record that cannot be written whole (a file size limit here, as a full disk) leaves no
 * part of it behind: the records before and after it are whole lines, and the file parses. */
static void test_failed_write_leaves_whole_lines(void **state)
{
    (void)state;
    char path[1100], log[1100];
    const char *dir = mp_test_dir("metrics_fsize");
    snprintf(path, sizeof path, "%s/m.jsonl", dir);
    snprintf(log, sizeof log, "%s/stderr.txt", dir);
    mp_metrics *m;
    assert_int_equal(mp_metrics_open(&m, path), MP_OK);
    mp_metrics_step(m, &(mp_step_record){.step = 1});
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)sb.st_size + 10; /* the next record gets 10 of its bytes written */
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved >= 0 && fd >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    close(fd);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    mp_metrics_step(m, &(mp_step_record){.step = 2});
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    signal(SIGXFSZ, was);
    mp_metrics_step(m, &(mp_step_record){.step = 3});
    mp_metrics_close(m);
    char *err = slurp(log);
    assert_non_null(strstr(err, "File too large"));
    free(err);
    char *text = slurp(path);
    cJSON *lines[4];
    assert_int_equal(parse_lines(text, lines, 4), 2);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(lines[1], "step")->valueint, 3);
    for (int k = 0; k < 2; k++)
        cJSON_Delete(lines[k]);
    free(text);
}

/* The file at `path` holds exactly `want`. */
static void assert_file(const char *path, const char *want)
{
    char *text = slurp(path);
    assert_string_equal(text, want);
    free(text);
}

/* A resumed run keeps the records up to its checkpoint (and an eval after the last kept step),
 * drops the later ones, the summary and a torn last line, and appends. */
static void test_resumed(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/m.jsonl", mp_test_dir("metrics_resume"));
    const char *before = "{\"type\":\"step\",\"step\":10,\"epoch\":0}\n"
                         "{\"type\":\"step\",\"step\":20,\"epoch\":0}\n"
                         "{\"type\":\"eval\",\"epoch\":0,\"loss\":1}\n"
                         "{\"type\":\"step\",\"step\":30,\"epoch\":1}\n"
                         "{\"type\":\"summary\",\"steps\":30}\n";
    mp_test_write_file(path, before, strlen(before), 0);
    mp_metrics *m;
    assert_int_equal(mp_metrics_open_resumed(&m, path, 20, 1), MP_OK);
    mp_step_record r = {.step = 30, .epoch = 1, .loss = 0.5, .comm_hidden = -1.0};
    mp_metrics_step(m, &r);
    mp_metrics_close(m);
    char *text = slurp(path);
    assert_int_equal(strncmp(text, before, 107), 0); /* the first three lines, unchanged */
    assert_non_null(strstr(text, "{\"type\":\"eval\",\"epoch\":0,\"loss\":1}\n{\"type\":\"step\",\"step\":30,\"epoch\":1,\"loss\":0.5"));
    assert_null(strstr(text, "summary"));
    free(text);
    const char *torn = "{\"type\":\"step\",\"step\":10}\n{\"type\":\"st";
    mp_test_write_file(path, torn, strlen(torn), 0);
    assert_int_equal(mp_metrics_open_resumed(&m, path, 50, 3), MP_OK);
    mp_metrics_close(m);
    assert_file(path, "{\"type\":\"step\",\"step\":10}\n");
    snprintf(path, sizeof path, "%s/new/m.jsonl", mp_test_dir("metrics_resume_new"));
    assert_int_equal(mp_metrics_open_resumed(&m, path, 5, 0), MP_OK); /* none yet: created */
    mp_metrics_close(m);
    assert_file(path, "");
    /* A finished run's end (the backward record of log.profile, the summary) goes too. */
    const char *ended = "{\"type\":\"step\",\"step\":10}\n{\"type\":\"backward\",\"steps\":9}\n"
                        "{\"type\":\"summary\",\"steps\":10}\n";
    mp_test_write_file(path, ended, strlen(ended), 0);
    assert_int_equal(mp_metrics_open_resumed(&m, path, 10, 1), MP_OK);
    mp_metrics_close(m);
    assert_file(path, "{\"type\":\"step\",\"step\":10}\n");
    /* Resumed at step 15 inside epoch 0: the eval of epoch 0 written after step 20 goes too. */
    mp_test_write_file(path, before, strlen(before), 0);
    assert_int_equal(mp_metrics_open_resumed(&m, path, 15, 0), MP_OK);
    mp_metrics_close(m);
    assert_file(path, "{\"type\":\"step\",\"step\":10,\"epoch\":0}\n");
}

/* Another program's file (a config, a checkpoint named by mistake) is refused, fresh or
 * resumed, and left as it was; a FIFO that no process reads is refused at once (the open used to
 * wait for a reader forever); one with a reader, and a device, are written. */
static void test_foreign_files(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("metrics_foreign");
    char path[1100];
    snprintf(path, sizeof path, "%s/run.cfg", dir);
    const char *cfg = "data: { batch_size = 64; };\n";
    mp_test_write_file(path, cfg, strlen(cfg), 0);
    mp_metrics *m = (mp_metrics *)&m;
    assert_int_equal(mp_metrics_open(&m, path), MP_EUSAGE);
    assert_null(m);
    assert_non_null(strstr(mp_error_message(), "holds something other than mpdist's metrics"));
    m = (mp_metrics *)&m;
    assert_int_equal(mp_metrics_open_resumed(&m, path, 10, 1), MP_EUSAGE);
    assert_null(m);
    assert_file(path, cfg);
    /* A metrics file cut inside its first record is still one: resumed, its torn line dropped. */
    snprintf(path, sizeof path, "%s/torn.jsonl", dir);
    mp_test_write_file(path, "{\"ty", 4, 0);
    assert_int_equal(mp_metrics_open_resumed(&m, path, 10, 1), MP_OK);
    mp_metrics_close(m);
    assert_file(path, "");
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(mp_metrics_open(&m, path), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "a FIFO that no process reads"));
    assert_int_equal(mp_metrics_open_resumed(&m, path, 10, 1), MP_EUSAGE);
    int reader = open(path, O_RDONLY | O_NONBLOCK);
    assert_true(reader >= 0);
    assert_int_equal(mp_metrics_open_resumed(&m, path, 10, 1), MP_OK); /* no past to keep */
    mp_step_record r = {.step = 11, .epoch = 1, .loss = 0.5, .comm_hidden = -1.0};
    mp_metrics_step(m, &r);
    mp_metrics_close(m);
    char got[64] = {0};
    assert_true(read(reader, got, sizeof got - 1) > 0);
    assert_int_equal(strncmp(got, "{\"type\":\"step\"", 14), 0);
    close(reader);
    assert_int_equal(mp_metrics_open(&m, "/dev/null"), MP_OK);
    mp_metrics_close(m);
}

/* The backward record: its fields, params and buckets in the order given. */
static void test_backward_record(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/b.jsonl", mp_test_dir("metrics_backward"));
    mp_metrics *m;
    assert_int_equal(mp_metrics_open(&m, path), MP_OK);
    mp_backward_param ps[2] = {{"fc.bias", "weights", 10, 32, 0.5}, {"bn.weight", "norm", 4, 64, 2.25}};
    mp_backward_bucket bs[1] = {{96, 2, 2.25}};
    mp_metrics_backward(m, &(mp_backward_record){.steps = 9, .micro_batches = 2, .bucket_mb = 25,
                                                  .first_bucket_mb = 1,
                                                  .nparams = 2, .nbuckets = 1, .params = ps,
                                                  .buckets = bs});
    mp_metrics_close(m);
    assert_file(path, "{\"type\":\"backward\",\"steps\":9,\"micro_batches\":2,\"bucket_mb\":25,\"first_bucket_mb\":1,"
                      "\"params\":[{\"name\":\"fc.bias\",\"group\":\"weights\",\"elements\":10,"
                      "\"bytes\":32,\"ready_ms\":0.5},{\"name\":\"bn.weight\",\"group\":\"norm\","
                      "\"elements\":4,\"bytes\":64,\"ready_ms\":2.25}],"
                      "\"buckets\":[{\"bytes\":96,\"params\":2,\"ready_ms\":2.25}]}\n");
}

/* A file a sink has open is refused to a second sink, fresh or resumed, and left as it is (two
 * runs naming one log.metrics truncated and interleaved it before 2026-12-03); once the first
 * closes, it opens again. Locks are per open file description, so one process shows it. */
static void test_one_writer(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/m.jsonl", mp_test_dir("metrics_lock"));
    mp_metrics *a, *b = (mp_metrics *)&b;
    assert_int_equal(mp_metrics_open(&a, path), MP_OK);
    mp_step_record r = {.step = 1, .epoch = 0, .loss = 0.5, .comm_hidden = -1.0};
    mp_metrics_step(a, &r);
    char *was = slurp(path);
    for (int resumed = 0; resumed < 2; resumed++) {
        mp_error_clear();
        mp_status st =
            resumed ? mp_metrics_open_resumed(&b, path, 0, 0) : mp_metrics_open(&b, path);
        assert_int_equal(st, MP_EUSAGE);
        assert_null(b);
        assert_non_null(strstr(mp_error_message(), "is being written by another run"));
        assert_file(path, was);
    }
    r.step = 2;
    mp_metrics_step(a, &r);
    mp_metrics_close(a);
    assert_int_equal(mp_metrics_open_resumed(&b, path, 1, 0), MP_OK);
    mp_metrics_close(b);
    assert_file(path, was);
    free(was);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_nonfinite_and_nulls),
        cmocka_unit_test(test_empty_path),
        cmocka_unit_test(test_unopenable),
        cmocka_unit_test(test_one_writer),
        cmocka_unit_test(test_write_error_reported_once),
        cmocka_unit_test(test_failed_write_leaves_whole_lines),
        cmocka_unit_test(test_resumed),
        cmocka_unit_test(test_foreign_files),
        cmocka_unit_test(test_backward_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
