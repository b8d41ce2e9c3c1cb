/* The op table's cases of the transformer ops (op_table.h): LayerNorm forward and backward (with
 * and without dx) over rows of C = 7, 33, 100 and 1030 (more than one block of threads), one
 * row, 67 rows and none, x and y in FP32, fp16, bf16 and mixed, gamma and beta in FP32 or in
 * x's half type; GELU forward and backward, also in place and with mixed dtypes; the token
 * embedding forward and backward (accumulating or not) with V = 11 (every id repeated) and
 * V = 256, ids in every dtype, and rows wider than one block's tile of columns. LayerNorm's
 * bounds come from each row's own statistics (ln_row_bound), GELU's from the two backends' tanh;
 * the embedding is exact on both (a copy, and FP32 sums in increasing row order): bitwise. */
#include "tests/gpu/op_table.h"

#include <math.h>
#include <stdlib.h>

#define DTS mp_gpu_dtypes
#define NDT MP_GPU_NDTYPES

static const mp_dtype F32 = MP_F32, F16 = MP_F16, BF16 = MP_BF16;
static const double U = 0x1p-24; /* FP32's unit roundoff */
static const double LN_EPS = 1e-5;

/* x (rows, C) of dtype dt: U(-1, 1) plus a row offset of -3.5, 0.5 or 4.5, so the mean matters. */
static mp_gpu_pair ln_input(mp_dtype dt, const int64_t *shape, mp_rng *r)
{
    mp_gpu_pair x = mp_gpu_random(dt, 2, shape, r, -1, 1);
    for (int64_t i = 0; i < shape[0] * shape[1]; i++)
        mp_store(x.host.data, dt, (size_t)i, op_hv(&x, i) + 4.0 * (double)(i / shape[1] % 3) - 3.5);
    mp_gpu_upload(&x);
    return x;
}

/* How far the two backends' FP32 statistics of row r may be apart (each is within half of it of
 * the exact values), from the row's max |x| (M), max |x - mean| (D) and invstd (S): the mean
 * within e_m and the variance within e_v (sums of C terms in other orders, mp_gpu_atol, and the
 * roundings after them; a mean off by e moves the variance by e^2 only, as the deviations from
 * the exact mean sum to 0), so invstd within e_s = S^3 e_v / 2 + 2 u S, and xhat = (x - mean) S,
 * at most X = D S, within e_x = S e_m + D e_s + 2 u X. */
typedef struct ln_row {
    double S, X, e_s, e_x;
} ln_row;

static ln_row ln_row_bound(const mp_gpu_pair *x, int64_t r, int64_t C)
{
    double mean = 0, M = 0, D = 0, var = 0;
    for (int64_t j = 0; j < C; j++) {
        mean += op_hv(x, r * C + j);
        M = fmax(M, fabs(op_hv(x, r * C + j)));
    }
    mean /= (double)C;
    for (int64_t j = 0; j < C; j++) {
        double d = op_hv(x, r * C + j) - mean;
        var += d * d;
        D = fmax(D, fabs(d));
    }
    var /= (double)C;
    ln_row b;
    b.S = 1 / sqrt(var + LN_EPS);
    b.X = D * b.S;
    double e_m = mp_gpu_atol(C, M) / (double)C + 2 * U * M;
    double e_v = mp_gpu_atol(C, D * D) / (double)C + 2 * U * D * D + e_m * e_m;
    b.e_s = b.S * b.S * b.S * e_v / 2 + 2 * U * b.S;
    b.e_x = b.S * e_m + D * b.e_s + 2 * U * b.X;
    return b;
}

/* y = LayerNorm(x) (rows, C); dt = (x, gamma and beta, y). An element may differ by |gamma|
 * e_x of its row and the roundings of the last three operations, and by the two roundings to
 * y's dtype (rtol). */
