/* bench_jpeg (issue 50): JPEG decode throughput on the GPU with nvJPEG beside the CPU's
 * libjpeg-turbo, on the same files. Every *.jpg under ROOT (an image folder, e.g. one written
 * by tests/make_folder) is read into memory once; then
 *   cpu     each file decoded to interleaved RGB by mp_image_decode (libjpeg-turbo, what the
 *           loader's threads run), on this one thread: images/s per core;
 *   nvjpeg  the files in batches of BATCH through nvjpegDecodeBatched to interleaved RGB in
 *           device memory, on the hardware decoder where the GPU has one (A100, H100, H200:
 *           NVJPEG_BACKEND_HARDWARE) and it takes the first batch, else the default backend,
 *           one CPU thread, ROUNDS passes over the whole batches after that warm-up batch,
 *           timed from the first batch to the stream's end (the headers parsed before):
 *           images/s;
 * and the first files' GPU pixels against the CPU's (the two IDCTs and chroma upsamplings may
 * differ by a few levels): max and mean absolute difference, which must stay under 48 and 2.
 * nvJPEG is loaded at run time (dlopen: MPDIST_NVJPEG_LIB, else libnvjpeg.so.13, .so.12, .so),
 * so this builds where its header and library are absent (the CUDA toolkit here has neither).
 * Prints a few lines ("cpu libjpeg-turbo: ...", "nvjpeg BACKEND, batch B: ...", "ratio ...",
 * "check ..."). Exit 0; 77 when there is no GPU or no nvJPEG (after the CPU line); 1 when the
 * check fails; 2 on a bad argument or an unreadable folder (one line on stderr).
 * Usage: bench_jpeg ROOT [BATCH (64)] [ROUNDS (3)] */
#define _XOPEN_SOURCE 700
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_args.h"
#include "engine/clock.h"
#include "io/image_decode.h"

/* The part of nvJPEG's C API used here, declared from its documentation (nvJPEG Library Guide,
 * "nvJPEG Type Declarations" and the decode API): handles are opaque pointers, statuses ints
 * (0: NVJPEG_STATUS_SUCCESS). */
typedef void *nvj_handle;
typedef void *nvj_state;
typedef struct nvj_image {
    unsigned char *channel[4]; /* NVJPEG_MAX_COMPONENT */
    size_t pitch[4];
} nvj_image;
enum { NVJ_BACKEND_DEFAULT = 0, NVJ_BACKEND_HARDWARE = 3, NVJ_OUTPUT_RGBI = 5 };

typedef struct nvj_api {
    int (*create_ex)(int backend, void *dev_alloc, void *pinned_alloc, unsigned flags,
                     nvj_handle *h);
    int (*create_simple)(nvj_handle *h);
    int (*destroy)(nvj_handle h);
    int (*state_create)(nvj_handle h, nvj_state *s);
    int (*state_destroy)(nvj_state s);
    int (*image_info)(nvj_handle h, const unsigned char *data, size_t n, int *components,
                      int *subsampling, int *widths, int *heights);
    int (*batched_init)(nvj_handle h, nvj_state s, int batch, int cpu_threads, int format);
    int (*batched)(nvj_handle h, nvj_state s, const unsigned char *const *data,
                   const size_t *lengths, nvj_image *out, cudaStream_t stream);
    int (*property)(int type, int *value); /* nvjpegGetProperty, MAJOR_VERSION 0 .. PATCH 2 */
} nvj_api;

/* The files, read whole. */
static struct {
    unsigned char **data;
    size_t *len;
    int n, cap;
} files;

static int add_file(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    size_t k = strlen(path);
    if (flag != FTW_F || k < 4 || strcmp(path + k - 4, ".jpg") != 0)
        return 0;
    if (files.n == files.cap) {
        files.cap = files.cap ? 2 * files.cap : 1024;
        files.data = realloc(files.data, (size_t)files.cap * sizeof *files.data);
        files.len = realloc(files.len, (size_t)files.cap * sizeof *files.len);
        if (!files.data || !files.len)
            return 1;
    }
    FILE *f = fopen(path, "rb");
    unsigned char *buf = malloc((size_t)st->st_size + 1);
    size_t got = f && buf ? fread(buf, 1, (size_t)st->st_size, f) : 0;
    if (f)
        fclose(f);
    if (!buf || got != (size_t)st->st_size) {
        fprintf(stderr, "bench_jpeg: %s: cannot read it\n", path);
        free(buf);
        return 1;
    }
    files.data[files.n] = buf;
    files.len[files.n++] = got;
    return 0;
}