static void run_ln_forward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 601, c->seed);
    int64_t rows = c->shape[0], C = c->shape[1];
    mp_gpu_pair x = ln_input(c->dt[0], c->shape, &r);
    mp_gpu_pair g = mp_gpu_random(c->dt[1], 1, &C, &r, 0.5, 1.5);
    mp_gpu_pair b = mp_gpu_random(c->dt[1], 1, &C, &r, -1, 1);
    mp_gpu_pair y = mp_gpu_poisoned(c->dt[2], 2, c->shape);
    OP_BOTH(c, layernorm_forward, LN_EPS, OP_T(&x), OP_T(&g), OP_T(&b), OP_T(&y));
    double *atol = op_zeros(rows * C);
    for (int64_t i = 0; i < rows; i++) {
        ln_row e = ln_row_bound(&x, i, C);
        for (int64_t j = 0; j < C; j++) {
            double gj = fabs(op_hv(&g, j));
            atol[i * C + j] = 2 * (gj * e.e_x + 4 * U * (e.X * gj + fabs(op_hv(&b, j))));
        }
    }
    mp_gpu_check_each(&y, atol, mp_gpu_rtol(c->dt[2]), "%s: y", c->name);
    free(atol);
    OP_FREE(&x, &g, &b, &y);
}

/* LayerNorm's gradients; dt = (x and dy, gamma and its gradients, dx). Per row, with
 * G = max |dy gamma|: mean(g) within e_1 and mean(g xhat) (at most G X) within e_2, so the
 * bracket of dx (at most I = 2 G + G X^2) within e_in and dx within S e_in + I e_s. dgamma's
 * rows add |dy| e_x each to the sum's own bound; dbeta is a plain column sum of |dy| <= 1. */
static void run_ln_backward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 602, c->seed);
    int64_t rows = c->shape[0], C = c->shape[1];
    mp_dtype pt = c->dt[1];
    mp_gpu_pair x = ln_input(c->dt[0], c->shape, &r);
    mp_gpu_pair dy = mp_gpu_random(c->dt[0], 2, c->shape, &r, -1, 1);
    mp_gpu_pair g = mp_gpu_random(pt, 1, &C, &r, 0.5, 1.5);
    mp_gpu_pair dx = mp_gpu_poisoned(c->dt[2], 2, c->shape);
    mp_gpu_pair dg = mp_gpu_poisoned(pt, 1, &C), db = mp_gpu_poisoned(pt, 1, &C);
    OP_BOTH(c, layernorm_backward, LN_EPS, OP_T(&x), OP_T(&dy), OP_T(&g),
            c->u.no_dx ? NULL : OP_T(&dx), OP_T(&dg), OP_T(&db));
    double *ax = op_zeros(rows * C), *ag = op_zeros(C), xmax = 0;
    for (int64_t i = 0; i < rows; i++) {
        ln_row e = ln_row_bound(&x, i, C);
        double G = 0;
        for (int64_t j = 0; j < C; j++) {
            G = fmax(G, fabs(op_hv(&dy, i * C + j) * op_hv(&g, j)));
            ag[j] += fabs(op_hv(&dy, i * C + j)) * 2 * e.e_x;
        }
        double e1 = mp_gpu_atol(C, G) / (double)C + 2 * U * G;
        double e2 = mp_gpu_atol(C, G * e.X) / (double)C + G * e.e_x + 2 * U * G * e.X;
        double in = 2 * G + G * e.X * e.X;
        double e_in = e1 + e.X * e2 + G * e.X * e.e_x + 4 * U * in;
        for (int64_t j = 0; j < C; j++)
            ax[i * C + j] = 2 * (e.S * e_in + in * e.e_s);
        xmax = fmax(xmax, e.X);
    }
    for (int64_t j = 0; j < C; j++)
        ag[j] += mp_gpu_atol(rows, xmax);
    if (c->u.no_dx) /* not written: the poison on both sides */
        mp_gpu_check_bits(&dx, "%s: dx", c->name);
    else
        mp_gpu_check_each(&dx, ax, mp_gpu_rtol(c->dt[2]), "%s: dx", c->name);
    mp_gpu_check_each(&dg, ag, mp_gpu_rtol(pt), "%s: dgamma", c->name);
    mp_gpu_check(&db, mp_gpu_atol(rows, 1), mp_gpu_rtol(pt), "%s: dbeta", c->name);
    free(ax);
    free(ag);
    OP_FREE(&x, &dy, &g, &dx, &dg, &db);
}

/* The two backends' tanh (libm's, CUDA's tanhf within 2 ulps) may give values of t 8 u apart;
 * every other operation is the same on both. slope is the derivative by t of the expression t
 * enters (gelu_rule.h): 0.5 |x| for y, 0.5 + |x| k (1 + 3 c x^2) for y'. */