/* The CPU's decode of every file, images/s on this thread; the first `keep` images kept. */
static double cpu_decode(mp_image *kept, int keep)
{
    double t0 = mp_now();
    for (int i = 0; i < files.n; i++) {
        mp_image img;
        if (mp_image_decode(files.data[i], files.len[i], "a file", 3, &img) != MP_OK) {
            fprintf(stderr, "bench_jpeg: %s\n", mp_error_message());
            exit(2);
        }
        if (i < keep)
            kept[i] = img;
        else
            free(img.px);
    }
    return files.n / (mp_now() - t0);
}

/* Loads nvJPEG; NULL with *why set when it cannot. */
static void *load_nvjpeg(nvj_api *a, const char **why)
{
    const char *env = getenv("MPDIST_NVJPEG_LIB");
    const char *names[] = {env && *env ? env : "libnvjpeg.so.13", "libnvjpeg.so.12",
                           "libnvjpeg.so"};
    void *lib = NULL;
    for (int i = 0; i < 3 && !lib; i++)
        if (!(env && *env && i > 0))
            lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        *why = dlerror();
        return NULL;
    }
    *(void **)&a->create_ex = dlsym(lib, "nvjpegCreateEx");
    *(void **)&a->create_simple = dlsym(lib, "nvjpegCreateSimple");
    *(void **)&a->destroy = dlsym(lib, "nvjpegDestroy");
    *(void **)&a->state_create = dlsym(lib, "nvjpegJpegStateCreate");
    *(void **)&a->state_destroy = dlsym(lib, "nvjpegJpegStateDestroy");
    *(void **)&a->image_info = dlsym(lib, "nvjpegGetImageInfo");
    *(void **)&a->batched_init = dlsym(lib, "nvjpegDecodeBatchedInitialize");
    *(void **)&a->batched = dlsym(lib, "nvjpegDecodeBatched");
    *(void **)&a->property = dlsym(lib, "nvjpegGetProperty");
    if (!a->create_ex || !a->create_simple || !a->destroy || !a->state_create ||
        !a->state_destroy || !a->image_info || !a->batched_init || !a->batched) {
        *why = "a function of its API is missing";
        dlclose(lib);
        return NULL;
    }
    return lib;
}

static void need(int st, const char *call)
{
    if (st != 0) {
        fprintf(stderr, "bench_jpeg: %s failed (nvjpegStatus_t %d)\n", call, st);
        exit(1);
    }
}

static void need_cuda(cudaError_t e, const char *call)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_jpeg: %s failed: %s\n", call, cudaGetErrorString(e));
        exit(1);
    }
}

/* Decodes files [first, first + batch) into out[0..batch) (each room for the largest image),
 * each row pitch from pitch[]; nvJPEG's status. */
static int gpu_batch(const nvj_api *a, nvj_handle h, nvj_state s, int batch, nvj_image *out,
                     const size_t *pitch, cudaStream_t stream, int first)
{
    for (int k = 0; k < batch; k++)
        out[k].pitch[0] = pitch[first + k];
    return a->batched(h, s, (const unsigned char *const *)files.data + first, files.len + first,
                      out, stream);
}

/* A handle and state on `backend` (the hardware decoder: create_ex; else create_simple),
 * initialised for batches of `batch`; false where the backend cannot be had. */