static double gelu_atol(double x, double scale, bool grad)
{
    double slope = grad ? 0.5 + fabs(x) * 0.8 * (1 + 3 * 0.044715 * x * x) : 0.5 * fabs(x);
    return 2 * fabs(scale) * 8 * U * slope;
}

/* y = gelu(x), x U(-4, 4); dt = (x, y); in place: y is x. */
static void run_gelu_forward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 603, c->seed);
    int64_t n = c->shape[0];
    mp_gpu_pair x = mp_gpu_random(c->dt[0], 1, &n, &r, -4, 4), y = {0}, *out = &x;
    double *atol = op_zeros(n);
    for (int64_t i = 0; i < n; i++)
        atol[i] = gelu_atol(op_hv(&x, i), 1, false);
    if (!c->u.ew.in_place) {
        y = mp_gpu_poisoned(c->dt[1], 1, &n);
        out = &y;
    }
    OP_BOTH(c, gelu_forward, OP_T(&x), OP_T(out));
    mp_gpu_check_each(out, atol, mp_gpu_rtol(c->dt[1]), "%s", c->name);
    free(atol);
    OP_FREE(&x, &y);
}

/* dx = dy gelu'(x); dt = (x, dy, dx); in place: dx is dy. */
static void run_gelu_backward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 604, c->seed);
    int64_t n = c->shape[0];
    mp_gpu_pair x = mp_gpu_random(c->dt[0], 1, &n, &r, -4, 4);
    mp_gpu_pair dy = mp_gpu_random(c->dt[1], 1, &n, &r, -1, 1), dx = {0}, *out = &dy;
    double *atol = op_zeros(n);
    for (int64_t i = 0; i < n; i++)
        atol[i] = gelu_atol(op_hv(&x, i), op_hv(&dy, i), true);
    if (!c->u.ew.in_place) {
        dx = mp_gpu_poisoned(c->dt[2], 1, &n);
        out = &dx;
    }
    OP_BOTH(c, gelu_backward, OP_T(&x), OP_T(&dy), OP_T(out));
    mp_gpu_check_each(out, atol, mp_gpu_rtol(c->dt[2]), "%s", c->name);
    free(atol);
    OP_FREE(&x, &dy, &dx);
}

/* ids (R) of dtype dt: integers drawn below V. */
static mp_gpu_pair emb_ids(mp_dtype dt, int64_t R, int64_t V, mp_rng *r)
{
    mp_gpu_pair ids = mp_gpu_pair_alloc(dt, 1, &R);
    for (int64_t i = 0; i < R; i++)
        mp_store(ids.host.data, dt, (size_t)i, (double)mp_rng_below(r, (uint64_t)V));
    mp_gpu_upload(&ids);
    return ids;
}

/* y (R, D) = rows of table (V, D); shape (R, D, V), dt = (ids, table, y). */
static void run_emb_forward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 605, c->seed);
    int64_t R = c->shape[0], D = c->shape[1], V = c->shape[2];
    const int64_t ts[2] = {V, D}, ys[2] = {R, D};
    mp_gpu_pair ids = emb_ids(c->dt[0], R, V, &r);
    mp_gpu_pair table = mp_gpu_random(c->dt[1], 2, ts, &r, -1, 1);
    mp_gpu_pair y = mp_gpu_poisoned(c->dt[2], 2, ys);
    OP_BOTH(c, embedding_forward, OP_T(&ids), OP_T(&table), OP_T(&y));
    mp_gpu_check_bits(&y, "%s", c->name);
    OP_FREE(&ids, &table, &y);
}

/* dtable (V, D) [+]= sums of dy (R, D) by id; shape (R, D, V), dt = (ids, dy, dtable). Without
 * accumulate dtable starts poisoned: every row, used or not, must be written. */
static void run_emb_backward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 606, c->seed);
    int64_t R = c->shape[0], D = c->shape[1], V = c->shape[2];
    const int64_t ts[2] = {V, D}, ys[2] = {R, D};
    bool acc = c->u.accumulate;
    mp_gpu_pair ids = emb_ids(c->dt[0], R, V, &r);
    mp_gpu_pair dy = mp_gpu_random(c->dt[1], 2, ys, &r, -1, 1);
    mp_gpu_pair dt = acc ? mp_gpu_random(c->dt[2], 2, ts, &r, -1, 1)
                         : mp_gpu_poisoned(c->dt[2], 2, ts);
    OP_BOTH(c, embedding_backward, OP_T(&ids), OP_T(&dy), acc, OP_T(&dt));
    mp_gpu_check_bits(&dt, "%s", c->name);
    OP_FREE(&ids, &dy, &dt);
}

static void cases_layernorm(void)
{
    const int64_t shapes[5][2] = {{1, 7}, {5, 33}, {67, 100}, {3, 1030}, {0, 33}};
    /* (x, gamma, y): each dtype with FP32 and with its own parameters, and two mixes */
    mp_dtype dts[NDT * 2 + 2][3];
    int n = 0;
    for (int d = 0; d < NDT; d++) {
        dts[n][0] = dts[n][2] = DTS[d], dts[n++][1] = F32;
        if (DTS[d] != F32)
            dts[n][0] = dts[n][1] = dts[n][2] = DTS[d], n++;
    }
    dts[n][0] = F32, dts[n][1] = F32, dts[n++][2] = BF16;
    dts[n][0] = F16, dts[n][1] = F32, dts[n++][2] = F32;
    for (int s = 0; s < 5; s++)
        for (int k = 0; k < n; k++) {
            if (s == 4 && k > 1)
                continue;
            op_case c = {.run = run_ln_forward, .dt = {dts[k][0], dts[k][1], dts[k][2]},
                         .shape = {shapes[s][0], shapes[s][1]}};
            op_add(c, "layernorm_forward", 3, 2, "%s", "");
            c.run = run_ln_backward;
            op_add(c, "layernorm_backward", 3, 2, "%s", "");
        }
    for (int k = 0; k < 3; k++) {
        op_case c = {.run = run_ln_backward, .dt = {DTS[k], F32, DTS[k]}, .shape = {5, 33},
                     .u.no_dx = true};
        op_add(c, "layernorm_backward", 3, 2, "(dx NULL)");
    }
}

static void cases_gelu(void)
{
    for (int d = 0; d < NDT; d++)
        for (int k = 0; k < 3; k++) { /* k 1: in place, 2: empty */
            op_case c = {.run = run_gelu_forward, .dt = {DTS[d], DTS[d], DTS[d]},
                         .shape = {k == 2 ? 0 : 4099}, .u.ew = {.in_place = k == 1}};
            op_add(c, "gelu_forward", 2, 1, "%s", k == 1 ? "in place" : "");
            c.run = run_gelu_backward;
            op_add(c, "gelu_backward", 3, 1, "%s", k == 1 ? "in place" : "");
        }
    const mp_dtype mixes[2][3] = {{F32, F16, F16}, {BF16, F32, F32}};
    for (int k = 0; k < 2; k++) {
        op_case c = {.run = run_gelu_forward, .dt = {mixes[k][0], mixes[k][1], mixes[k][2]},
                     .shape = {1031}};
        op_add(c, "gelu_forward", 2, 1, "%s", "");
        c.run = run_gelu_backward;
        op_add(c, "gelu_backward", 3, 1, "%s", "");
    }
}

static void cases_embedding(void)
{
    /* (R, D, V): repeated ids, few ids in a large table, rows wider than a block's tile */
    const int64_t shapes[5][3] = {{67, 33, 11}, {5, 7, 256}, {40, 100, 256}, {300, 2100, 11},
                                  {0, 5, 11}};
    const mp_dtype mixes[3][3] = {{F32, F32, F16}, {BF16, F32, BF16}, {F16, BF16, F32}};
    for (int s = 0; s < 5; s++)
        for (int k = 0; k < NDT + 3; k++) {
            op_case c = {.run = run_emb_forward, .shape = {shapes[s][0], shapes[s][1],
                                                           shapes[s][2]}};
            for (int j = 0; j < 3; j++)
                c.dt[j] = k < NDT ? DTS[k] : mixes[k - NDT][j];
            op_add(c, "embedding_forward", 3, 2, "V %lld", (long long)shapes[s][2]);
            c.run = run_emb_backward;
            for (int acc = 0; acc < 2; acc++) {
                c.u.accumulate = acc;
                op_add(c, "embedding_backward", 3, 2, "V %lld%s", (long long)shapes[s][2],
                       acc ? " accumulate" : "");
            }
        }
}

void op_cases_norm(void)
{
    cases_layernorm();
    cases_gelu();
    cases_embedding();
}