static bool open_backend(const nvj_api *a, bool hardware, int batch, nvj_handle *h, nvj_state *s)
{
    *h = NULL;
    *s = NULL;
    int st = hardware ? a->create_ex(NVJ_BACKEND_HARDWARE, NULL, NULL, 0, h) : a->create_simple(h);
    if (st != 0)
        return false;
    if (a->state_create(*h, s) != 0 || a->batched_init(*h, *s, batch, 1, NVJ_OUTPUT_RGBI) != 0) {
        if (*s)
            a->state_destroy(*s);
        a->destroy(*h);
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    int batch = mp_bench_count_arg(argc, argv, 2, 64);
    int rounds = mp_bench_count_arg(argc, argv, 3, 3);
    if (argc < 2 || argc > 4 || batch < 0 || rounds < 0) {
        fprintf(stderr, "usage: bench_jpeg ROOT [BATCH] [ROUNDS]\n");
        return 2;
    }
    if (nftw(argv[1], add_file, 32, FTW_PHYS) != 0 || files.n == 0) {
        fprintf(stderr, "bench_jpeg: %s: no readable *.jpg under it\n", argv[1]);
        return 2;
    }
    enum { KEEP = 8 };
    mp_image cpu[KEEP];
    int keep = files.n < KEEP ? files.n : KEEP;
    double cpu_rate = cpu_decode(cpu, keep);
    printf("cpu libjpeg-turbo, 1 thread: %d files, %.0f images/s\n", files.n, cpu_rate);
    int ndev = 0;
    nvj_api a;
    const char *why = NULL;
    void *lib = NULL;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1)
        why = "no CUDA device";
    else
        lib = load_nvjpeg(&a, &why);
    if (!lib) {
        printf("nvjpeg: not run: %s\n", why);
        return 77;
    }
    need_cuda(cudaSetDevice(0), "cudaSetDevice");
    if (batch > files.n)
        batch = files.n;
    nvj_handle h = NULL;
    nvj_state s = NULL;
    need(open_backend(&a, false, batch, &h, &s) ? 0 : 1, "nvjpegCreateSimple");
    size_t most = 0, *pitch = malloc((size_t)files.n * sizeof *pitch); /* headers, once */
    for (int i = 0; i < files.n; i++) {
        int comps = 0, sub = 0, w[4] = {0}, hh[4] = {0};
        need(a.image_info(h, files.data[i], files.len[i], &comps, &sub, w, hh),
             "nvjpegGetImageInfo");
        pitch[i] = (size_t)w[0] * 3;
        most = pitch[i] * (size_t)hh[0] > most ? pitch[i] * (size_t)hh[0] : most;
    }
    nvj_image *out = calloc((size_t)batch, sizeof *out);
    for (int i = 0; i < batch; i++)
        need_cuda(cudaMalloc((void **)&out[i].channel[0], most), "cudaMalloc");
    cudaStream_t stream;
    need_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
    /* the hardware decoder where it opens and takes the warm-up batch, else the default */
    char backend[96] = "default";
    nvj_handle hw = NULL;
    nvj_state hs = NULL;
    if (open_backend(&a, true, batch, &hw, &hs)) {
        int st = gpu_batch(&a, hw, hs, batch, out, pitch, stream, 0);
        if (st == 0 && cudaStreamSynchronize(stream) == cudaSuccess) {
            a.state_destroy(s);
            a.destroy(h);
            h = hw, s = hs;
            snprintf(backend, sizeof backend, "hardware");
        } else {
            (void)cudaGetLastError();
            a.state_destroy(hs);
            a.destroy(hw);
            snprintf(backend, sizeof backend, "default (the hardware decoder refused: status %d)",
                     st);
        }
    } else {
        snprintf(backend, sizeof backend, "default (no hardware decoder)");
    }
    if (strcmp(backend, "hardware") != 0) /* warm-up on the default backend */
        need(gpu_batch(&a, h, s, batch, out, pitch, stream, 0), "nvjpegDecodeBatched");
    need_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    /* the check: the first images of the warm-up batch against the CPU's */
    int worst = 0;
    double sum = 0.0, px = 0.0;
    for (int i = 0; i < keep && i < batch; i++) {
        size_t n = (size_t)cpu[i].h * (size_t)cpu[i].w * 3;
        unsigned char *g = malloc(n);
        need_cuda(cudaMemcpy(g, out[i].channel[0], n, cudaMemcpyDeviceToHost), "cudaMemcpy");
        for (size_t k = 0; k < n; k++) {
            int d = abs((int)g[k] - (int)cpu[i].px[k]);
            worst = d > worst ? d : worst;
            sum += d;
        }
        px += (double)n;
        free(g);
    }
    double t0 = mp_now();
    int whole = files.n - files.n % batch; /* whole batches only: the batch size is fixed */
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < whole; i += batch)
            need(gpu_batch(&a, h, s, batch, out, pitch, stream, i), "nvjpegDecodeBatched");
    need_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    double gpu_rate = (double)rounds * (double)whole / (mp_now() - t0);
    int v[3] = {0, 0, 0};
    for (int i = 0; i < 3 && a.property; i++)
        a.property(i, &v[i]);
    printf("nvjpeg %d.%d.%d, %s backend, batch %d, 1 CPU thread: %.0f images/s (%d rounds)\n",
           v[0], v[1], v[2], backend, batch, gpu_rate, rounds);
    printf("ratio nvjpeg / cpu thread: %.2f\n", gpu_rate / cpu_rate);
    double mean = px > 0 ? sum / px : 0.0;
    bool ok = worst < 48 && mean < 2.0;
    printf("check %s: the first %d images, max |gpu - cpu| %d levels, mean %.3f\n",
           ok ? "ok" : "FAILED", keep < batch ? keep : batch, worst, mean);
    for (int i = 0; i < keep; i++)
        free(cpu[i].px);
    for (int i = 0; i < batch; i++)
        cudaFree(out[i].channel[0]);
    free(out);
    free(pitch);
    cudaStreamDestroy(stream);
    a.state_destroy(s);
    a.destroy(h);
    dlclose(lib);
    for (int i = 0; i < files.n; i++)
        free(files.data[i]);
    free(files.data);
    free(files.len);
    return ok ? 0 : 1;
}
